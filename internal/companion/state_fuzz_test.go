package companion

import (
	"bytes"
	"encoding/json"
	"path"
	"strings"
	"testing"
)

// FuzzParseState: any stdin gives an error, or the bundle of a JSON object
// whose "bundle" is an absolute directory other than "/", cleaned.
func FuzzParseState(f *testing.F) {
	for _, s := range []string{
		`{"ociVersion":"1.0.2","id":"c1","status":"creating","pid":42,"bundle":"/run/containerd/io.containerd.runtime.v2.task/k8s.io/c1","annotations":{}}`,
		`{"bundle":"/b/c/"}`, `{"bundle":""}`, `{}`, `{"bundle":"rel"}`, `{"bundle":"/"}`, `{"bundle":"/.."}`,
		`{"bundle":"/a/../.."}`, `{"bundle":1}`, `garbage`, ``, `{"bundle":"/x"} trailing`, `{"Bundle":"/y","bundle":"/z"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, state []byte) {
		bundle, err := ParseState(bytes.NewReader(state))
		if err != nil {
			if bundle != "" || !strings.HasPrefix(err.Error(), "container state on stdin: ") {
				t.Fatalf("ParseState(%q) = %q, %v", state, bundle, err)
			}
			return
		}
		if !path.IsAbs(bundle) || path.Clean(bundle) != bundle || bundle == "/" {
			t.Fatalf("ParseState(%q) = %q: not a clean absolute directory", state, bundle)
		}
		// The same bundle as a JSON decoder reads from the first value.
		var v struct {
			Bundle string `json:"bundle"`
		}
		if err := json.NewDecoder(bytes.NewReader(state)).Decode(&v); err != nil || path.Clean(v.Bundle) != bundle {
			t.Fatalf("ParseState(%q) = %q, but the state says %q (%v)", state, bundle, v.Bundle, err)
		}
	})
}
