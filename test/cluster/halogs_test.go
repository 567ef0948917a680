//go:build cluster && matrix

package cluster

// This file reads what the ha stages (ha_test.go) check in: etcd's own log
// (one JSON object per line), the journal of kind-etcd-peer-nat.service
// (journalctl -o json) and the nodes' leases. Each reader is pure and
// tested here on lines as etcd v3.6 and systemd write them.

import (
	"encoding/json"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// etcdEvent is one line of etcd's log: its message, its time (zero when
// the line has none), and its string fields (member IDs among them).
type etcdEvent struct {
	at     time.Time
	msg    string
	fields map[string]string
}

// etcdEvents parses etcd's log (kubectl logs of its pod): one JSON object
// per line, as etcd v3.5 and later write by default; any other line is
// skipped.
func etcdEvents(log string) []etcdEvent {
	var out []etcdEvent
	for line := range strings.Lines(log) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		ev := etcdEvent{fields: map[string]string{}}
		for k, v := range m {
			if s, ok := v.(string); ok {
				ev.fields[k] = s
			}
		}
		ev.msg = ev.fields["msg"]
		if at, err := time.Parse(time.RFC3339Nano, ev.fields["ts"]); err == nil {
			ev.at = at
		}
		out = append(out, ev)
	}
	return out
}

// findEvent is the first event whose message is msg and, when key is not
// empty, whose field key is value.
func findEvent(evs []etcdEvent, msg, key, value string) (etcdEvent, bool) {
	for _, ev := range evs {
		if ev.msg == msg && (key == "" || ev.fields[key] == value) {
			return ev, true
		}
	}
	return etcdEvent{}, false
}

// memberID is the member's own ID, as its log names it (local-member-id),
// or "" when no line does.
func memberID(evs []etcdEvent) string {
	for _, ev := range evs {
		if id := ev.fields["local-member-id"]; id != "" {
			return id
		}
	}
	return ""
}

// journalLine is one entry of journalctl -o json: when and what.
type journalLine struct {
	at  time.Time
	msg string
}

// journalLines parses journalctl -o json: one object per line, MESSAGE a
// string, or an array of bytes when it is not valid UTF-8;
// __REALTIME_TIMESTAMP microseconds since the epoch, as a string. Any other
// line ("-- No entries --") is skipped.
func journalLines(out string) []journalLine {
	var lines []journalLine
	for line := range strings.Lines(out) {
		var e struct {
			Message  json.RawMessage `json:"MESSAGE"`
			Realtime string          `json:"__REALTIME_TIMESTAMP"`
		}
		if json.Unmarshal([]byte(line), &e) != nil || e.Message == nil {
			continue
		}
		var msg string
		if json.Unmarshal(e.Message, &msg) != nil {
			var raw []int
			if json.Unmarshal(e.Message, &raw) != nil {
				continue
			}
			b := make([]byte, 0, len(raw))
			for _, c := range raw {
				b = append(b, byte(c))
			}
			msg = string(b)
		}
		var at time.Time
		if us, err := strconv.ParseInt(e.Realtime, 10, 64); err == nil {
			at = time.UnixMicro(us)
		}
		lines = append(lines, journalLine{at: at, msg: msg})
	}
	return lines
}

// movedTo: msg is etcd-peer-nat's line for peer moving to the address to,
// "etcd peer NAME moved: WAS -> NOW (recorded R: HOW)", NOW to's, port
// 2380's (internal/etcdpeers' watcher).
func movedTo(msg, peer string, to netip.Addr) bool {
	prefix := "etcd peer " + peer + " moved: "
	i := strings.Index(msg, prefix)
	if i < 0 {
		return false
	}
	_, now, ok := strings.Cut(msg[i+len(prefix):], " -> ")
	if !ok {
		return false
	}
	now, _, _ = strings.Cut(now, " ")
	ap, err := netip.ParseAddrPort(now)
	return err == nil && ap.Addr() == to && ap.Port() == 2380
}

// staleLeases are the nodes whose lease in kube-node-lease was not renewed
// since the time given (truncated to the second, as readySince reads a
// heartbeat), from out: "NAME RENEWTIME" lines (kubectl's jsonpath); a
// node with no lease is stale.
func staleLeases(out string, nodes []string, since time.Time) []string {
	renewed := map[string]bool{}
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		if at, err := time.Parse(time.RFC3339Nano, f[1]); err == nil && !at.Before(since.Truncate(time.Second)) {
			renewed[f[0]] = true
		}
	}
	var stale []string
	for _, n := range nodes {
		if !renewed[n] {
			stale = append(stale, n)
		}
	}
	return stale
}

func TestHAEtcdEvents(t *testing.T) {
	// etcd v3.6.5's lines (a restarted member's, a peer's), a line that is
	// not JSON, and one that is not an object
	log := `{"level":"info","ts":"2026-12-05T10:00:01.123456Z","caller":"etcdserver/server.go:1821","msg":"published local member to cluster through raft","local-member-id":"8e9e05c52164694d","local-member-attributes":"{Name:cp2 ClientURLs:[https://172.18.0.9:2379]}","cluster-id":"cdf818194e3a8c32","publish-timeout":"7s"}
{"level":"info","ts":"2026-12-05T10:00:02.5Z","caller":"rafthttp/peer_status.go:53","msg":"peer became active","peer-id":"8e9e05c52164694d"}
{"level":"info","ts":"2026-12-05T10:00:03Z","caller":"rafthttp/snapshot_sender.go:131","msg":"sent database snapshot","snapshot-index":1203,"remote-peer-id":"8e9e05c52164694d","bytes":2506752,"size":"2.5 MB"}
I1205 10:00:04.000000       1 not json
["an array"]
`
	evs := etcdEvents(log)
	if len(evs) != 3 {
		t.Fatalf("etcdEvents: %d events, want 3: %+v", len(evs), evs)
	}
	if got := memberID(evs); got != "8e9e05c52164694d" {
		t.Errorf("memberID = %q, want 8e9e05c52164694d", got)
	}
	ev, ok := findEvent(evs, "peer became active", "peer-id", "8e9e05c52164694d")
	if !ok || !ev.at.Equal(time.Date(2026, 12, 5, 10, 0, 2, 5e8, time.UTC)) {
		t.Errorf("findEvent(peer became active) = %+v, %v", ev, ok)
	}
	if _, ok := findEvent(evs, "peer became active", "peer-id", "ffff"); ok {
		t.Error("findEvent matched another peer's ID")
	}
	if _, ok := findEvent(evs, "sent database snapshot", "remote-peer-id", "8e9e05c52164694d"); !ok {
		t.Error("findEvent missed the snapshot sent (its other fields are numbers)")
	}
	if _, ok := findEvent(evs, "published local member to cluster through raft", "", ""); !ok {
		t.Error("findEvent missed a message with no field asked")
	}
	if got := memberID(etcdEvents(`{"msg":"peer became active","peer-id":"1"}`)); got != "" {
		t.Errorf("memberID of a log naming none = %q", got)
	}
}

func TestHAJournalLines(t *testing.T) {
	out := `{"__REALTIME_TIMESTAMP":"1796464801123456","MESSAGE":"INFO: etcd peer kind-control-plane2 moved: 172.18.0.4:2380 -> 172.18.0.9:2380 (recorded 172.18.0.3:2380: redirected)","_SYSTEMD_UNIT":"kind-etcd-peer-nat.service"}
{"__REALTIME_TIMESTAMP":"1796464802000000","MESSAGE":[87,65,82,78,255]}
-- No entries --
{"__REALTIME_TIMESTAMP":"1796464803000000"}
`
	got := journalLines(out)
	want := []journalLine{
		{time.UnixMicro(1796464801123456), "INFO: etcd peer kind-control-plane2 moved: 172.18.0.4:2380 -> 172.18.0.9:2380 (recorded 172.18.0.3:2380: redirected)"},
		{time.UnixMicro(1796464802000000), "WARN\xff"},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(journalLine{})); diff != "" {
		t.Errorf("journalLines (-want +got):\n%s", diff)
	}
}

func TestHAMovedTo(t *testing.T) {
	const v4 = "INFO: etcd peer kind-control-plane2 moved: 172.18.0.4:2380 -> 172.18.0.9:2380 (recorded 172.18.0.3:2380: redirected)"
	const v6 = "INFO: etcd peer kind-control-plane2 moved: [fc00:f853:ccd:e793::4]:2380 -> [fc00:f853:ccd:e793::9]:2380 (recorded [fc00:f853:ccd:e793::3]:2380: redirected)"
	for _, tc := range []struct {
		msg, peer, to string
		want          bool
	}{
		{v4, "kind-control-plane2", "172.18.0.9", true},
		{v4, "kind-control-plane2", "172.18.0.4", false}, // where it was
		{v4, "kind-control-plane2", "172.18.0.3", false}, // where etcd recorded it
		{v4, "kind-control-plane", "172.18.0.9", false},  // another peer
		{v4, "kind-control-plane3", "172.18.0.9", false},
		{v6, "kind-control-plane2", "fc00:f853:ccd:e793::9", true},
		{v6, "kind-control-plane2", "fc00:f853:ccd:e793::4", false},
		{"INFO: etcd peer kind-control-plane2: 172.18.0.3:2380 -> 172.18.0.9:2380", "kind-control-plane2", "172.18.0.9", false}, // a first mapping, not a move
		{"INFO: etcd peer kind-control-plane2 moved: 172.18.0.4:2380 -> 172.18.0.9:2381 (recorded 172.18.0.3:2380: redirected)", "kind-control-plane2", "172.18.0.9", false},
		{"INFO: etcd peer kind-control-plane2 moved: nowhere", "kind-control-plane2", "172.18.0.9", false},
	} {
		if got := movedTo(tc.msg, tc.peer, netip.MustParseAddr(tc.to)); got != tc.want {
			t.Errorf("movedTo(%q, %s, %s) = %v, want %v", tc.msg, tc.peer, tc.to, got, tc.want)
		}
	}
}

func TestHAStaleLeases(t *testing.T) {
	since := time.Date(2026, 12, 5, 10, 0, 0, 7e8, time.UTC)
	out := "cp 2026-12-05T10:00:00.000001Z\ncp2 2026-12-05T09:59:59.999999Z\nw 2026-12-05T10:00:30.5Z\nbroken line here\ncp3 yesterday\n"
	got := staleLeases(out, []string{"cp", "cp2", "cp3", "w", "gone"}, since)
	if want := []string{"cp2", "cp3", "gone"}; !slices.Equal(got, want) {
		t.Errorf("staleLeases = %v, want %v", got, want)
	}
}
