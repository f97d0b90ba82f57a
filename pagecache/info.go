package pagecache

import (
	"sort"

	"github.com/s4d-project/s4d/pagefmt"
)

// What the store tells about its pages and pools: Inspect, Stats, Pools.

// PageInfo describes how one key is stored.
type PageInfo struct {
	Result  Result
	Class   pagefmt.Class
	Size    int
	Fill    uint64
	Backend string
	Data    []byte // stored bytes, when asked for
}

// Inspect is in read.go, beside the other reads of stored bytes.

// Stats is a snapshot of the whole store.
type Stats struct {
	OrigDataSize, ComprDataSize, MemUsedTotal, MemLimit, MemUsedMax uint64
	Pages, ZeroPages, SamePages, HugePages, PagesCompacted          uint64
	MetadataBytes                                                   uint64
}

// Stats returns totals over every pool.
func (s *Store) Stats() Stats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := Stats{ComprDataSize: s.compr, MemLimit: s.arena.Limit(), MemUsedMax: s.memMax,
		PagesCompacted: s.compacted}
	for _, p := range s.pools {
		st.Pages += p.st.Pages
		st.ZeroPages += p.st.Zero
		st.SamePages += p.st.Same
		st.HugePages += p.st.Huge
		st.MetadataBytes += p.ix.Bytes()
	}
	st.OrigDataSize = st.Pages * uint64(s.pageSize)
	st.MemUsedTotal = s.arena.Used() + st.MetadataBytes
	return st
}

// PoolInfo describes one pool.
type PoolInfo struct {
	Name string
	UID  uint32
	PoolStats
	Codec pagefmt.Codec // the pool's own (poolcodec.go); 0: the daemon's
}

// Pools lists the pools uid may see (all for root), by name.
func (s *Store) Pools(uid uint32) []PoolInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []PoolInfo
	for _, p := range s.pools {
		if uid == 0 || p.uid == uid {
			out = append(out, PoolInfo{Name: p.name, UID: p.uid, PoolStats: p.st, Codec: p.codec})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// PoolInfo returns one pool's description if uid may see it.
func (s *Store) PoolInfo(uid uint32, name string) (PoolInfo, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, err := s.lookup(uid, name)
	if err != nil {
		return PoolInfo{}, err
	}
	return PoolInfo{Name: p.name, UID: p.uid, PoolStats: p.st, Codec: p.codec}, nil
}

// ResetMemUsedMax sets mem_used_max back to the current usage.
func (s *Store) ResetMemUsedMax() {
	s.mu.Lock()
	s.memMax = s.arena.Used()
	s.mu.Unlock()
}
