package dnsforward

import (
	"net"
	"testing"
	"time"
)

// TestClean: a kept socket with a datagram, a byte or the end of the
// stream queued is not clean; one whose queue was read is. (Only TCP
// connections are kept now; the peek is the same for a UDP socket.)
func TestClean(t *testing.T) {
	l, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	u, err := net.DialUDP("udp", nil, l.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if !clean(u) {
		t.Error("a new UDP socket is not clean")
	}
	if _, err := l.WriteToUDP([]byte("late"), u.LocalAddr().(*net.UDPAddr)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return !clean(u) })
	u.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := u.Read(make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	if !clean(u) {
		t.Error("a UDP socket whose datagram was read is not clean")
	}

	tl, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	c, err := net.DialTCP("tcp", nil, tl.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := tl.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	if !clean(c) {
		t.Error("a new TCP connection is not clean")
	}
	s.Write([]byte{0})
	waitFor(t, func() bool { return !clean(c) })
	c.SetReadDeadline(time.Now().Add(time.Second))
	c.Read(make([]byte, 1))
	if !clean(c) {
		t.Error("a TCP connection whose byte was read is not clean")
	}
	s.Close()
	waitFor(t, func() bool { return !clean(c) }) // the end of the stream
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for range 100 {
		if ok() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("still clean after a second")
}
