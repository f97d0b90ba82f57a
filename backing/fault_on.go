//go:build s4dfault

package backing

import (
	"os"
	"path/filepath"
	"syscall"
)

// Test builds fail on demand: a file named "backing-read" or
// "backing-write" in $S4D_FAULT_DIR makes every such I/O fail with EIO.
func fault(op string) error {
	dir := os.Getenv("S4D_FAULT_DIR")
	if dir == "" {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, "backing-"+op)); err == nil {
		return syscall.EIO
	}
	return nil
}
