package boot

import (
	"context"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kind-entrypoint/entrypoint/internal/network"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/nstest"
)

// testProbeTimeout stands in for the 5 s probe limit, so that a scenario
// whose probe hangs (root/.host/run/NAME.hang) takes a moment, not 5 s
// (longer under an emulator: nstest.Stretch).
var testProbeTimeout = nstest.Stretch(nativeProbeTimeout)

// nativeProbeTimeout is testProbeTimeout outside an emulator, the limit the
// golden plans name.
const nativeProbeTimeout = 150 * time.Millisecond

// fixedRand is the randomness of every test run: the same machine-id and
// product_uuid each time, so that goldens are stable.
func fixedRand() io.Reader { return system.SeededRand(testSeed) }

// testSeed is also what a tree's .host/random holds to replay the same
// identities through the binary (cmd/entrypoint's golden test).
const testSeed = "kind"

// fakeCommands models, in a tree, the commands whose effects a later step
// or a second boot must see: update-alternatives switches the link,
// iptables-MODE-restore makes iptables-MODE-save print what it loaded,
// kubeadm writes the apiserver pair (and, like the real one, refuses to
// replace an existing certificate). Everything else is answered from
// root/.host/run/ as system.Tree does (NAME, NAME.fail, NAME.hang); a
// NAME.fail or NAME.hang file overrides the model for that command too.
//
// The commands change files directly rather than through the Tree: they
// are other programs, and Tree.Changes records the entrypoint's own
// changes (the commands it ran are in Tree.Ran).
func fakeCommands(tree *system.Tree) func(ctx context.Context, argv []string, stdin []byte) ([]byte, error) {
	// The benchmarks count this harness's allocations too: the run/ files
	// are tested with access(2) and read with system.Linux, which spares
	// the *os.File and FileInfo of os.Stat and os.ReadFile.
	dir := filepath.Join(tree.Root, system.ProbeDir, "run")
	probe := func(name string) string { return dir + "/" + name }
	exists := func(name, suffix string) bool { return unix.Access(dir+"/"+name+suffix, unix.F_OK) == nil }
	readFile := system.Linux{}.ReadFile
	return func(ctx context.Context, argv []string, stdin []byte) ([]byte, error) {
		name := path.Base(argv[0])
		if exists(name, ".hang") {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		if exists(name, ".fail") {
			if b, err := readFile(probe(name+".fail"), system.LimitConfig); err == nil {
				return nil, fmt.Errorf("%s: exit status 1: %s", argv[0], strings.TrimSpace(string(b)))
			}
		}
		switch {
		case name == "update-alternatives":
			return nil, fakeUpdateAlternatives(tree, argv)
		case strings.HasPrefix(name, "iptables-") && strings.HasSuffix(name, "-restore"):
			save := strings.TrimSuffix(name, "-restore") + "-save"
			w, err := tree.Files()
			if err != nil {
				return nil, err
			}
			return nil, w.WriteFile("/"+system.ProbeDir+"/run/"+save, stdin, 0o644)
		case name == "kubeadm":
			return fakeKubeadm(tree, argv)
		case name == "nft" && slices.Equal(argv[1:], network.NftApplyArgv[1:]):
			return nil, fakeNftApply(tree, stdin)
		}
		if b, err := readFile(probe(name), system.LimitOutput); err == nil {
			return b, nil
		}
		// As system.Linux says it of a program not on PATH.
		return nil, &system.NotInstalledError{Name: argv[0]}
	}
}

// fakeUpdateAlternatives handles "--set NAME PATH". It does not model
// registration: scenarios without /usr/sbin/iptables-* binaries still
// switch.
func fakeUpdateAlternatives(tree *system.Tree, argv []string) error {
	if len(argv) != 4 || argv[1] != "--set" {
		return fmt.Errorf("update-alternatives: unexpected arguments %q", argv[1:])
	}
	w, err := tree.Files()
	if err != nil {
		return err
	}
	link := network.AlternativesDir + "/" + argv[2]
	if err := w.MkdirAll(network.AlternativesDir, 0o755); err != nil {
		return err
	}
	// Like update-alternatives: a new link renamed over the old one.
	tmp := link + ".dpkg-tmp"
	w.Remove(tmp)
	if err := w.Symlink(argv[3], tmp); err != nil {
		return err
	}
	return w.Rename(tmp, link)
}

// fakeKubeadm handles the certificate renewal, printing what kubeadm
// v1.30 prints on standard output.
func fakeKubeadm(tree *system.Tree, argv []string) ([]byte, error) {
	if !slices.Equal(argv, network.KubeadmCertsArgv) {
		return nil, fmt.Errorf("kubeadm: unexpected arguments %q", argv[1:])
	}
	w, err := tree.Files()
	if err != nil {
		return nil, err
	}
	if _, err := w.Stat(network.KubeadmConfig); err != nil {
		return nil, fmt.Errorf("kubeadm: %w", err)
	}
	for _, p := range []string{network.APIServerCert, network.APIServerKey} {
		if _, err := w.Stat(p); err == nil {
			return nil, fmt.Errorf("kubeadm: exit status 1: [certs] %s exists and is not valid for this configuration", p)
		}
	}
	if err := w.WriteFile(network.APIServerKey, []byte("-----BEGIN RSA PRIVATE KEY-----\n(new apiserver key)\n-----END RSA PRIVATE KEY-----\n"), 0o600); err != nil {
		return nil, err
	}
	out := "[certs] Generating \"apiserver\" certificate and key\n" +
		"[certs] apiserver serving cert is signed for DNS names [kind-control-plane kubernetes kubernetes.default kubernetes.default.svc kubernetes.default.svc.cluster.local localhost] and IPs [10.96.0.1 172.18.0.4 127.0.0.1]\n"
	return []byte(out), w.WriteFile(network.APIServerCert, []byte("-----BEGIN CERTIFICATE-----\n(new apiserver certificate)\n-----END CERTIFICATE-----\n"), 0o644)
}
