//go:build linux

// Command pause is the cluster tier's pod sandbox process: it holds a pod's
// namespaces, reaps the orphans it inherits as the pod's PID 1, and exits
// cleanly on SIGINT or SIGTERM. Kubernetes' own pause is C; this one is
// built here so that no image is pulled.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (kind-entrypoint cluster tier)")
		return
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
