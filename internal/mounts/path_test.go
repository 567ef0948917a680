package mounts

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/kind-entrypoint/entrypoint/internal/system"
)

// statCounter counts Stat calls.
type statCounter struct {
	system.System
	stats int
}

func (s *statCounter) Stat(p string) (fs.FileInfo, error) {
	s.stats++
	return s.System.Stat(p)
}

// TestPathLookedUpOnce: a PATH naming the same directories again and
// again (a 1 MiB .host/environ holds 300k entries) is looked in once per
// directory; before, every entry cost a stat.
func TestPathLookedUpOnce(t *testing.T) {
	tr := tree(t, map[string]fs.FileMode{"usr/bin/mount": setuidRoot}, rootLine+"\n", nil)
	sys := &statCounter{System: tr}
	searchPath := strings.Repeat("/sbin:/bin:/usr/sbin/:", 100_000) + "/usr/bin"
	b, err := lookBinary(sys, "mount", searchPath)
	if err != nil || b.Path != "/usr/bin/mount" {
		t.Fatalf("lookBinary = %+v, %v", b, err)
	}
	if sys.stats > 4 {
		t.Errorf("%d stats for 4 distinct directories", sys.stats)
	}
}
