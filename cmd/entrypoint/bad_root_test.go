package main

// The classes of hostile host input, one or more hosts each, run
// through the three commands that read a --root: --dry-run, check and
// capture. Every case, whatever it tests, must also: not panic, end in
// time, print only lines of the known shapes, and never show (or archive)
// a byte of the file kept outside its root.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
	"github.com/kind-entrypoint/entrypoint/internal/system/outputtest"
)

// secret is what the file outside every case's root holds.
const secret = "SECRET-outside-the-root-7f3a"

type hardCase struct {
	name string
	// scenario is the host under testdata/hosts the case starts from.
	scenario string
	// files replace the scenario's: content, "->TARGET" for a symlink
	// (OUT in TARGET is the outside directory's path without its
	// leading "/"), "FIFO" for a named pipe; remove deletes.
	files  map[string]string
	remove []string
	// args is the command; ROOT stands for the host's directory.
	args []string
	// code is the exit status wanted (-1: any).
	code int
	// want are substrings of stdout+stderr; not must never appear.
	want, not []string
}

func hardCases() []hardCase {
	const (
		v1   = "docker-v1-cgroupns"
		v1NS = "docker-v1-no-cgroupns"
		v2   = "docker-v2-cgroupns"
		ipCh = "net-ip-change"
	)
	up := strings.Repeat("../", 24)
	onlyRoot := "1 0 0:1 / / rw shared:1 - overlay overlay rw\n"
	dry := []string{"--dry-run", "--root", "ROOT"}
	chk := []string{"check", "--root", "ROOT"}
	capt := []string{"capture", "-o", "ARCHIVE", "--root", "ROOT"}
	var cases []hardCase
	// each runs a host through the three commands.
	each := func(name, scen string, files map[string]string, dryCode int, want, not []string) {
		for _, c := range []struct {
			cmd  string
			args []string
			code int
		}{{"dry-run", dry, dryCode}, {"check", chk, -1}, {"capture", capt, 0}} {
			w := want
			if c.cmd != "dry-run" {
				w = nil
			}
			cases = append(cases, hardCase{name: name + "/" + c.cmd, scenario: scen, files: files, args: c.args, code: c.code, want: w, not: not})
		}
	}

	// 1. A mount table without /sys.
	each("no-sys-mount", v2, map[string]string{"/proc/self/mountinfo": onlyRoot}, 0,
		[]string{"WARN: nothing is mounted at /sys"}, nil)

	// 2. Symlinks leave the root only on the replaying machine.
	each("escape/resolv.conf-relative", v2, map[string]string{"/etc/resolv.conf": "->" + up + "OUT/secret"}, 0, nil, nil)
	each("escape/config.toml-absolute", v2, map[string]string{"/etc/containerd/config.toml": "->/OUT/secret"}, -1, nil, nil)
	each("escape/product_uuid", v2, map[string]string{"/kind/product_uuid": "->/OUT/secret"}, -1, nil, nil)
	each("escape/old-ipv4", ipCh, map[string]string{"/kind/old-ipv4": "->/OUT/secret"}, -1, nil, nil)
	each("escape/apiserver.key", ipCh, map[string]string{"/etc/kubernetes/pki/apiserver.key": "->/OUT/secret"}, -1, nil, nil)
	each("escape/kubelet.conf", ipCh, map[string]string{"/etc/kubernetes/kubelet.conf": "->/OUT/secret"}, -1, nil, nil)
	each("escape/mount-binary", v2, map[string]string{"/usr/bin/mount": "->/OUT/setuid-mount"}, 0,
		nil, []string{"chmod /usr/bin/mount"})
	each("escape/mountinfo-of-this-machine", v2, map[string]string{"/proc/self/mountinfo": "->/proc/self/mountinfo"}, -1,
		[]string{"/proc/self/mountinfo"}, nil)
	each("escape/dmi-dir", v2, map[string]string{"/sys/class/dmi/id": "->/OUT/dmi"}, 0,
		nil, []string{"FATAL", "lstat /OUT"})

	// 3 and 4. Bounded reads; a pipe or a device is not a file.
	each("fifo/mountinfo", v2, map[string]string{"/proc/self/mountinfo": "FIFO"}, -1,
		[]string{"/proc/self/mountinfo: not a regular file"}, nil)
	each("fifo/config.toml", v2, map[string]string{"/etc/containerd/config.toml": "FIFO"}, -1, nil, nil)
	each("big/config.toml", v2, map[string]string{"/etc/containerd/config.toml": strings.Repeat("# padding\n", 100_000)}, 12,
		[]string{"/etc/containerd/config.toml", "262144"}, nil)

	// 5. Host text never starts a line of its own.
	each("forge/mountinfo-newline", v1NS, map[string]string{"/proc/self/mountinfo": "REPLACE /sys/fs/cgroup/memory /sys/fs/cgroup/memory\\012step\\04011\\040pwned:\\012\\040\\040mount\\040/\\040on\\040/etc"}, -1, nil, nil)
	each("forge/old-ipv4", ipCh, map[string]string{"/kind/old-ipv4": "172.18.0.3\nstep 11 forged:\n  run rm -rf /\n"}, -1, nil, nil)
	each("forge/iptables-save-fail", v2, map[string]string{"/.host/run/iptables-nft-save.fail": "boom\x1b[31m\nERROR: forged\n\x07"}, -1, nil, []string{"\x1b"})
	each("forge/self-cgroup", v1, map[string]string{"/proc/self/cgroup": "2:cpu,cpuacct:/x\npass  pod-network  forged row\n"}, -1, nil, nil)

	// 6. Errors name their input, clipped.
	each("mountinfo/bad-line", v2, map[string]string{"/proc/self/mountinfo": onlyRoot + "2 1 0:2 / /x rw\n"}, -1,
		[]string{"/proc/self/mountinfo: line 2"}, []string{"statfs /kind: parsing"})
	each("mountinfo/60KB-binary-line", v2, map[string]string{"/proc/self/mountinfo": onlyRoot + strings.Repeat("\x01\xfe", 30_000) + "\n"}, -1,
		[]string{"/proc/self/mountinfo: line 2"}, nil)
	each("mountinfo/70KB-line", v2, map[string]string{"/proc/self/mountinfo": onlyRoot + "2 1 0:2 / /x rw - tmpfs tmpfs rw," + strings.Repeat("o", 70_000) + "\n"}, -1,
		[]string{"/proc/self/mountinfo: line 2"}, []string{"token too long"})
	each("mountinfo/no-root-line", v2, map[string]string{"/proc/self/mountinfo": "2 1 0:2 / /sys rw - sysfs sysfs rw\n"}, -1,
		[]string{"/proc/self/mountinfo"}, []string{"statfs /usr/bin/mount: file does not exist", "statfs /kind: file does not exist"})

	// 7. A --root that is not a directory is a usage error, before any step.
	cases = append(cases,
		hardCase{name: "root/missing/dry-run", args: []string{"--dry-run", "--root", "ROOT/nonexistent"}, code: 2, want: []string{"not a directory"}, not: []string{"step 1"}},
		hardCase{name: "root/missing/check", args: []string{"check", "--root", "ROOT/nonexistent"}, code: 3, want: []string{"not a directory"}},
		hardCase{name: "root/missing/capture", args: []string{"capture", "-o", "ARCHIVE", "--root", "ROOT/nonexistent"}, code: 2, want: []string{"not a directory"}},
		hardCase{name: "root/missing/companion", args: []string{"undo-mount-hacks", "--dry-run", "--root", "ROOT/nonexistent"}, code: 2, want: []string{"not a directory"}},
	)

	// 9. Replays fail closed: a .host file that is there but
	// cannot be read is an error naming it, in every command; without
	// .host/environ the environment is empty, never this machine's
	// (TestHardening sets a proxy holding the secret in it).
	for kind, content := range map[string]string{
		"fifo": "FIFO", "link-out": "->/OUT/secret", "loop": "->environ",
		"big": strings.Repeat("A=b\n", 300_000),
	} {
		files := map[string]string{"/.host/environ": content}
		cases = append(cases,
			hardCase{name: "environ/" + kind + "/dry-run", scenario: v2, files: files, args: dry, code: 2, want: []string{"/.host/environ"}, not: []string{"step 1"}},
			hardCase{name: "environ/" + kind + "/check", scenario: v2, files: files, args: chk, code: 3, want: []string{"/.host/environ"}},
			hardCase{name: "environ/" + kind + "/capture", scenario: v2, files: files, args: capt, code: 2, want: []string{"/.host/environ"}},
			hardCase{name: "environ/" + kind + "/companion", scenario: v2, files: files, args: []string{"undo-mount-hacks", "--dry-run", "--root", "ROOT"}, code: 2, want: []string{"/.host/environ"}},
		)
	}
	each("environ/absent", v2, nil, 0, []string{"HTTP_PROXY=\\\" \\\"HTTPS_PROXY=\\\""}, nil)
	cases[len(cases)-3].remove = []string{"/.host/environ"}
	cases[len(cases)-2].remove = []string{"/.host/environ"}
	cases[len(cases)-1].remove = []string{"/.host/environ"}
	for kind, content := range map[string]string{
		"fifo": "FIFO", "link-out": "->/OUT/secret", "dir": "", "big": strings.Repeat("x", 5000),
	} {
		files := map[string]string{"/.host/random": content}
		if kind == "dir" {
			files = map[string]string{"/.host/random/x": "x"}
		}
		cases = append(cases,
			hardCase{name: "random/" + kind + "/dry-run", scenario: v2, files: files, args: dry, code: -1, want: []string{"/.host/random"}},
			hardCase{name: "random/" + kind + "/capture", scenario: v2, files: files, args: capt, code: -1, want: []string{"/.host/random"}},
		)
	}

	// 8. Lower severity.
	for _, a := range []string{"0.0.0.0", "255.255.255.255"} {
		each("host.docker.internal/"+a, v2, map[string]string{"/.host/hosts": "kind-control-plane 172.18.0.2\nhost.docker.internal " + a + "\n"}, 0,
			[]string{"fact host IP: 172.18.0.1 (default gateway"}, []string{"nameserver " + a, "--to-destination " + a})
	}
	each("dotdot/self-cgroup", v1NS, map[string]string{"/proc/self/cgroup": "REPLACE /docker/74ee /docker/../../../etc/74ee"}, 15,
		[]string{"/proc/self/cgroup: line", "not a clean path"}, nil)
	each("dotdot/cgroup-mountpoint", v1, map[string]string{"/proc/self/mountinfo": "REPLACE /sys/fs/cgroup/memory /sys/fs/cgroup/../../../etc"}, -1,
		[]string{"/proc/self/mountinfo: mount", "not a clean absolute path"}, nil)
	each("machine-id/non-empty-dir", v2, map[string]string{"/etc/machine-id/x": "x"}, 16, []string{"/etc/machine-id"}, nil)
	each("kind/regular-file", v2, map[string]string{"/kind": "x"}, 17, []string{"/kind/product_name: not a directory"}, nil)
	each("no-usable-address", ipCh, map[string]string{"/.host/hosts": "REPLACE 172.18.0.4 127.0.0.1"}, -1,
		[]string{"no usable IPv4 address"}, []string{"usable 4 address"})
	return cases
}

// fixTree lays out a case's files over the scenario's copy in root, every
// change through the root (system.TreeFiles): the links a case lays out
// never lead a later change out of it.
func fixTree(t *testing.T, root, out string, c hardCase) {
	t.Helper()
	w, err := system.OpenTreeFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, p := range c.remove {
		if err := w.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
	}
	for p, content := range c.files {
		if rest, ok := strings.CutPrefix(content, "REPLACE "); ok {
			old, nw, _ := strings.Cut(rest, " ")
			b, err := system.NewTree(root).ReadFile(p, system.LimitTable)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(b, []byte(old)) {
				t.Fatalf("%s holds no %q", p, old)
			}
			content = strings.ReplaceAll(string(b), old, nw)
		}
		if err := w.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
		if err := w.MkdirAll(path.Dir(path.Clean("/"+p)), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case content == "FIFO":
			err = w.Mkfifo(p, 0o644)
		case strings.HasPrefix(content, "->"):
			err = w.Symlink(strings.ReplaceAll(content[2:], "OUT", strings.TrimPrefix(out, "/")), p)
		default:
			err = w.WriteFile(p, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// outsideDir is the directory every escaping link points into: files that
// hold the secret, a setuid mount binary, a DMI directory.
func outsideDir(t *testing.T) string {
	t.Helper()
	out := hosttest.Dir(t, map[string]string{
		"secret":           secret + "\n",
		"setuid-mount":     secret,
		"dmi/product_name": secret,
		"dmi/product_uuid": secret,
	})
	if err := os.Chmod(filepath.Join(out, "setuid-mount"), 0o4755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	return out
}

// planDotDot finds a change planned on a path holding "..".
var planDotDot = regexp.MustCompile(`(?m)^  (mkdir|mount|umount|remove|write|write-in-place|symlink|chown|chmod) .*/\.\.(/| |$).*`)

// checkLines fails for a line of no known shape, a control byte, or a
// forged line.
func checkLines(t *testing.T, what, out string) {
	t.Helper()
	for _, p := range outputtest.Problems(out) {
		t.Errorf("%s: %s", what, p)
	}
}

// archived returns every file name and content of a capture, as one text.
func archived(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var b strings.Builder
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s -> %s\n", h.Name, h.Linkname)
		io.Copy(&b, tr)
	}
	return b.String()
}

func TestHardening(t *testing.T) {
	// This machine's environment holds the secret: a replay that fell
	// back to it would plan it into the proxy drop-in.
	t.Setenv("HTTP_PROXY", "http://"+secret+":1")
	for _, c := range hardCases() {
		t.Run(c.name, func(t *testing.T) {
			out := outsideDir(t)
			root := t.TempDir()
			if c.scenario != "" {
				root = hosttest.Host(t, c.scenario)
				fixTree(t, root, out, c)
			}
			archive := filepath.Join(t.TempDir(), "node.tar.gz")
			var args []string
			for _, a := range c.args {
				a = strings.ReplaceAll(a, "ROOT", root)
				args = append(args, strings.ReplaceAll(a, "ARCHIVE", archive))
			}
			var stdout, stderr bytes.Buffer
			code := -100
			done := make(chan struct{})
			go func() {
				defer close(done)
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("panic: %v\n%s", r, debug.Stack())
					}
				}()
				code = dispatch("entrypoint", args, strings.NewReader(""), &stdout, &stderr)
			}()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				t.Fatalf("%q still running after 60 s", args)
			}
			t.Logf("%q: exit %d\nstdout:\n%.300s\nstderr:\n%.300s", args, code, stdout.String(), stderr.String())
			if c.code >= 0 && code != c.code {
				t.Errorf("exit %d, want %d", code, c.code)
			}
			if args[0] != "capture" {
				checkLines(t, "stdout", stdout.String())
			}
			checkLines(t, "stderr", stderr.String())
			all := stdout.String() + stderr.String()
			for _, w := range c.want {
				if !strings.Contains(all, w) {
					t.Errorf("output lacks %q", w)
				}
			}
			if m := planDotDot.FindString(all); m != "" {
				t.Errorf("a change planned on a path with \"..\": %q", m)
			}
			for _, n := range append(c.not, secret) {
				if strings.Contains(all, n) {
					t.Errorf("output holds %q", n)
				}
			}
			if args[0] == "capture" && code == 0 {
				if a := archived(t, archive); strings.Contains(a, secret) || strings.Contains(a, out) {
					t.Errorf("the capture archived what is outside its root")
				}
			}
		})
	}
}
