# The entrypoint of kind's node image, as one static Go binary.
GO        ?= go
BIN       := bin/entrypoint
VERSION   ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
FUZZTIME  ?= 30s
STATICCHECK_VERSION ?= v0.8.2
# lint: the most lines a Go file outside the tests holds (one subject a file).
MAX_LINES ?= 450
# Every build tag of the test tiers: lint reads their files too (go vet and
# staticcheck see only untagged files otherwise).
TEST_TAGS ?= e2e e2ebench vm podman cluster matrix nerdctl docker29

export CGO_ENABLED := 0

.PHONY: all build build-arm64 vet test test-arm64 unit e2e e2e-podman e2e-cluster e2e-cluster-matrix e2e-docker29-cluster e2e-nerdctl e2e-conformance e2e-vm e2e-vm-cluster e2e-stack e2e-docker29 run bench fuzz lint image clean

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/entrypoint

# The same static binary for arm64 (kind publishes its node images for
# amd64 and arm64).
build-arm64:
	GOARCH=arm64 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)-arm64 ./cmd/entrypoint

# Every tier: unit and golden tests, privileged tests (root, namespaces),
# the end-to-end tier in Docker (this host: cgroup v1), kind's podman
# provider with rootful podman, real Kubernetes clusters on our nodes, then
# the same node image on cgroup v2 and rootless hosts (Docker and podman) in
# a VM.
test: unit e2e e2e-podman e2e-cluster e2e-vm

# vet is its own target so that `make unit lint` runs it once.
vet:
	$(GO) vet ./...

# test/unit/packages.sh: the machine's commands the tests start (iptables),
# installed when missing and run as root.
unit: vet
	bash test/unit/packages.sh
	$(GO) test -count=1 ./...

# The unit, golden and privileged tests built for arm64, run as root under
# qemu-user (installed if missing), with a count per package; not in `test`
# (its time: docs/testing.md, "arm64 under qemu-user"). See test/arm64/run.sh.
test-arm64:
	bash test/arm64/run.sh

# A dry run of the plan for this host: prints facts and plan, changes nothing.
run: build
	./$(BIN) --dry-run

# The tiers that drive container engines: each builds the binary and runs
# its test/TIER/run.sh.
#   e2e              the end-to-end tier: nodes in Docker on this host; see
#                    test/e2e/README.md.
#   e2e-podman       kind's podman provider: the kind CLI and nodes under
#                    rootful podman on this host; see test/podman/README.md.
#   e2e-cluster      real Kubernetes on our nodes: Kubernetes built from the
#                    Go module proxy, clusters created, checked and restarted
#                    by the real kind CLI, and the same with kind's own script
#                    as a control run; see test/cluster/README.md.
#   e2e-nerdctl      kind's nerdctl provider: a real 1+1 cluster from the
#                    cluster tier's image, made, restarted and checked by the
#                    kind CLI under nerdctl and a containerd of the tier's
#                    own; not in `test` (its time: see test/nerdctl/README.md).
#   e2e-conformance  Kubernetes' conformance suite, as kind's CI runs it, on
#                    our nodes and on kind's script, with a comparison; not in
#                    `test` (its time: see test/conformance/README.md).
#                    CONFORMANCE_SUITE=full for every [Conformance] spec
#                    instead of the subset the entrypoint touches.
#   e2e-vm           cgroup v2 and rootless hosts: the same node image in a
#                    Debian VM (qemu, TCG); see test/vm/README.md.
#   e2e-stack        the node image on kind v0.33.0's node stack (Debian
#                    trixie, systemd 257, containerd 2.3, runc 1.4, built
#                    from the Go module proxy), through every e2e test,
#                    with kind v0.33.0's script as the differential's
#                    control; see test/stack/README.md.
#   e2e-docker29     kind nodes (ours and kind's script) on Docker 29 with
#                    its nftables and its iptables firewall backends, an
#                    engine built from the Go module proxy and run in a
#                    network namespace of its own; DNS from the node and a
#                    pod namespace, before and after a restart; not in
#                    `test`; see test/docker29/README.md.
ENGINE_TIERS := podman cluster nerdctl conformance vm stack docker29

e2e: build
	bash test/e2e/run.sh

$(addprefix e2e-,$(ENGINE_TIERS)): e2e-%: build
	bash test/$*/run.sh

# kind's cluster shapes on our nodes and on kind's script: IPv4 1+2, IPv6,
# dual-stack, 3 control planes behind kind's load balancer, podman; each
# restarted with new addresses. Not in `test` (its time: see
# test/cluster/README.md). Needs `make e2e-podman` first for the podman shape.
e2e-cluster-matrix: build
	bash test/cluster/run.sh --matrix

# kind's cluster shapes on Docker 29 (test/docker29: its engine, built from
# the Go module proxy): IPv4 1+2, IPv6, dual-stack and HA on its nftables
# backend, IPv4 on its iptables one, our image and kind's script, each
# restarted with new addresses. Not in `test` (its time: see
# test/docker29/README.md).
e2e-docker29-cluster: build
	bash test/docker29/run.sh --cluster

# Real Kubernetes on cgroup v2: the cluster tier's node image in the VM, one
# matrix row (1+1, checked, restarted with new addresses, checked again) per
# engine: rootful and rootless Docker, rootless podman, kind's script as the
# control, dual-stack; not in `test` (test/vm/README.md: its time under
# emulation).
e2e-vm-cluster: build
	VM_SUITE=cluster bash test/vm/run.sh

# Go benchmarks, then boot/process/RSS benchmarks of real nodes in Docker;
# writes bench/results.md (BENCH_E2E=0: the Go benchmarks only).
bench: build
	bash bench/run.sh

# Runs every fuzz target for FUZZTIME each.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for t in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/^func //'); do \
	    echo "== $$pkg $$t"; \
	    $(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }
	@big=$$(git ls-files '*.go' ':!:*_test.go' | xargs wc -l | awk '$$2 != "total" && $$1 > $(MAX_LINES)'); \
	  if [ -n "$$big" ]; then echo "Go files over $(MAX_LINES) lines (split them by subject):"; echo "$$big"; exit 1; fi
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	$(GO) vet -tags '$(TEST_TAGS)' ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) -tags '$(TEST_TAGS)' ./...

# The image node images copy the binary from (FROM scratch), one per
# architecture: kind-entrypoint:TAG (amd64) and kind-entrypoint:TAG-arm64,
# with the classic builder (no registry here to hold a manifest list). The
# arm64 image is built from a context of its own holding the arm64 binary
# as bin/entrypoint: the classic builder commits any step before the COPY
# (an ARG naming the binary) as amd64, and then refuses it for arm64.
image: build build-arm64
	DOCKER_BUILDKIT=0 docker build --platform linux/amd64 -t kind-entrypoint:$(VERSION) -t kind-entrypoint:latest .
	@set -e; ctx=$$(mktemp -d); trap 'rm -rf "$$ctx"' EXIT; \
	  mkdir "$$ctx/bin"; cp $(BIN)-arm64 "$$ctx/bin/entrypoint"; cp .dockerignore "$$ctx/"; \
	  DOCKER_BUILDKIT=0 docker build --platform linux/arm64 -f Dockerfile -t kind-entrypoint:$(VERSION)-arm64 -t kind-entrypoint:latest-arm64 "$$ctx"
	@for t in kind-entrypoint:$(VERSION) kind-entrypoint:$(VERSION)-arm64; do \
	  docker image inspect -f "$$t: {{.Os}}/{{.Architecture}}" $$t; done

clean:
	rm -rf bin
