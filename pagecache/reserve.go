package pagecache

import "github.com/s4d-project/s4d/slab"

// Reserve sets aside n bytes of memory for pages to come, present now
// (outside the lock); it returns how much it set aside. Slabs the sweeps
// gave back from locked memory are locked again first (slab.Arena.Rearm):
// a swap daemon's spare is refilled from them, so it drops back after a
// swap storm instead of holding its peak locked, and maps only the rest.
func (s *Store) Reserve(n uint64) (uint64, error) {
	got := s.arena.Rearm(&s.mu, n)
	if got >= n {
		return got, nil
	}
	r, err := slab.MapReserve(n-got, s.arena.SlabSize())
	if err != nil || r == nil {
		return got, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return got + s.arena.AddReserve(r), nil
}

// Spare is the memory ready for new pages without a page fault.
func (s *Store) Spare() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.arena.Spare()
}
