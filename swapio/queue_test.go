package swapio

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// vmLck is this process's locked memory in KiB.
func vmLck(t *testing.T) int {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmLck:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	t.Fatal("no VmLck")
	return 0
}

// LockCode locks the path's code, the C library and liblz4 (some MiB, not
// the program whole), and UnlockCode gives it all back.
func TestLockCode(t *testing.T) {
	if err := Available(); err != nil {
		t.Skip(err)
	}
	before := vmLck(t)
	n, err := LockCode()
	if err != nil {
		UnlockCode()
		t.Skip("not locked here:", err)
	}
	locked := vmLck(t) - before
	UnlockCode()
	// n counts a page locked twice (a pin inside a locked mapping) twice.
	if locked < 64 || uint64(locked)*1024 > n || n > 32<<20 {
		t.Fatalf("LockCode said %d bytes, VmLck grew %d KiB", n, locked)
	}
	if after := vmLck(t); after != before {
		t.Fatalf("VmLck %d KiB after UnlockCode, %d before", after, before)
	}
}
