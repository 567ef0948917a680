package system

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestJSONDamage(t *testing.T) {
	const secret = "SECRET-MARKER-json"
	var v struct {
		Name string `json:"name"`
		Port int    `json:"port"`
	}
	for _, tt := range []struct {
		in     string
		fields []string
		want   string
	}{
		{`{"name": "` + secret, nil, "not JSON (a syntax error at byte 28)"},
		{`{"name": 7}`, []string{"name"}, "field name of the wrong type (at byte 10)"},
		{`{"port": "` + secret + `"}`, []string{"name"}, "a field of the wrong type (at byte 29)"},
	} {
		err := json.Unmarshal([]byte(tt.in), &v)
		got := JSONDamage(err, "a record", tt.fields...)
		if got != tt.want || strings.Contains(got, secret) {
			t.Errorf("JSONDamage(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := JSONDamage(errors.New(secret), "a record"); got != "not a record" {
		t.Errorf("another error: %q", got)
	}
}
