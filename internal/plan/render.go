package plan

import (
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kind-entrypoint/entrypoint/internal/logline"
)

// maxShown is the longest file content a rendered action shows in full.
const maxShown = 200

// String renders the action as one line, the form --dry-run prints: its
// paths and texts come from the host, so the line is escaped
// (logline.Escape).
func (a Action) String() string {
	var b strings.Builder
	x := a.Extras()
	b.WriteString(string(a.Op))
	switch a.Op {
	case OpLog:
		fmt.Fprintf(&b, " %s: %s", a.Level, a.Data)
	case OpWrite, OpWriteInPlace:
		c := content(a.Data, x.Whole && a.Op == OpWrite)
		switch {
		case x.Secret:
			// Its size only: a short secret is guessed from a hash.
			c = fmt.Sprintf("(%d bytes, a secret: not shown)", len(a.Data))
		case x.Masked != nil:
			c = content(x.Masked, false) + " (secrets masked)"
		}
		if a.Op == OpWrite {
			fmt.Fprintf(&b, " %s %s %s", a.Path, octal(a.Mode), c)
		} else {
			fmt.Fprintf(&b, " %s %s", a.Path, c)
		}
	case OpMkdir, OpChmod:
		fmt.Fprintf(&b, " %s %s", a.Path, octal(a.Mode))
	case OpRemove, OpUnmount:
		fmt.Fprintf(&b, " %s", a.Path)
	case OpSymlink:
		fmt.Fprintf(&b, " %s -> %s", a.Path, a.Source)
	case OpChown:
		fmt.Fprintf(&b, " %s %d:%d", a.Path, a.UID, a.GID)
	case OpMount:
		fmt.Fprintf(&b, " %s on %s", cmp.Or(a.Source, "none"), a.Path)
		if a.FSType != "" {
			fmt.Fprintf(&b, " type %s", a.FSType)
		}
		fmt.Fprintf(&b, " (%s)", a.Flags)
		if len(a.Data) > 0 {
			fmt.Fprintf(&b, " data %q", a.Data)
		}
	case OpRun:
		for _, arg := range x.Argv {
			b.WriteByte(' ')
			b.WriteString(shellQuote(arg))
		}
		if x.Stdin != nil {
			fmt.Fprintf(&b, " < %s", content(x.Stdin, x.Whole))
		}
		if x.DropStdout {
			b.WriteString(" >/dev/null")
		}
		fmt.Fprintf(&b, " (timeout %s)", x.Timeout)
		if len(x.Creates) > 0 {
			fmt.Fprintf(&b, " (must write %s)", strings.Join(x.Creates, ", "))
		}
	}
	if a.Op != OpLog && a.OnFail != Fatal {
		fmt.Fprintf(&b, " [on failure: %s", a.OnFail)
		if a.FailMsg != "" {
			fmt.Fprintf(&b, " %q", a.FailMsg)
		}
		b.WriteString("]")
	}
	if len(x.Rollback) > 0 {
		fmt.Fprintf(&b, " [rollback: %s]", strings.Join(Strings(x.Rollback), "; "))
	}
	if a.EveryBoot {
		b.WriteString(" [every boot]")
	}
	if a.Reason != "" {
		b.WriteString("  # " + a.Reason)
	}
	return logline.Escape(b.String())
}

// octal prints a mode as chmod would take it, special bits included.
func octal(m fs.FileMode) string { return fmt.Sprintf("%04o", UnixMode(m)) }

// UnixMode is m's permission bits and its setuid, setgid and sticky bits
// as chmod(2) and tar headers hold them.
func UnixMode(m fs.FileMode) uint32 {
	v := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		v |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		v |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		v |= 0o1000
	}
	return v
}

// content is data quoted, in full when whole or short, else its size and
// a hash.
func content(data []byte, whole bool) string {
	if whole || len(data) <= maxShown {
		return strconv.Quote(string(data))
	}
	sum := sha256.Sum256(data)
	return fmt.Sprintf("(%d bytes, sha256 %x)", len(data), sum[:6])
}

// shellQuote makes an argument readable in a one-line rendering; it is
// never given to a shell.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '-' || r == '_' || r == '.' || r == '/' || r == ':' || r == '=' || r == ',' || r == '+' ||
			(r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'))
	}) < 0 {
		return s
	}
	return strconv.Quote(s)
}

// jsonAction is the --log-format=json / --dry-run JSON form of an Action.
type jsonAction struct {
	Op     Op     `json:"op"`
	Path   string `json:"path,omitempty"`
	Source string `json:"source,omitempty"`
	FSType string `json:"fstype,omitempty"`
	Flags  string `json:"flags,omitempty"`
	Data   string `json:"data,omitempty"`
	// DataBase64 is Data when it is not UTF-8: JSON strings cannot
	// hold those bytes (they become U+FFFD), and the plan must say
	// which bytes are written.
	DataBase64 string `json:"data_base64,omitempty"`
	// Secret: Data is left out, a secret (Extra.Secret); DataBytes is
	// its size.
	Secret bool `json:"secret,omitempty"`
	// Masked: Data is the content with its secrets masked
	// (Extra.Masked), DataBytes the size of what is written.
	Masked    bool     `json:"masked,omitempty"`
	DataBytes int      `json:"data_bytes,omitempty"`
	Mode      string   `json:"mode,omitempty"`
	Owner     string   `json:"owner,omitempty"`
	Argv      []string `json:"argv,omitempty"`
	Stdin     string   `json:"stdin,omitempty"`
	// StdinBase64 is Stdin when it is not UTF-8.
	StdinBase64 string `json:"stdin_base64,omitempty"`
	TimeoutMS   int64  `json:"timeout_ms,omitempty"`
	// DropStdout: the run's standard output is not logged.
	DropStdout bool     `json:"drop_stdout,omitempty"`
	Creates    []string `json:"creates,omitempty"`
	Level      string   `json:"level,omitempty"`
	Reason     string   `json:"reason,omitempty"`
	OnFail     string   `json:"on_fail,omitempty"`
	FailMsg    string   `json:"fail_msg,omitempty"`
	Rollback   []Action `json:"rollback,omitempty"`
}

// MarshalJSON renders the action with flags and modes by name.
func (a Action) MarshalJSON() ([]byte, error) {
	x := a.Extras()
	j := jsonAction{
		Op: a.Op, Path: a.Path, Source: a.Source, FSType: a.FSType,
		Data: string(a.Data), Argv: x.Argv, Stdin: string(x.Stdin),
		TimeoutMS: x.Timeout.Milliseconds(), DropStdout: x.DropStdout, Creates: x.Creates, Level: string(a.Level), Reason: a.Reason, FailMsg: a.FailMsg,
		Rollback: x.Rollback,
	}
	switch {
	case x.Secret:
		j.Data, j.Secret, j.DataBytes = "", true, len(a.Data)
	case x.Masked != nil:
		j.Data, j.Masked, j.DataBytes = string(x.Masked), true, len(a.Data)
		if !utf8.Valid(x.Masked) {
			j.Data, j.DataBase64 = "", base64.StdEncoding.EncodeToString(x.Masked)
		}
	case !utf8.Valid(a.Data):
		j.Data, j.DataBase64 = "", base64.StdEncoding.EncodeToString(a.Data)
	}
	if !utf8.Valid(x.Stdin) {
		j.Stdin, j.StdinBase64 = "", base64.StdEncoding.EncodeToString(x.Stdin)
	}
	if a.Op == OpMount {
		j.Flags = a.Flags.String()
	}
	if a.Op == OpWrite || a.Op == OpMkdir || a.Op == OpChmod {
		j.Mode = octal(a.Mode)
	}
	if a.Op == OpChown {
		j.Owner = fmt.Sprintf("%d:%d", a.UID, a.GID)
	}
	if a.Op != OpLog {
		j.OnFail = a.OnFail.String()
	}
	return json.Marshal(j)
}

// Strings is each action's one-line form (Action.String), in order: what
// tests compare a plan with.
func Strings(actions []Action) []string {
	var out []string
	for _, a := range actions {
		out = append(out, a.String())
	}
	return out
}
