package pagecache

import (
	"errors"
	"fmt"

	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/pageindex"
)

// What the store offers the cold tier for moving pages between its RAM and
// the levels below: pick pages (Pick, DrainColdest), copy their objects
// out (CopyObjects), and point them at a new place (Relocate), which
// takes effect only for a page still as it was picked: a page replaced,
// deleted or moved meanwhile keeps its new state, and the caller frees
// the place it had prepared. At a restart, what Records gave is handed
// back to Restore. Accounting does not change: a page off RAM counts as
// stored, with its stored size.

// ArenaUse says how much of the arena is used, under what limit (0: none),
// in slabs of Slab bytes.
type ArenaUse struct{ Used, Limit, Slab uint64 }

// Arena reports the arena's use.
func (s *Store) Arena() ArenaUse {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return ArenaUse{Used: s.arena.Used(), Limit: s.arena.Limit(), Slab: uint64(s.arena.SlabSize())}
}

// InRAM says whether the page holds arena memory: Relocate may move it.
func (r *PageRef) InRAM() bool { return r.e.HasObject() }

// Loc is the place of a page off RAM (OnFile).
func (r *PageRef) Loc() Loc { return Loc(r.e.Handle()) }

// ObjSize is the size of the page's object: checksum and stored bytes.
func (r *PageRef) ObjSize() int { return r.e.ObjSize() }

func (s *Store) ref(p *pool, key uint64, e pageindex.Entry) PageRef {
	return PageRef{Pool: p.name, UID: p.uid, Key: key, Age: e.Age(), Class: e.Class(), Size: e.Size(), p: p, e: e}
}

// eachEntry calls fn for every entry of every pool, each shard read-locked
// in turn. The caller holds the store's lock.
func (s *Store) eachEntry(fn func(p *pool, key uint64, e pageindex.Entry) bool) {
	for _, p := range s.pools {
		// Loaded atomically: readers age entries under read locks (idle.go).
		if !p.ix.EachLoaded(func(key uint64, e pageindex.Entry) bool { return fn(p, key, e) }) {
			return
		}
	}
}

// Pick lists the pages, in RAM or off it, that take accepts, until their
// objects reach limit bytes. take runs under the store's read lock: it
// must not call the store.
func (s *Store) Pick(take func(r PageRef) bool, limit int) []PageRef {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []PageRef
	total := 0
	s.eachEntry(func(p *pool, key uint64, e pageindex.Entry) bool {
		if r := s.ref(p, key, e); take(r) {
			out = append(out, r)
			total += e.ObjSize()
		}
		return total < limit
	})
	return out
}

// DrainColdest picks slabs to empty, those whose pages score highest
// first (score ranks a page by its age; among equals, the sparsest slab
// goes first, then slab order from *cursor), until they hold want bytes,
// keeps new objects out of them, and lists their pages. undrain lets the
// slabs that kept objects take new ones again: call it once the pages
// have moved, or failed to. score runs under the store's lock.
func (s *Store) DrainColdest(want uint64, score func(age int) uint32, cursor *uint32) (refs []PageRef, undrain func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.arena
	sum := make([]uint64, a.Slabs())
	found := make([]uint16, a.Slabs())
	s.eachEntry(func(_ *pool, _ uint64, e pageindex.Entry) bool {
		if e.HasObject() {
			sum[e.Handle().Slab()] += uint64(score(e.Age()))
			found[e.Handle().Slab()]++
		}
		return true
	})
	slabs := a.DrainColdest(want, sum, found, cursor)
	set := make([]bool, a.Slabs())
	for _, idx := range slabs {
		set[idx] = true
	}
	s.eachEntry(func(p *pool, key uint64, e pageindex.Entry) bool {
		if e.HasObject() && set[e.Handle().Slab()] {
			refs = append(refs, s.ref(p, key, e))
		}
		return true
	})
	return refs, func() {
		s.mu.Lock()
		for _, idx := range slabs {
			a.Undrain(idx)
		}
		s.mu.Unlock()
	}
}

// CopyObjects copies the object of each page of refs that is still in RAM
// as picked into slot(i), and says how many it copied; the slots of the
// others are left as they were (Relocate will refuse those pages).
func (s *Store) CopyObjects(refs []PageRef, slot func(i int) []byte) int {
	// The read lock keeps every object in place: frees and compaction
	// take the write lock. An entry may change meanwhile; its old object
	// is freed only after, so the bytes copied are those it named.
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for i, r := range refs {
		if s.pools[r.Pool] != r.p || !r.e.HasObject() {
			continue
		}
		if cur, ok := r.p.ix.Get(r.Key); !ok || cur&^pageindex.IdleBits != r.e&^pageindex.IdleBits {
			continue
		}
		copy(slot(i), s.arena.Bytes(r.e.Handle(), r.e.ObjSize()))
		n++
	}
	return n
}

// Relocate points each page of refs at locs[i] off RAM if it is still as
// picked (its age aside), freeing what it held before: its arena object,
// or its place off RAM (Tier.Forget). moved[i] says which moved; the
// caller frees the places of the others.
func (s *Store) Relocate(refs []PageRef, locs []Loc) (moved []bool) {
	moved = make([]bool, len(refs))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range refs {
		if s.pools[r.Pool] != r.p {
			continue
		}
		w := r.p.ix.Walk(true)
		ix := w.At(r.Key)
		cur, ok := ix.Get(r.Key)
		if ok && cur&^pageindex.IdleBits == r.e&^pageindex.IdleBits {
			ix.Set(r.Key, cur&pageindex.IdleBits|pageindex.OnFileBit|cur&pageindex.KeepBits|pageindex.Entry(locs[i]))
			if cur.HasObject() {
				s.arena.Free(cur.Handle())
			} else if cur.OnFile() {
				s.tier.Forget(Loc(cur.Handle()), cur.ObjSize())
			}
			moved[i] = true
		}
		w.Done()
	}
	return moved
}

// PoolRecord is what a restart needs of one pool: its owner, codec, and
// its pages, each as an opaque word: those that need no RAM (off RAM, or
// zero) as they are, those in RAM as lost (word 0: a crash takes them).
// Changed says that the pool was being changed as it was recorded, so
// that a restart must trust none of its pages: any may be older than the
// last write, and pages written later are not listed.
type PoolRecord struct {
	Name    string
	UID     uint32
	Codec   pagefmt.Codec
	Changed bool
	Keys    []uint64
	Words   []uint64
}

// lostWord records a page in RAM: a crash loses it. Entries are never 0.
const lostWord = 0

// Records lists the backends' names and every pool with its pages: what
// a restart can have back without the RAM, and what it would have lost.
// then runs under the same hold of the store's lock, so that the caller
// may mark the moment the records describe: nothing is freed or moved off
// RAM between the two.
//
// A pool found still (no PUT or DEL under way) is recorded whole, and its
// next change is noted first (Tier.Note); one being changed is recorded
// Changed. So a crash loses pages that were in RAM when the last record
// was taken, and every page of a pool changed since; a restart reports
// them (Restore), and never finds an older version of a page.
func (s *Store) Records(then func()) (backends []string, pools []PoolRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.backends.Load(); p != nil {
		backends = append(backends, (*p)...)
	}
	for _, p := range s.pools {
		// Read before the walk: a PUT that starts later waits for the
		// lock, and one counted here may publish during the walk.
		changed := p.writers.Load() > 0
		pr := PoolRecord{Name: p.name, UID: p.uid, Codec: p.codec, Changed: changed}
		p.ix.EachLoaded(func(key uint64, e pageindex.Entry) bool {
			pr.Keys = append(pr.Keys, key)
			if e.OnFile() || e.Class() == pagefmt.ClassZero {
				pr.Words = append(pr.Words, uint64(e&^pageindex.IdleBits))
			} else {
				pr.Words = append(pr.Words, lostWord)
			}
			return true
		})
		p.clean = !changed
		pools = append(pools, pr)
	}
	then()
	return backends, pools
}

// Restored says what Restore brought back, and what the crash before it
// (if any) lost.
type Restored struct {
	Pages   int      // restored, each as last written
	Lost    int      // recorded, but lost: in RAM at the record, or of a changed pool
	Changed []string // pools changed after the record: pages written since are lost too, uncounted
}

// Restore brings back pools that Records listed, into a store that has
// none of them: their owners, codecs and pages, except the pages a crash
// lost, counted; a Changed pool comes back empty. Each page off RAM has
// its place claimed (claim says why a place cannot be had). On an error
// the store must not be used.
func (s *Store) Restore(backends []string, pools []PoolRecord, claim func(loc Loc, size int) error) (Restored, error) {
	ids := make([]uint8, len(backends))
	for i, n := range backends {
		ids[i] = s.BackendID(n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var r Restored
	for _, bp := range pools {
		if s.pools[bp.Name] != nil {
			return r, fmt.Errorf("index names pool %q twice", bp.Name)
		}
		if bp.Codec > pagefmt.CodecZstd {
			return r, fmt.Errorf("damaged index: pool %q has codec %d", bp.Name, bp.Codec)
		}
		// A pool recorded whole is as the record says until it changes;
		// a changed one stays marked changed in the record until the
		// next, whatever happens now.
		p := &pool{name: bp.Name, uid: bp.UID, codec: bp.Codec, clean: !bp.Changed}
		s.pools[p.name] = p
		s.user(p.uid).pools++
		if bp.Changed {
			r.Changed = append(r.Changed, p.name)
		}
		w := p.ix.Walk(true)
		for j, key := range bp.Keys {
			if bp.Words[j] == lostWord || bp.Changed {
				r.Lost++
				continue
			}
			e, err := s.restored(pageindex.Entry(bp.Words[j]), ids, claim)
			if err != nil {
				w.Done()
				return r, fmt.Errorf("damaged index: pool %q key %d: %w", p.name, key, err)
			}
			if _, dup := w.At(key).Set(key, e); dup {
				w.Done()
				return r, fmt.Errorf("damaged index: pool %q has key %d twice", p.name, key)
			}
			s.account(p, e, +1)
			r.Pages++
		}
		w.Done()
	}
	return r, nil
}

// restored checks a recorded entry and gives it this store's backend
// number; a page off RAM has its place claimed.
func (s *Store) restored(e pageindex.Entry, ids []uint8, claim func(Loc, int) error) (pageindex.Entry, error) {
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
	if err := claim(Loc(e.Handle()), e.ObjSize()); err != nil {
		return 0, err
	}
	return e, nil
}
