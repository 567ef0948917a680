package boot

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// TestUnstartableSaveIsSaid: an iptables-save that cannot be started
// (net-nft-save-unstartable: its standard input could not be opened)
// counts no rules, as in the reference, so step 9 picks the other,
// empty backend. The live log says the save failed, before the mode it
// chose; step 10's error then names that failure as the likely cause,
// not the other backend.
func TestUnstartableSaveIsSaid(t *testing.T) {
	tree := system.NewTree(hosttest.Host(t, "net-nft-save-unstartable"))
	h := detect(t, tree)
	var logs bytes.Buffer
	err := Run(t.Context(), h, Steps(), logline.New(&logs, logline.Text))
	if err == nil {
		t.Fatal("the boot succeeded, want step 10 to fail")
	}
	logs.WriteString("ERROR: " + err.Error() + "\n") // as main logs it
	live := logs.String()
	t.Logf("live log:\n%s", live)

	// The replayed save's error ("open /dev/null: permission denied"),
	// as the failed start of a real one says it.
	const save, cause = "iptables-nft-save: ", "open /dev/null: permission denied"
	warn := regexp.MustCompile(`(?m)^WARN: ` + save + cause + ` \(its rules count as 0\)$`).FindStringIndex(live)
	mode := strings.Index(live, "INFO: setting iptables to detected mode: legacy\n")
	if warn == nil || mode < warn[0] {
		t.Errorf("want the WARN naming the failed save before step 9's mode line")
	}
	errLine := live[strings.LastIndex(live, "ERROR: "):]
	if !regexp.MustCompile(`^ERROR: enable_network_magic: .*\(looked at: .*; likely cause: ` + save + cause).MatchString(errLine) {
		t.Errorf("step 10's ERROR does not name the failed save as the likely cause: %s", errLine)
	}
	if strings.Contains(errLine, "other backend") {
		t.Errorf("step 10's ERROR points at the other backend, not the failed save: %s", errLine)
	}
}
