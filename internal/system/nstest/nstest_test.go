package nstest

import "testing"

func TestDiffLines(t *testing.T) {
	for _, c := range []struct{ a, b, want string }{
		{"x\ny\n", "x\ny\n", ""},
		{"x\ny\n", "x\nz\n", "- y\n+ z\n"},
		{"x\n", "x\nx\n", "+ x\n"},
		{"x\ny", "y\nx", "(same lines, reordered)\n- \"x\\ny\"\n+ \"y\\nx\"\n"},
	} {
		if got := DiffLines(c.a, c.b); got != c.want {
			t.Errorf("DiffLines(%q, %q) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
}
