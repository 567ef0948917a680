package capture

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRedactKubeconfig: every secret field's value goes, on its line or
// continued below it, quoted or not; the rest, addresses included, stays.
func TestRedactKubeconfig(t *testing.T) {
	in := "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: LS0tCA==\n    server: https://172.18.0.3:6443\n" +
		"users:\n- name: a\n  user:\n    client-certificate-data: LS0tY2VydA==\n    client-key-data: LS0tS0VZ\n" +
		"- name: b\n  user:\n    \"token\": 'abc.def'\n    tokenFile: /t\n- name: c\n  user:\n    password: >-\n      SECRET\n      MORE\n    username: c\n" +
		"- name: d\n  user: {client-key-data: X}\n    client-key-data:SECRET"
	want := "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: LS0tCA==\n    server: https://172.18.0.3:6443\n" +
		"users:\n- name: a\n  user:\n    client-certificate-data: LS0tY2VydA==\n    client-key-data: \"(a secret, not archived)\"\n" +
		"- name: b\n  user:\n    \"token\": \"(a secret, not archived)\"\n    tokenFile: /t\n- name: c\n  user:\n    password: \"(a secret, not archived)\"\n    username: c\n" +
		"- name: d\n  user: {client-key-data: \"(a secret, not archived)\"\n"
	got, n := redactKubeconfig([]byte(in))
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if n != 4 || strings.Contains(string(got), "SECRET") || strings.Contains(string(got), "LS0tS0VZ") || strings.Contains(string(got), "X}") {
		t.Errorf("%d redacted, want 4 (the last line is a continuation of the flow one)", n)
	}
}
