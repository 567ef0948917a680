package main

import (
	"strings"
	"testing"
)

func TestSummarize(t *testing.T) {
	const ran = `{"Action":"start","Package":"m/a"}
{"Action":"run","Package":"m/a","Test":"TestX"}
{"Action":"output","Package":"m/a","Test":"TestX","Output":"=== RUN   TestX\n"}
{"Action":"pass","Package":"m/a","Test":"TestX/sub","Elapsed":0}
{"Action":"pass","Package":"m/a","Test":"TestX","Elapsed":0}
{"Action":"output","Package":"m/a","Test":"TestY","Output":"=== RUN   TestY\n"}
{"Action":"output","Package":"m/a","Test":"TestY","Output":"    y_test.go:9: under qemu: why\n"}
{"Action":"output","Package":"m/a","Test":"TestY","Output":"--- SKIP: TestY (0.00s)\n"}
{"Action":"skip","Package":"m/a","Test":"TestY","Elapsed":0}
{"Action":"output","Package":"m/a","Output":"ok  \tm/a\t0.1s\n"}
{"Action":"pass","Package":"m/a","Elapsed":0.1}
{"Action":"output","Package":"m/none","Output":"?   \tm/none\t[no test files]\n"}
{"Action":"skip","Package":"m/none","Elapsed":0}
`
	for _, c := range []struct {
		name, in string
		ok       bool
		want     []string
	}{
		{"passed", ran, true, []string{"m/a ", "1/0/1", "1/0/0", "SKIP m/a TestY: y_test.go:9: under qemu: why"}},
		{"skipped whole", ran + `{"Action":"output","Package":"m/b","Output":"SKIP: no sandbox\n"}
{"Action":"pass","Package":"m/b","Elapsed":0}
`, false, []string{"FAIL: ran no test", "--- m/b:\nSKIP: no sandbox\n"}},
		{"a test failed", ran + `{"Action":"output","Package":"m/c","Test":"TestZ","Output":"    z_test.go:3: boom\n"}
{"Action":"fail","Package":"m/c","Test":"TestZ","Elapsed":0}
{"Action":"fail","Package":"m/c","Elapsed":0}
`, false, []string{"0/1/0", "FAIL", "z_test.go:3: boom"}},
		{"cut short", ran + `{"Action":"pass","Package":"m/d","Test":"TestW","Elapsed":0}
`, false, []string{"FAIL: no result"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out strings.Builder
			ok, err := summarize(strings.NewReader(c.in), &out)
			if err != nil {
				t.Fatal(err)
			}
			if ok != c.ok {
				t.Errorf("ok = %t, want %t", ok, c.ok)
			}
			for _, w := range c.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("the report lacks %q:\n%s", w, out.String())
				}
			}
			if strings.Contains(out.String(), "m/none") {
				t.Errorf("a package without tests is listed:\n%s", out.String())
			}
		})
	}
}
