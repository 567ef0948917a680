package capture

// This file holds the redaction of kubeconfigs: kubeadm's
// /etc/kubernetes/*.conf embed the component's client key
// (client-key-data), and may hold a token or a password. A replay reads
// them for the addresses they name, never for those fields.

import (
	"bytes"
	"path"
	"strings"
)

// kubeconfigSecrets are the fields of a kubeconfig's user whose values
// are secrets.
var kubeconfigSecrets = []string{"client-key-data", "token", "password"}

// redactedValue stands for a secret field's value in an archived file.
const redactedValue = `"(a secret, not archived)"`

// IsKubeconfig reports whether p is one of kubeadm's kubeconfigs.
func IsKubeconfig(p string) bool {
	return path.Dir(p) == "/etc/kubernetes" && strings.HasSuffix(p, ".conf")
}

// redactKubeconfig replaces the value of every secret field of a
// kubeconfig (kubeconfigSecrets, as a mapping key anywhere on its line:
// a block mapping or a flow one), and the lines more indented than the
// key after it (a value continued on the lines below), with
// redactedValue; n is how many. Linear in data.
func redactKubeconfig(data []byte) (out []byte, n int) {
	out = make([]byte, 0, len(data))
	skipDeeper := -1 // after a redacted key: the indentation of its line
	for line := range bytes.Lines(data) {
		body := bytes.TrimLeft(line, " \t-")
		indent := len(line) - len(body)
		if skipDeeper >= 0 {
			if len(bytes.TrimSpace(body)) == 0 || indent > skipDeeper {
				continue
			}
			skipDeeper = -1
		}
		if at := secretField(line); at >= 0 {
			line = append(append(bytes.Clone(line[:at]), " "+redactedValue...), '\n')
			skipDeeper, n = indent, n+1
		}
		out = append(out, line...)
	}
	return out, n
}

// secretField is the offset in line just after the ":" of the first
// secret field's key, -1 when it has none.
func secretField(line []byte) int {
	for _, k := range kubeconfigSecrets {
		for from := 0; ; {
			i := bytes.Index(line[from:], []byte(k))
			if i < 0 {
				break
			}
			i += from
			from = i + len(k)
			if i > 0 && isKeyByte(line[i-1]) {
				continue // part of a longer key
			}
			rest := bytes.TrimLeft(line[from:], `"' `)
			if bytes.HasPrefix(rest, []byte(":")) {
				return len(line) - len(rest) + 1
			}
		}
	}
	return -1
}

func isKeyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}
