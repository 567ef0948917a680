package containerd

// This file holds what of config.toml may be shown. The config can hold
// registry credentials ([plugins."io.containerd.grpc.v1.cri".registry.
// configs."HOST".auth] password, identitytoken; registry headers), so no
// error quotes its bytes (contentFree: the line and column say where) and
// what the dry run and capture show of it has those values masked
// (Redact).

import (
	"bytes"
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// Redacted is what a credential's value becomes: a TOML string, so that
// the masked config still parses and plans the same way.
const Redacted = `"(redacted)"`

// isCredentialKey reports whether a key part names a credential, whose
// value, and everything under it, is masked: containerd's registry
// auth (auth, username, password, identitytoken) and headers (an
// Authorization header), and any key that says password, token, secret
// or credential. The username is masked too: with the registry's name
// it is half a credential, and no plan needs it.
func isCredentialKey(k string) bool {
	k = strings.ToLower(k)
	return slices.Contains(credentialKeys, k) || slices.ContainsFunc(credentialWords, func(w string) bool {
		return strings.Contains(k, w)
	})
}

var (
	credentialKeys  = []string{"auth", "username", "headers"}
	credentialWords = []string{"password", "token", "secret", "credential"}
)

// MayHoldCredential reports whether text holds a credential's key or
// what names one: a value whose parts Redact cannot place (an array, a
// number) is masked whole when it does, and capture archives a config
// that does not parse only when it does not.
func MayHoldCredential(text []byte) bool {
	l := bytes.ToLower(text)
	for _, w := range slices.Concat(credentialKeys, credentialWords) {
		if bytes.Contains(l, []byte(w)) {
			return true
		}
	}
	return false
}

// Redact is config with the value of every credential key (isCredentialKey,
// in a header, a dotted key or an inline table) replaced by Redacted,
// and n the number of values masked. A value it cannot see into (an
// array, or an inline table's array) that mentions a credential is masked
// whole. A config that does not parse is an error: where its credentials
// are cannot be told.
func Redact(config []byte) (redacted []byte, n int, err error) {
	if len(config) > maxConfigSize {
		return nil, 0, fmt.Errorf("config is %d bytes, more than the %d this tool accepts", len(config), maxConfigSize)
	}
	config = config[:len(config):len(config)]
	sc, err := scanDocument(config)
	if err != nil {
		return nil, 0, err
	}
	var masks []splice
	// Whether a section's header names a credential, asked once per
	// section, not once per key under it: a header of thousands of
	// parts over thousands of keys would cost their product.
	credSection := make([]bool, len(sc.sections))
	for i, s := range sc.sections {
		credSection[i] = slices.ContainsFunc(s.path, isCredentialKey)
	}
	for i := range sc.kvs {
		kv := &sc.kvs[i]
		whole := splice{kv.valueAt, kv.end, Redacted}
		switch {
		case credSection[kv.section] || slices.ContainsFunc(kv.key, isCredentialKey):
			masks = append(masks, whole)
		case kv.value.kind == unstable.InlineTable:
			if inner, ok := redactInline(kv.value, false, MayHoldCredential(config[kv.valueAt:kv.end]), nil); ok {
				masks = append(masks, inner...)
			} else {
				masks = append(masks, whole)
			}
		case kv.value.kind == unstable.Invalid && MayHoldCredential(config[kv.valueAt:kv.end]):
			masks = append(masks, whole)
		}
	}
	comments, err := commentMasks(config)
	if err != nil {
		return nil, 0, err
	}
	if len(comments) > 0 {
		masks = disjoint(append(masks, comments...))
	}
	return applySplices(config, masks), len(masks), nil
}

// disjoint sorts masks by where they start and drops each that starts
// inside one before it: a comment within a value masked whole.
func disjoint(masks []splice) []splice {
	slices.SortFunc(masks, func(a, b splice) int { return cmp.Or(a.start-b.start, b.end-a.end) })
	kept := masks[:0]
	for _, m := range masks {
		if len(kept) == 0 || m.start >= kept[len(kept)-1].end {
			kept = append(kept, m)
		}
	}
	return kept
}

// RedactedComment is what a comment that names a credential becomes.
const RedactedComment = "# (redacted)"

// commentMasks are the masks of config's comments that name a
// credential (MayHoldCredential: a commented-out password line), each
// replaced whole by RedactedComment. config has parsed already; a
// second pass keeps the comments, which the scan drops, wherever they
// stand: on a line of their own, after a value, inside an array or an
// inline table.
func commentMasks(config []byte) ([]splice, error) {
	p := unstable.Parser{KeepComments: true}
	p.Reset(config)
	var masks []splice
	var walk func(n *unstable.Node)
	walk = func(n *unstable.Node) {
		for ; n.Valid(); n = n.Next() {
			if n.Kind == unstable.Comment && MayHoldCredential(n.Data) {
				masks = append(masks, splice{int(n.Raw.Offset), int(n.Raw.Offset + n.Raw.Length), RedactedComment})
			}
			walk(n.Child())
		}
	}
	for p.NextExpression() {
		walk(p.Expression())
	}
	if err := p.Error(); err != nil {
		return nil, fmt.Errorf("%s", contentFree(err.Error()))
	}
	return masks, nil
}

// redactInline appends the masks of an inline table's credentials to
// masks (under: the table is a credential's). ok is false when one cannot
// be placed, a credential's array or number, or any array or number
// when the table's text (suspect) mentions a credential: the caller
// masks the table whole.
func redactInline(v valueRef, under, suspect bool, masks []splice) ([]splice, bool) {
	for _, it := range v.items {
		cred := under || slices.ContainsFunc(it.key, isCredentialKey)
		switch {
		case it.value.kind == unstable.InlineTable:
			var ok bool
			if masks, ok = redactInline(it.value, cred, suspect, masks); !ok {
				return nil, false
			}
		case it.value.kind == unstable.Invalid:
			if cred || suspect {
				return nil, false
			}
		case cred:
			r := it.value.raw
			masks = append(masks, splice{int(r.Offset), int(r.Offset + r.Length), Redacted})
		}
	}
	return masks, true
}

// unquotedChar is how go-toml's messages quote a character of the input
// (%#U: "U+0073 's'").
var unquotedChar = regexp.MustCompile(`U\+[0-9A-F]{4,6}( '(?s:.)')?`)

// namedKey is go-toml's messages that name a key or table of the input.
var namedKey = regexp.MustCompile(`^(key|table) .*? ((?:is )?already (?:defined|exists).*)$`)

// contentFree is a parser's message about config.toml without the
// input it quotes: a character (%#U), a key's or table's name, the text
// of a number strconv refused. Where it is wrong is in the line and
// column beside it.
func contentFree(msg string) string {
	msg = unquotedChar.ReplaceAllString(msg, "(a character, not quoted)")
	msg = namedKey.ReplaceAllString(msg, "$1 (named at this position) $2")
	if i := strings.Index(msg, "unable to parse float:"); i >= 0 {
		msg = msg[:i] + "unable to parse float (out of range)"
	}
	return msg
}
