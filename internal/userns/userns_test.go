package userns

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kind-entrypoint/entrypoint/internal/plan"
	"github.com/kind-entrypoint/entrypoint/internal/system"
	"github.com/kind-entrypoint/entrypoint/internal/system/hosttest"
)

var uidMapTests = []struct {
	name    string
	in      string
	full    bool
	wantErr string
}{
	// The kernel's own format: %10u %10u %10u.
	{name: "initial namespace", in: "         0          0 4294967295\n", full: true},
	{name: "initial namespace, single spaces", in: "0 0 4294967295", full: true},
	{name: "tabs", in: "0\t0\t4294967295\n", full: true},
	{name: "CRLF", in: "0 0 4294967295\r\n", full: true},
	{name: "blank lines around", in: "\n\n  0 0 4294967295  \n\n", full: true},
	{name: "rootless Docker", in: "         0       1000          1\n         1     100000      65536\n"},
	{name: "userns-remap", in: "         0     165536      65536\n"},
	{name: "Fedora subuids", in: "0 1000 1\n1 524288 65536\n"},
	{name: "three lines", in: "0 1000 1\n1 100000 65536\n65537 200000 1000\n"},
	{name: "full range but shifted", in: "0 1 4294967295\n"},
	{name: "one short of the full range", in: "0 0 4294967294\n"},
	{name: "full map twice", in: "0 0 4294967295\n0 0 4294967295\n"},
	{name: "empty: a namespace whose map is not written yet", in: ""},
	{name: "blank only", in: "\n \n\t\n"},
	{name: "garbage", in: "hello\n", wantErr: "line 1: want 3 fields, got 1"},
	{name: "two fields", in: "0 0\n", wantErr: "line 1: want 3 fields, got 2"},
	{name: "four fields", in: "0 0 4294967295 1\n", wantErr: "line 1: want 3 fields, got 4"},
	{name: "bad second line", in: "0 1000 1\n1 x 65536\n", wantErr: `line 2: field 2: strconv.ParseUint: parsing "x": invalid syntax`},
	{name: "negative", in: "0 0 -1\n", wantErr: `line 1: field 3: strconv.ParseUint: parsing "-1": invalid syntax`},
	{name: "overflow", in: "0 0 4294967296\n", wantErr: `line 1: field 3: strconv.ParseUint: parsing "4294967296": value out of range`},
	{name: "huge", in: "0 0 99999999999999999999999\n", wantErr: `line 1: field 3: strconv.ParseUint: parsing "99999999999999999999999": value out of range`},
	{name: "plus sign", in: "+0 0 4294967295\n", wantErr: `line 1: field 1: strconv.ParseUint: parsing "+0": invalid syntax`},
	{name: "hex", in: "0 0 0xffffffff\n", wantErr: `line 1: field 3: strconv.ParseUint: parsing "0xffffffff": invalid syntax`},
	{name: "NUL", in: "0 0 4294967295\x00\n", wantErr: `line 1: field 3: strconv.ParseUint: parsing "4294967295\x00": invalid syntax`},
	// A field of any length: the error quotes 80 bytes of it.
	{name: "long field", in: "0 0 " + strings.Repeat("9", 100000) + "\n", wantErr: `line 1: field 3: strconv.ParseUint: parsing "` + strings.Repeat("9", 80) + `"...: value out of range`},
}

func TestParseUIDMap(t *testing.T) {
	for _, tt := range uidMapTests {
		t.Run(tt.name, func(t *testing.T) {
			full, err := ParseUIDMap([]byte(tt.in))
			hosttest.Result(t, fmt.Sprintf("ParseUIDMap(%q)", tt.in), full, err, tt.full, tt.wantErr)
		})
	}
}

func TestMissing(t *testing.T) {
	tests := []struct {
		controllers string
		want        []string
	}{
		{"cpuset cpu io memory hugetlb pids rdma misc", nil},
		{"cpuset cpu io memory pids", nil},
		{"pids memory cpu", nil},
		{"cpu\tmemory\npids\n", nil},
		{"memory", []string{"cpu", "pids"}},
		{"memory pids", []string{"cpu"}},
		{"cpuset io memory pids", []string{"cpu"}}, // cpuset is not cpu
		{"cpux memoryy pidss", Required},           // whole words only
		{"cpu,memory,pids", Required},              // not the file's separator
		{"", Required},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, Missing(tt.controllers)); diff != "" {
			t.Errorf("Missing(%q) (-want +got):\n%s", tt.controllers, diff)
		}
	}
}

func TestMissingError(t *testing.T) {
	tests := []struct {
		missing []string
		want    string
	}{
		{nil, ""},
		{[]string{}, ""},
		// The reference's message when one is missing.
		{[]string{"cpu"}, "UserNS: cpu controller needs to be delegated"},
		{[]string{"cpu", "pids"}, "UserNS: cpu and pids controllers need to be delegated"},
		{[]string{"cpu", "memory", "pids"}, "UserNS: cpu, memory and pids controllers need to be delegated"},
	}
	for _, tt := range tests {
		if got := hosttest.ErrString(MissingError(tt.missing)); got != tt.want {
			t.Errorf("MissingError(%q) = %q, want %q", tt.missing, got, tt.want)
		}
	}
}

func TestPlan(t *testing.T) {
	running := plan.Info("running in a user namespace (experimental)")
	tests := []struct {
		name    string
		f       Facts
		want    []plan.Action
		wantErr string
	}{
		{
			name: "rootless v2, delegated",
			f:    Facts{NofileHard: 1048576, CgroupV2: true, Controllers: "cpuset cpu io memory pids"},
			want: []plan.Action{running},
		},
		{
			name: "exactly the minimum nofile",
			f:    Facts{NofileHard: MinNofile, CgroupV2: true, Controllers: "cpu memory pids"},
			want: []plan.Action{running},
		},
		{
			name: "low nofile warns",
			f:    Facts{NofileHard: 63999, CgroupV2: true, Controllers: "cpu memory pids"},
			want: []plan.Action{running, plan.Warning("UserNS: expected RLIMIT_NOFILE to be at least 64000, got 63999")},
		},
		{
			name: "v1: controllers are not checked",
			f:    Facts{NofileHard: 1024, Controllers: ""},
			want: []plan.Action{running, plan.Warning("UserNS: expected RLIMIT_NOFILE to be at least 64000, got 1024")},
		},
		{
			name:    "v2, only memory: the warning first, then one error naming both",
			f:       Facts{NofileHard: 4096, CgroupV2: true, Controllers: "memory"},
			want:    []plan.Action{running, plan.Warning("UserNS: expected RLIMIT_NOFILE to be at least 64000, got 4096")},
			wantErr: "UserNS: cpu and pids controllers need to be delegated",
		},
		{
			name:    "v2, empty controllers file",
			f:       Facts{NofileHard: 1048576, CgroupV2: true},
			want:    []plan.Action{running},
			wantErr: "UserNS: cpu, memory and pids controllers need to be delegated",
		},
		{
			name:    "v2, cpu missing",
			f:       Facts{NofileHard: 1048576, CgroupV2: true, Controllers: "cpuset io memory pids"},
			want:    []plan.Action{running},
			wantErr: "UserNS: cpu controller needs to be delegated",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Plan(tt.f)
			hosttest.Result(t, "Plan", got, err, tt.want, tt.wantErr)
		})
	}
}

func TestInUserNS(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		want    bool
		wantErr string
	}{
		{"host", map[string]string{"proc/self/uid_map": "         0          0 4294967295\n"}, false, ""},
		{"rootless", map[string]string{"proc/self/uid_map": "0 1000 1\n1 100000 65536\n"}, true, ""},
		{"kernel without user namespaces", map[string]string{}, false, ""},
		{"garbage", map[string]string{"proc/self/uid_map": "0 0\n"}, false, "/proc/self/uid_map: line 1: want 3 fields, got 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := InUserNS(hosttest.Tree(t, tt.files))
			hosttest.Result(t, "InUserNS", got, err, tt.want, tt.wantErr)
		})
	}
}

func TestDetect(t *testing.T) {
	tests := []struct {
		name     string
		files    map[string]string
		cgroupV2 bool
		want     Facts
		wantErr  string
	}{
		{
			name:     "v2",
			files:    map[string]string{".host/nofile": "4096\n", "sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory pids\n"},
			cgroupV2: true,
			want:     Facts{NofileHard: 4096, CgroupV2: true, Controllers: "cpuset cpu io memory pids"},
		},
		{
			name:  "v1: the controllers file is not read",
			files: map[string]string{".host/nofile": "unlimited"},
			want:  Facts{NofileHard: 1<<64 - 1},
		},
		{
			name:     "v2 without a controllers file",
			files:    map[string]string{},
			cgroupV2: true,
			wantErr:  "open /sys/fs/cgroup/cgroup.controllers: no such file or directory",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sys := hosttest.Tree(t, tt.files)
			var controllers func() (string, error)
			if tt.cgroupV2 {
				// As cgroupfix.ReadControllers reads it.
				controllers = func() (string, error) {
					b, err := sys.ReadFile("/sys/fs/cgroup/cgroup.controllers", system.LimitValue)
					return strings.TrimSpace(string(b)), err
				}
			}
			got, err := Detect(sys, controllers)
			hosttest.Result(t, "Detect", got, err, tt.want, tt.wantErr)
		})
	}
}
