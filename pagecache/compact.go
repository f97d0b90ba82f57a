package pagecache

import "github.com/s4d-project/s4d/pageindex"

// Compact moves objects out of the sparsest slabs of each size class into
// the free slots of fuller ones, then releases the emptied slabs. It holds
// the store's write lock throughout, so it is meant to be run on demand.
func (s *Store) Compact() (moved, freed uint64) {
	s.gate.Lock()
	defer s.gate.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.arena
	defer a.Release() // compaction is asked for to give memory back
	before := a.Used()
	victims := a.DrainSparse()
	if len(victims) == 0 {
		return 0, 0
	}
	for _, p := range s.pools {
		p.ix.Each(func(_ uint64, e *pageindex.Entry) {
			if !e.HasObject() || !victims[e.Handle().Slab()] {
				return
			}
			h, buf, err := a.Alloc(e.ObjSize())
			if err != nil {
				return // cannot happen: the receivers had room; the page stays put
			}
			copy(buf, a.Bytes(e.Handle(), e.ObjSize()))
			a.Free(e.Handle())
			*e = e.WithHandle(h)
			moved++
		})
	}
	// A victim that kept an object (it should not) goes back into service.
	for idx := range victims {
		a.Undrain(idx)
	}
	s.compacted += moved
	return moved, before - a.Used()
}
