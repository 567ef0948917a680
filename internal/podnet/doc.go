// Package podnet checks that this node can network a pod: it does, once and
// briefly, what the kubelet and a CNI plugin do for every pod, proves that
// traffic passes both ways, and removes all of it again.
//
// The pod is wired the way Calico and other point-to-point plugins wire
// one: a network namespace of its own; a veth pair with one end moved into
// it (renamed eth0); a /32 address on eth0; a link-scoped route to a
// link-local gateway (169.254.1.1), a default route via it, and a permanent
// neighbour entry that resolves the gateway to the host veth's MAC (no ARP
// proxy needed); on the host, a /32 route to the pod through the host veth.
// Then a TCP connection from the host to a listener in the pod, and one from
// the pod to a listener on the host.
//
// Everything is done with rtnetlink requests through vishvananda/netlink,
// and namespaces through vishvananda/netns (the libraries runc uses; no
// `ip`, no process): the host's requests from the calling thread, the
// pod's from threads moved into its namespace with setns, so that no other
// goroutine of the process ever runs there. The kernel's own words for a
// refused request (extended acks, Linux 4.12+; kubeadm asks for 4.19) go
// into the error. The pod namespace is never mounted under /run/netns: a
// descriptor keeps it, and it ends when that descriptor and its sockets
// are closed. Cleanup is deferred at every step, so a failure anywhere
// leaves nothing behind: the host route is deleted, then the host veth
// (which takes its peer with it), and the namespace is released; then the
// preflight checks that the link and the route are really gone.
//
// It starts no process and leaves nothing behind, even on failure.
package podnet
