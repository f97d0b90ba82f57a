package pagecache

// MapOnlyReserve, on, makes new pages use only memory set aside
// (Reserve) or kept from emptied slabs: a Put that needs more is refused
// (NoSpace) rather than mapping memory under the store's lock. A swap
// device turns it on: its writes come when memory is short, and a
// mapping made then waits in reclaim that the device's own server cannot
// make progress in (slab.Arena.MapOnlyReserve).
func (s *Store) MapOnlyReserve(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.arena.MapOnlyReserve(on)
}
