package check

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/capture"
	"github.com/kind-entrypoint/entrypoint/internal/cgroupfix"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// host copies a fake host, then changes the copy: the fake hosts of
// testdata/hosts are reused, each change making one requirement fail.
func host(t *testing.T, name string, change func(dir string)) string {
	t.Helper()
	dst := hosttest.Host(t, name)
	if change != nil {
		change(dst)
	}
	return dst
}

func write(t *testing.T, dir, p, content string) {
	t.Helper()
	hosttest.AddFiles(t, dir, map[string]string{p: content})
}

// editMountinfo rewrites the fake host's mountinfo line by line.
func editMountinfo(t *testing.T, dir string, edit func(line string) string) {
	t.Helper()
	p := filepath.Join(dir, "proc/self/mountinfo")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if l := edit(line); l != "" || line == "" {
			out = append(out, l)
		}
	}
	w, err := system.OpenTreeFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.WriteFile("/proc/self/mountinfo", []byte(strings.Join(out, "\n")), 0o444); err != nil {
		t.Fatal(err)
	}
}

func mountpointIs(line, p string) bool {
	f := strings.Fields(line)
	return len(f) > 4 && f[4] == p
}

// editMount is a change to a fake host that rewrites the line of the
// mount at p with edit; an empty line removes the mount.
func editMount(p string, edit func(line string) string) func(t *testing.T, dir string) {
	return func(t *testing.T, dir string) {
		editMountinfo(t, dir, func(l string) string {
			if mountpointIs(l, p) {
				return edit(l)
			}
			return l
		})
	}
}

// dropMount is a change to a fake host that removes the mount at p.
func dropMount(p string) func(t *testing.T, dir string) {
	return editMount(p, func(string) string { return "" })
}

func runTree(t *testing.T, dir string) Report {
	t.Helper()
	tree := system.NewTree(dir)
	env, _ := tree.Environ()
	rep := Run(context.Background(), Options{Sys: tree, LookupEnv: env, ProbeTimeout: 100 * time.Millisecond})
	if len(tree.Changes()) > 0 {
		t.Fatalf("check changed the host: %q", tree.Changes())
	}
	return rep
}

func rowNamed(rows []Row, name string) (Row, bool) {
	for _, r := range rows {
		if r.Name == name {
			return r, true
		}
	}
	return Row{}, false
}

// rowNames are every row, in order, of a host that gets that far.
var rowNames = []string{
	"user-namespace", "cgroup-version", "kubelet-cgroup-v1", "cgroupns", "cgroup-controllers", "cgroup-mounts", "nofile", "inotify", "keys-maxkeys",
	"fs-kind", "fs-containerd", "zfs-acl", "snapshotter", "overlay", "dev-fuse", "containerd-nofile", "sys", "mount-propagation",
	"iptables-legacy", "iptables-nft", "iptables-mode", "docker-dns", "host-docker-internal", "node-name", "default-gateway",
	"dns-forwarder", "dmi", "lib-modules", "kernel-modules", "plan",
}

// garbleMountinfo makes the host's mount table unreadable.
func garbleMountinfo(t *testing.T, dir string) { write(t, dir, "proc/self/mountinfo", "garbage\n") }

// allFail wants each row named to fail, observing observed.
func allFail(observed string, names ...string) map[string]string {
	want := map[string]string{}
	for _, n := range names {
		want[n] = "fail:" + observed
	}
	return want
}

// TestRows: each failing and warning row, on a fake host that shows it
// (and nothing else worse than its own verdict where the host is clean).
func TestRows(t *testing.T) {
	runRowCases(t, []rowCase{
		{
			name: "a clean cgroup v2 node", host: "docker-v2-cgroupns",
			want: map[string]string{"cgroup-version": "pass", "cgroupns": "pass", "overlay": "pass", "plan": "pass:10 steps"},
			exit: ExitPass,
		},
		{
			name: "rootless without delegation", host: "rootless-v2-missing-cpu-pids",
			want: map[string]string{
				"user-namespace":     "pass:yes",
				"cgroup-controllers": "fail:missing cpu, pids",
				"nofile":             "warn:4096",
				"plan":               "fail:validate_userns would stop the entrypoint \\(exit 11\\)",
			},
			exit: ExitFail,
		},
		{
			name: "rootless with delegation", host: "rootless-v2-delegated",
			want: map[string]string{"cgroup-controllers": "pass:cpu .*memory.*pids", "overlay": "pass", "dev-fuse": "pass:not needed"},
			exit: ExitPass,
		},
		{
			name: "no cgroupns on v1", host: "docker-v1-no-cgroupns",
			want: map[string]string{
				"cgroup-version": "warn:v1",
				"cgroupns":       "warn:no: the container's cgroup is /docker/",
				"plan":           "warn:cgroupns not enabled",
			},
			exit: ExitWarn,
		},
		{
			name: "cgroupns on v1", host: "docker-v1-cgroupns",
			want: map[string]string{"cgroupns": "pass:yes", "cgroup-controllers": "pass:^cpu cpuacct", "cgroup-version": "warn"},
			exit: ExitWarn,
		},
		{
			name: "zfs", host: "zfs",
			want: map[string]string{"fs-kind": "warn:zfs: snapshotter native", "snapshotter": "pass:native \\(/kind is on zfs\\)", "dev-fuse": "pass:not needed"},
			exit: ExitWarn,
		},
		{
			name: "fuse-overlayfs chosen, no /dev/fuse", host: "rootless-v2-overlay-fails",
			want: map[string]string{
				"snapshotter": "pass:fuse-overlayfs",
				"overlay":     "warn:operation not permitted; the snapshotter is fuse-overlayfs",
				"dev-fuse":    "fail:missing",
			},
			exit: ExitFail,
		},
		{
			name: "fuse-overlayfs chosen, /dev/fuse there", host: "rootless-v2-overlay-fails",
			change: func(t *testing.T, dir string) { write(t, dir, "dev/fuse", "") },
			want:   map[string]string{"dev-fuse": "pass:present", "overlay": "warn"},
			exit:   ExitWarn,
		},
		{
			name: "fuse-overlayfs on a FUSE rootfs", host: "fuseblk",
			want: map[string]string{"fs-kind": "pass:fuseblk", "dev-fuse": "fail"},
			exit: ExitFail,
		},
		{
			name: "permit_mounts_in_userns", host: "userns-permit-mounts",
			want: map[string]string{"overlay": "warn:not tried", "dev-fuse": "fail"},
			exit: ExitFail,
		},
		{
			name: "SELinux label in a user namespace", host: "selinux-warning",
			want: map[string]string{"overlay": "warn:SELinux", "plan": "warn:SELinux might be Enforcing"},
			exit: ExitWarn,
		},
		{
			name: "overlay fails outside a user namespace, overlayfs snapshotter", host: "docker-v2-cgroupns",
			change: func(t *testing.T, dir string) { write(t, dir, ".host/overlay", "mount overlay: no such device\n") },
			want:   map[string]string{"overlay": "fail:no such device; the snapshotter is overlayfs"},
			exit:   ExitFail,
		},
		{
			name: "overlay trial on an overlay /tmp", host: "docker-v2-cgroupns",
			change: func(t *testing.T, dir string) {
				write(t, dir, ".host/overlay", "mount overlay: invalid argument\n")
				dropMount("/tmp")(t, dir)
			},
			want: map[string]string{"overlay": "warn:on /tmp, itself on overlayfs"},
			exit: ExitWarn,
		},
		{
			name: "no volume for /var: containerd's layers on overlay", host: "docker-v2-cgroupns",
			change: dropMount("/var"),
			want:   map[string]string{"fs-containerd": "fail:/var/lib/containerd does not exist yet; /var is on overlayfs"},
			exit:   ExitFail,
		},
		{
			name: "read-only cgroup mount (not --privileged)", host: "docker-v2-cgroupns",
			change: editMount("/sys/fs/cgroup", func(l string) string { return strings.Replace(l, " rw,", " ro,", 1) }),
			want:   map[string]string{"cgroup-mounts": "fail:read-only: /sys/fs/cgroup"},
			exit:   ExitFail,
		},
		// Rows read from the mount table say that it could not be read,
		// not that nothing is mounted (and run --privileged).
		{name: "mount table unreadable, v2", host: "docker-v2-cgroupns", change: garbleMountinfo, exit: ExitFail,
			want: allFail("/proc/self/mountinfo: line 1", "cgroupns", "cgroup-mounts", "sys", "mount-propagation")},
		{name: "mount table unreadable, v1", host: "docker-v1-cgroupns", change: garbleMountinfo, exit: ExitFail,
			want: allFail("/proc/self/mountinfo: line 1", "cgroup-controllers")},
		// Every row of a group whose step could not detect: the rows of
		// a host that cannot be read are those of one that can.
		{name: "resolv.conf unreadable", host: "docker-v2-cgroupns", exit: ExitFail,
			change: func(t *testing.T, dir string) {
				os.Remove(filepath.Join(dir, "etc/resolv.conf"))
				write(t, dir, "etc/resolv.conf/x", "")
			},
			want: allFail("/etc/resolv.conf: not a regular file", "host-docker-internal", "node-name", "default-gateway")},
		{
			name: "nothing mounted at /sys", host: "docker-v2-cgroupns",
			change: dropMount("/sys"),
			want:   map[string]string{"sys": "fail:nothing mounted at /sys"},
			exit:   ExitFail,
		},
		{
			name: "nothing mounted at /", host: "docker-v2-cgroupns",
			change: dropMount("/"),
			want:   map[string]string{"mount-propagation": "fail:nothing mounted at /"},
			exit:   ExitFail,
		},
		{
			name: "sysfs superblock read-only", host: "docker-v2-cgroupns",
			change: editMount("/sys", func(l string) string { return strings.TrimSuffix(l, "sysfs rw") + "sysfs ro" }),
			want:   map[string]string{"sys": "warn:superblock is read-only"},
			exit:   ExitWarn,
		},
		{
			name: "booted node, /sys writable and / private", host: "docker-v2-cgroupns",
			change: func(t *testing.T, dir string) { write(t, dir, "proc/1/comm", "systemd\n") },
			want: map[string]string{
				"sys":               "warn:writable, although the node has booted",
				"mount-propagation": "warn:/ is slave, not every mount is shared",
			},
			exit: ExitWarn,
		},
		{
			name: "hanging nft-save", host: "net-nft-hang",
			want: map[string]string{"iptables-nft": "warn:timed out", "iptables-legacy": "pass", "iptables-mode": "pass:legacy"},
			exit: ExitWarn,
		},
		{
			name: "Docker's DNS in native nftables", host: "net-native-dns",
			want: map[string]string{"docker-dns": "pass:native nftables: table ip docker-dns \\(udp 39499, tcp 43261\\)", "iptables-mode": "pass:nft"},
			exit: ExitPass,
		},
		{
			name: "Docker's DNS in iptables", host: "net-nft-wins",
			want: map[string]string{"docker-dns": "pass:iptables: iptables-nft-save holds"},
			exit: ExitPass,
		},
		{
			name: "native nftables, nft missing", host: "net-native-nft-missing",
			want: map[string]string{"docker-dns": "fail:nft is not installed"},
			exit: ExitFail,
		},
		{
			name: "native nftables, nft failing", host: "net-native-nft-fails",
			want: map[string]string{"docker-dns": "fail:nft failed"},
			exit: ExitFail,
		},
		{
			name: "no redirect anywhere", host: "net-native-empty",
			want: map[string]string{"docker-dns": "fail:nowhere"},
			exit: ExitFail,
		},
		{
			name: "rules in both backends", host: "docker-v2-cgroupns",
			change: func(t *testing.T, dir string) {
				write(t, dir, ".host/run/iptables-legacy-save", "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -j ACCEPT\nCOMMIT\n")
			},
			want: map[string]string{"iptables-mode": "warn:legacy 1 rules, nft \\d+ rules", "iptables-legacy": "pass:1 rules"},
			exit: ExitWarn,
		},
		{
			name: "no iptables at all", host: "docker-v2-cgroupns",
			change: func(t *testing.T, dir string) {
				for _, c := range []string{"iptables-legacy-save", "ip6tables-legacy-save", "iptables-nft-save", "ip6tables-nft-save"} {
					os.Remove(filepath.Join(dir, ".host/run", c))
				}
			},
			want: map[string]string{"iptables-legacy": "warn:not installed", "iptables-nft": "warn:not installed", "iptables-mode": "fail:no iptables-save works"},
			exit: ExitFail,
		},
		{
			name: "neither host.docker.internal nor a gateway", host: "net-hostip-none",
			want: map[string]string{"host-docker-internal": "warn:no default gateway", "default-gateway": "warn:none"},
			exit: ExitWarn,
		},
		{
			name: "Docker Desktop", host: "net-hostip-desktop",
			want: map[string]string{"host-docker-internal": "pass:192.168.65.254"},
		},
		{
			name: "host.docker.internal is loopback", host: "net-hostip-loopback",
			want: map[string]string{"host-docker-internal": "pass:127.0.0.1 is loopback.*gateway 172.18.0.1 is used"},
		},
		{
			// No Docker DNS to rewrite: the lookup is not waited for, even
			// when it would hang.
			name: "podman", host: "podman-v1-no-cgroupns",
			change: func(t *testing.T, dir string) {
				write(t, dir, ".host/hosts", "kind-control-plane 10.89.0.2\nhost.docker.internal hang\n")
			},
			want: map[string]string{"host-docker-internal": "pass:not needed"},
			exit: ExitWarn, // this host runs without a cgroup namespace
		},
		{
			name: "old IPv4 address, none now", host: "net-ipv4-gone",
			want: map[string]string{"node-name": "fail:recorded IPv4 172.18.0.3", "plan": "fail:exit 20"},
			exit: ExitFail,
		},
		{
			name: "old IPv4 address, none now, no default route", host: "net-ipv4-gone-no-route",
			want: map[string]string{"node-name": "fail:IPv4 none \\(lookup kind-control-plane: no such host; /proc/net/route: no IPv4 default route\\).*recorded IPv4 172.18.0.3$", "plan": "fail:exit 20"},
			exit: ExitFail,
		},
		{
			// kind #3989: followed by the default route's interface.
			name: "name not resolving, new address", host: "net-ip-change-unresolved",
			want: map[string]string{"node-name": "warn:^kind-control-plane: IPv4 172.18.0.4 from the default route's interface eth0 \\(lookup kind-control-plane: no such host\\), IPv6 fc00:f853:ccd:e793::4 from the default route's interface eth0", "plan": "warn:WARN"},
			exit: ExitWarn,
		},
		{
			// The name's answers are the node's old addresses.
			name: "name resolving to stale addresses", host: "net-ip-change-stale-hosts",
			want: map[string]string{"node-name": "warn:^kind-control-plane: IPv4 172.18.0.4 from the default route's interface eth0 \\(kind-control-plane resolves to 172.18.0.3, on no interface of this node\\), IPv6 fc00:f853:ccd:e793::4 from the default route's interface eth0", "plan": "warn:WARN"},
			exit: ExitWarn,
		},
		{
			// No default route gives another: the stale answer is kept.
			name: "name resolving to stale addresses, no route tables", host: "net-ip-change-stale-hosts",
			change: func(t *testing.T, dir string) {
				for _, f := range []string{"proc/net/route", "proc/net/ipv6_route"} {
					if err := os.Remove(filepath.Join(dir, f)); err != nil {
						t.Fatal(err)
					}
				}
			},
			want: map[string]string{"node-name": "warn:^kind-control-plane: IPv4 172.18.0.3 \\(kind-control-plane resolves to 172.18.0.3, on no interface of this node\\), IPv6 fc00:f853:ccd:e793::3 \\(.*\\)$", "plan": "warn:WARN"},
			exit: ExitWarn,
		},
		{
			name: "old IPv6 address, none now", host: "net-ipv6-gone",
			want: map[string]string{"node-name": "warn:recorded IPv6", "plan": "warn:ERROR"},
			exit: ExitWarn,
		},
		{
			name: "node name lookup hangs", host: "docker-v2-cgroupns",
			change: func(t *testing.T, dir string) { write(t, dir, ".host/hosts", "kind-control-plane hang\n") },
			want:   map[string]string{"node-name": "warn:timed out"},
			exit:   ExitWarn,
		},
		{
			name: "DMI as in sysfs", host: "id-dmi-sysfs",
			want: map[string]string{"dmi": "pass:^/sys/class/dmi/id/product_name present \\(-> /sys/devices/virtual/dmi/id/product_name\\); /sys/class/dmi/id/product_uuid present \\(-> /sys/devices/virtual/dmi/id/product_uuid\\); /sys/devices/virtual/dmi/id/product_uuid present$"},
		},
		{
			name: "garbage product_uuid", host: "id-uuid-kept",
			change: func(t *testing.T, dir string) { write(t, dir, "kind/product_uuid", "garbage\n") },
			want:   map[string]string{"dmi": "warn:not a UUID"},
			exit:   ExitWarn,
		},
		{
			name: "no /lib/modules", host: "docker-v2-cgroupns",
			change: func(t *testing.T, dir string) { os.RemoveAll(filepath.Join(dir, "lib/modules")) },
			want:   map[string]string{"lib-modules": "warn:missing"},
			exit:   ExitWarn,
		},
		{
			name: "no modules for the running kernel", host: "docker-v2-cgroupns",
			change: func(t *testing.T, dir string) { write(t, dir, "proc/sys/kernel/osrelease", "5.15.0-91-generic\n") },
			want:   map[string]string{"lib-modules": "warn:5.15.0-91-generic"},
			exit:   ExitWarn,
		},
		{
			name: "modules for the running kernel", host: "docker-v2-cgroupns",
			change: func(t *testing.T, dir string) {
				write(t, dir, "proc/sys/kernel/osrelease", "5.15.0-91-generic\n")
				write(t, dir, "lib/modules/5.15.0-91-generic/modules.dep", "")
			},
			want: map[string]string{"lib-modules": "pass:/lib/modules/5.15.0-91-generic"},
		},
		{
			name: "low RLIMIT_NOFILE", host: "docker-v2-cgroupns",
			change: func(t *testing.T, dir string) { write(t, dir, ".host/nofile", "1024\n") },
			want:   map[string]string{"nofile": "warn:1024"},
			exit:   ExitWarn,
		},
		{
			name: "not a node image", host: "docker-v2-cgroupns",
			change: func(t *testing.T, dir string) { os.RemoveAll(filepath.Join(dir, "kind")) },
			want:   map[string]string{"fs-kind": "warn:no /kind"},
			exit:   ExitWarn,
		},
	})
}

// rowCase is a fake host (a host of testdata/hosts, changed) and the rows
// check must show for it.
type rowCase struct {
	name   string
	host   string
	change func(t *testing.T, dir string)
	// want are rows that must have this status, and whose observed
	// value must match the regexp after the colon, if any.
	want map[string]string
	exit int
}

// runRowCases checks each case's host, in parallel: every row there, in
// order, each not passing with a hint, those of want as wanted, and the
// exit code.
func runRowCases(t *testing.T, tests []rowCase) {
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := host(t, tt.host, func(dir string) {
				if tt.change != nil {
					tt.change(t, dir)
				}
			})
			rep := runTree(t, dir)
			var text bytes.Buffer
			if err := WriteText(&text, rep.Rows); err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, r := range rep.Rows {
				names = append(names, r.Name)
				if r.Status != Pass && r.Hint == "" {
					t.Errorf("row %s is %s without a hint", r.Name, r.Status)
				}
			}
			if diff := cmp.Diff(rowNames, names); diff != "" {
				t.Errorf("rows (-want +got):\n%s", diff)
			}
			for name, want := range tt.want {
				status, pattern, _ := strings.Cut(want, ":")
				r, ok := rowNamed(rep.Rows, name)
				if !ok {
					t.Errorf("no row %s", name)
					continue
				}
				if string(r.Status) != status || !regexp.MustCompile(pattern).MatchString(r.Observed) {
					t.Errorf("row %s: %s %q, want %s matching %q", name, r.Status, r.Observed, status, pattern)
				}
			}
			if got := ExitCode(rep.Rows); got != tt.exit {
				t.Errorf("exit code %d, want %d", got, tt.exit)
			}
			if t.Failed() {
				t.Logf("check:\n%s", text.String())
			}
		})
	}
}

// TestDetectFails: a host whose shared facts cannot be read is one failing
// row, not a crash.
func TestDetectFails(t *testing.T) {
	dir := host(t, "docker-v2-cgroupns", func(dir string) { write(t, dir, "proc/self/uid_map", "garbage\n") })
	rep := runTree(t, dir)
	if len(rep.Rows) != 1 || rep.Rows[0].Name != "detect" || rep.Rows[0].Status != Fail || !strings.Contains(rep.Rows[0].Observed, "uid_map") {
		t.Errorf("rows %+v", rep.Rows)
	}
	if ExitCode(rep.Rows) != ExitFail {
		t.Errorf("exit %d", ExitCode(rep.Rows))
	}
}

// TestPodNetworkRow: the preflight's outcome is a row, after the others.
func TestPodNetworkRow(t *testing.T) {
	dir := host(t, "docker-v2-cgroupns", nil)
	tree := system.NewTree(dir)
	env, _ := tree.Environ()
	for _, tt := range []struct {
		err    error
		status Status
	}{{nil, Pass}, {errors.New("TCP pod -> host: connect: timeout"), Fail}} {
		rep := Run(context.Background(), Options{Sys: tree, LookupEnv: env, PodNetwork: func(context.Context) (string, error) {
			return "host <-> pod", tt.err
		}})
		last := rep.Rows[len(rep.Rows)-1]
		if last.Name != "pod-network" || last.Status != tt.status {
			t.Errorf("last row %+v, want pod-network %s", last, tt.status)
		}
	}
}

// TestJSON: one document, an array of rows with all four keys.
func TestJSON(t *testing.T) {
	rep := runTree(t, host(t, "zfs", nil))
	var buf bytes.Buffer
	if err := WriteJSON(&buf, rep.Rows); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(&buf)
	var rows []map[string]any
	if err := dec.Decode(&rows); err != nil {
		t.Fatal(err)
	}
	if dec.More() {
		t.Error("more than one JSON document")
	}
	for _, r := range rows {
		for _, k := range []string{"name", "status", "observed", "hint"} {
			if _, ok := r[k].(string); !ok {
				t.Errorf("row %v lacks string %q", r, k)
			}
		}
	}
	if len(rows) != len(rowNames) {
		t.Errorf("%d rows, want %d", len(rows), len(rowNames))
	}
	buf.Reset()
	if err := WriteJSON(&buf, nil); err != nil || strings.TrimSpace(buf.String()) != "[]" {
		t.Errorf("no rows: %q, %v", buf.String(), err)
	}
}

func TestExitCode(t *testing.T) {
	for _, tt := range []struct {
		statuses []Status
		want     int
	}{
		{nil, 0}, {[]Status{Pass, Pass}, 0}, {[]Status{Pass, Warn}, 1}, {[]Status{Warn, Fail, Pass}, 2}, {[]Status{Fail}, 2},
	} {
		var rows []Row
		for _, s := range tt.statuses {
			rows = append(rows, Row{Status: s})
		}
		if got := ExitCode(rows); got != tt.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tt.statuses, got, tt.want)
		}
	}
}

// TestRecordsWhatItReads: run through a capture.Recorder, check's reads are
// recorded (so a capture holds them) and each probe is answered once for
// the dry run and the rows alike.
func TestRecordsWhatItReads(t *testing.T) {
	dir := host(t, "rootless-v2-overlay-fails", nil)
	tree := system.NewTree(dir)
	env, _ := tree.Environ()
	rec := capture.NewRecorder(tree)
	Run(context.Background(), Options{Sys: rec, LookupEnv: rec.Env(env)})
	paths := rec.Paths()
	for _, p := range []string{"/dev/fuse", "/lib/modules", "/proc/1/comm", "/proc/self/uid_map", "/etc/containerd/config.toml"} {
		if _, ok := paths[p]; !ok {
			t.Errorf("%s was not recorded", p)
		}
	}
	// The iptables saves ran once each, for the dry run and three rows,
	// and nft once (none of the saves holds Docker's DNS rules).
	if n := len(tree.Ran()); n != 5 {
		t.Errorf("%d commands ran, want the 4 saves and nft once each: %q", n, tree.Ran())
	}
}

// TestCgroupNSAtMountCap: when the mount table holds more cgroup mounts
// than fix_cgroup handles, the cgroupns row fails with the cap's error and
// a hint that names the mount table, not the container's cgroup (which
// the entrypoint found, and never got to use).
func TestCgroupNSAtMountCap(t *testing.T) {
	dir := host(t, "docker-v1-cgroupns", func(dir string) {
		n := 0
		editMountinfo(t, dir, func(line string) string {
			if line == "" || n > 0 {
				return line
			}
			var b strings.Builder
			b.WriteString(line)
			for n = 0; n <= cgroupfix.MaxV1Mounts; n++ {
				fmt.Fprintf(&b, "\n%d 1047 0:29 / /sys/fs/cgroup/cpu,cpuacct/c%d rw,nosuid - cgroup cgroup rw,cpu,cpuacct", 5000+n, n)
			}
			return b.String()
		})
	})
	rep := runTree(t, dir)
	r, ok := rowNamed(rep.Rows, "cgroupns")
	if !ok {
		t.Fatal("no row cgroupns")
	}
	if r.Status != Fail || !strings.Contains(r.Observed, "cgroup mounts, more than the 1024 this step handles") {
		t.Errorf("row cgroupns: %s %q, want fail with the cap's error", r.Status, r.Observed)
	}
	if strings.Contains(r.Hint, "/proc/self/cgroup") || !strings.Contains(r.Hint, "more than 1024 cgroup mounts") || !strings.Contains(r.Hint, "/proc/self/mountinfo") {
		t.Errorf("row cgroupns's hint %q: want the cap on the mount table, not the container's cgroup", r.Hint)
	}
	if plan, _ := rowNamed(rep.Rows, "plan"); plan.Status != Fail || !strings.Contains(plan.Observed, "exit 15") {
		t.Errorf("row plan: %s %q, want fix_cgroup's stop", plan.Status, plan.Observed)
	}
}
