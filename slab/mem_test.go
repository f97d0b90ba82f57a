package slab

import (
	"os"
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

// Locked pages (a stop that keeps swap devices locks the daemon's memory)
// stay with the process: a sweep does not count them as given back, but
// files them for reuse all the same.
func TestSweepKeepsLockedPages(t *testing.T) {
	a := New(4096, 0)
	defer a.Unmap()
	h, b, err := a.Alloc(1000)
	if err != nil {
		t.Fatal(err)
	}
	b[0] = 1
	mem := a.slabs[h.Slab()].buf
	if err := unix.Mlock(mem); err != nil {
		t.Skipf("this process may not lock memory: %v", err)
	}
	defer unix.Munlock(mem)
	a.Free(h)
	var mu sync.Mutex
	a.Sweep(&mu)
	if n := a.Sweep(&mu); n != 0 || resident(t, mem) == 0 {
		t.Fatalf("a locked slab counted %d bytes given back, %d pages resident", n, resident(t, mem))
	}
	if again, err := a.mem.get(); err != nil || &again[0] != &mem[0] {
		t.Fatal("the locked slab was not filed for reuse")
	}
}
