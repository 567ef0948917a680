package bootlog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The testdata files are real: `docker logs -t` and `docker inspect -f
// {{.State.StartedAt}}` of nodes of the e2e image (our binary, the
// reference script, /sbin/init directly), cut after 30 lines, and
// `strace -D -f -qq -e trace=execve,execveat,clone,clone3,fork,vfork` of
// both entrypoints, cut after init's execve.

func readLogs(t *testing.T, name string) ([]Line, time.Time) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	lines, err := ParseDockerLogs(string(b))
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.ReadFile(filepath.Join("testdata", name+".startedat"))
	if err != nil {
		t.Fatal(err)
	}
	started, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(s)))
	if err != nil {
		t.Fatal(err)
	}
	return lines, started
}

func at(t *testing.T, stamp string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, stamp)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestReadBoot(t *testing.T) {
	const banner = "systemd 252.39-1~deb12u2 running in system mode (+PAM +AUDIT +SELINUX +APPARMOR +IMA +SMACK +SECCOMP +GCRYPT -GNUTLS +OPENSSL +ACL +BLKID +CURL +ELFUTILS +FIDO2 +IDN2 -IDN +IPTC +KMOD +LIBCRYPTSETUP +LIBFDISK +PCRE2 -PWQUALITY +P11KIT +QRENCODE +TPM2 +BZIP2 +LZ4 +XZ +ZLIB +ZSTD -BPF_FRAMEWORK -XKBCOMMON +UTMP +SYSVINIT default-hierarchy=unified)"
	for _, tc := range []struct {
		name          string
		viaEntrypoint bool
		want          Boot
	}{
		{"docker-logs-entrypoint-tty", true, Boot{
			StartingInit:  at(t, "2026-11-29T23:58:31.158707182Z"),
			FirstInit:     at(t, "2026-11-29T23:58:31.273187286Z"),
			FirstInitText: banner,
			PreInit:       33 * time.Millisecond,
			KindReady:     at(t, "2026-11-29T23:58:31.132168038Z"),
		}},
		{"docker-logs-entrypoint-no-tty", true, Boot{
			StartingInit: at(t, "2026-11-29T23:58:36.993976386Z"),
			PreInit:      30 * time.Millisecond,
			KindReady:    at(t, "2026-11-29T23:58:36.967508268Z"),
		}},
		{"docker-logs-reference-tty", true, Boot{
			StartingInit:  at(t, "2026-11-29T23:58:43.020397895Z"),
			FirstInit:     at(t, "2026-11-29T23:58:43.034737904Z"),
			FirstInitText: banner,
			PreInit:       -1,
			KindReady:     at(t, "2026-11-29T23:58:42.795613388Z"),
		}},
		{"docker-logs-init-only-tty", false, Boot{
			FirstInit:     at(t, "2026-11-29T23:58:49.250135589Z"),
			FirstInitText: banner,
			PreInit:       -1,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines, _ := readLogs(t, tc.name)
			got := ReadBoot(lines, tc.viaEntrypoint)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ReadBoot (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReadBootLost: systemd's tcflush took the entrypoint's last lines
// (made by cutting them from a real log): init's first line is systemd's
// banner, found by its text.
func TestReadBootLost(t *testing.T) {
	lines, _ := readLogs(t, "docker-logs-entrypoint-tty")
	var cut []Line
	for _, l := range lines {
		if l.Text == StartingInit || strings.HasPrefix(l.Text, "INFO: pre-init") || strings.HasPrefix(l.Text, "INFO: detected cgroup") {
			continue
		}
		cut = append(cut, l)
	}
	got := ReadBoot(cut, true, "INFO: detected cgroup v1")
	if !got.Fallback || got.FirstInit != at(t, "2026-11-29T23:58:31.273187286Z") || !got.StartingInit.IsZero() || got.PreInit != -1 {
		t.Errorf("ReadBoot = %+v, want init's first line found by systemd's banner", got)
	}
	if want := []string{StartingInit, "INFO: detected cgroup v1"}; !cmp.Equal(got.Lost, want) {
		t.Errorf("Lost = %q, want %q", got.Lost, want)
	}
	if !got.KindReady.IsZero() {
		t.Errorf("KindReady = %v, want none", got.KindReady)
	}
}

func TestStepDurations(t *testing.T) {
	lines, err := ParseDockerLogs(`2026-11-29T23:45:16.534417390Z {"time":"2026-11-29T23:45:16.532806853Z","level":"INFO","step":"validate_userns","msg":"step finished"}
2026-11-29T23:45:16.534433294Z {"time":"2026-11-29T23:45:16.533006971Z","level":"INFO","step":"configure_containerd","msg":"step finished","duration_ms":0.075}
2026-11-29T23:45:16.535054421Z {"time":"2026-11-29T23:45:16.534994678Z","level":"INFO","step":"fix_mount","msg":"ensuring we can execute mount/umount even with userns-remap"}
2026-11-29T23:45:16.538690547Z {"time":"2026-11-29T23:45:16.536632211Z","level":"INFO","step":"fix_mount","msg":"step finished","duration_ms":1.928}
2026-11-29T23:45:16.567667553Z {"time":"2026-11-29T23:45:16.567532513Z","level":"INFO","msg":"pre-init finished in 34 ms"}
2026-11-29T23:45:16.568667553Z systemd 252.39-1~deb12u2 running in system mode
`)
	if err != nil {
		t.Fatal(err)
	}
	want := []Step{{"validate_userns", 0}, {"configure_containerd", 75 * time.Microsecond}, {"fix_mount", 1928 * time.Microsecond}}
	if diff := cmp.Diff(want, StepDurations(lines)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestParseDockerLogs(t *testing.T) {
	got, err := ParseDockerLogs("2026-11-29T23:58:31.125985172Z INFO: a\r\n2026-11-29T23:58:31.2Z \r\n2026-11-29T23:58:31.3Z\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []Line{
		{at(t, "2026-11-29T23:58:31.125985172Z"), "INFO: a"},
		{at(t, "2026-11-29T23:58:31.2Z"), ""},
		{at(t, "2026-11-29T23:58:31.3Z"), ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := ParseDockerLogs("INFO: no timestamp\n"); err == nil {
		t.Error("a line without a timestamp parsed")
	}
}

func TestCountPrograms(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	got, err := CountPrograms(read("strace-entrypoint.log"), "/sbin/init")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/usr/sbin/iptables-nft-save", "/usr/sbin/ip6tables-legacy-save",
		"/usr/sbin/ip6tables-nft-save", "/usr/sbin/iptables-legacy-save",
		"/usr/bin/update-alternatives", "/usr/bin/update-alternatives",
		"/usr/sbin/iptables-nft-restore",
	}
	if diff := cmp.Diff(want, got.Execs); diff != "" {
		t.Errorf("entrypoint programs (-want +got):\n%s", diff)
	}
	// One more process than programs: Go's os package probes for pidfd
	// support with a child that exits at once (clone without SIGCHLD).
	if got.Processes != 8 {
		t.Errorf("entrypoint processes = %d, want 8", got.Processes)
	}
	if !strings.Contains(got.Init, `execve("/sbin/init"`) {
		t.Errorf("Init = %q", got.Init)
	}

	ref, err := CountPrograms(read("strace-reference.log"), "/sbin/init")
	if err != nil {
		t.Fatal(err)
	}
	// Failed execve (a shell's PATH search: /usr/local/sbin/sh ENOENT)
	// start nothing and are not counted.
	if len(ref.Execs) != 94 || ref.Processes != 114 {
		t.Errorf("reference: %d programs, %d processes; want 94, 114", len(ref.Execs), ref.Processes)
	}

	if _, err := CountPrograms(read("strace-entrypoint.log"), "/sbin/other-init"); err == nil {
		t.Error("no error for a log without init's execve")
	}
}

func TestMedianMax(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	for _, tc := range []struct {
		in       []time.Duration
		med, max time.Duration
	}{
		{nil, 0, 0},
		{ms(5), 5 * time.Millisecond, 5 * time.Millisecond},
		{ms(9, 1, 5), 5 * time.Millisecond, 9 * time.Millisecond},
		{ms(4, 1, 2, 8), 3 * time.Millisecond, 8 * time.Millisecond},
	} {
		if got := Median(tc.in); got != tc.med {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.med)
		}
		if got := Max(tc.in); got != tc.max {
			t.Errorf("Max(%v) = %v, want %v", tc.in, got, tc.max)
		}
	}
	// The RSS samples (KiB) of BenchmarkPeakRSS.
	if got := Median([]float64{4096, 1024, 2048, 8192}); got != 3072 {
		t.Errorf("Median of KiB = %v, want 3072", got)
	}
	if got := Ms(1234567 * time.Nanosecond); got != 1.2 {
		t.Errorf("Ms = %v, want 1.2", got)
	}
}
