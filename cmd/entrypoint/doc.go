// Command entrypoint replaces the bash entrypoint of kind's node image: it
// prepares the node container and then execs init as PID 1.
//
//	ENTRYPOINT ["/entrypoint", "/sbin/init"]
package main
