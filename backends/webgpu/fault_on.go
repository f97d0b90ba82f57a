//go:build s4dfault

package webgpu

import (
	"errors"
	"os"
	"path/filepath"
)

// faultLost fails the Vulkan runtime's kernel waits while a file named
// "vulkan-lost" is in $S4D_FAULT_DIR (test builds, tag s4dfault): the
// engine meets a device lost mid-batch, after the kernel wrote its output,
// with other batches in flight.
func faultLost() error {
	dir := os.Getenv("S4D_FAULT_DIR")
	if dir == "" {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, "vulkan-lost")); err == nil {
		return errors.New("vulkan: device lost (injected)")
	}
	return nil
}
