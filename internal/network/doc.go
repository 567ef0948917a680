// Package network implements the select_iptables and enable_network_magic
// steps: it detects the iptables backends' rules (running the iptables save
// tools, each with a time limit) and Docker's embedded DNS, looks up the
// Docker host and the node's own addresses, and plans the rules,
// resolv.conf, the rewrite of the node's old addresses after a restart and
// the renewal of the API server's certificate; on nodes of ipv6 and
// dual-stack clusters also the runtime unit of the DNS forwarder for
// IPv6-only pods (magic_forwarder.go, a plan.RuntimeUnit; the forwarder
// itself is internal/dnsforward).
//
// The text transformations (iptables-save output, resolv.conf, the node's
// Kubernetes config files, /proc/net/route) are pure functions of their
// arguments; every read and command goes through system.System.
//
// It never runs a shell or puts a value from the environment on a command
// line, never replaces an address with an empty string, and never touches
// a longer address that holds the old one (172.18.0.3 in 172.18.0.30).
package network
