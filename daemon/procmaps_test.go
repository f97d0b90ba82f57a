package daemon

import (
	"bufio"
	"fmt"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapsAny reports whether process pid ("self" for this one) maps any of
// [addr, addr+n), from its /proc maps.
func mapsAny(pid string, addr, n uint64) bool {
	f, err := os.Open("/proc/" + pid + "/maps")
	if err != nil {
		return true // unknown: the caller takes another address
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var lo, hi uint64
		if _, err := fmt.Sscanf(sc.Text(), "%x-%x", &lo, &hi); err == nil && lo < addr+n && addr < hi {
			return true
		}
	}
	return false
}

// unmappedHere returns an address at which this process maps nothing
// (for n bytes): a mapping made and removed at once.
func unmappedHere(t *testing.T, n int) uint64 {
	t.Helper()
	m, err := unix.Mmap(-1, 0, n, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	a := uint64(uintptr(unsafe.Pointer(&m[0])))
	if err := unix.Munmap(m); err != nil {
		t.Fatal(err)
	}
	return a
}
