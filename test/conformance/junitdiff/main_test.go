package main

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func readRun(t *testing.T, name string) run {
	t.Helper()
	f, err := os.Open("testdata/" + name + ".xml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := parseReport(name, f)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestParseReport(t *testing.T) {
	got := readRun(t, "ours")
	want := run{
		name: "ours",
		results: map[string]string{
			"[It] [sig-node] Pods should be submitted and removed [NodeConformance] [Conformance]":                     passed,
			"[It] [sig-network] DNS should provide DNS for the cluster [Conformance]":                                  failed,
			"[It] [sig-storage] EmptyDir should support (root,0644,tmpfs) [LinuxOnly] [NodeConformance] [Conformance]": skipped,
			"[It] [sig-node] Pods should run a pod with no filter":                                                     notSelected,
		},
		reasons: map[string]string{
			"[It] [sig-network] DNS should provide DNS for the cluster [Conformance]":                                  "timed out waiting for the condition",
			"[It] [sig-storage] EmptyDir should support (root,0644,tmpfs) [LinuxOnly] [NodeConformance] [Conformance]": "Only supported for providers [gce]",
		},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(run{})); diff != "" {
		t.Errorf("parseReport (-want +got):\n%s", diff)
	}
}

func TestWriteComparison(t *testing.T) {
	var b strings.Builder
	ok := writeComparison(&b, []run{readRun(t, "ours"), readRun(t, "control")})
	if ok {
		t.Error("writeComparison: ok for a run that failed a spec the control passed")
	}
	want := `| | ours | control |
|---|---|---|
| specs selected | 3 | 3 |
| of them [Conformance] | 3 | 3 |
| passed | 1 | 2 |
| failed | 1 | 0 |
| skipped at run time | 1 | 1 |

## Results that differ

- [It] [sig-network] DNS should provide DNS for the cluster [Conformance] (ours: failed, control: passed)

## ours: failed and skipped at run time

- failed [It] [sig-network] DNS should provide DNS for the cluster [Conformance]: timed out waiting for the condition
- skipped [It] [sig-storage] EmptyDir should support (root,0644,tmpfs) [LinuxOnly] [NodeConformance] [Conformance]: Only supported for providers [gce]

## control: failed and skipped at run time

- skipped [It] [sig-storage] EmptyDir should support (root,0644,tmpfs) [LinuxOnly] [NodeConformance] [Conformance]: Only supported for providers [gce]
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("comparison (-want +got):\n%s", diff)
	}
	b.Reset()
	if !writeComparison(&b, []run{readRun(t, "control"), readRun(t, "control")}) {
		t.Errorf("writeComparison: not ok for two clean runs:\n%s", b.String())
	}
}
