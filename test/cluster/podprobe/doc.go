// Command podprobe is the cluster tier's test workload, one static binary
// in a FROM-scratch image:
//
//	podprobe serve ADDR     answer every HTTP request with this host's name
//	podprobe get URL        print the body of URL (5 s limit)
//	podprobe resolve NAME   print NAME's addresses, using /etc/resolv.conf
//	podprobe resolve6 NAME  print NAME's IPv6 addresses (AAAA) only
//	podprobe                sleep until killed (a pod to exec into)
//
// It resolves with Go's own resolver, which reads the pod's resolv.conf
// (nameserver, search, ndots) as the C library would.
package main
