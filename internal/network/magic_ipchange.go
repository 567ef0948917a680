package network

// This file holds the IP change of enable_network_magic: rewriting the
// node's old address in kubeadm's and the kubelet's files, and renewing
// the API server's serving certificate for the new one.

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/plan"
)

// replacement is one address change to make in the node's files.
type replacement struct{ old, new string }

// planAddressChange follows a change of the node's addresses since the last
// boot (Docker gives a restarted container a new address), in the node's
// config files and the API server's certificate, and records the current
// addresses.
func planAddressChange(f MagicFacts) ([]plan.Action, error) {
	var actions, records []plan.Action
	var changes []replacement
	for _, fam := range []struct {
		name, file string
		NodeAddr
	}{{"IPv4", OldIPv4, f.IPv4}, {"IPv6", OldIPv6, f.IPv6}} {
		is4 := fam.name == "IPv4"
		if w := sourceWarning(fam.name, fam.NodeAddr); w != "" {
			actions = append(actions, plan.Warning(w))
		}
		// As the script (getent's empty answer): no value, not "none".
		cur := ""
		if fam.Addr.IsValid() {
			cur = fam.Addr.String()
		}
		actions = append(actions, plan.Info("detected "+fam.name+" address: "+cur))
		if cur != "" && (fam.Old == nil || *fam.Old != cur) {
			records = append(records, plan.WriteFile(fam.file, []byte(cur), 0o644).
				Because("the address to follow after a restart"))
		}
		if fam.Old == nil {
			continue
		}
		old := *fam.Old
		oldAddr, err := netip.ParseAddr(old)
		// The script's line, with the recorded value as it is; a value
		// that is no address at all is quoted and clipped, as the ERROR
		// line below names it: the file may hold kilobytes of anything.
		shown := old
		if err != nil {
			shown = logline.QuoteClipped(old)
		}
		actions = append(actions, plan.Info(fmt.Sprintf("detected old %s address: %s", fam.name, shown)))
		switch {
		case err != nil || oldAddr.Is4() != is4 || oldAddr.Zone() != "":
			actions = append(actions, plan.Error(fmt.Sprintf(
				"%s: %s is not an %s address; not following an address change", fam.file, logline.QuoteClipped(old), fam.name)))
		case oldAddr.Is4In6():
			// The reference recorded getent ahostsv6's IPv4-mapped
			// answer on IPv4-only networks: no IPv6 address at all.
			actions = append(actions, plan.Info(fmt.Sprintf(
				"%s: %s is IPv4-mapped, not an IPv6 address; ignoring it", fam.file, old)))
		case cur == "":
			// The script's words, then why: the name gave none and
			// neither did the default route's interface.
			msg := "have an old " + fam.name + " address but no current " + fam.name + " address (!)"
			if fam.Err != nil {
				msg += ": " + fam.Err.Error()
			}
			if is4 { // IPv6 is not the script's: an ERROR line is enough
				return actions, errors.New(msg)
			}
			actions = append(actions, plan.Error(msg))
		case oldAddr != fam.Addr:
			if _, _, err := ReplaceAddress(nil, old, cur); err != nil {
				actions = append(actions, plan.Error(fmt.Sprintf(
					"%s: cannot replace %s with %s: %v", fam.file, old, cur, err)))
				break
			}
			changes = append(changes, replacement{old, cur})
		}
	}

	for _, file := range f.Files {
		data, total := file.Data, 0
		var done []string
		for _, c := range changes {
			out, n, err := ReplaceAddress(data, c.old, c.new)
			if err != nil {
				return actions, fmt.Errorf("%s: %w", file.Path, err)
			}
			if n > 0 {
				data, total = out, total+n
				done = append(done, fmt.Sprintf("%s -> %s", c.old, c.new))
			}
		}
		if total > 0 {
			places := "places"
			if total == 1 {
				places = "place"
			}
			w := plan.WriteFile(file.Path, data, file.Mode).
				Because(fmt.Sprintf("%s (%d %s)", strings.Join(done, ", "), total, places))
			if kubeconfigs[file.Path] {
				w = w.Secret()
			}
			actions = append(actions, w)
		}
	}
	actions = append(actions, records...)
	if len(changes) > 0 {
		actions = append(actions, planCertRenewal(f)...)
	}
	return actions, nil
}

// sourceWarning is the WARN line for a node address of MagicFacts that is
// not the script's (see nodeAddr), "" for one that is: the default route's
// interface's, because the name gave none or a stale one (kind #3989), or
// a stale answer kept for want of another.
func sourceWarning(family string, a NodeAddr) string {
	var stale *StaleAddrError
	if !errors.As(a.Err, &stale) {
		if a.Iface == "" {
			return ""
		}
		return fmt.Sprintf("the node's name gives no %s address (%v); using %s, the address on the default route's interface %s",
			family, a.Err, a.Addr, a.Iface)
	}
	s := fmt.Sprintf("the node's name gives %s, an %s address on no interface of this node (a stale entry in /etc/hosts or the engine's DNS)",
		stale.Addr, family)
	if a.Iface != "" {
		return fmt.Sprintf("%s; using %s, the address on the default route's interface %s", s, a.Addr, a.Iface)
	}
	s += ", and the default route's interface gives none"
	if stale.Route != nil {
		s += " (" + stale.Route.Error() + ")"
	}
	return fmt.Sprintf("%s; using %s all the same", s, a.Addr)
}

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
	if !slices.ContainsFunc(f.Files, func(file File) bool { return file.Path == KubeadmConfig }) {
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
