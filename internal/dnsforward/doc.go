// Package dnsforward is the node's DNS forwarder for IPv6 single-stack
// clusters (kind#4152, kind#3114): it answers DNS over UDP and TCP on an
// IPv6 address of the node and passes each query, unchanged, to the
// address enable_network_magic points the node's IPv4 resolver at (the
// host IP, which Docker's rules in the node's namespace send on to the
// embedded DNS server at 127.0.0.11). IPv6-only pods, CoreDNS among them,
// cannot reach that IPv4 address; they reach this one.
//
// It reads no more of DNS than it needs: the 12-byte header (a datagram
// shorter than that, or one that is itself a reply, is dropped), the
// message ID and the question (an upstream reply must carry the
// query's), and on TCP the 2-byte length of RFC 1035 4.2.2 (framing.go).
// Everything else is passed through byte for byte.
//
// Everything it holds is bounded (Limits): the size of a message, the
// queries in flight (one slot each, shared by UDP and TCP, and by client
// addresses fairly: one client cannot hold them all), the TCP
// connections (at the cap, one of the client address that holds the most
// and that waits on its client is closed for a new one, so half-open
// connections cannot lock clients out), the bytes queued toward a TCP
// client (a small send buffer), and the time each query, each idle
// connection and each client reading its answer may take. Its memory is
// therefore bounded too (Limits.MemoryBound). Queries pipelined on a TCP
// connection are forwarded at once and answered as their answers come
// (RFC 7766 6.2.1.1), each over an upstream connection of its own: the
// upstream need not pipeline. UDP queries share one socket to the
// upstream, each under an ID of the forwarder's that no other query in
// flight holds and that comes again only after 65,535 others (udp.go):
// a query costs four system calls, and a late copy of an answer reaches
// no one.
//
// The entrypoint runs it as `entrypoint dns-forwarder` under a runtime
// systemd unit that enable_network_magic writes (internal/network,
// magic_forwarder.go). Do not use it as a general resolver: it has no
// cache, no retries of its own (the client's resolver retries) and
// forwards to one server.
package dnsforward
