#!/usr/bin/env bash
# Builds the conformance suite's tools from the Go module proxy into OUT_DIR,
# static and trimmed, from the same module as the cluster tier's binaries
# (test/cluster/k8s-module.sh), so that the Go build cache of the Kubernetes
# packages serves both:
#   e2e.test  go test -c k8s.io/kubernetes/test/e2e
#   ginkgo    github.com/onsi/ginkgo/v2/ginkgo, the version Kubernetes pins
#   agnhost, nnp  k8s.io/kubernetes/test/images/{agnhost,nonewprivs}, for
#             the images of those names
# Usage: build-tools.sh VERSIONS_FILE OUT_DIR
set -o errexit -o nounset -o pipefail

versions=$1 out=$2
# shellcheck source=test/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
go_build_init conformance "$out"
bash "$(dirname "${BASH_SOURCE[0]}")/../cluster/k8s-module.sh" "$versions" "$work/k8s"
ldflags=$(cat "$work/k8s/ldflags")
cd "$work/k8s"

t=$(date +%s)
go build -trimpath -ldflags "$ldflags" -o "$out.tmp/" github.com/onsi/ginkgo/v2/ginkgo k8s.io/kubernetes/test/images/agnhost k8s.io/kubernetes/test/images/nonewprivs
log "ginkgo, agnhost and nnp built in $(since "$t")"
t=$(date +%s)
go test -c -trimpath -ldflags "$ldflags" -o "$out.tmp/e2e.test" k8s.io/kubernetes/test/e2e
log "e2e.test built in $(since "$t")"
go_build_done
