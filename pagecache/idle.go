package pagecache

import (
	"sync/atomic"

	"github.com/s4d-project/s4d/backends"
)

// Idle tracking. Every entry carries its page's age: the epochs since the
// page was last read or written, saturating at MaxAge. It costs no
// metadata beyond the entry, and no write lock on a read:
//   - a write makes a fresh entry, of age 0;
//   - a read clears the age in place (touch), only when it is not 0
//     already, so a page read again within an epoch costs one load. The
//     reader holds its shard's read lock: writers are shut out, and
//     readers race only each other, through atomics (index.find and get
//     load entries atomically for that reason);
//   - AgeTick, once an epoch, adds one to every age, also under read
//     locks and through compare-and-swap, a chunk of slots at a time.
//
// The epoch's length is the caller's (the daemon's idle-epoch setting).

const (
	ageShift = 56
	// MaxAge is the oldest age an entry tells: a page idle longer, or
	// marked idle (MarkIdle), reads MaxAge.
	MaxAge        = 63
	ageMask entry = MaxAge << ageShift
)

func (e entry) age() int            { return int(e>>ageShift) & MaxAge }
func (e entry) withAge(a int) entry { return e&^ageMask | entry(a)<<ageShift }

// load reads a slot's entry; see touch for why atomically.
func (s *slot) load() entry { return entry(atomic.LoadUint64((*uint64)(&s.e))) }

func (s *slot) cas(old, new entry) bool {
	return atomic.CompareAndSwapUint64((*uint64)(&s.e), uint64(old), uint64(new))
}

// getTouch is get for a read of the page: its age starts again. The
// caller holds the shard's read lock at least.
func (ix *index) getTouch(key uint64) (entry, bool) {
	p := ix.find(key)
	if p < 0 {
		return 0, false
	}
	s := &ix.slots[p]
	for {
		e := s.load()
		if e&ageMask == 0 || s.cas(e, e&^ageMask) {
			return e &^ ageMask, true
		}
	}
}

// sharedChunk is how many slots a shared walk visits per hold of a
// shard's read lock, so that a writer waits for a few microseconds, not
// for a whole shard of a large pool.
const sharedChunk = 1024

// eachShared calls fn for every stored slot under its shard's read lock;
// fn may change the entry only with slot.cas, and only its age or
// tried bit (readers hold the same lock). An entry a writer moves between
// two chunks may be seen twice or not at all: good enough for ages.
func (sh *shards) eachShared(fn func(key uint64, s *slot)) {
	for i := range sh {
		for lo := 0; ; lo += sharedChunk {
			sh[i].mu.RLock()
			slots := sh[i].ix.slots
			if lo >= len(slots) {
				sh[i].mu.RUnlock()
				break
			}
			for j := lo; j < min(lo+sharedChunk, len(slots)); j++ {
				if s := &slots[j]; s.load() != 0 {
					fn(s.key, s)
				}
			}
			sh[i].mu.RUnlock()
		}
	}
}

// poolsFor lists the pools uid may use (all for root), or the one named.
func (s *Store) poolsFor(uid uint32, name string) ([]*pool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if name != "" {
		p, err := s.lookup(uid, name)
		if err != nil {
			return nil, err
		}
		return []*pool{p}, nil
	}
	var out []*pool
	for _, p := range s.pools {
		if uid == 0 || p.uid == uid {
			out = append(out, p)
		}
	}
	return out, nil
}

// AgeTick ends an epoch: every stored page grows one epoch older.
func (s *Store) AgeTick() {
	ps, _ := s.poolsFor(0, "")
	for _, p := range ps {
		p.ix.eachShared(func(_ uint64, sl *slot) {
			for {
				e := sl.load()
				if e == 0 || e.age() == MaxAge || sl.cas(e, e.withAge(e.age()+1)) {
					return
				}
			}
		})
	}
}

// MarkIdle makes every page of pool (all of uid's pools for "") read as
// idle for the longest, as if untouched for MaxAge epochs, until it is
// next read or written (zram's `echo all > idle`). It returns how many
// pages it marked.
func (s *Store) MarkIdle(uid uint32, pool string) (uint64, error) {
	ps, err := s.poolsFor(uid, pool)
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, p := range ps {
		p.ix.eachShared(func(_ uint64, sl *slot) {
			for {
				e := sl.load()
				if e == 0 || sl.cas(e, e.withAge(MaxAge)) {
					n++
					return
				}
			}
		})
	}
	return n, nil
}

// IdleInfo counts one pool's pages by age.
type IdleInfo struct {
	Pool  string
	UID   uint32
	Pages [MaxAge + 1]uint64 // pages of each age, in epochs
	Bytes [MaxAge + 1]uint64 // their stored bytes
}

// Older sums the pages and stored bytes of age minAge or more.
func (in *IdleInfo) Older(minAge int) (pages, bytes uint64) {
	for a := max(minAge, 0); a <= MaxAge; a++ {
		pages += in.Pages[a]
		bytes += in.Bytes[a]
	}
	return pages, bytes
}

// Idle counts the pages of pool (all of uid's pools for "") by age,
// without refreshing them.
func (s *Store) Idle(uid uint32, pool string) ([]IdleInfo, error) {
	ps, err := s.poolsFor(uid, pool)
	if err != nil {
		return nil, err
	}
	out := make([]IdleInfo, len(ps))
	for i, p := range ps {
		in := &out[i]
		in.Pool, in.UID = p.name, p.uid
		p.ix.eachShared(func(_ uint64, sl *slot) {
			e := sl.load()
			in.Pages[e.age()]++
			in.Bytes[e.age()] += uint64(e.size())
		})
	}
	return out, nil
}

// PageRef names a stored page as Coldest found it. It stays valid
// whatever happens to the page: a change made through it (Replace) takes
// effect only while the page is still as it was found.
type PageRef struct {
	Pool  string
	UID   uint32 // the pool's owner
	Key   uint64
	Age   int // epochs since last read or written; MaxAge: at least that, or marked idle
	Class backends.Class
	Size  int // stored bytes
	p     *pool
	e     entry // as found
}

// Tried says whether recompression was tried on the page's bytes already.
func (r *PageRef) Tried() bool { return r.e&triedBit != 0 }

// OnFile says whether the page lives on the backing file (entry bit 63):
// its handle is no arena object then, and ReadRefs and Replace are not
// for it.
func (r *PageRef) OnFile() bool { return r.e>>63 != 0 }

// ColdFilter chooses the pages Coldest looks at.
type ColdFilter struct {
	UID    uint32 // pages of this user's pools only; 0: every user's
	Pool   string // one pool; "": every pool (of UID)
	MinAge int    // pages idle for at least this many epochs
	// Want, if set, further chooses pages. It runs under a shard's lock
	// and must not call the store.
	Want func(*PageRef) bool
}

// Coldest returns up to n pages that f accepts, the oldest first (among
// pages of the same age, in no particular order), without refreshing
// them: the cold tier's choice of what to recompress or write back. It
// walks every chosen pool once, keeping at most n pages, so ask for many
// at a time rather than calling it for each batch. ErrNoPool and
// ErrPermission come back for a pool that is missing or not UID's.
func (s *Store) Coldest(n int, f ColdFilter) ([]PageRef, error) {
	ps, err := s.poolsFor(f.UID, f.Pool)
	if err != nil || n <= 0 {
		return nil, err
	}
	var byAge [MaxAge + 1][]PageRef
	total, youngest := 0, 0 // youngest: no page kept is younger
	for _, p := range ps {
		p.ix.eachShared(func(key uint64, sl *slot) {
			e := sl.load()
			a := e.age()
			if a < f.MinAge || (total == n && a <= youngest) {
				return
			}
			r := PageRef{Pool: p.name, UID: p.uid, Key: key, Age: a, Class: e.class(), Size: e.size(), p: p, e: e}
			if f.Want != nil && !f.Want(&r) {
				return
			}
			if total == n { // make room: drop one of the youngest
				for len(byAge[youngest]) == 0 {
					youngest++
				}
				byAge[youngest] = byAge[youngest][:len(byAge[youngest])-1]
				total--
			}
			byAge[a] = append(byAge[a], r)
			total++
			for youngest < MaxAge && len(byAge[youngest]) == 0 {
				youngest++
			}
			youngest = min(youngest, a)
		})
	}
	out := make([]PageRef, 0, total)
	for a := MaxAge; a >= 0; a-- {
		out = append(out, byAge[a]...)
	}
	return out, nil
}
