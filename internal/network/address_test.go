package network

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

// replaceAddressTests is shared with the fuzzers as seeds.
var replaceAddressTests = []struct {
	name     string
	content  string
	old, new string
	want     string
	wantN    int
}{
	// IPv4.
	{name: "v4 whole content", content: "172.18.0.3", old: "172.18.0.3", new: "172.18.0.4", want: "172.18.0.4", wantN: 1},
	{name: "v4 at start and end", content: "172.18.0.3 and 172.18.0.3", old: "172.18.0.3", new: "172.18.0.4", want: "172.18.0.4 and 172.18.0.4", wantN: 2},
	{name: "v4 longer last octet", content: "172.18.0.30", old: "172.18.0.3", new: "172.18.0.4", want: "172.18.0.30"},
	{name: "v4 longer first octet", content: "1172.18.0.3", old: "172.18.0.3", new: "172.18.0.4", want: "1172.18.0.3"},
	{name: "v4 inside a longer dotted string", content: "10.172.18.0.3 172.18.0.3.5", old: "172.18.0.3", new: "172.18.0.4", want: "10.172.18.0.3 172.18.0.3.5"},
	{name: "v4 port", content: "172.18.0.3:6443", old: "172.18.0.3", new: "172.18.0.4", want: "172.18.0.4:6443", wantN: 1},
	{name: "v4 URL", content: "server: https://172.18.0.3:6443\n", old: "172.18.0.3", new: "172.18.0.4", want: "server: https://172.18.0.4:6443\n", wantN: 1},
	{name: "v4 flag", content: "    - --advertise-address=172.18.0.3\n", old: "172.18.0.3", new: "172.18.0.4", want: "    - --advertise-address=172.18.0.4\n", wantN: 1},
	{name: "v4 YAML list item", content: "certSANs:\n- 172.18.0.3\n- 172.18.0.30\n", old: "172.18.0.3", new: "172.18.0.4", want: "certSANs:\n- 172.18.0.4\n- 172.18.0.30\n", wantN: 1},
	{name: "v4 YAML map key", content: "172.18.0.3: node\n", old: "172.18.0.3", new: "172.18.0.4", want: "172.18.0.4: node\n", wantN: 1},
	{name: "v4 quoted", content: `node-ip: "172.18.0.3"`, old: "172.18.0.3", new: "172.18.0.4", want: `node-ip: "172.18.0.4"`, wantN: 1},
	{name: "v4 CIDR and range", content: "172.18.0.3/32 172.18.0.3-172.18.0.9", old: "172.18.0.3", new: "172.18.0.4", want: "172.18.0.4/32 172.18.0.4-172.18.0.9", wantN: 2},
	{name: "v4 list", content: "--listen-client-urls=https://127.0.0.1:2379,https://172.18.0.3:2379", old: "172.18.0.3", new: "172.18.0.4", want: "--listen-client-urls=https://127.0.0.1:2379,https://172.18.0.4:2379", wantN: 1},
	{name: "v4 mixed", content: "172.18.0.3,172.18.0.30,10.172.18.0.3,172.18.0.3", old: "172.18.0.3", new: "172.18.0.4", want: "172.18.0.4,172.18.0.30,10.172.18.0.3,172.18.0.4", wantN: 2},
	{name: "v4 inside IPv6", content: "::ffff:172.18.0.3 64:ff9b::172.18.0.3", old: "172.18.0.3", new: "172.18.0.4", want: "::ffff:172.18.0.3 64:ff9b::172.18.0.3"},
	{name: "v4 glued to words", content: "v172.18.0.3 172.18.0.3a 172.18.0.3_x x_172.18.0.3", old: "172.18.0.3", new: "172.18.0.4", want: "v172.18.0.3 172.18.0.3a 172.18.0.3_x x_172.18.0.3"},
	{name: "v4 twice glued", content: "172.18.0.3172.18.0.3", old: "172.18.0.3", new: "172.18.0.4", want: "172.18.0.3172.18.0.3"},
	{name: "v4 bracketed", content: "[172.18.0.3]", old: "172.18.0.3", new: "172.18.0.4", want: "[172.18.0.4]", wantN: 1},
	{name: "v4 dots are literal", content: "172x18x0x3 172-18-0-3", old: "172.18.0.3", new: "172.18.0.4", want: "172x18x0x3 172-18-0-3"},
	{name: "v4 CRLF", content: "a: 172.18.0.3\r\nb: 172.18.0.3\r\n", old: "172.18.0.3", new: "10.89.0.12", want: "a: 10.89.0.12\r\nb: 10.89.0.12\r\n", wantN: 2},
	{name: "v4 non-ASCII neighbours", content: "«172.18.0.3»", old: "172.18.0.3", new: "172.18.0.4", want: "«172.18.0.4»", wantN: 1},
	{name: "v4 empty content", content: "", old: "172.18.0.3", new: "172.18.0.4", want: ""},
	{name: "v4 old equals new", content: "172.18.0.3", old: "172.18.0.3", new: "172.18.0.3", want: "172.18.0.3"},

	// IPv6.
	{name: "v6 whole content", content: "fc00::3", old: "fc00::3", new: "fc00::4", want: "fc00::4", wantN: 1},
	{name: "v6 longer last group", content: "fc00::30 fc00::3a", old: "fc00::3", new: "fc00::4", want: "fc00::30 fc00::3a"},
	{name: "v6 more groups after", content: "fc00::3:1", old: "fc00::3", new: "fc00::4", want: "fc00::3:1"},
	{name: "v6 more groups before", content: "1:fc00::3 ffc00::3", old: "fc00::3", new: "fc00::4", want: "1:fc00::3 ffc00::3"},
	{name: "v6 bracketed port", content: "'[fc00::3]:6443'", old: "fc00::3", new: "fc00::4", want: "'[fc00::4]:6443'", wantN: 1},
	{name: "v6 URL", content: "https://[fc00::3]:6443", old: "fc00::3", new: "fc00::4", want: "https://[fc00::4]:6443", wantN: 1},
	// Unbracketed, the port cannot be told from a last group: this is
	// the address fc00::3:6443, not fc00::3 port 6443.
	{name: "v6 unbracketed port is another address", content: "fc00::3:6443", old: "fc00::3", new: "fc00::4", want: "fc00::3:6443"},
	{name: "v6 flag", content: "--node-ip=fc00:f853:ccd:e793::3 ", old: "fc00:f853:ccd:e793::3", new: "fc00:f853:ccd:e793::4", want: "--node-ip=fc00:f853:ccd:e793::4 ", wantN: 1},
	{name: "v6 YAML list item", content: "- fc00::3\n", old: "fc00::3", new: "fc00::4", want: "- fc00::4\n", wantN: 1},
	{name: "v6 CIDR and zone", content: "fc00::3/64 fc00::3%eth0", old: "fc00::3", new: "fc00::4", want: "fc00::4/64 fc00::4%eth0", wantN: 2},
	{name: "v6 spelling is literal", content: "FC00::3 fc00:0::3", old: "fc00::3", new: "fc00::4", want: "FC00::3 fc00:0::3"},
	{name: "v6 leading double colon", content: "::3 a::3", old: "::3", new: "::4", want: "::4 a::3", wantN: 1},
	{name: "v6 IPv4-mapped", content: "::ffff:172.18.0.3 ::ffff:172.18.0.30", old: "::ffff:172.18.0.3", new: "::ffff:172.18.0.4", want: "::ffff:172.18.0.4 ::ffff:172.18.0.30", wantN: 1},
	{name: "v6 old equals new", content: "fc00::3", old: "fc00::3", new: "fc00::3", want: "fc00::3"},
}

func TestReplaceAddress(t *testing.T) {
	for _, tc := range replaceAddressTests {
		t.Run(tc.name, func(t *testing.T) {
			got, n, err := ReplaceAddress([]byte(tc.content), tc.old, tc.new)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(got), tc.want); diff != "" {
				t.Errorf("mismatch (-got +want):\n%s", diff)
			}
			if n != tc.wantN {
				t.Errorf("n = %d, want %d", n, tc.wantN)
			}
			again, n, err := ReplaceAddress(got, tc.old, tc.new)
			if err != nil || n != 0 || string(again) != string(got) {
				t.Errorf("second pass = %q, %d, %v; want no change", again, n, err)
			}
		})
	}
}

func TestReplaceAddressErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new string
		wantErr  string
	}{
		{name: "old empty", old: "", new: "172.18.0.4", wantErr: "old address is empty"},
		{name: "new empty", old: "172.18.0.3", new: "", wantErr: "new address is empty"},
		{name: "old regexp", old: "172.18.0.*", new: "172.18.0.4", wantErr: `old address: ParseAddr("172.18.0.*"): unexpected character (at "*")`},
		{name: "old regexp alternation", old: "172.18.0.3|10.0.0.1", new: "172.18.0.4", wantErr: `old address: ParseAddr("172.18.0.3|10.0.0.1"): unexpected character (at "|10.0.0.1")`},
		{name: "old escaped dots", old: `172\.18\.0\.3`, new: "172.18.0.4", wantErr: `old address: ParseAddr("172\\.18\\.0\\.3"): unexpected character (at "\\.18\\.0\\.3")`},
		{name: "old bracketed", old: "[fc00::3]", new: "fc00::4", wantErr: `old address: ParseAddr("[fc00::3]"): each colon-separated field must have at least one digit (at "[fc00::3]")`},
		{name: "old CIDR", old: "172.18.0.3/16", new: "172.18.0.4", wantErr: `old address: ParseAddr("172.18.0.3/16"): unexpected character (at "/16")`},
		{name: "old trailing newline", old: "172.18.0.3\n", new: "172.18.0.4", wantErr: `old address: ParseAddr("172.18.0.3\n"): unexpected character (at "\n")`},
		{name: "new sed replacement", old: "172.18.0.3", new: `\0`, wantErr: `new address: ParseAddr("\\0"): unable to parse IP`},
		{name: "new hostname", old: "172.18.0.3", new: "kind-control-plane", wantErr: `new address: ParseAddr("kind-control-plane"): unable to parse IP`},
		{name: "v4 to v6", old: "172.18.0.3", new: "fc00::4", wantErr: "cannot replace 172.18.0.3 with fc00::4: different address families"},
		{name: "v4 to IPv4-mapped v6", old: "172.18.0.3", new: "::ffff:172.18.0.4", wantErr: "cannot replace 172.18.0.3 with ::ffff:172.18.0.4: different address families"},
		{name: "zone", old: "fe80::3%eth0", new: "fe80::4", wantErr: "old address fe80::3%eth0: has a zone"},
		{name: "old unspecified", old: "0.0.0.0", new: "172.18.0.4", wantErr: "old address 0.0.0.0: unspecified address"},
		{name: "new unspecified", old: "fc00::3", new: "::", wantErr: "new address ::: unspecified address"},
		{name: "old loopback", old: "127.0.0.1", new: "172.18.0.4", wantErr: "old address 127.0.0.1: loopback address"},
		{name: "new loopback", old: "fc00::3", new: "::1", wantErr: "new address ::1: loopback address"},
		{name: "new multicast", old: "fc00::3", new: "ff02::1", wantErr: "new address ff02::1: not a host's address"},
		{name: "old broadcast", old: "255.255.255.255", new: "172.18.0.4", wantErr: "old address 255.255.255.255: not a host's address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, n, err := ReplaceAddress([]byte("172.18.0.3 fc00::3 127.0.0.1 0.0.0.0"), tc.old, tc.new)
			checkRefused(t, got, err, tc.wantErr)
			if n != 0 {
				t.Errorf("%d replacements along with the error", n)
			}
		})
	}
}

// TestReplaceAddressGolden moves whole control-plane files from one node
// address to another, the files the entrypoint fixes after a restart.
func TestReplaceAddressGolden(t *testing.T) {
	forEachInput(t, "address-*", func(t *testing.T, name string, content []byte) {
		old, new := "172.18.0.3", "172.18.0.4"
		if strings.HasPrefix(name, "address-v6-") {
			old, new = "fc00:f853:ccd:e793::3", "fc00:f853:ccd:e793::4"
		}
		got, n, err := ReplaceAddress(content, old, new)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Error("nothing replaced")
		}
		hosttest.Golden(t, filepath.Join("testdata", name+".golden"), got)
		// new appears nowhere in the fixtures, so going back restores them.
		back, m, err := ReplaceAddress(got, new, old)
		if err != nil || m != n {
			t.Errorf("replacing back: %d replacements, error %v; want %d", m, err, n)
		}
		if diff := cmp.Diff(string(back), string(content)); diff != "" {
			t.Errorf("round trip mismatch (-got +want):\n%s", diff)
		}
	})
}
