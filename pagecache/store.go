// Package pagecache keeps compressed pages in RAM: named pools of uint64
// keys owned by a user, an index per pool, an arena of size-classed slabs,
// a memory limit, compaction and zram-style statistics. A page may also
// live below RAM, in the levels the cold tier registers (Tier, tier.go),
// through a small API for moving pages (move.go); the store knows
// nothing of what those levels are.
package pagecache

import (
	"encoding/binary"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/pageindex"
	"github.com/s4d-project/s4d/slab"
)

// Result is the outcome for one page of a batch.
type Result uint8

const (
	OK        Result = iota
	NoSpace          // the memory limit refused the page
	NotFound         // no such key
	Failed           // the page could not be stored or read
	Corrupt          // the stored bytes fail their checksum
	OverQuota        // the user's quota refused the page
)

const checksumSize = pageindex.ChecksumSize

// Errors for whole requests.
var (
	ErrPermission = errors.New("permission denied")
	ErrNoPool     = errors.New("no such pool")
	ErrPoolLimit  = errors.New("too many pools for this user")
)

// Limits bound what one user may hold; zero means no limit.
type Limits struct {
	PoolsPerUser int
	BytesPerUser uint64 // stored (compressed) bytes
}

type user struct {
	pools int
	bytes uint64
}

// Store holds every pool. It is safe for concurrent use.
type Store struct {
	pageSize int

	mu    sync.RWMutex
	gate  sync.RWMutex // Puts filling reserved slots hold it for reading; Compact for writing
	arena *slab.Arena
	pools map[string]*pool
	// Backend names by the number entries hold, copied on write: every
	// PUT looks its backend up, and must not queue on mu for it.
	backends  atomic.Pointer[[]string]
	backendMu sync.Mutex // adds a name
	memMax    uint64
	compr     uint64 // compressed bytes held
	compacted uint64
	limits    Limits
	users     map[uint32]*user
	tier      Tier // the levels below RAM, if any (tier.go)
}

type pool struct {
	name  string
	uid   uint32
	ix    pageindex.Shards
	st    PoolStats     // guarded by Store.mu
	codec pagefmt.Codec // poolcodec.go

	// What a crash would lose (tier.go): clean says the Tier's last
	// record of the pool is whole, so its next change must be noted
	// first; writers counts the PUTs and DELs changing it now.
	clean   bool // guarded by Store.mu
	note    *noteWait
	writers atomic.Int32
}

// PoolStats counts one pool's pages.
type PoolStats struct {
	Pages, StoredBytes, Zero, Same, Huge uint64
}

// New makes a store for pages of pageSize bytes, holding at most memLimit
// bytes of arena memory (0 = no limit).
func New(pageSize int, memLimit uint64) *Store {
	a := slab.New(pageSize, memLimit)
	s := &Store{pageSize: pageSize, arena: a, pools: map[string]*pool{}, users: map[uint32]*user{}}
	// The slabs' memory goes with the store: nothing outside it holds
	// their bytes past a call (see View).
	runtime.AddCleanup(s, func(unmap func()) { unmap() }, a.Unmapper())
	return s
}

// SetLimits changes the per-user limits; what is stored stays.
func (s *Store) SetLimits(l Limits) {
	s.mu.Lock()
	s.limits = l
	s.mu.Unlock()
}

func (s *Store) user(uid uint32) *user {
	u := s.users[uid]
	if u == nil {
		u = new(user)
		s.users[uid] = u
	}
	return u
}

// PageSize is the size of every page in the store.
func (s *Store) PageSize() int { return s.pageSize }

// SetMemLimit changes the limit; pages already stored stay.
func (s *Store) SetMemLimit(limit uint64) {
	s.mu.Lock()
	s.arena.SetLimit(limit)
	s.arena.Release()
	s.mu.Unlock()
}

// Sweep gives back to the kernel the memory of slabs emptied before the
// previous sweep (it is kept a while for new slabs to reuse) and returns
// how many bytes that was. Call it every few seconds.
func (s *Store) Sweep() uint64 { return s.arena.Sweep(&s.mu) }

// BackendID returns the small number entries use for a backend name.
func (s *Store) BackendID(name string) uint8 {
	if id, ok := s.backendID(name); ok {
		return id
	}
	s.backendMu.Lock()
	defer s.backendMu.Unlock()
	if id, ok := s.backendID(name); ok {
		return id
	}
	var names []string
	if p := s.backends.Load(); p != nil {
		names = *p
	}
	if len(names) == 16 {
		return 15 // entries hold 4 bits; more backends than that share the last
	}
	names = append(names[:len(names):len(names)], name)
	s.backends.Store(&names)
	return uint8(len(names) - 1)
}

func (s *Store) backendID(name string) (uint8, bool) {
	if p := s.backends.Load(); p != nil {
		for i, n := range *p {
			if n == name {
				return uint8(i), true
			}
		}
	}
	return 0, false
}

func (s *Store) backendName(id uint8) string {
	if p := s.backends.Load(); p != nil && int(id) < len(*p) {
		return (*p)[id]
	}
	return "?"
}

// lookup finds a pool the caller may use; root may use every pool.
func (s *Store) lookup(uid uint32, name string) (*pool, error) {
	p := s.pools[name]
	if p == nil {
		return nil, ErrNoPool
	}
	if uid != 0 && p.uid != uid {
		return nil, ErrPermission
	}
	return p, nil
}

// lookupOrCreate is lookup that creates a pool for uid where there is none,
// within its limit of pools. The caller holds the write lock.
func (s *Store) lookupOrCreate(uid uint32, name string) (*pool, error) {
	p, err := s.lookup(uid, name)
	if err != ErrNoPool {
		return p, err
	}
	if s.limits.PoolsPerUser > 0 && s.user(uid).pools >= s.limits.PoolsPerUser {
		return nil, ErrPoolLimit
	}
	// A new pool is in no record of the Tier's: its first change is noted.
	p = &pool{name: name, uid: uid, clean: true}
	s.pools[name] = p
	s.user(uid).pools++
	return p, nil
}

// CheckPool reports whether uid may use pool (nil if it does not exist yet
// and would be created by a PUT).
func (s *Store) CheckPool(uid uint32, name string) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if _, err := s.lookup(uid, name); err != nil && err != ErrNoPool {
		return err
	}
	return nil
}

// Put stores a compressed batch under keys, page by page: each page either
// replaces its key whole or, when the memory limit refuses it, leaves the
// key as it was and is reported NoSpace. res must have len(keys) entries.
//
// The lock is held only to reserve arena slots and, after the bytes are
// copied into them without it, to publish the new entries: concurrent
// batches copy in parallel, and readers never see a slot being filled.
func (s *Store) Put(uid uint32, name string, keys []uint64, b *pagefmt.Batch, c *pagefmt.Compressed, backend uint8, res []Result) error {
	n := len(keys)
	if n > coldPart && s.tier != nil && s.arena.Limit() > 0 && c.Place == nil {
		return s.putInParts(uid, name, keys, b, c, backend, res)
	}
	// The batch's parts travel in the scratch (from a pool), so that the
	// steps below may run on several goroutines without moving the
	// caller's values to the heap.
	sc := putScratchPool.Get().(*putScratch)
	defer sc.done()
	sc.size(n)
	sc.b, sc.c, sc.res = *b, c, res
	// Checksums are computed before taking the lock: they are the costly
	// part. A backend may have computed them already (on the GPU).
	if len(c.Sum) == n {
		sc.sums = c.Sum
	} else {
		inParallel(n, 256, sc.checksums)
	}
	// Compaction moves objects: it waits until no slot is being filled.
	s.gate.RLock()
	defer s.gate.RUnlock()

	s.mu.Lock()
	p, err := s.lookupOrCreate(uid, name)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	p.writers.Add(1)
	defer p.writers.Add(-1) // once the entries are published
	if err := s.changing(p); err != nil {
		s.mu.Unlock()
		return err
	}
	if short := s.reserve(p, keys, c, backend, sc, res, false); short > 0 && s.tier != nil {
		s.roomFor(p, keys, c, backend, sc, res, short) // the Tier makes room
	}
	s.memMax = max(s.memMax, s.arena.Used())
	s.mu.Unlock()

	// Filling fresh slabs costs a page fault per 4 KiB written (most of a
	// 256-page Put on a virtual machine, 0.8 us a page), so even a small
	// batch spreads it over the cores.
	if c.Place != nil { // the engine writes the objects (direct.go)
		if err := s.place(p, sc, keys, backend); err != nil {
			return err
		}
	} else if n <= 64 {
		sc.fill(0, n) // no method value to allocate for a small batch
	} else {
		inParallel(n, 64, sc.fill)
	}
	faultCorrupt(keys, sc.buf, res)

	// Entries go in under their shards' locks only; the pages they
	// replace are freed under the store's lock afterwards.
	w := p.ix.Walk(true)
	for i, key := range keys {
		if res[i] != OK {
			continue
		}
		if old, ok := w.At(key).Set(key, pageindex.MakeEntry(sc.h[i], int(c.Size[i]), c.Class[i], backend)); ok {
			sc.old = append(sc.old, old)
		}
	}
	w.Done()
	if len(sc.old) > 0 {
		s.mu.Lock()
		for _, old := range sc.old {
			s.forget(p, old)
		}
		s.mu.Unlock()
	}
	return nil
}

// reserve checks each page of a Put against the quota and reserves its
// arena slot, counting it; with retry, only pages refused for space
// before. It returns the bytes refused for space. Under the store's lock.
func (s *Store) reserve(p *pool, keys []uint64, c *pagefmt.Compressed, backend uint8, sc *putScratch, res []Result, retry bool) (short uint64) {
	var err error
	owner := s.user(p.uid)
	w := p.ix.Walk(false)
	for i, key := range keys {
		if retry && res[i] != NoSpace {
			continue
		}
		size := int(c.Size[i])
		if q := s.limits.BytesPerUser; q > 0 && owner.bytes+uint64(size) > q {
			// The page it would replace counts as freed.
			if old, ok := w.At(key).Get(key); !ok || owner.bytes-uint64(old.Size())+uint64(size) > q {
				res[i] = OverQuota
				continue
			}
		}
		if c.Class[i] != pagefmt.ClassZero {
			if sc.h[i], sc.buf[i], err = s.arena.Alloc(checksumSize + size); err != nil {
				res[i] = NoSpace
				short += uint64(checksumSize + size)
				continue
			}
		}
		// Counted from now, so limits and quotas see it.
		s.account(p, pageindex.MakeEntry(sc.h[i], size, c.Class[i], backend), +1)
		res[i] = OK
	}
	w.Done()
	return short
}

// coldPart is the most pages of one Put reserved at once when the store
// has a Tier: pages reserved but not yet in the index cannot be moved off
// RAM, so a batch larger than the room left must be stored in parts, each
// making room from the ones before. (A part an engine places itself
// (direct.go) goes whole: its placing is one call.)
const coldPart = 256

func (s *Store) putInParts(uid uint32, name string, keys []uint64, b *pagefmt.Batch, c *pagefmt.Compressed, backend uint8, res []Result) error {
	for lo := 0; lo < len(keys); lo += coldPart {
		hi := min(lo+coldPart, len(keys))
		pb := b.Part(lo, hi-lo)
		pc := pagefmt.Compressed{Class: c.Class[lo:hi], Fill: c.Fill[lo:hi], Off: c.Off[lo:hi], Size: c.Size[lo:hi], Data: c.Data}
		if len(c.Sum) == len(keys) {
			pc.Sum = c.Sum[lo:hi]
		}
		if err := s.Put(uid, name, keys[lo:hi], &pb, &pc, backend, res[lo:hi]); err != nil {
			return err
		}
	}
	return nil
}

// roomFor is Put's way past the memory limit: pages refused for space
// (short bytes of them) are retried after the Tier made room. Called and
// returning with the store's lock held.
func (s *Store) roomFor(p *pool, keys []uint64, c *pagefmt.Compressed, backend uint8, sc *putScratch, res []Result, short uint64) {
	for try := 0; short > 0 && try < 3; try++ {
		s.mu.Unlock()
		err := s.tier.MakeRoom(short)
		s.mu.Lock()
		if err != nil {
			return
		}
		short = s.reserve(p, keys, c, backend, sc, res, true)
	}
}

// putScratch holds a Put's batch, checksums and reserved slots between
// its steps.
type putScratch struct {
	b    pagefmt.Batch
	c    *pagefmt.Compressed
	res  []Result
	sums []uint32
	own  []uint32 // sums' memory when Put computes them
	h    []slab.Handle
	buf  [][]byte
	old  []pageindex.Entry // entries the batch replaced, to free
}

var putScratchPool = sync.Pool{New: func() any { return new(putScratch) }}

func (sc *putScratch) size(n int) {
	if cap(sc.h) < n {
		sc.h, sc.buf, sc.own = make([]slab.Handle, n), make([][]byte, n), make([]uint32, n)
	}
	sc.h, sc.buf, sc.sums, sc.old = sc.h[:n], sc.buf[:n], sc.own[:n], sc.old[:0]
	clear(sc.h)
	clear(sc.buf)
}

// done returns the scratch, holding no arena memory nor the batch.
func (sc *putScratch) done() {
	clear(sc.buf)
	sc.b, sc.c, sc.res, sc.sums = pagefmt.Batch{}, nil, nil, nil
	putScratchPool.Put(sc)
}

// checksums computes the checksums of pages [lo, hi).
func (sc *putScratch) checksums(lo, hi int) { checksums(&sc.b, sc.c, sc.sums, lo, hi) }

// fill writes the checksums and stored bytes of pages [lo, hi) into their
// reserved slots.
func (sc *putScratch) fill(lo, hi int) {
	c := sc.c
	for i := lo; i < hi; i++ {
		buf := sc.buf[i]
		if sc.res[i] != OK || buf == nil {
			continue
		}
		binary.LittleEndian.PutUint32(buf, sc.sums[i])
		switch c.Class[i] {
		case pagefmt.ClassSame:
			binary.LittleEndian.PutUint64(buf[checksumSize:], c.Fill[i])
		case pagefmt.ClassRaw:
			copy(buf[checksumSize:], sc.b.Page(i))
		default:
			copy(buf[checksumSize:], c.Data[c.Off[i]:c.Off[i]+c.Size[i]])
		}
	}
}

// checksums fills sums[lo:hi] with the checksums of those pages' stored bytes.
func checksums(b *pagefmt.Batch, c *pagefmt.Compressed, sums []uint32, lo, hi int) {
	for i := lo; i < hi; i++ {
		sums[i] = c.Checksum(i, b)
	}
}

func (s *Store) forget(p *pool, e pageindex.Entry) {
	if e.HasObject() {
		s.arena.Free(e.Handle())
	} else if e.OnFile() {
		s.tier.Forget(Loc(e.Handle()), e.ObjSize())
	}
	s.account(p, e, -1)
}

func (s *Store) account(p *pool, e pageindex.Entry, sign int) {
	d := uint64(sign) // wraps to subtract
	s.user(p.uid).bytes += uint64(e.Size()) * d
	p.st.Pages += d
	p.st.StoredBytes += uint64(e.Size()) * d
	s.compr += uint64(e.Size()) * d
	switch e.Class() {
	case pagefmt.ClassZero:
		p.st.Zero += d
	case pagefmt.ClassSame:
		p.st.Same += d
	case pagefmt.ClassRaw:
		p.st.Huge += d
	}
}

// Del removes keys.
func (s *Store) Del(uid uint32, name string, keys []uint64, res []Result) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.lookup(uid, name)
	if err != nil {
		return err
	}
	p.writers.Add(1)
	defer p.writers.Add(-1)
	if err := s.changing(p); err != nil {
		return err
	}
	w := p.ix.Walk(true)
	defer w.Done()
	for i, key := range keys {
		if old, ok := w.At(key).Del(key); ok {
			s.forget(p, old)
			res[i] = OK
		} else {
			res[i] = NotFound
		}
	}
	return nil
}

func (r Result) String() string {
	return [...]string{"ok", "no space", "not found", "failed", "corrupt", "over quota"}[r]
}
