package podnet

// This file holds the proof of a preflight: one TCP exchange between the pod
// and the host, each side in its own network namespace.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netns"
)

// exchange listens on listenAddr in namespace listenNS, connects to it from
// namespace dialNS, and checks that a random token goes there and back.
// It returns the dialling side's source address. The side in the host
// namespace (the dialler, or with hostListens the accepted connection)
// closes with an RST, so that no TIME_WAIT socket stays on the host.
func exchange(ctx context.Context, listenNS, dialNS netns.NsHandle, listenAddr netip.Addr, hostListens bool) (netip.Addr, error) {
	token := randomHex(8)
	deadline, _ := ctx.Deadline()
	var ln *net.TCPListener
	err := inNS(listenNS, func() (err error) {
		ln, err = net.ListenTCP("tcp4", net.TCPAddrFromAddrPort(netip.AddrPortFrom(listenAddr, 0)))
		return err
	})
	if err != nil {
		return netip.Addr{}, fmt.Errorf("listen on %s: %w", listenAddr, err)
	}
	served := make(chan error, 1)
	wait := sync.OnceValue(func() error { return <-served })
	var c *net.TCPConn
	// Whatever happens, nothing of the exchange outlives it: a socket
	// left open would keep the pod's namespace alive. Closing the client
	// ends the server's read; closing the listener ends its accept.
	defer func() {
		ln.Close()
		if c != nil {
			c.Close()
		}
		wait()
	}()
	if err := ln.SetDeadline(deadline); err != nil {
		served <- nil
		return netip.Addr{}, err
	}
	go func() { served <- serve(ln, deadline, hostListens) }()

	to := ln.Addr().String()
	err = inNS(dialNS, func() error {
		conn, err := (&net.Dialer{Deadline: deadline}).DialContext(ctx, "tcp4", to)
		c, _ = conn.(*net.TCPConn) // nil with err
		return err
	})
	if err != nil {
		return netip.Addr{}, fmt.Errorf("connect to %s: %w", to, err)
	}
	if !hostListens {
		_ = c.SetLinger(0)
	}
	if err := c.SetDeadline(deadline); err != nil {
		return netip.Addr{}, err
	}
	local := c.LocalAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
	if _, err := fmt.Fprintf(c, "ping %s\n", token); err != nil {
		return local, fmt.Errorf("send to %s: %w", to, err)
	}
	reply, err := readLine(c)
	if err != nil {
		return local, fmt.Errorf("read the reply from %s: %w", to, err)
	}
	if want := "pong " + token + "\n"; reply != want {
		return local, fmt.Errorf("reply from %s: %q, want %q", to, reply, want)
	}
	if err := wait(); err != nil {
		return local, fmt.Errorf("listener on %s: %w", to, err)
	}
	return local, nil
}

// serve answers one connection: "ping TOKEN" with "pong TOKEN".
func serve(ln *net.TCPListener, deadline time.Time, rst bool) error {
	c, err := ln.AcceptTCP()
	if err != nil {
		return fmt.Errorf("accept: %w", err)
	}
	if rst {
		_ = c.SetLinger(0)
	}
	defer c.Close()
	if err := c.SetDeadline(deadline); err != nil {
		return err
	}
	line, err := readLine(c)
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	token, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "ping ")
	if !ok {
		return fmt.Errorf("got %q, want a ping", line)
	}
	_, err = fmt.Fprintf(c, "pong %s\n", token)
	return err
}

// maxLine bounds a line of the exchange: "ping " or "pong ", a token of 16
// hex digits, and the newline, with room to spare. The listener's port can
// be reached by anything that can route to its address until the deadline;
// whatever connects first gets this much of our memory, not more.
const maxLine = 64

// readLine reads one newline-terminated line of at most maxLine bytes.
func readLine(r io.Reader) (string, error) {
	line, err := bufio.NewReaderSize(io.LimitReader(r, maxLine), maxLine).ReadString('\n')
	if err == io.EOF && len(line) == maxLine {
		return line, fmt.Errorf("no newline in the first %d bytes", maxLine)
	}
	return line, err
}
