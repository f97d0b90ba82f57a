package pagecache

import (
	"cmp"
	"fmt"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/backends"
)

// slabMem hands out slab memory from anonymous mappings of its own, off
// the Go heap. On the heap, the arena set the collector's goal at twice
// the store (memory let go stayed resident until a collection came), and
// every new slab was zeroed under the store's lock; here a slab let go
// goes back to the kernel at once, and a fresh one is zeroed by the kernel
// when first written, outside any lock. Address space is given back only
// with the store (see New): a slab let go is reused first.
type slabMem struct {
	slabSize int
	free     [][]byte // slabs let go, their pages returned
	rest     []byte   // what the newest region has not handed out
	maps     *regions
	pin      backends.Pinner // registers new regions with a device (direct.go)
	keepIdle int             // idle registered bytes kept for reuse (direct.go)
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
			slabs = pinnedRegionSlabs
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
// nothing refers to slabs let go.
func giveBack(slabs [][]byte) {
	slices.SortFunc(slabs, func(x, y []byte) int { return cmp.Compare(addr(x), addr(y)) })
	for i := 0; i < len(slabs); {
		j, end := i+1, addr(slabs[i])+uintptr(len(slabs[i]))
		for j < len(slabs) && addr(slabs[j]) == end {
			end += uintptr(len(slabs[j]))
			j++
		}
		unix.Madvise(unsafe.Slice(&slabs[i][0], int(end-addr(slabs[i]))), unix.MADV_DONTNEED)
		i = j
	}
}

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// reuse files slabs given back, to be handed out before new memory.
func (m *slabMem) reuse(slabs [][]byte) { m.free = append(m.free, slabs...) }
