// Package dnstest holds what the forwarder's tests share: a stand-in
// resolver (Start) that answers every query with the query itself, its QR
// bit set (StartWith: late, twice, or never for some names; Listen: in a
// benchmark's process of its own), and a client side (Query, Exchange).
// It knows no more of DNS than the forwarder does.
//
// Only tests import it.
package dnstest
