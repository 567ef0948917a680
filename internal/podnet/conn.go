package podnet

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// conn is an rtnetlink socket. A netlink socket acts on the network
// namespace it was created in, whichever thread uses it later; dial makes
// it in a given one.
type conn struct {
	fd  int
	seq uint32
	buf []byte
}

// replyTimeout bounds each wait for the kernel's answer, so that a lost
// reply fails the preflight instead of hanging it.
const replyTimeout = 5 * time.Second

// dial opens an rtnetlink socket in the network namespace open as ns.
func dial(ns int) (*conn, error) {
	var c *conn
	err := inNS(ns, func() error {
		var err error
		c, err = dialHere()
		return err
	})
	return c, err
}

// dialHere opens an rtnetlink socket in the calling thread's namespace.
func dialHere() (*conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	c := &conn{fd: fd, buf: make([]byte, 1<<16)}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		c.close()
		return nil, fmt.Errorf("netlink bind: %w", err)
	}
	tv := unix.NsecToTimeval(replyTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		c.close()
		return nil, fmt.Errorf("netlink SO_RCVTIMEO: %w", err)
	}
	// Best effort (Linux 4.12+): the kernel's own words for a refusal,
	// and no echo of the whole request in an error.
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1)
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
	return c, nil
}

func (c *conn) close() error {
	if c == nil || c.fd < 0 {
		return nil
	}
	err := unix.Close(c.fd)
	c.fd = -1
	return err
}

// do sends a request and returns the messages of its answer: for a dump,
// every message up to NLMSG_DONE; otherwise those before the ack. A
// refusal is an *Error.
func (c *conn) do(r request) ([]message, error) {
	c.seq++
	seq := c.seq
	if err := unix.Sendto(c.fd, r.encode(seq), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("netlink: %s: send: %w", r.what, err)
	}
	var out []message
	for {
		n, from, err := recvfrom(c.fd, c.buf)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) {
				return nil, fmt.Errorf("netlink: %s: no answer within %s", r.what, replyTimeout)
			}
			return nil, fmt.Errorf("netlink: %s: receive: %w", r.what, err)
		}
		if sa, ok := from.(*unix.SockaddrNetlink); !ok || sa.Pid != 0 {
			continue // not from the kernel
		}
		// Copied: the messages outlive the buffer's next use.
		msgs, err := parseMessages(append([]byte(nil), c.buf[:n]...))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.what, err)
		}
		for _, m := range msgs {
			if m.seq != seq {
				continue // a late answer to an earlier request
			}
			switch m.typ {
			case unix.NLMSG_DONE:
				return out, nil
			case unix.NLMSG_ERROR:
				if err := parseAck(m, r.what); err != nil {
					return nil, err
				}
				return out, nil
			}
			out = append(out, m)
		}
	}
}

func recvfrom(fd int, buf []byte) (int, unix.Sockaddr, error) {
	for {
		n, from, err := unix.Recvfrom(fd, buf, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err == nil && n > len(buf) {
			return 0, nil, fmt.Errorf("message truncated (%d bytes)", n)
		}
		return n, from, err
	}
}

// link returns a link by name.
func (c *conn) link(name string) (link, error) {
	msgs, err := c.do(getLink(name))
	if err != nil {
		return link{}, err
	}
	if len(msgs) != 1 {
		return link{}, fmt.Errorf("netlink: get link %s: %d answers, want 1", name, len(msgs))
	}
	return parseLink(msgs[0])
}

// inNS runs fn on an OS thread moved into the network namespace open as
// ns, then moves the thread back. Namespaces belong to threads: fn's
// goroutine stays locked to that thread throughout, and no other goroutine
// can run there meanwhile. Should the move back fail, the thread is never
// unlocked, so the Go runtime ends it rather than reuse it in the wrong
// namespace.
func inNS(ns int, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open this thread's network namespace: %w", err)
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(ns, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns: %w", err)
			return
		}
		ferr := fn()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("setns back: %w", err))
			return // still locked: the thread exits with this goroutine
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// currentNS opens the calling thread's network namespace.
func currentNS() (int, error) {
	fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open the network namespace: %w", err)
	}
	return fd, nil
}

// newNS makes a new network namespace, as a CNI runtime does for a pod,
// and returns a descriptor that keeps it alive: nothing is mounted under
// /run/netns, so closing the descriptor (and every socket made in it)
// ends the namespace and whatever links are still in it. The thread that
// makes it starts from the namespace open as from and is moved back to its
// own afterwards.
func newNS(from int) (int, error) {
	fd := -1
	err := inNS(from, func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
		}
		var err error
		fd, err = currentNS()
		return err
	})
	return fd, err
}
