package companion

import (
	"context"
	"strings"
	"testing"

	"github.com/kind-entrypoint/entrypoint/internal/boot"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// TestEtcdPeerNATDryRun: the dry run of etcd-peer-nat on a replayed node
// (names from .host/hosts) shows the peers file it read, what each name
// resolves to now, and the one restore it would run.
func TestEtcdPeerNATDryRun(t *testing.T) {
	tree := hosttest.Tree(t, map[string]string{
		"proc/self/mountinfo":      mountinfoV1,
		"run/kind-etcd-peers.json": `{"iptables":"nft","self":"kind-control-plane","peers":[{"name":"kind-control-plane2","peerURLs":["https://172.18.0.5:2380"]},{"name":"gone","peerURLs":["https://172.18.0.9:2380"]}]}`,
		".host/hosts":              "kind-control-plane2 172.18.0.3\n",
	})
	cmd, ok := Lookup("etcd-peer-nat")
	if !ok {
		t.Fatal("no etcd-peer-nat")
	}
	d := boot.DryRunOn(context.Background(), tree, func(string) (string, bool) { return "", false }, cmd.Steps(nil), boot.DryRunOptions{})
	if d.Err != nil || d.DetectErr != nil {
		t.Fatalf("%v %v", d.Err, d.DetectErr)
	}
	var b strings.Builder
	if err := d.Render(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"fact peer kind-control-plane2: https://172.18.0.5:2380\n",
		"log INFO: etcd peer kind-control-plane2: 172.18.0.5:2380 -> 172.18.0.3:2380\n",
		"run iptables-nft-restore --noflush < \"*nat\\n:KIND-ETCD-PEERS - [0:0]\\n-A OUTPUT -j KIND-ETCD-PEERS\\n-A KIND-ETCD-PEERS -d 172.18.0.5/32",
		"log INFO: etcd peer not resolved yet: gone (recorded 172.18.0.9:2380)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("dry run lacks %q:\n%s", want, b.String())
		}
	}
	if len(tree.Changes()) != 0 {
		t.Errorf("a dry run changed the tree: %q", tree.Changes())
	}
}
