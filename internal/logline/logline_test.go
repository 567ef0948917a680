package logline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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

func TestSettle(t *testing.T) {
	const settle = 100 * time.Millisecond
	// Not a terminal: no wait.
	f, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	l := New(f, Text)
	l.Info("x")
	if d := l.Settle(settle); d != 0 {
		t.Errorf("waited %v on a plain file", d)
	}
	// A pty: waits until settle has passed since the last line.
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	defer master.Close()
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer slave.Close()
	go io.Copy(io.Discard, master)
	l = New(slave, Text)
	l.Info("detected cgroup v1")
	start := time.Now()
	d := l.Settle(settle)
	if d <= 0 || d > settle || time.Since(start) < d {
		t.Errorf("waited %v on a pty (want up to %v)", d, settle)
	}
	if d := l.Settle(settle); d != 0 {
		t.Errorf("second settle waited %v", d)
	}
	l.Info("starting init")
	if d := l.Settle(0); d != 0 {
		t.Errorf("--tty-settle=0 waited %v", d)
	}
}
