package cold

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/s4d-project/s4d/backing"
	"github.com/s4d-project/s4d/pagecache"
	"github.com/s4d-project/s4d/pagefmt"
)

// fileLevel is the level below the store's RAM: a backing file. It is the
// store's pagecache.Tier. A page on the file keeps its entry in the
// store, with its place there (a pagecache.Loc: the file's units to its
// object) in place of an arena handle; the object is the arena's as it
// was (checksum, then stored bytes), packed among others.
//
// A move copies objects out of the arena, writes them without any lock
// of the store, and then has the store point each page at its copy only
// if it is still the one copied (pagecache.Store.Relocate): a page
// replaced, deleted or moved by compaction meanwhile keeps its new
// state, and its copy on the file is freed. Nothing is lost on an error:
// the pages stay where they were.
type fileLevel struct {
	store   Store
	f       *backing.File
	shift   uint32
	persist bool
	mu      sync.Mutex // one move at a time
	cursor  uint32     // slab index the next pressure round starts from

	pressure, forced, moved atomic.Uint64 // rounds under pressure, pages forced out, pages compacted in the file
	kept                    atomic.Uint64 // of the rounds under pressure, those run ahead of PUTs (KeepRoom)
	pages                   atomic.Uint64 // pages written back in all
	failures, full          atomic.Uint64 // rounds failed by an I/O error; rounds that found the file full
	readFailures            atomic.Uint64
	lastErr                 atomic.Pointer[string]
	restored                pagecache.Restored // what the start found, and what the crash before it lost
	remote                  *remoteLevel       // the level below, if any (remote.go)
}

var _ pagecache.Tier = (*fileLevel)(nil)

// attachFile makes f the store's level below RAM. idx, the index of a
// persisted file's last checkpoint, is restored first: its pools, owners
// and pages (which stay on the file until read), less what a crash lost
// (pagecache.Store.Records says what). With persist, checkpoints record
// the store on the file. It returns the pages restored; on an error the
// store must not be used.
func attachFile(store Store, f *backing.File, idx *backing.Index, persist bool) (*fileLevel, int, error) {
	return attachLevels(store, f, idx, persist, nil)
}

// attachLevels is attachFile with the remote level below the file, if rl
// is not nil: its table is restored from idx before the pages.
func attachLevels(store Store, f *backing.File, idx *backing.Index, persist bool, rl *remoteLevel) (*fileLevel, int, error) {
	c := &fileLevel{store: store, f: f, shift: uint32(bits.TrailingZeros64(f.Unit())), persist: persist, remote: rl}
	if persist {
		f.SetPersist()
	}
	if idx != nil && rl != nil {
		if err := rl.restoreTable(idx); err != nil {
			return nil, 0, err
		}
	}
	if idx != nil {
		pools := make([]pagecache.PoolRecord, len(idx.Pools))
		for i, p := range idx.Pools {
			pools[i] = pagecache.PoolRecord{Name: p.Name, UID: p.UID, Codec: pagefmt.Codec(p.Codec &^ changedBit),
				Changed: p.Codec&changedBit != 0, Keys: p.Keys, Words: p.Words}
		}
		var err error
		if c.restored, err = store.Restore(idx.Backends, pools, c.claim); err != nil {
			return nil, 0, fmt.Errorf("backing file %s: %w", f.Path(), err)
		}
	}
	if rl != nil {
		rl.l.Settle() // places no restored page names are freed
	}
	store.SetTier(c)
	return c, c.restored.Pages, nil
}

// changedBit marks, in a pool's codec byte in the file's index, a pool
// recorded Changed. A daemon that knows no such bit refuses the index
// as damaged rather than restore pages that may be older.
const changedBit = 0x80

// claim takes, at a restart, the place of a page the index recorded.
func (c *fileLevel) claim(loc pagecache.Loc, size int) error {
	if isRemote(loc) {
		if c.remote == nil {
			return fmt.Errorf("place %#x is the remote tier's; start with --remote-tier", loc)
		}
		return c.remote.l.Claim(uint32(loc))
	}
	if !c.f.Restore(c.off(loc), size) {
		return fmt.Errorf("place %d (%d bytes) outside the file or over another", c.off(loc), size)
	}
	return nil
}

func (c *fileLevel) off(loc pagecache.Loc) uint64 { return uint64(loc) << c.shift }

func (c *fileLevel) loc(off uint64) pagecache.Loc { return pagecache.Loc(off >> c.shift) }

func (c *fileLevel) failed(err error) {
	if errors.Is(err, backing.ErrFull) {
		c.full.Add(1)
	} else {
		c.failures.Add(1)
	}
	msg := err.Error()
	c.lastErr.Store(&msg)
}

// MakeRoom is what a PUT that found no room calls (writeback.go).
func (c *fileLevel) MakeRoom(need uint64) error { return c.makeRoom(need) }

// Read reads objects from the file, in one batch.
func (c *fileLevel) Read(rs []pagecache.TierRead) {
	br := make([]backing.Read, 0, len(rs))
	var onFile, far []int
	for i, r := range rs {
		if isRemote(r.Loc) {
			far = append(far, i)
			continue
		}
		onFile = append(onFile, i)
		br = append(br, backing.Read{Off: c.off(r.Loc), Len: r.Len})
	}
	if len(far) > 0 {
		if c.remote == nil {
			for _, i := range far {
				rs[i].Err = fmt.Errorf("place %#x is the remote tier's, and there is none", rs[i].Loc)
			}
		} else {
			c.remote.read(rs, far) // remote.go
		}
	}
	if len(br) == 0 {
		return
	}
	c.f.ReadBatch(br)
	for j, i := range onFile {
		rs[i].Data, rs[i].Err = br[j].Data, br[j].Err
		if br[j].Err != nil {
			c.readFailures.Add(1)
		}
	}
}

// Hold keeps the file's space from reuse (backing.File.Hold).
func (c *fileLevel) Hold() (unhold func()) {
	c.f.Hold()
	if c.remote == nil {
		return c.f.Unhold
	}
	un := c.remote.l.Hold()
	return func() { un(); c.f.Unhold() }
}

// Forget frees the file's space of a page replaced or deleted.
func (c *fileLevel) Forget(loc pagecache.Loc, size int) {
	if isRemote(loc) {
		if c.remote != nil {
			c.remote.l.Forget(uint32(loc)) // its block goes at the next Flush
		}
		return
	}
	c.f.Free(c.off(loc), size)
}

// Note checkpoints, with pool marked changed, before its first change
// since the last checkpoint that found it still (persist.go).
func (c *fileLevel) Note(pool string) error {
	if !c.persist {
		return nil
	}
	if err := c.Checkpoint(); err != nil {
		return fmt.Errorf("recording that pool %q changes: %w", pool, err)
	}
	return nil
}

// FileStats describes the backing file and the moves to and from it.
type FileStats struct {
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
	// What the last start found lost by a crash before it: pages in RAM
	// at the last checkpoint or of pools changed since it, and those pools
	// (their pages written since are lost too, uncounted).
	LostAtStart         uint64
	ChangedPoolsAtStart []string
}

func (c *fileLevel) stats() FileStats {
	st := FileStats{Stats: c.f.Stats(), Path: c.f.Path(), Persist: c.persist, WrittenBack: c.pages.Load(),
		Forced: c.forced.Load(), PressureRounds: c.pressure.Load(), AheadRounds: c.kept.Load(), Compacted: c.moved.Load(),
		Failures: c.failures.Load(), FullRounds: c.full.Load(), ReadFailures: c.readFailures.Load(),
		LostAtStart: uint64(c.restored.Lost), ChangedPoolsAtStart: c.restored.Changed}
	if e := c.lastErr.Load(); e != nil {
		st.LastError = *e
	}
	return st
}

// readGood reads the picked pages' objects off the file, held so their
// space is not reused meanwhile (a page freed then is refused later by
// Relocate), and keeps those that read back whole: a page the file cannot
// give back stays where it is, to be reported when read, never moved as
// other bytes. vs is reused for the pages kept.
func (c *fileLevel) readGood(vs []pagecache.PageRef) (ok []pagecache.PageRef, objs [][]byte) {
	rs := make([]backing.Read, len(vs))
	for i := range vs {
		rs[i] = backing.Read{Off: c.off(vs[i].Loc()), Len: vs[i].ObjSize()}
	}
	c.f.Hold()
	c.f.ReadBatch(rs)
	c.f.Unhold()
	ok = vs[:0]
	for i, v := range vs {
		if _, good := pagecache.CheckObject(rs[i].Data); rs[i].Err == nil && good {
			ok = append(ok, v)
			objs = append(objs, rs[i].Data)
		}
	}
	return ok, objs
}
