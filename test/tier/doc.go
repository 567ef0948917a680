// Package tier holds what the tiers that drive a real container engine
// share: test/e2e (Docker), test/podman (podman) and test/cluster (Docker,
// podman, nerdctl). Running the engine's CLI with a time limit, the tier's
// time budget, what `kind create cluster` must print with a node image that
// has no kubeadm, kind's `run` flags for a node of each provider
// (KindRunArgs), a node or network that goes when its test ends (RunNode,
// NewNetwork), and what every provider's node must show (CheckNode,
// LeavesDNSAlone, CheckKubeletRoots).
//
// Only the tiers' tests import it; it starts no engine itself.
package tier
