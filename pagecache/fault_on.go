//go:build s4dfault

package pagecache

import (
	"os"
	"path/filepath"
	"strconv"
)

// Test builds damage pages on demand (build tag s4dfault): a file named
// "corrupt-<key>" in $S4D_FAULT_DIR flips a bit of that key's stored
// bytes once a PUT has written them, as a memory fault would, so that
// every read path's checksum check can be exercised end to end.
func faultCorrupt(keys []uint64, objs [][]byte, res []Result) {
	dir := os.Getenv("S4D_FAULT_DIR")
	if dir == "" {
		return
	}
	for i, key := range keys {
		if res[i] != OK || len(objs[i]) <= checksumSize {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "corrupt-"+strconv.FormatUint(key, 10))); err == nil {
			objs[i][checksumSize+(len(objs[i])-checksumSize)/2] ^= 0x10
		}
	}
}
