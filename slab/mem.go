package slab

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// slabMem hands out slab memory from anonymous mappings of its own, off
// the Go heap. On the heap, the arena set the collector's goal at twice
// the store (memory let go stayed resident until a collection came), and
// every new slab was zeroed under the store's lock; here a slab let go
// goes back to the kernel at once, and a fresh one is zeroed by the kernel
// when first written, outside any lock. Address space is given back only
// with the store (Unmap): a slab let go is reused first.
type slabMem struct {
	slabSize int
	free     [][]byte // slabs let go, their pages returned
	rest     []byte   // what the newest region has not handed out
	maps     *regions
	pin      Pinner // registers new regions with a device (pinned.go)
	keepIdle int    // idle registered bytes kept for reuse (pinned.go)
}

// regions are the mappings slabs come from.
type regions struct {
	all    [][]byte
	pinned []pinnedRange // those registered with a device
}

// unmap unmaps every region: no slab may be used after.
func (r *regions) unmap() {
	r.unpinAll()
	for _, m := range r.all {
		unix.Munmap(m)
	}
	r.all = nil
}

// Unmap unregisters and unmaps all slab memory: no object may be used
// after. The store's owner does it once the store is unreachable.
func (a *Arena) Unmap() { a.mem.maps.unmap() }

// Unmapper returns Unmap's work as a function that does not hold the
// arena, for a cleanup attached to what holds it.
func (a *Arena) Unmapper() func() { return a.mem.maps.unmap }

// regionSlabs is how many slabs one mapping holds.
const regionSlabs = 64

func (m *slabMem) get() ([]byte, error) {
	if n := len(m.free); n > 0 {
		s := m.free[n-1]
		m.free[n-1] = nil
		m.free = m.free[:n-1]
		return s, nil
	}
	if len(m.rest) < m.slabSize {
		slabs := regionSlabs
		if m.pin != nil {
			slabs = PinnedRegionSlabs
		}
		r, err := unix.Mmap(-1, 0, slabs*m.slabSize, unix.PROT_READ|unix.PROT_WRITE,
			unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
		if err != nil {
			return nil, fmt.Errorf("mapping slab memory: %w", err)
		}
		m.maps.all = append(m.maps.all, r)
		m.maps.register(r, m.pin)
		m.rest = r
	}
	s := m.rest[:m.slabSize:m.slabSize]
	m.rest = m.rest[m.slabSize:]
	return s, nil
}

// giveBack returns slabs' pages to the kernel, each run of adjacent slabs
// in one call; they read as zeros when handed out again. It needs no lock:
// nothing refers to slabs let go. It returns how many slabs the kernel
// kept (it drops no locked pages: a stop that keeps swap devices locks
// the daemon's memory); all are reused the same.
func giveBack(slabs [][]byte) (kept int) {
	forEachRun(slabs, func(run []byte, in [][]byte) {
		if unix.Madvise(run, unix.MADV_DONTNEED) != nil {
			kept += len(in)
		}
	})
	return kept
}

// forEachRun calls f with each run of adjacent slabs, sorting slabs.
func forEachRun(slabs [][]byte, f func(run []byte, slabs [][]byte)) {
	slices.SortFunc(slabs, func(x, y []byte) int { return cmp.Compare(addr(x), addr(y)) })
	for i := 0; i < len(slabs); {
		j, end := i+1, addr(slabs[i])+uintptr(len(slabs[i]))
		for j < len(slabs) && addr(slabs[j]) == end {
			end += uintptr(len(slabs[j]))
			j++
		}
		f(unsafe.Slice(&slabs[i][0], int(end-addr(slabs[i]))), slabs[i:j])
		i = j
	}
}

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// reuse files slabs given back, to be handed out before new memory.
func (m *slabMem) reuse(slabs [][]byte) { m.free = append(m.free, slabs...) }

// slabMemory returns memory for a new slab, reusing an emptied one's. Its
// contents do not matter: a slot is always written before it is read.
func (a *Arena) slabMemory() ([]byte, error) {
	for _, l := range []*[][]byte{&a.kept, &a.keptOld} {
		if n := len(*l); n > 0 {
			b := (*l)[n-1]
			(*l)[n-1] = nil
			*l = (*l)[:n-1]
			return b, nil
		}
	}
	return a.mem.get()
}

// sweep moves the kept slab memory on by a sweep and returns what was kept
// since before the last one, for the caller to give back (giveBack) and
// then file for reuse (slabMem.reuse).
func (a *Arena) sweep() [][]byte {
	let := a.keepPinned(a.keptOld)
	a.keptOld, a.kept = a.kept, nil
	return let
}

// Sweep gives back to the kernel the memory of slabs emptied before the
// previous sweep (it is kept a while for new slabs to reuse), and idle
// registered mappings beyond what is kept (pinned.go), and returns how
// many bytes that was. mu is the lock that guards the arena: Sweep is
// called without it and holds it only to take and to file memory.
func (a *Arena) Sweep(mu sync.Locker) uint64 {
	mu.Lock()
	let := a.sweep()
	mu.Unlock()
	// Outside the lock: after deleting a GiB, thousands of slabs go back.
	kept := giveBack(let)
	mu.Lock()
	a.mem.reuse(let)
	idle := a.mem.idleMappings()
	mu.Unlock()
	return uint64(len(let)-kept)*uint64(a.slabSize) + dropMappings(idle)
}

// Release gives back all kept slab memory at once.
func (a *Arena) Release() {
	for range 2 {
		let := a.sweep()
		giveBack(let)
		a.mem.reuse(let)
	}
}

// keptBytes is the slab memory kept for reuse.
func (a *Arena) keptBytes() uint64 { return uint64(len(a.kept)+len(a.keptOld)) * uint64(a.slabSize) }
