//go:build s4dfault

package swapdev

import (
	"os"
	"path/filepath"
	"syscall"
)

// Test builds die on demand: a file named "swap-takeover" in
// $S4D_FAULT_DIR kills the daemon (SIGKILL, as a crash would) right after
// its first device of the last run serves again, before the records are
// rewritten: the window the records' not-clean mark closes.
func faultSwapTakeover() {
	dir := os.Getenv("S4D_FAULT_DIR")
	if dir == "" {
		return
	}
	if _, err := os.Stat(filepath.Join(dir, "swap-takeover")); err == nil {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
}
