// Package tier holds what the tiers that drive a real container engine
// share: test/e2e (Docker) and test/podman (podman). Running the engine's
// CLI with a time limit, the tier's time budget, and what `kind create
// cluster` must print with a node image that has no kubeadm.
//
// Only the tiers' tests import it; it starts no engine itself.
package tier
