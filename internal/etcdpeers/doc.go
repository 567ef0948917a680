// Package etcdpeers lets an HA control plane's etcd find its peers after
// a restart that gave every node a new address (kind#1689).
//
// etcd dials its peers at the addresses its membership recorded; after
// `docker restart` those belong to nobody, or to another node, and no
// member can change the membership without a quorum. This package never
// changes it. Before etcd runs, enable_network_magic reads the members'
// names and recorded peer URLs from etcd's bbolt file (ReadMembersAt: a
// bounded, read-only reader of the pages it needs, read on demand through
// system.Open, written here rather than taken from go.etcd.io/bbolt; see
// boltread.go) and, on a control plane whose etcd has two or more
// members, writes a runtime unit (unit.go) that runs `entrypoint
// etcd-peer-nat`. That command (nat.go, rules.go, watch.go) resolves
// each peer's name through the node's resolver (Docker's embedded DNS)
// and DNATs recorded:port → current:port in the node's own network
// namespace, in a chain of its own; then it keeps looking the names up,
// every few seconds for as long as the node runs, and follows a peer
// restarted alone at a new address. TLS still verifies: the dialled
// address is the one the peer's certificate names; only the packets go
// elsewhere.
//
// It does not read anything but the membership buckets, and it never
// archives the file: the database holds the cluster's Secrets, so
// capture keeps only what a replay needs (MembersDB, the names and URLs
// in a file of the same format).
//
// Imports only plan and system, like a step package.
package etcdpeers
