package pagecache

import (
	"unsafe"

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
// Registered memory stays resident while the store lives: slabs emptied
// there are kept for reuse rather than given back to the kernel (dropping
// pages that a device holds would leave it writing into pages the store
// no longer sees). A mapping that p refuses is used unregistered: the
// engine then writes its objects through a buffer of its own.
func (s *Store) SetPinner(p backends.Pinner) {
	s.mu.Lock()
	s.arena.mem.pin = p
	s.mu.Unlock()
}

// pinnedRange is a slab mapping registered with a device.
type pinnedRange struct {
	lo, hi uintptr
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
	r.pinned = append(r.pinned, pinnedRange{lo: lo, hi: lo + uintptr(len(mem)), unpin: unpin})
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
