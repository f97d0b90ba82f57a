package slab

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// resident counts the pages of b in memory.
func resident(t *testing.T, b []byte) int {
	t.Helper()
	vec := make([]byte, (len(b)+os.Getpagesize()-1)/os.Getpagesize())
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		t.Fatal(errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// Slab memory is in memory only once written, goes back to the kernel when
// let go, and is handed out again, zeroed, before a new region is mapped.
func TestSlabMemGivesPagesBack(t *testing.T) {
	m := slabMem{slabSize: 64 << 10, maps: &regions{}}
	defer m.maps.unmap()
	var slabs [][]byte
	for range regionSlabs + 1 {
		s, err := m.get()
		if err != nil {
			t.Fatal(err)
		}
		slabs = append(slabs, s)
	}
	if len(m.maps.all) != 2 {
		t.Fatalf("%d regions for %d slabs", len(m.maps.all), regionSlabs+1)
	}
	s := slabs[3]
	if resident(t, s) != 0 {
		t.Fatal("an unwritten slab is resident")
	}
	for i := range s {
		s[i] = 0xA5
	}
	if r := resident(t, s); r != len(s)/os.Getpagesize() {
		t.Fatalf("%d pages resident after writing the slab", r)
	}
	giveBack([][]byte{slabs[5], s, slabs[4]}) // 3, 4, 5: one run
	m.reuse([][]byte{s})
	if resident(t, s) != 0 {
		t.Fatal("a slab let go is still resident")
	}
	again, err := m.get()
	if err != nil || &again[0] != &s[0] {
		t.Fatal("the slab let go was not handed out first")
	}
	for _, b := range again {
		if b != 0 {
			t.Fatal("a reused slab kept its old bytes")
		}
	}
}

// The store's sweeps give emptied slabs' pages back to the kernel.
func TestSweepGivesPagesBack(t *testing.T) {
	a := New(4096, 0)
	defer a.mem.maps.unmap()
	var hs []Handle
	for range 500 {
		h, b, err := a.Alloc(1000)
		if err != nil {
			t.Fatal(err)
		}
		b[0] = 1
		hs = append(hs, h)
	}
	mem := a.slabs[0].buf
	if resident(t, mem) == 0 {
		t.Fatal("a written slab is not resident")
	}
	for _, h := range hs {
		a.Free(h)
	}
	var mu sync.Mutex // the store's lock
	if a.Sweep(&mu) != 0 || resident(t, mem) == 0 {
		t.Fatal("kept memory went back before two sweeps")
	}
	if n := a.Sweep(&mu); n == 0 || n%uint64(a.slabSize) != 0 {
		t.Fatalf("the second sweep let go of %d bytes", n)
	}
	if r := resident(t, mem); r != 0 {
		t.Fatalf("%d pages of an emptied slab resident after two sweeps", r)
	}
	if len(a.mem.free) == 0 {
		t.Fatal("memory given back is not filed for reuse")
	}
}

// vmLocked is the process's locked memory (VmLck), in bytes.
func vmLocked(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmLck:" {
			kib, _ := strconv.ParseUint(f[1], 10, 64)
			return kib << 10
		}
	}
	t.Fatal("no VmLck in /proc/self/status")
	return 0
}

// A daemon serving swap locks its memory, and the kernel will not drop
// locked pages: emptied slabs must be unlocked to go back, and locked
// again before a swap-out writes into them (a write must never fault).
func TestSweepGivesLockedPagesBack(t *testing.T) {
	a := New(4096, 0)
	defer a.mem.maps.unmap()
	const n = 32 << 20
	r, err := MapReserve(n, a.SlabSize())
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Mlock(r); err != nil {
		t.Skipf("cannot lock %d bytes here: %v", n, err)
	}
	var mu sync.Mutex
	base := vmLocked(t)
	a.AddReserve(r)
	a.MapOnlyReserve(true)
	var hs []Handle
	for {
		h, b, err := a.Alloc(3000)
		if err == ErrNoSpare {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b[0] = 1
		hs = append(hs, h)
	}
	for _, h := range hs {
		a.Free(h)
	}
	a.Sweep(&mu)
	if got := a.Sweep(&mu); got < n/2 {
		t.Fatalf("two sweeps gave back %d bytes of %d emptied", got, n)
	}
	if after := vmLocked(t); base-after < n/2 || resident(t, r) > len(r)/os.Getpagesize()/2 {
		t.Fatalf("locked %d -> %d bytes, %d pages resident: the emptied slabs stayed", base, after, resident(t, r))
	}
	if a.Spare() != 0 {
		t.Fatalf("memory given back still counts as spare: %d", a.Spare())
	}
	if _, _, err := a.Alloc(3000); err != ErrNoSpare {
		t.Fatalf("an arena that may not map took unlocked memory: %v", err)
	}
	got := a.Rearm(&mu, n)
	if got < n/2 || vmLocked(t) < base-n/8 || a.Spare() != got {
		t.Fatalf("Rearm filed %d bytes, locked %d (was %d), spare %d", got, vmLocked(t), base, a.Spare())
	}
	if _, _, err := a.Alloc(3000); err != nil {
		t.Fatalf("after Rearm: %v", err)
	}
}

// MapReserve hands memory back present (a swap-out written into it must
// not fault) and locked where the process may lock, though it never
// populates under the kernel's mmap lock (touch.go).
func TestMapReservePresentAndLocked(t *testing.T) {
	const n = 8 << 20
	base := vmLocked(t)
	r, err := MapReserve(n, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(r)
	if got, want := resident(t, r), len(r)/os.Getpagesize(); got != want {
		t.Fatalf("%d of %d pages resident", got, want)
	}
	if err := lockOnFault(r); err != nil {
		t.Skipf("this process may not lock memory: %v", err)
	}
	if got := vmLocked(t) - base; got < n {
		t.Fatalf("%d bytes locked, want %d", got, n)
	}
}
