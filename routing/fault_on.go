//go:build s4dfault

package routing

import (
	"errors"
	"os"
	"path/filepath"
)

// Test builds fail on demand (build tag s4dfault): a file named
// "backend-<name>" in $S4D_FAULT_DIR makes that backend fail every batch
// after it has written its output, as a device lost mid-batch would.
func faultBackend(name string) error {
	dir := os.Getenv("S4D_FAULT_DIR")
	if dir == "" {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, "backend-"+name)); err == nil {
		return errors.New("device lost (injected)")
	}
	return nil
}
