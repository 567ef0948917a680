package nstest

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) { Main(m) }

// TestNetwork: in a network namespace of the test's own, every kind of
// change Network reports shows, one at a time; an engine's links do not.
func TestNetwork(t *testing.T) {
	Unshare(t, unix.CLONE_NEWNET)
	state := func() []string {
		t.Helper()
		s, err := Network()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := state()
	for _, c := range []struct {
		argv    string
		changes bool
	}{
		{"link add veth9 type veth peer name docker9", false},
		{"link add br-9 type bridge", false},
		{"link add a0 type veth peer name b0", true},
		{"link set a0 up", true},
		{"addr add 10.9.0.1/24 dev a0", true},
		{"route add 10.8.0.0/16 via 10.9.0.2 table 7", true},
		{"-6 route add fd09::/64 dev a0 table 8", true},
		{"rule add from 10.7.0.0/16 table 7 pref 100", true},
		{"-6 rule add from fd07::/64 table 8 pref 100", true},
		{"link set a0 mtu 1400", true},
	} {
		if out, err := exec.Command("ip", strings.Fields(c.argv)...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", c.argv, err, out)
		}
		after := state()
		if diff := cmp.Diff(before, after); (diff != "") != c.changes {
			t.Errorf("after ip %s: changes %t, want %t (-before +after):\n%s", c.argv, diff != "", c.changes, diff)
		}
		before = after
	}
}

// TestSteady: carrier, operational state, lifetimes, DAD and expiry are
// dropped at any depth; everything else stays.
func TestSteady(t *testing.T) {
	var v any
	in := `{"ifname":"a0","flags":["BROADCAST","UP","LOWER_UP","NO-CARRIER","M-DOWN"],"operstate":"UP","mtu":1500,
		"addr_info":[{"local":"fd00::1","prefixlen":64,"valid_life_time":86000,"preferred_life_time":14000,"tentative":true,"deprecated":true,"dadfailed":true}],
		"routes":[{"dst":"fd09::/64","flags":["linkdown","dead","onlink"],"expires":297,"metric":1024}]}`
	if err := json.Unmarshal([]byte(in), &v); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(steady(v))
	want := `{"addr_info":[{"dadfailed":true,"local":"fd00::1","prefixlen":64}],"flags":["BROADCAST","UP"],"ifname":"a0","mtu":1500,` +
		`"routes":[{"dst":"fd09::/64","flags":["onlink"],"metric":1024}]}`
	if string(got) != want {
		t.Errorf("steady:\n got %s\nwant %s", got, want)
	}
}
