package pagecache

import (
	"encoding/binary"
	"hash/crc32"
	"sort"

	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/pageindex"
)

// What the store tells about its pages and pools: Inspect, Stats, Pools.

// object returns the stored bytes of e after checking their checksum.
func (s *Store) object(e pageindex.Entry) ([]byte, bool) {
	if e.OnFile() {
		return s.tierObject(e) // tier.go
	}
	obj := s.arena.Bytes(e.Handle(), e.ObjSize())
	data := obj[checksumSize:]
	return data, binary.LittleEndian.Uint32(obj) == crc32.Checksum(data, pagefmt.Castagnoli)
}

// PageInfo describes how one key is stored.
type PageInfo struct {
	Result  Result
	Class   pagefmt.Class
	Size    int
	Fill    uint64
	Backend string
	Data    []byte // stored bytes, when asked for
}

// Inspect describes keys, copying their stored bytes if withData.
func (s *Store) Inspect(uid uint32, name string, keys []uint64, withData bool) ([]PageInfo, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, err := s.lookup(uid, name)
	if err != nil {
		return nil, err
	}
	out := make([]PageInfo, len(keys))
	w := p.ix.Walk(false)
	defer w.Done()
	for i, key := range keys {
		e, ok := w.At(key).Get(key)
		if !ok {
			out[i].Result = NotFound
			continue
		}
		pi := PageInfo{Class: e.Class(), Size: e.Size(), Backend: s.backendName(e.Backend())}
		if e.HasObject() || e.OnFile() {
			obj, ok := s.object(e)
			if !ok {
				out[i].Result = Corrupt
				continue
			}
			if pi.Class == pagefmt.ClassSame {
				pi.Fill = binary.LittleEndian.Uint64(obj)
			}
			if withData {
				pi.Data = append([]byte(nil), obj...)
			}
		}
		out[i] = pi
	}
	return out, nil
}

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
