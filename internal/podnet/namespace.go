package podnet

// This file holds the network namespaces of a preflight: making the pod's,
// and running code on a thread inside one.

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// inNS runs fn on an OS thread moved into the network namespace ns, then
// moves the thread back. Namespaces belong to threads: fn's goroutine stays
// locked to that thread throughout, and no other goroutine can run there
// meanwhile. Should the move back fail, the thread is never unlocked, so
// the Go runtime ends it rather than reuse it in the wrong namespace.
func inNS(ns netns.NsHandle, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open this thread's network namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns: %w", err)
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("setns back: %w", err))
			return // still locked: the thread exits with this goroutine
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// currentNS opens the calling thread's network namespace.
func currentNS() (netns.NsHandle, error) {
	ns, err := netns.Get()
	if err != nil {
		return ns, fmt.Errorf("open the network namespace: %w", err)
	}
	return ns, nil
}

// newNS makes a new network namespace, as a CNI runtime does for a pod,
// and returns a descriptor that keeps it alive: nothing is mounted under
// /run/netns, so closing the descriptor (and every socket made in it)
// ends the namespace and whatever links are still in it. The thread that
// makes it starts from the namespace from and is moved back to its own
// afterwards.
func newNS(from netns.NsHandle) (netns.NsHandle, error) {
	ns := netns.None()
	err := inNS(from, func() (err error) {
		if ns, err = netns.New(); err != nil {
			return fmt.Errorf("new network namespace: %w", err)
		}
		return nil
	})
	return ns, err
}
