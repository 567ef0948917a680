package logline

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
)

// Level is a log line's severity, printed as the reference prints it.
type Level string

const (
	Info  Level = "INFO"
	Warn  Level = "WARN"
	Error Level = "ERROR"
)

// Format selects the output form.
type Format string

const (
	Text Format = "text"
	JSON Format = "json"
)

// ParseFormat accepts the --log-format values.
func ParseFormat(s string) (Format, error) {
	switch Format(s) {
	case Text, JSON:
		return Format(s), nil
	}
	return "", fmt.Errorf("unknown log format %q (want text or json)", s)
}

// Logger writes log lines; the zero value discards them. A Logger is safe
// for concurrent use, and copies made by Step share its writer.
type Logger struct {
	out    *sink
	format Format
	step   string
}

type sink struct {
	mu   sync.Mutex
	w    io.Writer
	last time.Time // when the last line was written
}

// New returns a Logger writing to w in format f.
func New(w io.Writer, f Format) *Logger {
	return &Logger{out: &sink{w: w}, format: f}
}

// Step returns a Logger whose JSON lines carry the step's name.
func (l *Logger) Step(name string) *Logger {
	c := *l
	c.step = name
	return &c
}

func (l *Logger) Info(msg string)  { l.Log(Info, msg) }
func (l *Logger) Warn(msg string)  { l.Log(Warn, msg) }
func (l *Logger) Error(msg string) { l.Log(Error, msg) }

// Log writes one line at level lv.
func (l *Logger) Log(lv Level, msg string) { l.write(lv, msg, -1) }

// Done records that the current step finished after d. Text logs stay as
// the reference's, so only JSON logs carry it.
func (l *Logger) Done(d time.Duration) {
	if l.format == JSON {
		l.write(Info, "step finished", d)
	}
}

type jsonLine struct {
	Time       string  `json:"time"`
	Level      Level   `json:"level"`
	Step       string  `json:"step,omitempty"`
	Msg        string  `json:"msg"`
	DurationMS float64 `json:"duration_ms,omitempty"`
}

func (l *Logger) write(lv Level, msg string, d time.Duration) {
	if l == nil || l.out == nil {
		return
	}
	var line []byte
	if l.format == JSON {
		j := jsonLine{Time: time.Now().UTC().Format(time.RFC3339Nano), Level: lv, Step: l.step, Msg: msg}
		if d >= 0 {
			j.DurationMS = float64(d.Microseconds()) / 1000
		}
		line, _ = json.Marshal(j)
		line = append(line, '\n')
	} else {
		// Messages carry host text (paths, addresses, errors that
		// quote files): one line each, whatever it holds.
		line = []byte(string(lv) + ": " + Escape(msg) + "\n")
	}
	l.out.mu.Lock()
	defer l.out.mu.Unlock()
	l.out.w.Write(line)
	l.out.last = time.Now()
}
