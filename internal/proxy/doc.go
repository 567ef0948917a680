// Package proxy hands the node's proxy settings to every systemd unit, by a
// DefaultEnvironment= drop-in for the system manager.
//
// A value systemd would read differently from what the user set is refused,
// never written.
package proxy
