package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "--spawn" {
		os.Exit(spawn(os.Args[2:]))
	}
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		fmt.Fprintln(os.Stderr, "maxrss:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "maxrss-kib %d own-hwm-kib %d\n", ru.Maxrss, ownHWM())
	if len(os.Args) > 1 {
		err := unix.Exec(os.Args[1], os.Args[1:], os.Environ())
		fmt.Fprintln(os.Stderr, "maxrss: exec:", err)
		os.Exit(127)
	}
}

func spawn(argv []string) int {
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "maxrss: --spawn needs a command")
		return 2
	}
	fmt.Fprintf(os.Stderr, "spawner-hwm-kib %d\n", ownHWM())
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			fmt.Fprintf(os.Stderr, "child-maxrss-kib %d\n", ru.Maxrss)
		}
	}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode()
	case err != nil:
		fmt.Fprintln(os.Stderr, "maxrss:", err)
		return 127
	}
	return 0
}

// ownHWM is VmHWM of /proc/self/status in KiB: this process's own peak
// (its current memory map's), or -1.
func ownHWM() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		if v, ok := bytes.CutPrefix(s.Bytes(), []byte("VmHWM:")); ok {
			if f := bytes.Fields(v); len(f) > 0 {
				if n, err := strconv.ParseInt(string(f[0]), 10, 64); err == nil {
					return n
				}
			}
		}
	}
	return -1
}
