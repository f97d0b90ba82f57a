package pagecache

import (
	"errors"
	"fmt"
	"math/bits"
	"sort"

	"github.com/s4d-project/s4d/backing"
	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/pageindex"
)

// AttachBacking gives the store a backing file: from now on, pages the
// memory limit would refuse push the coldest ones out to it. idx, the
// index of a persisted file's last checkpoint, is restored first: its
// pools, owners and pages (which stay on the file until read). With
// persist, checkpoints record the store on the file. It returns the
// pages restored; on an error the store must not be used.
func (s *Store) AttachBacking(f *backing.File, idx *backing.Index, persist bool) (int, error) {
	c := &fileTier{f: f, shift: uint32(bits.TrailingZeros64(f.Unit())), persist: persist}
	if persist {
		f.SetPersist()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.file = c
	if idx == nil {
		return 0, nil
	}
	ids := make([]uint8, len(idx.Backends))
	for i, n := range idx.Backends {
		ids[i] = s.BackendID(n)
	}
	n := 0
	for _, bp := range idx.Pools {
		if s.pools[bp.Name] != nil {
			return n, fmt.Errorf("backing file %s: index names pool %q twice", f.Path(), bp.Name)
		}
		if bp.Codec > uint8(pagefmt.CodecZstd) {
			return n, fmt.Errorf("backing file %s: damaged index: pool %q has codec %d", f.Path(), bp.Name, bp.Codec)
		}
		p := &pool{name: bp.Name, uid: bp.UID, codec: pagefmt.Codec(bp.Codec)}
		s.pools[p.name] = p
		s.user(p.uid).pools++
		w := p.ix.Walk(true)
		for j, key := range bp.Keys {
			e, err := s.restored(pageindex.Entry(bp.Words[j]), ids)
			if err != nil {
				w.Done()
				return n, fmt.Errorf("backing file %s: damaged index: pool %q key %d: %w", f.Path(), p.name, key, err)
			}
			if _, dup := w.At(key).Set(key, e); dup {
				w.Done()
				return n, fmt.Errorf("backing file %s: damaged index: pool %q has key %d twice", f.Path(), p.name, key)
			}
			s.account(p, e, +1)
			n++
		}
		w.Done()
	}
	return n, nil
}

// restored checks an entry from a checkpoint and gives it this store's
// backend number; a page on the file is counted live there.
func (s *Store) restored(e pageindex.Entry, ids []uint8) (pageindex.Entry, error) {
	e &^= pageindex.IdleBits
	if int(e.Backend()) >= len(ids) {
		return 0, fmt.Errorf("backend %d not named", e.Backend())
	}
	e = e.WithBackend(ids[e.Backend()])
	cl, size := e.Class(), e.Size()
	if !e.OnFile() {
		if cl != pagefmt.ClassZero || e.Handle() != 0 || size != 0 {
			return 0, errors.New("a page in RAM recorded (only zero pages may be)")
		}
		return e, nil
	}
	if cl < pagefmt.ClassSame || cl > pagefmt.ClassRaw || size == 0 || size > s.pageSize || cl == pagefmt.ClassSame && size != 8 {
		return 0, fmt.Errorf("class %d of %d bytes", cl, size)
	}
	if !s.file.f.Restore(s.file.off(e), e.ObjSize()) {
		return 0, fmt.Errorf("place %d (%d bytes) outside the file or over another", s.file.off(e), e.ObjSize())
	}
	return e, nil
}

// Checkpoint records every page on the backing file, and every zero page,
// so that a restart on the file finds them (with persist; else nothing).
func (s *Store) Checkpoint() error {
	c := s.file
	if c == nil || !c.persist {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return s.checkpointLocked()
}

func (s *Store) checkpointLocked() error {
	c := s.file
	if !c.persist {
		return nil
	}
	s.mu.Lock()
	idx := &backing.Index{}
	if p := s.backends.Load(); p != nil {
		idx.Backends = append(idx.Backends, (*p)...)
	}
	for _, p := range s.pools {
		bp := backing.Pool{Name: p.name, UID: p.uid, Codec: uint8(p.codec)}
		p.ix.EachLoaded(func(key uint64, e pageindex.Entry) bool {
			if e.OnFile() || e.Class() == pagefmt.ClassZero {
				bp.Keys = append(bp.Keys, key)
				bp.Words = append(bp.Words, uint64(e&^pageindex.IdleBits))
			}
			return true
		})
		idx.Pools = append(idx.Pools, bp)
	}
	c.f.BeginCheckpoint()
	s.mu.Unlock()
	sort.Slice(idx.Pools, func(i, j int) bool { return idx.Pools[i].Name < idx.Pools[j].Name })
	if err := c.f.Checkpoint(idx); err != nil {
		c.failed(err)
		return err
	}
	return nil
}

// PersistAll writes every page still in RAM to the backing file and
// checkpoints: what a planned stop does. It returns the pages written.
func (s *Store) PersistAll() (uint64, error) {
	c := s.file
	if c == nil || !c.persist {
		return 0, errors.New("no persisted backing file")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	pages, _, werr := s.writebackLocked(All, 0)
	return pages, errors.Join(werr, s.checkpointLocked())
}

// CompactFile moves the pages of sparsely used blocks of the backing file
// together, so that the blocks can be reused whole, and says how many
// pages moved.
func (s *Store) CompactFile() (uint64, error) {
	c := s.file
	if c == nil {
		return 0, errors.New("no backing file")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return s.compactFile(), nil
}

func (s *Store) compactFile() uint64 {
	c := s.file
	sparse := c.f.Sparse(backing.BlockSize / 2)
	s.mu.Lock()
	all := s.pick(func(e pageindex.Entry) bool { return e.OnFile() && sparse(c.off(e), e.ObjSize()) }, 1<<62)
	s.mu.Unlock()
	var moved uint64
	for len(all) > 0 {
		n, total := 0, 0
		for n < len(all) && total < roundMax {
			total += all[n].e.ObjSize()
			n++
		}
		vs := all[:n]
		all = all[n:]
		rs := make([]backing.Read, len(vs))
		for i, v := range vs {
			rs[i] = backing.Read{Off: c.off(v.e), Len: v.e.ObjSize()}
		}
		// Read under the lock: the objects cannot be freed meanwhile.
		s.mu.RLock()
		c.f.ReadBatch(rs)
		s.mu.RUnlock()
		ok := vs[:0]
		var sizes []int
		var objs [][]byte
		for i, v := range vs {
			var st pagefmt.Stored
			if checkObject(rs[i].Data, rs[i].Err, &st) == OK { // a bad one stays, to be reported when read
				ok = append(ok, v)
				sizes = append(sizes, len(rs[i].Data))
				objs = append(objs, rs[i].Data)
			}
		}
		b := c.f.Place(sizes)
		if len(b.Offs) == 0 {
			break
		}
		for i := range b.Offs {
			copy(b.Slot(i), objs[i])
		}
		err := c.f.Write(b)
		s.mu.Lock()
		if err != nil {
			c.f.Abandon(b)
			c.failed(err)
			s.mu.Unlock()
			break
		}
		for i, off := range b.Offs {
			if s.swap(ok[i], off, c.free) {
				moved++
			} else {
				c.f.Free(off, sizes[i])
			}
		}
		s.mu.Unlock()
	}
	c.moved.Add(moved)
	return moved
}

// ColdStats describes the backing file and the moves to and from it.
type ColdStats struct {
	backing.Stats
	Path           string
	Persist        bool
	WrittenBack    uint64 // pages moved to the file in all
	Forced         uint64 // of which by a forced writeback
	PressureRounds uint64 // rounds run because the memory limit was reached
	AheadRounds    uint64 // of which run in the background, ahead of PUTs (KeepRoom)
	Compacted      uint64 // pages moved within the file by compaction
	Failures       uint64 // rounds failed by an I/O error (their pages stayed in RAM)
	FullRounds     uint64 // rounds that found the file full
	ReadFailures   uint64 // pages that could not be read back
	LastError      string
}

// ColdStats returns the backing file's statistics; false if there is none.
func (s *Store) ColdStats() (ColdStats, bool) {
	s.mu.RLock()
	c := s.file
	s.mu.RUnlock()
	if c == nil {
		return ColdStats{}, false
	}
	st := ColdStats{Stats: c.f.Stats(), Path: c.f.Path(), Persist: c.persist, WrittenBack: c.pages.Load(),
		Forced: c.forced.Load(), PressureRounds: c.pressure.Load(), AheadRounds: c.kept.Load(), Compacted: c.moved.Load(),
		Failures: c.failures.Load(), FullRounds: c.full.Load(), ReadFailures: c.readFailures.Load()}
	if e := c.lastErr.Load(); e != nil {
		st.LastError = *e
	}
	return st, true
}
