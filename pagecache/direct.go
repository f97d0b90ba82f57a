package pagecache

import (
	"cmp"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/backends"
)

// Compressed pages written by the engine itself: a GPU engine offers each
// part of a batch with a Placer (see backends.Placer), Put reserves the
// slots once the sizes are known, and the engine writes every object,
// checksum first, straight into its slot. For that the slab memory is
// registered with the engine's device (SetPinner); the store copies
// nothing.

// pinnedRegionSlabs is how many slabs one mapping holds when mappings are
// registered with a device: registering costs milliseconds, under the
// store's lock, so it is done for 16 MiB (4 KiB pages) at a time.
const pinnedRegionSlabs = 256

// SetPinner has the store register every slab mapping it makes from now
// on with p, so that p's device writes objects straight into slots.
// Slabs emptied in registered memory are kept for reuse rather than their
// pages given back one by one (dropping pages that a device holds would
// leave it writing into pages the store no longer sees); a registered
// mapping none of whose slabs is in use goes back whole, unregistered
// first (Sweep). A mapping that p refuses is used unregistered: the engine
// then writes its objects through a buffer of its own.
func (s *Store) SetPinner(p backends.Pinner) {
	s.mu.Lock()
	s.arena.mem.pin, s.arena.mem.keepIdle = p, idlePinnedKeep
	s.mu.Unlock()
}

// pinnedRange is a slab mapping registered with a device.
type pinnedRange struct {
	lo, hi uintptr
	mem    []byte // the mapping
	unpin  func()
}

// register registers a new mapping with p, if any.
func (r *regions) register(mem []byte, p backends.Pinner) {
	if p == nil {
		return
	}
	unpin, err := p.Pin(mem)
	if err != nil {
		return
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	r.pinned = append(r.pinned, pinnedRange{lo: lo, hi: lo + uintptr(len(mem)), mem: mem, unpin: unpin})
}

// isPinned tells whether a slab lies in a registered mapping.
func (r *regions) isPinned(slab []byte) bool {
	a := addr(slab)
	for _, p := range r.pinned {
		if a >= p.lo && a < p.hi {
			return true
		}
	}
	return false
}

// idlePinnedKeep is how much idle registered memory the store keeps for
// the next burst: registering a mapping again costs milliseconds under the
// store's lock (on the H100 host, a daemon that had given back all of
// 182 MiB stored its next GiB at 5-6 GB/s instead of 28-31).
const idlePinnedKeep = 256 << 20

// idleMappings takes out of use the registered mappings none of whose
// slabs is in use (all of them filed for reuse, or never handed out),
// beyond m.keepIdle bytes of them, and returns them, for the caller to
// unregister and unmap outside the store's lock: nothing refers to them
// any more. Under the store's lock.
func (m *slabMem) idleMappings() []pinnedRange {
	r := m.maps
	if len(r.pinned) == 0 {
		return nil
	}
	order := make([]int, len(r.pinned))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int { return cmp.Compare(r.pinned[x].lo, r.pinned[y].lo) })
	of := func(b []byte) int {
		a := addr(b)
		k, _ := slices.BinarySearchFunc(order, a, func(i int, a uintptr) int {
			switch p := r.pinned[i]; {
			case a < p.lo:
				return 1
			case a >= p.hi:
				return -1
			}
			return 0
		})
		if k < len(order) && a >= r.pinned[order[k]].lo && a < r.pinned[order[k]].hi {
			return order[k]
		}
		return -1
	}
	idle := make([]int, len(r.pinned)) // slabs not in use, per mapping
	for _, s := range m.free {
		if i := of(s); i >= 0 {
			idle[i] += len(s) / m.slabSize
		}
	}
	if len(m.rest) > 0 {
		if i := of(m.rest); i >= 0 {
			idle[i] += len(m.rest) / m.slabSize
		}
	}
	drop := make([]bool, len(r.pinned))
	var out []pinnedRange
	kept := 0
	for i, p := range r.pinned {
		if idle[i]*m.slabSize != len(p.mem) {
			continue
		}
		if kept+len(p.mem) <= m.keepIdle {
			kept += len(p.mem)
			continue
		}
		drop[i] = true
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil
	}
	m.free = slices.DeleteFunc(m.free, func(s []byte) bool { i := of(s); return i >= 0 && drop[i] })
	if len(m.rest) > 0 {
		if i := of(m.rest); i >= 0 && drop[i] {
			m.rest = nil
		}
	}
	r.all = slices.DeleteFunc(r.all, func(mm []byte) bool { i := of(mm); return i >= 0 && drop[i] })
	left := r.pinned[:0]
	for i, p := range r.pinned {
		if !drop[i] {
			left = append(left, p)
		}
	}
	clear(r.pinned[len(left):])
	r.pinned = left
	return out
}

// dropMappings unregisters and unmaps mappings idleMappings took out of
// use, and returns their bytes.
func dropMappings(ps []pinnedRange) (bytes uint64) {
	for _, p := range ps {
		p.unpin() // the device lets go of the pages first
		unix.Munmap(p.mem)
		bytes += uint64(len(p.mem))
	}
	return bytes
}

// unpinAll unregisters every mapping, before they are unmapped.
func (r *regions) unpinAll() {
	for _, p := range r.pinned {
		p.unpin()
	}
	r.pinned = nil
}

// keepPinned files the slabs of let that lie in registered mappings for
// reuse at once and returns the others, to give back.
func (a *arena) keepPinned(let [][]byte) [][]byte {
	if len(a.mem.maps.pinned) == 0 {
		return let
	}
	out := let[:0]
	for _, s := range let {
		if a.mem.maps.isPinned(s) {
			a.mem.reuse([][]byte{s})
		} else {
			out = append(out, s)
		}
	}
	return out
}

// place has the engine write the objects of a Put's part into the slots
// reserved for them. If it fails, the slots go back, the pages are
// reported Failed, and the error (a backends.PlaceError) tells the caller
// to redo the batch on another engine.
func (s *Store) place(p *pool, sc *putScratch, keys []uint64, backend uint8) error {
	c := sc.c
	err := c.Place.Place(sc.buf)
	if err == nil {
		return nil
	}
	s.mu.Lock()
	for i := range keys {
		if sc.res[i] == OK {
			s.forget(p, makeEntry(sc.h[i], int(c.Size[i]), c.Class[i], backend))
			sc.res[i] = Failed
		}
	}
	s.mu.Unlock()
	if !backends.IsPlaceError(err) {
		err = &backends.PlaceError{Err: err}
	}
	return err
}
