package podnet

import (
	"net/netip"
	"testing"
)

func TestRandomAddr(t *testing.T) {
	for _, p := range []netip.Prefix{podPrefix, netip.MustParsePrefix("10.0.0.0/30")} {
		for range 500 {
			a := randomAddr(p)
			last := a.As4()[3] & byte(^uint32(0)>>p.Bits())
			if !p.Contains(a) || a == p.Masked().Addr() || last == byte(^uint32(0)>>p.Bits()) {
				t.Fatalf("randomAddr(%s) = %s", p, a)
			}
		}
	}
}
