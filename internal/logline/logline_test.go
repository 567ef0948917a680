package logline

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

func TestText(t *testing.T) {
	var b bytes.Buffer
	l := New(&b, Text)
	l.Info("detected cgroup v1")
	l.Step("fix_mount").Warn("w")
	l.Error("e")
	l.Done(time.Second) // text logs stay the reference's
	if got, want := b.String(), "INFO: detected cgroup v1\nWARN: w\nERROR: e\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	var nilLogger *Logger
	nilLogger.Info("no panic")
}

func TestJSON(t *testing.T) {
	var b bytes.Buffer
	l := New(&b, JSON).Step("fix_cgroup")
	l.Info("detected cgroup v1")
	l.Done(1500 * time.Microsecond)
	dec := json.NewDecoder(&b)
	var lines []jsonLine
	for dec.More() {
		var j jsonLine
		if err := dec.Decode(&j); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, j)
	}
	if len(lines) != 2 || lines[0].Msg != "detected cgroup v1" || lines[0].Step != "fix_cgroup" || lines[0].Level != Info {
		t.Fatalf("lines = %+v", lines)
	}
	if lines[1].DurationMS != 1.5 {
		t.Errorf("duration = %v", lines[1].DurationMS)
	}
}

func TestParseFormat(t *testing.T) {
	if _, err := ParseFormat("yaml"); err == nil {
		t.Error("yaml accepted")
	}
	if f, err := ParseFormat("json"); err != nil || f != JSON {
		t.Error("json refused")
	}
}
