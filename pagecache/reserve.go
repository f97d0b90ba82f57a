package pagecache

import "github.com/s4d-project/s4d/slab"

// Reserve sets aside n bytes of memory for pages to come, present now
// (slab.MapReserve, outside the lock); it returns how much it set aside.
func (s *Store) Reserve(n uint64) (uint64, error) {
	r, err := slab.MapReserve(n, s.arena.SlabSize())
	if err != nil || r == nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.arena.AddReserve(r), nil
}

// Spare is the memory ready for new pages without a page fault.
func (s *Store) Spare() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.arena.Spare()
}
