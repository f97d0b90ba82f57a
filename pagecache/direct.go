package pagecache

import (
	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/pageindex"
	"github.com/s4d-project/s4d/slab"
)

// Compressed pages written by the engine itself: a GPU engine offers each
// part of a batch with a Placer (see pagefmt.Placer), Put reserves the
// slots once the sizes are known, and the engine writes every object,
// checksum first, straight into its slot. For that the slab memory is
// registered with the engine's device (SetPinner); the store copies
// nothing.

// SetPinner has the store register every slab mapping it makes from now
// on with p, so that p's device writes objects straight into slots.
// Slabs emptied in registered memory are kept for reuse rather than their
// pages given back one by one (dropping pages that a device holds would
// leave it writing into pages the store no longer sees); a registered
// mapping none of whose slabs is in use goes back whole, unregistered
// first (Sweep). A mapping that p refuses is used unregistered: the engine
// then writes its objects through a buffer of its own.
func (s *Store) SetPinner(p slab.Pinner) {
	s.mu.Lock()
	s.arena.SetPinner(p, slab.IdlePinnedKeep)
	s.mu.Unlock()
}

// place has the engine write the objects of a Put's part into the slots
// reserved for them. If it fails, the slots go back, the pages are
// reported Failed, and the error (a pagefmt.PlaceError) tells the caller
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
			s.forget(p, pageindex.MakeEntry(sc.h[i], int(c.Size[i]), c.Class[i], backend))
			sc.res[i] = Failed
		}
	}
	s.mu.Unlock()
	if !pagefmt.IsPlaceError(err) {
		err = &pagefmt.PlaceError{Err: err}
	}
	return err
}
