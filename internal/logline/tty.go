package logline

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// TTYSettle is the default of --tty-settle: how long the last line must
// have been out before init starts, when the log goes to a terminal.
//
// With `docker run --tty` (as kind runs nodes) stderr is a pty, and systemd,
// first thing as PID 1, resets /dev/console with tcflush(TCIOFLUSH). On a
// pty that discards what the kernel has not yet moved from the flip buffer
// to the reading side (pty_flush_buffer -> tty_buffer_flush), i.e. lines
// whose flush_to_ldisc work has not run. The slave side cannot see that
// (TIOCOUTQ is always 0), so the only remedy is time, and it buys little:
// 8 nodes booted at once, 5 rounds, 2 cores at load ~9, lost lines on
// 2/40 nodes with no wait, 2/40 with 2 ms and with 10 ms, 1/40 with 30 ms,
// 0/40 with 100 ms (at load ~2: 1/72 with no wait, 0/48 with 10 ms;
// bench/lost-lines.sh). Only ever the last lines ("pre-init finished",
// "starting init"); never the line kind waits for, nor one before it. The reference script has the
// same race (its echo is right before its exec). So by default there is
// no wait: 100 ms on every node start is too much for two INFO lines that
// nothing reads; --tty-settle=100ms buys them.
const TTYSettle time.Duration = 0

// Settle waits, when the log goes to a terminal, until d has passed since
// the last line was written (TTYSettle unless the user says otherwise). It
// returns how long it waited.
func (l *Logger) Settle(d time.Duration) time.Duration {
	if d <= 0 || l == nil || l.out == nil {
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
	wait := d - time.Since(last)
	if wait <= 0 {
		return 0
	}
	time.Sleep(wait)
	return wait
}
