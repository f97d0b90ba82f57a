package pagecache

import (
	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/pageindex"
)

// Idle tracking. Every entry carries its page's age: the epochs since the
// page was last read or written, saturating at MaxAge. It costs no
// metadata beyond the entry, and no write lock on a read: a write makes a
// fresh entry, of age 0; a read clears the age in place (GetTouch); AgeTick,
// once an epoch, adds one to every age under read locks (see pageindex).
//
// The epoch's length is the caller's (the daemon's idle-epoch setting).

// MaxAge is the oldest age an entry tells: a page idle longer, or marked
// idle (MarkIdle), reads MaxAge.
const MaxAge = pageindex.MaxAge

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
		p.ix.Tick()
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
		n += p.ix.MarkIdle()
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
		p.ix.EachShared(func(_ uint64, sl *pageindex.Slot) {
			e := sl.Load()
			in.Pages[e.Age()]++
			in.Bytes[e.Age()] += uint64(e.Size())
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
	Class pagefmt.Class
	Size  int // stored bytes
	p     *pool
	e     pageindex.Entry // as found
}

// Tried says whether recompression was tried on the page's bytes already.
func (r *PageRef) Tried() bool { return r.e.Tried() }

// OnFile says whether the page lives off RAM, below the store (entry bit
// 63; see Tier): its handle is no arena object then, and ReadRefs and
// Replace are not for it.
func (r *PageRef) OnFile() bool { return r.e.OnFile() }

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
		p.ix.EachShared(func(key uint64, sl *pageindex.Slot) {
			e := sl.Load()
			a := e.Age()
			if a < f.MinAge || (total == n && a <= youngest) {
				return
			}
			r := PageRef{Pool: p.name, UID: p.uid, Key: key, Age: a, Class: e.Class(), Size: e.Size(), p: p, e: e}
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
