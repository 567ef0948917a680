module github.com/kind-entrypoint/entrypoint

go 1.26.0

require (
	github.com/coreos/go-systemd/v22 v22.7.0
	github.com/google/go-cmp v0.7.0
	github.com/moby/sys/mountinfo v0.7.3
	github.com/pelletier/go-toml/v2 v2.4.3
	golang.org/x/sys v0.50.0
)
