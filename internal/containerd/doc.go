// Package containerd implements the configure_containerd step: the choice
// of the snapshotter and a TOML-aware edit of /etc/containerd/config.toml
// that changes only the bytes of the values it sets, so that comments and
// layout written by the image author survive.
//
// It never writes a config it has not parsed again, writes nothing when
// nothing changes, and starts no process.
package containerd
