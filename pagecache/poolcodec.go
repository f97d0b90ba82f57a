package pagecache

import "github.com/s4d-project/s4d/pagefmt"

// A pool may choose the codec its pages are compressed with when they are
// written (a pool read often keeps LZ4's speed, one that holds a cache
// takes zstd's ratio). 0 is the daemon's codec.

// SetPoolCodec sets pool's codec for later writes, creating the pool (for
// uid) if there is none yet; pages stored already stay as they are.
func (s *Store) SetPoolCodec(uid uint32, name string, codec pagefmt.Codec) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.lookupOrCreate(uid, name)
	if err != nil {
		return err
	}
	p.codec = codec
	return nil
}

// PoolCodec is CheckPool that also says the pool's codec (0: the daemon's,
// and for a pool that does not exist yet).
func (s *Store) PoolCodec(uid uint32, name string) (pagefmt.Codec, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, err := s.lookup(uid, name)
	switch err {
	case nil:
		return p.codec, nil
	case ErrNoPool:
		return 0, nil
	}
	return 0, err
}
