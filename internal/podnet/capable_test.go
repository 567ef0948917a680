package podnet

import "testing"

func TestCapable(t *testing.T) {
	status := func(eff string) []byte {
		return []byte("Name:\tentrypoint\nCapInh:\t0000000000000000\nCapEff:\t" + eff + "\nCapBnd:\t000001ffffffffff\n")
	}
	tests := []struct {
		euid   int
		status []byte
		want   bool
	}{
		{0, status("000001fffeffffff"), true},     // all but CAP_SYS_RESOURCE, as on our CI
		{0, status("0000000000001000"), false},    // CAP_NET_ADMIN only
		{0, status("0000000000201000"), true},     // CAP_NET_ADMIN + CAP_SYS_ADMIN
		{0, status("00000000a80425fb"), false},    // Docker's default set
		{1000, status("000001ffffffffff"), false}, // not root
		{0, []byte("Name:\tx\n"), false},          // no CapEff line
		{0, status("zz"), false},
	}
	for _, tt := range tests {
		if got := Capable(tt.euid, tt.status); got != tt.want {
			t.Errorf("Capable(%d, %q) = %t, want %t", tt.euid, tt.status, got, tt.want)
		}
	}
}
