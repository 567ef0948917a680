// Package e2e holds the end-to-end tier: real kind node containers in Docker,
// started with kind's own `docker run` flags from an image that carries the
// entrypoint binary, then asserted from outside (docker logs, docker exec).
//
// The tests need Docker and images built by test/e2e/run.sh, so they are
// behind the e2e build tag:
//
//	bash test/e2e/run.sh        # what `make e2e` runs
//
// parse.go holds the pure parsers the tests use; they are unit-tested
// without the tag.
package e2e
