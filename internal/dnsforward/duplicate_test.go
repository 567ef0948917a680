package dnsforward_test

import (
	"bytes"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/kind-entrypoint/entrypoint/internal/dnsforward"
	"github.com/kind-entrypoint/entrypoint/internal/dnsforward/dnstest"
)

// TestLateDuplicateAnswers: the upstream answers every query twice, the
// copy marked (dnstest.Duplicate), at once or a little later. 100 clients
// one after the other, each with a socket or connection of its own and
// all with the same DNS ID, must each get the first answer to their own
// query: never the copy of the client before them that the pooled
// upstream socket (UDP) still holds. On TCP the same holds for 100
// queries one after the other on one connection.
func TestLateDuplicateAnswers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		dup, gap time.Duration
		sameName bool // every client asks for the same name
	}{
		{name: "copy at once", sameName: false},
		{name: "copy 2ms later", dup: 2 * time.Millisecond},
		// The same name and ID: only the check of the kept socket
		// tells the copy apart; the gap lets it arrive first.
		{name: "same name", gap: 2 * time.Millisecond, sameName: true},
	} {
		for _, network := range []string{"udp", "tcp"} {
			t.Run(network+"/"+tc.name, func(t *testing.T) {
				up := dnstest.StartWith(t, loop4, dnstest.Behaviour{Twice: true, Dup: tc.dup})
				f := start(t, up.Addr, dnsforward.DefaultLimits())
				var shared net.Conn
				if network == "tcp" {
					shared = dial(t, network, f.Addr())
				}
				for i := range 100 {
					name := fmt.Sprintf("client-%d", i)
					if tc.sameName {
						name = "kind-control-plane"
					}
					q := dnstest.Query(7, name)
					c := shared
					if c == nil || i%2 == 0 {
						c = dial(t, network, f.Addr())
					}
					reply, err := dnstest.Exchange(c, q, 2*time.Second)
					if err != nil {
						t.Fatalf("client %d: %v", i, err)
					}
					if !bytes.Equal(reply, dnstest.Answer(q)) {
						t.Fatalf("client %d got %x, want its own first answer %x", i, reply, dnstest.Answer(q))
					}
					if c != shared {
						c.Close()
					}
					time.Sleep(tc.gap)
				}
				f.stop()
				if got := f.Stats(); got.UDP+got.TCP != 100 || got.Failed != 0 {
					t.Errorf("counts %+v, want 100 answered", got)
				}
			})
		}
	}
}
