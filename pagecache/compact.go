package pagecache

import "sort"

// Compact moves objects out of the sparsest slabs of each size class into
// the free slots of fuller ones, then releases the emptied slabs. It holds
// the store's write lock throughout, so it is meant to be run on demand.
func (s *Store) Compact() (moved, freed uint64) {
	s.gate.Lock()
	defer s.gate.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.arena
	defer a.release() // compaction is asked for to give memory back
	before := a.used
	victims := make(map[uint32]bool)
	for c := 0; c <= topClass; c++ {
		list := append([]uint32(nil), a.partial[c]...)
		if len(list) < 2 {
			continue
		}
		// Fullest first: they receive; the sparsest give up their objects
		// while the free slots of the others can take them.
		sort.Slice(list, func(i, j int) bool { return a.slabs[list[i]].used > a.slabs[list[j]].used })
		per := a.slotsPer(c)
		free := 0
		for _, idx := range list {
			free += per - int(a.slabs[idx].used)
		}
		for i := len(list) - 1; i > 0; i-- {
			sl := a.slabs[list[i]]
			// The slab's own free slots stop counting once it drains.
			if free-(per-int(sl.used)) < int(sl.used) {
				break
			}
			free -= per
			victims[list[i]] = true
			sl.draining = true
			a.unlist(list[i])
		}
	}
	if len(victims) == 0 {
		return 0, 0
	}
	for _, p := range s.pools {
		p.ix.each(func(_ uint64, e *entry) {
			if !e.hasObject() || !victims[uint32(e.handle()>>slotBits)] {
				return
			}
			h, buf, err := a.alloc(e.objSize())
			if err != nil {
				return // cannot happen: the receivers had room; the page stays put
			}
			copy(buf, a.bytes(e.handle(), e.objSize()))
			a.free(e.handle())
			*e = e.withHandle(h)
			moved++
		})
	}
	// A victim that kept an object (it should not) goes back into service.
	for idx := range victims {
		if sl := a.slabs[idx]; sl != nil {
			sl.draining = false
			if sl.partial < 0 && int(sl.used) < a.slotsPer(int(sl.class)) {
				a.list(idx)
			}
		}
	}
	s.compacted += moved
	return moved, before - a.used
}
