//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// capNames maps a capability's bit number to its OCI name
// (linux/capability.h order).
var capNames = [...]string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER",
	"CAP_FSETID", "CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP",
	"CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST",
	"CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER",
	"CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE",
	"CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE",
	"CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD",
	"CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP",
	"CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
	"CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF",
	"CAP_CHECKPOINT_RESTORE",
}

// capSets are the members of an OCI LinuxCapabilities object.
var capSets = []string{"bounding", "effective", "permitted", "inheritable", "ambient"}

// capSysResource is CAP_SYS_RESOURCE's bit: without it no hard rlimit can
// be raised.
const capSysResource = 24

// rlimitResources maps the OCI names of rlimits to their resource numbers.
var rlimitResources = map[string]int{
	"RLIMIT_CPU": unix.RLIMIT_CPU, "RLIMIT_FSIZE": unix.RLIMIT_FSIZE,
	"RLIMIT_DATA": unix.RLIMIT_DATA, "RLIMIT_STACK": unix.RLIMIT_STACK,
	"RLIMIT_CORE": unix.RLIMIT_CORE, "RLIMIT_RSS": unix.RLIMIT_RSS,
	"RLIMIT_NPROC": unix.RLIMIT_NPROC, "RLIMIT_NOFILE": unix.RLIMIT_NOFILE,
	"RLIMIT_MEMLOCK": unix.RLIMIT_MEMLOCK, "RLIMIT_AS": unix.RLIMIT_AS,
	"RLIMIT_LOCKS": unix.RLIMIT_LOCKS, "RLIMIT_SIGPENDING": unix.RLIMIT_SIGPENDING,
	"RLIMIT_MSGQUEUE": unix.RLIMIT_MSGQUEUE, "RLIMIT_NICE": unix.RLIMIT_NICE,
	"RLIMIT_RTPRIO": unix.RLIMIT_RTPRIO, "RLIMIT_RTTIME": unix.RLIMIT_RTTIME,
}

// host is what the wrapper's own process can hold.
type host struct {
	bounding uint64
	// hardLimit returns the hard limit of an rlimit named as in OCI
	// ("RLIMIT_NOFILE"); false for a name it does not know.
	hardLimit func(name string) (uint64, bool)
}

// ownHardLimit is host.hardLimit for this process.
func ownHardLimit(name string) (uint64, bool) {
	res, ok := rlimitResources[name]
	if !ok {
		return 0, false
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(res, &lim); err != nil {
		return 0, false
	}
	return lim.Max, true
}

// runcGlobalValueFlags are runc's global options that take a value as the
// next argument; they must be skipped when looking for the subcommand.
var runcGlobalValueFlags = map[string]bool{
	"--root": true, "--log": true, "--log-format": true, "--criu": true, "--rootless": true,
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "runtimeshim: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	runc, err := findRunc()
	if err != nil {
		return err
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err
	}
	bounding, err := parseCapBnd(string(status))
	if err != nil {
		return err
	}
	if doc, key := specToEdit(args); doc != "" {
		if err := fitToHost(doc, key, host{bounding: bounding, hardLimit: ownHardLimit}); err != nil {
			return err
		}
	}
	argv := append([]string{runc}, args...)
	return syscall.Exec(runc, argv, os.Environ())
}

// findRunc returns the real runc. RUNTIMESHIM_RUNC overrides the search.
func findRunc() (string, error) {
	if p := os.Getenv("RUNTIMESHIM_RUNC"); p != "" {
		return p, nil
	}
	self, _ := os.Executable()
	for _, p := range []string{"/usr/sbin/runc", "/usr/bin/runc", "/usr/local/sbin/runc", "/usr/local/bin/runc"} {
		if p == self {
			continue
		}
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	p, err := exec.LookPath("runc")
	if err != nil {
		return "", fmt.Errorf("find runc: %w", err)
	}
	return p, nil
}

// parseCapBnd returns the CapBnd mask of a /proc/PID/status text.
func parseCapBnd(status string) (uint64, error) {
	for _, line := range strings.Split(status, "\n") {
		v, ok := strings.CutPrefix(line, "CapBnd:")
		if !ok {
			continue
		}
		mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			return 0, fmt.Errorf("parse CapBnd %q: %w", strings.TrimSpace(v), err)
		}
		return mask, nil
	}
	return 0, errors.New("no CapBnd line in /proc/self/status")
}

// specToEdit finds, in a runc command line, the JSON document holding the
// process (capabilities, rlimits) and the key of the process object inside
// it ("" when it is the document's top level). It returns "" when the
// command carries no process.
func specToEdit(args []string) (doc string, processKey string) {
	i := 0
	for i < len(args) {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			break
		}
		if runcGlobalValueFlags[a] {
			i++
		}
		i++
	}
	if i >= len(args) {
		return "", ""
	}
	sub, rest := args[i], args[i+1:]
	switch sub {
	case "create", "run":
		bundle := flagValue(rest, "--bundle", "-b")
		if bundle == "" {
			bundle = "."
		}
		return filepath.Join(bundle, "config.json"), "process"
	case "exec":
		if p := flagValue(rest, "--process", "-p"); p != "" {
			return p, ""
		}
	}
	return "", ""
}

// flagValue returns the value of a flag given as "--name V", "--name=V",
// "-n V" or "-n=V".
func flagValue(args []string, long, short string) string {
	for i, a := range args {
		for _, name := range []string{long, short} {
			if a == name && i+1 < len(args) {
				return args[i+1]
			}
			if v, ok := strings.CutPrefix(a, name+"="); ok {
				return v
			}
		}
		if a == "--" {
			break
		}
	}
	return ""
}

// fitToHost rewrites path so that its process asks for no capability and
// no rlimit the host cannot grant. processKey selects the process object
// ("" = top level).
func fitToHost(path, processKey string, h host) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, changed, err := fitSpec(data, processKey, h)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if !changed {
		return nil
	}
	return replaceFile(path, out)
}

// fitSpec is the pure part of fitToHost. It returns data itself when
// nothing changes.
func fitSpec(data []byte, processKey string, h host) ([]byte, bool, error) {
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // keep 64-bit integers (rlimits, memory limits) exact
	if err := dec.Decode(&doc); err != nil {
		return nil, false, err
	}
	proc := doc
	if processKey != "" {
		p, ok := doc[processKey].(map[string]any)
		if !ok {
			return data, false, nil
		}
		proc = p
	}
	capsChanged := dropMissingCaps(proc, h.bounding)
	limitsChanged := false
	if h.bounding&(1<<capSysResource) == 0 {
		var err error
		if limitsChanged, err = lowerRlimits(proc, h.hardLimit); err != nil {
			return nil, false, err
		}
	}
	if !capsChanged && !limitsChanged {
		return data, false, nil
	}
	out, err := json.Marshal(doc)
	return out, true, err
}

// dropMissingCaps removes from every capability set of an OCI process the
// capabilities outside bounding.
func dropMissingCaps(proc map[string]any, bounding uint64) bool {
	caps, ok := proc["capabilities"].(map[string]any)
	if !ok {
		return false
	}
	missing := map[string]bool{}
	for bit, name := range capNames {
		if bounding&(1<<uint(bit)) == 0 {
			missing[name] = true
		}
	}
	changed := false
	for _, set := range capSets {
		list, ok := caps[set].([]any)
		if !ok {
			continue
		}
		kept := make([]any, 0, len(list))
		for _, c := range list {
			if s, ok := c.(string); ok && missing[s] {
				changed = true
				continue
			}
			kept = append(kept, c)
		}
		caps[set] = kept
	}
	return changed
}

// lowerRlimits lowers every rlimit of an OCI process whose hard limit is
// above the host's to the host's (and its soft limit to no more than
// that). Rlimits the host does not name are left alone: runc will say
// what is wrong with them.
func lowerRlimits(proc map[string]any, hardLimit func(string) (uint64, bool)) (bool, error) {
	list, ok := proc["rlimits"].([]any)
	if !ok {
		return false, nil
	}
	changed := false
	for _, item := range list {
		rl, ok := item.(map[string]any)
		if !ok {
			continue
		}
		name, _ := rl["type"].(string)
		limit, ok := hardLimit(name)
		if !ok {
			continue
		}
		hard, err := rlimitValue(rl, "hard")
		if err != nil {
			return false, fmt.Errorf("%s: %w", name, err)
		}
		soft, err := rlimitValue(rl, "soft")
		if err != nil {
			return false, fmt.Errorf("%s: %w", name, err)
		}
		if hard <= limit {
			continue
		}
		rl["hard"] = json.Number(strconv.FormatUint(limit, 10))
		rl["soft"] = json.Number(strconv.FormatUint(min(soft, limit), 10))
		changed = true
	}
	return changed, nil
}

// rlimitValue reads the hard or soft value of an OCI rlimit.
func rlimitValue(rl map[string]any, key string) (uint64, error) {
	n, ok := rl[key].(json.Number)
	if !ok {
		return 0, fmt.Errorf("%s is not a number: %v", key, rl[key])
	}
	v, err := strconv.ParseUint(n.String(), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", key, err)
	}
	return v, nil
}

// replaceFile writes data to a temporary file beside path, keeping path's
// mode, and renames it over path.
func replaceFile(path string, data []byte) error {
	mode := os.FileMode(0o600)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".runtimeshim-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
