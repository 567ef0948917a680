package logline

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// TTYSettle is how long the last line must have been out before init may
// start, when the log goes to a terminal.
//
// With `docker run --tty` (as kind runs nodes) stderr is a pty, and systemd,
// first thing as PID 1, resets /dev/console with tcflush(TCIOFLUSH): what the
// container runtime has not read from the pty yet is dropped, and with it
// possibly "INFO: detected cgroup v1", the line kind's CLI waits for. The
// reference script was ~200 ms slow enough never to notice; we are not.
// A pty tells its slave side nothing about what its master has read
// (TIOCOUTQ is always 0), so the only remedy is time: seen lost twice in
// eight parallel e2e runs with no wait, never with this one.
const TTYSettle = 100 * time.Millisecond

// Settle waits, when the log goes to a terminal, until TTYSettle has passed
// since the last line was written. It returns how long it waited.
func (l *Logger) Settle() time.Duration {
	if l == nil || l.out == nil {
		return 0
	}
	f, ok := l.out.w.(*os.File)
	if !ok {
		return 0
	}
	if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err != nil {
		return 0
	}
	l.out.mu.Lock()
	last := l.out.last
	l.out.mu.Unlock()
	wait := TTYSettle - time.Since(last)
	if wait <= 0 {
		return 0
	}
	time.Sleep(wait)
	return wait
}
