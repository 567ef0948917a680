package check

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/boot"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
	"github.com/kind-entrypoint/entrypoint/internal/system/outputtest"
	"golang.org/x/sys/unix"
)

// hostSecret is what the files outside every fuzzed root hold.
const hostSecret = "SECRET-outside-the-root-4b1d"

// fuzzFiles are the node files FuzzHost fills from its input, in order.
var fuzzFiles = []string{
	"/proc/self/mountinfo",
	"/proc/self/cgroup",
	"/sys/fs/cgroup/cgroup.controllers",
	"/proc/self/uid_map",
	"/etc/containerd/config.toml",
	"/etc/resolv.conf",
	"/kind/old-ipv4",
	"/kind/product_uuid",
	"/.host/environ",
	"/.host/hosts",
	"/.host/run/iptables-nft-save",
	"/.host/run/iptables-legacy-save.fail",
}

// extraFiles are more read paths FuzzHost lays out, each with fixed
// content and a kind of its own (the .host files of every probe, the DMI
// and identity files).
var extraFiles = map[string]string{
	"/.host/random":                   "kind\n",
	"/.host/nofile":                   "1048576\n",
	"/.host/overlay":                  "ok\n",
	"/.host/statfs":                   "/kind overlay\n",
	"/.host/run/ip6tables-nft-save":   "*filter\nCOMMIT\n",
	"/.host/run/iptables-legacy-save": "",
	"/sys/class/dmi/id/product_uuid":  "x\n",
	"/etc/machine-id":                 "0123456789abcdef0123456789abcdef\n",
}

// extraOrder is extraFiles' paths in a fixed order (their kinds' bits).
var extraOrder = slices.Sorted(maps.Keys(extraFiles))

// Kinds of a read path, three bits each of FuzzHost's kinds: what is laid
// out there.
const (
	kindFile     = iota // a regular file with the content
	kindAbsOut          // a symlink out of the root, absolute
	kindClimbOut        // a symlink out of the root, climbing with ".."
	kindFIFO            // a named pipe
	kindDir             // a directory
	kindDevice          // a character device no driver has
	kindDangling        // a symlink to nothing
	kindLoop            // a symlink to itself
)

// kindOf is the kind of read path i (fuzzFiles, then extraOrder).
func kindOf(kinds uint64, i int) uint64 { return (kinds >> (3 * i)) & 7 }

// environIndex is .host/environ's place in fuzzFiles.
var environIndex = slices.Index(fuzzFiles, "/.host/environ")

// FuzzHost builds a host from its input (the files above; kinds says,
// three bits a read path, what is there: see kindFile...; grow makes one
// file's content up to 1 MiB long) and runs what reads a --root: Detect and
// the dry run of every step, rendered, then check, rendered. Neither may
// panic, take long, allocate much, show a byte from outside the root, or
// print a line of no known shape.
func FuzzHost(f *testing.F) {
	v1 := "1 0 0:1 / / rw shared:1 - overlay overlay rw\n2 1 0:2 / /sys rw,nosuid - sysfs sysfs rw\n3 2 0:3 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n4 3 0:4 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n5 3 0:5 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
	v2 := "1 0 0:1 / / rw shared:1 - overlay overlay rw\n2 1 0:2 / /sys rw,nosuid - sysfs sysfs rw\n3 2 0:3 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
	config := "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  snapshotter = \"overlayfs\"\n"
	environ := "PATH=/usr/bin\nHOSTNAME=kind-control-plane\n"
	hosts := "kind-control-plane 172.18.0.2\nhost.docker.internal 192.168.65.254\n"
	save := "*nat\n:DOCKER_OUTPUT - [0:0]\n-A OUTPUT -d 127.0.0.11/32 -j DOCKER_OUTPUT\n-A DOCKER_OUTPUT -d 127.0.0.11/32 -p udp -m udp --dport 53 -j DNAT --to-destination 127.0.0.11:41234\nCOMMIT\n"
	f.Add(v1, "2:cpu,cpuacct:/\n1:name=systemd:/\n", "", "0 0 4294967295\n", config, "nameserver 127.0.0.11\n", "", "", environ, hosts, save, "", uint64(0), uint16(0))
	f.Add(v2, "0::/\n", "cpu memory pids\n", "0 1000 65536\n", config, "nameserver 127.0.0.11\nsearch x\n", "172.18.0.3", "", environ, hosts, save, "boom\x1b[31m\n", uint64(0), uint16(0x9a))
	f.Add("1 0 0:1 / / rw shared:1 - overlay overlay rw\n", "0::/\n", "cpu memory pids\n", "", "", "", "172.18.0.3\nstep 11 forged:\n", "x", "", "", "", "", uint64(0o11111111111111111111), uint16(0))
	f.Add(strings.Replace(v1, "/sys/fs/cgroup/memory", `/sys/fs/cgroup/memory\012step\04011\040pwned:`, 1), "2:cpu,cpuacct:/x\npass  pod-network  forged row\n", "", "", config, "", "", "", environ, "host.docker.internal 0.0.0.0\n", "", "", uint64(0o22222222222222222222), uint16(0))
	f.Add(v1, "2:cpu,cpuacct:/../../x\n", "", "", config, "", "", "", environ, hosts, save, "", uint64(0o33333333333333333333), uint16(0))
	for k := uint64(kindDir); k <= kindLoop; k++ {
		var all uint64
		for i := range len(fuzzFiles) + len(extraOrder) {
			all |= k << (3 * i)
		}
		// Every path of this kind but .host/environ, which stops the
		// replay before it reads anything else, and the mount table,
		// without which Detect stops.
		all &^= 7<<(3*environIndex) | 7
		f.Add(v1, "", "", "", config, "", "", "", environ, hosts, save, "", all, uint16(0))
		// Only the .host files.
		all &= ^uint64(0) << (3 * len(fuzzFiles))
		f.Add(v1, "", "", "", config, "", "", "", environ, hosts, save, "", all, uint16(0))
	}

	out := hosttest.Dir(f, map[string]string{"secret": hostSecret + "\n", "dir/x": hostSecret})
	f.Fuzz(func(t *testing.T, mountinfo, selfCgroup, controllers, uidMap, config, resolv, oldIPv4, productUUID, environ, hosts, nftSave, legacyFail string, kinds uint64, grow uint16) {
		fuzzHost(t, out, []string{mountinfo, selfCgroup, controllers, uidMap, config, resolv, oldIPv4, productUUID, environ, hosts, nftSave, legacyFail}, kinds, grow)
	})
}

// fuzzHost is one input of FuzzHost: contents of fuzzFiles, kinds and grow
// (its low 4 bits pick a file of fuzzFiles, the next 4 the power of two,
// from 1 KiB to 1 MiB, its content is repeated up to).
func fuzzHost(t *testing.T, out string, contents []string, kinds uint64, grow uint16) {
	up := strings.Repeat("../", 16) + strings.TrimPrefix(out, "/")
	{
		root := t.TempDir()
		base := map[string]string{
			"usr/bin/mount": "", "usr/bin/umount": "", "etc/hostname": "kind-control-plane\n",
			"proc/net/route":                "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\neth0\t00000000\t010012AC\t0003\t0\t0\t0\t00000000\t0\t0\t0\n",
			"sys/class/dmi/id/product_name": "x\n", "sys/class/dmi/id/product_uuid": "x\n",
			"etc/systemd/system/containerd-fuse-overlayfs.service": "[Install]\nWantedBy=multi-user.target\n",
		}
		hosttest.AddFiles(t, root, base)
		tree := system.NewTree(root)
		w := hosttest.Files(t, tree)
		if i := int(grow & 15); i < len(contents) && contents[i] != "" {
			size := 1 << (10 + min(grow>>4&15, 10))
			contents[i] = strings.Repeat(contents[i], (size+len(contents[i])-1)/len(contents[i]))
		}
		paths := append(slices.Clone(fuzzFiles), extraOrder...)
		for i, p := range paths {
			content := extraFiles[p]
			if i < len(contents) {
				content = contents[i]
			}
			if err := w.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
			if err := w.MkdirAll(path.Dir(path.Clean("/"+p)), 0o755); err != nil {
				t.Fatal(err)
			}
			var err error
			switch kindOf(kinds, i) {
			case kindFile:
				if content != "" || i < 4 || i >= len(contents) {
					err = w.WriteFile(p, []byte(content), 0o644)
				}
			case kindAbsOut:
				err = w.Symlink(out+"/secret", p)
			case kindClimbOut:
				err = w.Symlink(up+"/secret", p)
			case kindFIFO:
				err = w.Mkfifo(p, 0o644)
			case kindDir:
				err = w.MkdirAll(p+"/x", 0o755)
			case kindDevice:
				err = unix.Mknod(filepath.Join(root, p), unix.S_IFCHR|0o644, int(unix.Mkdev(4000, 4000)))
			case kindDangling:
				err = w.Symlink("/nowhere", p)
			case kindLoop:
				err = w.Symlink(path.Base(p), p)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if kinds&(1<<30) != 0 {
			// A directory on the way leads out.
			if err := w.RemoveAll("sys/class/dmi/id"); err != nil {
				t.Fatal(err)
			}
			if err := w.Symlink(out+"/dir", "sys/class/dmi/id"); err != nil {
				t.Fatal(err)
			}
		}

		env, err := tree.Environ()
		if err != nil {
			// A replay fails closed: an environ that is there but
			// cannot be read is an error naming it, never absent.
			if kindOf(kinds, environIndex) == kindFile && !strings.Contains(err.Error(), "limit") || !strings.Contains(err.Error(), "/.host/environ") {
				t.Fatalf("environ of kind %d: %v", kindOf(kinds, environIndex), err)
			}
			return
		}
		if kindOf(kinds, environIndex) != kindFile {
			t.Fatalf("an environ of kind %d (not a regular file) was read", kindOf(kinds, environIndex))
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		done := make(chan string, 1)
		go func() {
			var b bytes.Buffer
			if h, err := boot.Detect(tree, env); err == nil {
				h.ProbeTimeout = 20 * time.Millisecond
				results, _ := boot.DryRun(context.Background(), h, boot.Steps())
				if err := boot.Render(&b, h, results); err != nil {
					t.Error(err)
				}
			}
			rep := Run(context.Background(), Options{Sys: tree, LookupEnv: env, ProbeTimeout: 20 * time.Millisecond})
			if err := WriteText(&b, rep.Rows); err != nil {
				t.Error(err)
			}
			done <- b.String()
		}()
		var text string
		select {
		case text = <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("the dry run and check of a small host took over 20 s")
		}
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 512<<20 {
			t.Errorf("allocated %d MiB for a host of a few KiB", alloc>>20)
		}
		if strings.Contains(text, hostSecret) {
			t.Errorf("a file outside the root was read:\n%s", text)
		}
		for _, p := range outputtest.Problems(text) {
			t.Error(p)
		}
	}
}

// TestHostRandom runs fuzzHost on random hosts: what FuzzHost checks, in
// every test run, and a measure of its speed.
func TestHostRandom(t *testing.T) {
	out := hosttest.Dir(t, map[string]string{"secret": hostSecret + "\n", "dir/x": hostSecret})
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20 {
		contents := make([]string, len(fuzzFiles))
		for j := range contents {
			b := make([]byte, r.IntN(200))
			for k := range b {
				const alphabet = " \n:/0123456789abcdef-.\x00\x1b\\rw"
				b[k] = alphabet[r.IntN(len(alphabet))]
			}
			contents[j] = string(b)
		}
		kinds := r.Uint64()
		if r.IntN(4) != 0 {
			// Mostly a readable environ: one that is not stops the
			// replay before anything else is read.
			kinds &^= 7 << (3 * environIndex)
		}
		start := time.Now()
		t.Run(fmt.Sprint(i), func(t *testing.T) { fuzzHost(t, out, contents, kinds, uint16(r.Uint32())) })
		t.Logf("host %d: %s", i, time.Since(start))
	}
}
