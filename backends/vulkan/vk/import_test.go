package vk

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestImportKinds tries the shapes of host memory the daemon can offer
// for import and logs which the driver takes (S4D_VULKAN_IMPORT_PROBE=1;
// issue 41: NVIDIA refused a PUT's read-only memfd mapping, and also a
// writable second mapping of it). It fails only if the shape the spike
// measured, a memfd written through a writable shared mapping, is
// refused.
func TestImportKinds(t *testing.T) {
	if os.Getenv("S4D_VULKAN_IMPORT_PROBE") != "1" {
		t.Skip("a probe: S4D_VULKAN_IMPORT_PROBE=1 runs it")
	}
	const n = 1 << 20
	memfd := func(fill bool) int {
		fd, err := unix.MemfdCreate("s4d-probe", unix.MFD_ALLOW_SEALING)
		if err != nil {
			t.Fatal(err)
		}
		unix.Ftruncate(fd, n)
		if fill {
			unix.Pwrite(fd, make([]byte, n), 0)
		}
		unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL)
		return fd
	}
	mapf := func(fd, prot int) []byte {
		m, err := unix.Mmap(fd, 0, n, prot, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	alias := func(m []byte, populate bool) []byte {
		a, err := unix.MremapPtr(unsafe.Pointer(&m[0]), 0, nil, n, unix.MREMAP_MAYMOVE)
		if err != nil {
			t.Fatal(err)
		}
		am := unsafe.Slice((*byte)(a), n)
		if err := unix.Mprotect(am, unix.PROT_READ|unix.PROT_WRITE); err != nil {
			t.Fatal(err)
		}
		if populate {
			unix.Madvise(am, unix.MADV_POPULATE_WRITE)
		}
		return am
	}
	rw, ro := unix.PROT_READ|unix.PROT_WRITE, unix.PROT_READ
	kinds := []struct {
		name string
		mem  func() []byte
	}{
		{"memfd rw, written through the mapping (the spike's)", func() []byte { m := mapf(memfd(false), rw); clear(m); return m }},
		{"memfd rw, filled by pwrite, untouched", func() []byte { return mapf(memfd(true), rw) }},
		{"memfd rw, holes, untouched", func() []byte { return mapf(memfd(false), rw) }},
		{"memfd rw, populated for reading", func() []byte { m := mapf(memfd(true), rw); unix.Madvise(m, unix.MADV_POPULATE_READ); return m }},
		{"memfd rw, populated for writing", func() []byte { m := mapf(memfd(true), rw); unix.Madvise(m, unix.MADV_POPULATE_WRITE); return m }},
		{"memfd ro", func() []byte { return mapf(memfd(true), ro) }},
		{"memfd ro, mprotect rw, populated for writing", func() []byte {
			m := mapf(memfd(true), ro)
			unix.Mprotect(m, rw)
			unix.Madvise(m, unix.MADV_POPULATE_WRITE)
			return m
		}},
		{"memfd ro, writable alias", func() []byte { return alias(mapf(memfd(true), ro), false) }},
		{"memfd ro, writable alias populated for writing", func() []byte { return alias(mapf(memfd(true), ro), true) }},
		{"memfd rw, writable alias populated for writing", func() []byte { return alias(mapf(memfd(true), rw), true) }},
		{"anonymous private, untouched", func() []byte {
			m, _ := unix.Mmap(-1, 0, n, rw, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
			return m
		}},
		{"anonymous private, populated", func() []byte {
			m, _ := unix.Mmap(-1, 0, n, rw, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
			return m
		}},
	}
	// Each shape on a device of its own: on NVIDIA one refusal was seen
	// to make every later import of the device fail.
	for i, k := range kinds {
		d, err := Open(Options{Device: -1})
		if err != nil {
			t.Fatal(err)
		}
		b, err := d.Import(k.mem())
		var after error
		if err != nil {
			// And then the spike's shape, on the same device.
			var b2 *Buffer
			if b2, after = d.Import(kinds[0].mem()); after == nil {
				b2.Release()
			}
		}
		t.Logf("%-50s %v (the spike's shape after it: %v)", k.name, err, after)
		if err == nil {
			b.Release()
		} else if i == 0 {
			t.Errorf("the spike's shape refused: %v", err)
		}
		d.Close()
	}
}
