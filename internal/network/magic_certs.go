package network

// This file holds the certificate renewal of enable_network_magic: the API
// server's serving certificate, regenerated for a new address.

import (
	"fmt"

	"github.com/kind-entrypoint/entrypoint/internal/plan"
)

// planCertRenewal regenerates the API server's certificate, whose SANs hold
// the old address. kubeadm will not replace an existing certificate, so the
// old pair is moved aside first (kept as .old) and put back if kubeadm
// fails, or exits 0 without writing both: a certificate for the old
// address still lets the node boot, none at all does not. Once the pair in
// place is whole again, new or put back, the kept copy goes: no stray copy
// of a private key is left. (Were the pair not put back, Apply would stop
// before that, and .old would be the only copy.)
func planCertRenewal(f MagicFacts) []plan.Action {
	if f.Cert == nil || f.Key == nil {
		return nil // not a control-plane node
	}
	hasConfig := false
	for _, file := range f.Files {
		hasConfig = hasConfig || file.Path == KubeadmConfig
	}
	if !hasConfig {
		return []plan.Action{plan.Error(fmt.Sprintf(
			"cannot regenerate the API server certificate for the new address: %s does not exist", KubeadmConfig))}
	}
	restoreCert := plan.WriteFile(f.Cert.Path, f.Cert.Data, f.Cert.Mode)
	restoreKey := plan.WriteFile(f.Key.Path, f.Key.Data, f.Key.Mode).Secret()
	return []plan.Action{
		plan.Info("clearing and regenerating the certificate for serving the Kubernetes API"),
		plan.WriteFile(f.Cert.Path+".old", f.Cert.Data, f.Cert.Mode).Because("keep the old pair until a new one exists"),
		plan.WriteFile(f.Key.Path+".old", f.Key.Data, f.Key.Mode).Secret(),
		plan.Remove(f.Cert.Path).Because("kubeadm refuses to replace an existing certificate"),
		plan.Remove(f.Key.Path).WithRollback(restoreCert),
		plan.Run(KubeadmCertsArgv, nil, KubeadmTimeout).Creating(f.Cert.Path, f.Key.Path).
			OrError("kept the old API server certificate, which does not cover the new address; regenerating it failed").
			WithRollback(restoreCert, restoreKey),
		plan.Remove(f.Cert.Path + ".old").OrWarn("failed to remove " + f.Cert.Path + ".old"),
		plan.Remove(f.Key.Path + ".old").OrWarn("failed to remove " + f.Key.Path + ".old"),
	}
}
