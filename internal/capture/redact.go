package capture

import (
	"bytes"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// scrub removes private keys and URL credentials from an extra file (the
// rendered plan shows up to 200 bytes of a file written, quoted).
func (b *builder) scrub(data []byte) []byte {
	if !b.needsScrub(data) {
		// The plan of a host with 50k cpuset mounts is 160 MB of text,
		// which two copies made 320 MB more of capture's peak.
		return data
	}
	s := string(data)
	for _, k := range b.secrets() {
		s = strings.ReplaceAll(s, string(k), "(private key, not archived)")
	}
	return []byte(b.redact(s))
}

// needsScrub reports whether scrub would change data: it holds a private
// key read, a credential recorded, or a URL's userinfo.
func (b *builder) needsScrub(data []byte) bool {
	for _, s := range b.secrets() {
		if bytes.Contains(data, s) {
			return true
		}
	}
	return b.credentials.in(data) || bytes.Contains(data, []byte("://")) && bytes.Contains(data, []byte("@"))
}

// secrets are what needsScrub looks for besides URL userinfo and the
// credentials, and what scrub replaces, in order: each private key read,
// quoted and as it is. Made once, when the first extra file is scrubbed:
// every path is read by then, and a stream asks for them on every line.
func (b *builder) secrets() [][]byte {
	if b.secretForms != nil {
		return b.secretForms
	}
	b.secretForms = [][]byte{}
	for _, k := range b.keys {
		if len(k) == 0 {
			continue
		}
		quoted := strconv.Quote(string(k))
		b.secretForms = append(b.secretForms, []byte(quoted[1:len(quoted)-1]), k)
	}
	return b.secretForms
}

// scrubbed writes to w what render writes, scrubbed line by line: the
// same text as scrub of the whole, as no key form or credential the
// text can hold spans a line. (A value in a plan is escaped to one line;
// only a raw private key of several lines, which a plan never prints
// unquoted, would.) It holds one line at a time, never the text.
func (b *builder) scrubbed(w io.Writer, render func(io.Writer) error) error {
	s := &scrubber{b: b, w: w}
	if err := render(s); err != nil {
		return err
	}
	return s.flush()
}

// scrubber is the writer of scrubbed.
type scrubber struct {
	b    *builder
	w    io.Writer
	line []byte // the start of a line, not yet ended
}

func (s *scrubber) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.line = append(s.line, p...)
			break
		}
		unit := p[:i+1]
		if len(s.line) > 0 {
			s.line = append(s.line, unit...)
			unit = s.line
		}
		if err := s.emit(unit); err != nil {
			return 0, err
		}
		s.line = s.line[:0]
		p = p[i+1:]
	}
	return n, nil
}

// emit writes one line, scrubbed.
func (s *scrubber) emit(line []byte) error {
	_, err := s.w.Write(s.b.scrub(line))
	return err
}

// flush writes the last line when it has no newline.
func (s *scrubber) flush() error {
	if len(s.line) == 0 {
		return nil
	}
	return s.emit(s.line)
}

// addCredentials records the user and password of a proxy setting, for
// redact (see credentialSet.add); an error past maxCredentials.
func (b *builder) addCredentials(value string) error {
	u := proxyUserinfo(value)
	if u == "" {
		return nil
	}
	return b.credentials.add(u)
}

// redact replaces every recorded credential, where it stands before the
// "@" of its host, and whatever else looks like a URL's user and password.
func (b *builder) redact(s string) string {
	return RedactURLCredentials(b.credentials.redact(s))
}

// proxyUserinfo is the user and password of a proxy setting: "user:pass"
// of "http://user:pass@proxy:3128", and of "user:pass@proxy:3128", the
// form without a scheme that curl, Go and Docker take too; "" when there
// is none. The password may hold an unencoded '@', '/', quote or blank:
// the user part ends at the last '@' before the first '/' after an '@'.
func proxyUserinfo(v string) string {
	if i := strings.Index(v, "://"); i > 0 && urlScheme.MatchString(v[:i]) {
		v = v[i+len("://"):]
	}
	at := strings.IndexByte(v, '@')
	if at < 0 {
		return ""
	}
	end := len(v)
	if j := strings.IndexByte(v[at:], '/'); j >= 0 {
		end = at + j
	}
	return v[:strings.LastIndexByte(v[:end], '@')]
}

// IsPrivateKey reports whether a file is a private key: named *.key (as
// kubeadm names them under /etc/kubernetes/pki), or holding a PEM private
// key block.
func IsPrivateKey(p string, data []byte) bool {
	return strings.HasSuffix(p, ".key") || bytes.Contains(data, []byte("PRIVATE KEY-----"))
}

// urlScheme is a URL scheme (RFC 3986).
var urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)

// urlUserinfo is the userinfo of a URL: from "scheme://" to the last "@"
// before the host (a password may hold an unencoded "@" too).
var urlUserinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/\s"'@]*(?:@[^/\s"'@]*)*@`)

// RedactURLCredentials replaces the user and password of every URL in s:
// http://user:pass@host -> http://REDACTED@host.
func RedactURLCredentials(s string) string {
	// A match never spans a line (it holds no space): only the lines
	// with "://" and "@" go through the regexp, which made capturing a
	// host of 70k mounts spend seconds on its plan's text.
	if !strings.Contains(s, "://") || !strings.Contains(s, "@") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for line := range strings.Lines(s) {
		if strings.Contains(line, "://") && strings.Contains(line, "@") {
			line = urlUserinfo.ReplaceAllString(line, "${1}REDACTED@")
		}
		b.WriteString(line)
	}
	return b.String()
}
