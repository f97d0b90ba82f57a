//go:build s4dfault

package daemon

import (
	"errors"
	"os"
	"path/filepath"
)

// Test builds fail on demand: a file named "selfcheck" in $S4D_FAULT_DIR
// makes the self-check fail, so the watchdog path can be exercised.
func faultSelfCheck() error {
	dir := os.Getenv("S4D_FAULT_DIR")
	if dir == "" {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, "selfcheck")); err == nil {
		return errors.New("self-check failure injected")
	}
	return nil
}
