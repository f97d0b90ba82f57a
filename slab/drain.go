package slab

import (
	"cmp"
	"slices"
	"sort"
)

// Emptying slabs: compaction moves objects out of sparse slabs into the
// free slots of fuller ones, writeback moves the objects of the coldest
// slabs to a file. Either keeps new objects out of the slabs it empties
// (DrainSparse, DrainColdest) and lets those that kept objects take new
// ones again (Undrain).

// Slabs is the number of slab indexes: every handle's Slab is below it.
func (a *Arena) Slabs() int { return len(a.slabs) }

// Undrain lets slab idx, if it is still draining, take new objects again.
func (a *Arena) Undrain(idx uint32) {
	if s := a.slabs[idx]; s != nil && s.draining {
		s.draining = false
		if s.partial < 0 && int(s.used) < a.SlotsPer(int(s.class)) {
			a.list(idx)
		}
	}
}

// DrainSparse picks, in each size class, the sparsest slabs whose objects
// the free slots of the others can take, drains them and returns them,
// for compaction to move their objects (Alloc, copy, Free) and then to
// Undrain each.
func (a *Arena) DrainSparse() map[uint32]bool {
	victims := make(map[uint32]bool)
	for c := 0; c <= TopClass; c++ {
		list := append([]uint32(nil), a.partial[c]...)
		if len(list) < 2 {
			continue
		}
		// Fullest first: they receive; the sparsest give up their objects
		// while the free slots of the others can take them.
		sort.Slice(list, func(i, j int) bool { return a.slabs[list[i]].used > a.slabs[list[j]].used })
		per := a.SlotsPer(c)
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
	return victims
}

// DrainColdest drains slabs, coldest first, until they hold want bytes,
// and returns them. score[i] sums the coldness of the objects the caller
// found in slab i (larger: colder), found[i] counts them. Slabs go by
// their mean score; among equals, the sparsest first (most memory freed
// per byte moved), then in slab order from *cursor, which moves past each
// slab taken.
func (a *Arena) DrainColdest(want uint64, score []uint64, found []uint16, cursor *uint32) []uint32 {
	var cand []uint32
	for i, sl := range a.slabs {
		// Same-filled pages (class 0) are smaller than their entries: not
		// worth moving. A slab with slots reserved by a Put not yet in the
		// index would not empty.
		if sl != nil && !sl.draining && sl.class != 0 && sl.used > 0 && found[i] == sl.used {
			cand = append(cand, uint32(i))
		}
	}
	n := uint32(len(a.slabs))
	cur := *cursor
	slices.SortFunc(cand, func(x, y uint32) int {
		sx, sy := score[x]/uint64(a.slabs[x].used), score[y]/uint64(a.slabs[y].used)
		if sx != sy {
			return cmp.Compare(sy, sx)
		}
		if ux, uy := a.slabs[x].used, a.slabs[y].used; ux != uy {
			return int(ux) - int(uy)
		}
		return cmp.Compare((x-cur+n)%n, (y-cur+n)%n)
	})
	var out []uint32
	var got uint64
	for _, idx := range cand {
		if got >= want {
			break
		}
		sl := a.slabs[idx]
		sl.draining = true
		if sl.partial >= 0 {
			a.unlist(idx)
		}
		out = append(out, idx)
		got += uint64(a.slabSize)
		*cursor = idx + 1
	}
	return out
}
