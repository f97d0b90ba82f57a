package pagecache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
	"sync/atomic"

	"github.com/s4d-project/s4d/backing"
	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/pageindex"
)

// The cold tier moves pages between the arena and a backing file. An
// entry with bit 63 set lives on the file: its handle counts the file's
// units to its object, which is the arena object as it was (checksum,
// then stored bytes), packed among others. Its size, class and backend
// bits keep their meaning, and the idle bits are left to the tracker.
//
// A move copies objects out under the store's lock, writes them without
// it, and then swaps each entry only if it is still the one copied: a
// page replaced, deleted or moved by compaction meanwhile keeps its new
// state, and its copy on the file is freed. Nothing is lost on an error:
// the pages stay where they were.

const (
	// pendingRead marks, between finding and reading, a page View found
	// on the file; callers never see it.
	pendingRead Result = 0xFE
	// A round moves at most this many bytes of objects, so that the
	// buffers it holds stay small; under pressure it moves at least
	// roundMin, so that each write is large.
	roundMax = 8 << 20
	roundMin = 2 << 20
)

// coldness ranks pages for writeback under pressure: larger goes first.
// Slabs go by the mean age of their pages (idle.go); among equals, the
// sparsest first (most memory freed per byte written), then in slab
// order from a moving cursor.
func coldness(e pageindex.Entry) uint32 { return uint32(e.Age()) }

// fileTier is the store's backing file and what it has done.
type fileTier struct {
	f       *backing.File
	shift   uint32
	persist bool
	mu      sync.Mutex // one move at a time
	cursor  uint32     // slab index the next pressure round starts from

	pressure, forced, moved atomic.Uint64 // rounds under pressure, pages forced out, pages compacted in the file
	kept                    atomic.Uint64 // of the rounds under pressure, those run ahead of PUTs (KeepRoom)
	pages                   atomic.Uint64 // pages written back in all
	failures, full          atomic.Uint64 // rounds failed by an I/O error; rounds that found the file full
	readFailures, corrupt   atomic.Uint64
	lastErr                 atomic.Pointer[string]
}

func (c *fileTier) failed(err error) {
	if errors.Is(err, backing.ErrFull) {
		c.full.Add(1)
	} else {
		c.failures.Add(1)
	}
	msg := err.Error()
	c.lastErr.Store(&msg)
}

func (c *fileTier) off(e pageindex.Entry) uint64 { return uint64(e.Handle()) << c.shift }

// free releases the file space of an entry on the file. Under the store's lock.
func (c *fileTier) free(e pageindex.Entry) { c.f.Free(c.off(e), e.ObjSize()) }

// Mode chooses the pages a forced writeback moves.
type Mode uint8

const (
	All  Mode = iota // every page with stored bytes
	Idle             // pages of at least the age asked for (idle.go)
	Huge             // pages stored raw
)

// ParseMode reads a mode's name.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "all":
		return All, nil
	case "idle":
		return Idle, nil
	case "huge":
		return Huge, nil
	}
	return 0, fmt.Errorf("writeback mode %q: want all, idle or huge", s)
}

func (m Mode) takes(e pageindex.Entry, minAge int) bool {
	switch m {
	case Huge:
		return e.Class() == pagefmt.ClassRaw
	case Idle:
		return e.Age() >= minAge
	}
	return true
}

// victim is a page picked for a move, with the entry it had.
type victim struct {
	p   *pool
	key uint64
	e   pageindex.Entry
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

// roomFor is Put's way past the memory limit: pages refused for space
// (short bytes of them) are retried after writing back enough cold pages
// to make room. Called and returning with the store's lock held.
func (s *Store) roomFor(p *pool, keys []uint64, c *pagefmt.Compressed, backend uint8, sc *putScratch, res []Result, short uint64) {
	for try := 0; short > 0 && try < 3; try++ {
		s.mu.Unlock()
		err := s.makeRoom(short)
		s.mu.Lock()
		if err != nil {
			return
		}
		short = s.reserve(p, keys, c, backend, sc, res, true)
	}
}

// coldPart is the most pages of one Put reserved at once when the store
// has a backing file: pages reserved but not yet in the index cannot be
// written back, so a batch larger than the room left must be stored in
// parts, each making room from the ones before. (A part an engine places
// itself (direct.go) goes whole: its placing is one call.)
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

// makeRoom writes back the pages of the coldest slabs until the arena can
// take need more bytes under its limit.
func (s *Store) makeRoom(need uint64) error {
	c := s.file
	c.mu.Lock()
	defer c.mu.Unlock()
	for try := 0; ; try++ {
		s.mu.Lock()
		a := s.arena
		room := uint64(0)
		if a.Limit() > a.Used() {
			room = a.Limit() - a.Used()
		}
		// Another writer made room meanwhile.
		if room >= need+uint64(a.SlabSize()) {
			s.mu.Unlock()
			return nil
		}
		slabs := s.coldSlabs(max(need+uint64(a.SlabSize())-room, roundMin))
		if len(slabs) == 0 {
			s.mu.Unlock()
			return errors.New("nothing in the arena to write back")
		}
		c.pressure.Add(1)
		set := make([]bool, a.Slabs())
		for _, idx := range slabs {
			set[idx] = true
		}
		vs := s.pick(func(e pageindex.Entry) bool { return e.HasObject() && set[e.Handle().Slab()] }, 1<<62)
		_, err := s.moveOut(vs, func() { s.undrain(slabs) })
		if errors.Is(err, backing.ErrFull) && try == 0 {
			// Space held for the last checkpoint, or scattered among
			// sparse blocks, may be had back.
			if cerr := s.checkpointLocked(); cerr == nil || !c.persist {
				s.compactFile()
				continue
			}
		}
		return err
	}
}

// KeepRoom writes back the coldest slabs' pages, outside any PUT, until
// percent of the memory limit is free (and a slab more, as for a PUT), so
// that PUTs find room without writing back themselves. It does nothing
// without a backing file or a limit, or while that much is free.
func (s *Store) KeepRoom(percent int) error {
	s.mu.RLock()
	a := s.arena
	room := a.Limit() / 100 * uint64(percent)
	enough := s.file == nil || a.Limit() == 0 || a.Used()+room+uint64(a.SlabSize()) <= a.Limit()
	s.mu.RUnlock()
	if enough {
		return nil
	}
	s.file.kept.Add(1)
	return s.makeRoom(room)
}

// coldSlabs picks slabs to empty, coldest first, until they hold want
// bytes, and keeps new objects out of them. Under the store's lock.
func (s *Store) coldSlabs(want uint64) []uint32 {
	a := s.arena
	score := make([]uint64, a.Slabs())
	found := make([]uint16, a.Slabs())
	s.eachEntry(func(_ *pool, _ uint64, e pageindex.Entry) bool {
		if e.HasObject() {
			score[e.Handle().Slab()] += uint64(coldness(e))
			found[e.Handle().Slab()]++
		}
		return true
	})
	return a.DrainColdest(want, score, found, &s.file.cursor)
}

// undrain lets slabs that kept objects take new ones again.
func (s *Store) undrain(slabs []uint32) {
	for _, idx := range slabs {
		s.arena.Undrain(idx)
	}
}

// pick lists the pages fn takes, up to max bytes of objects. Under the store's lock.
func (s *Store) pick(fn func(e pageindex.Entry) bool, limit int) []victim {
	var vs []victim
	total := 0
	s.eachEntry(func(p *pool, key uint64, e pageindex.Entry) bool {
		if fn(e) {
			vs = append(vs, victim{p, key, e})
			total += e.ObjSize()
		}
		return total < limit
	})
	return vs
}

// moveOut writes victims' arena objects to the file and points their
// entries there, and says how many moved. It is called with the store's
// lock held, drops it for the write, and returns without it; then runs
// under the lock at the end.
func (s *Store) moveOut(vs []victim, then func()) (int, error) {
	c := s.file
	sizes := make([]int, len(vs))
	for i, v := range vs {
		sizes[i] = v.e.ObjSize()
	}
	b := c.f.Place(sizes)
	for i := range b.Offs {
		copy(b.Slot(i), s.arena.Bytes(vs[i].e.Handle(), vs[i].e.ObjSize()))
	}
	s.mu.Unlock()
	var err error
	if len(b.Offs) > 0 {
		err = c.f.Write(b)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer then()
	if err != nil {
		c.f.Abandon(b)
		err = fmt.Errorf("writing pages back to %s: %w", c.f.Path(), err)
		c.failed(err)
		return 0, err
	}
	moved := 0
	for i, off := range b.Offs {
		if s.swap(vs[i], off, func(old pageindex.Entry) { s.arena.Free(old.Handle()) }) {
			moved++
		} else {
			c.f.Free(off, sizes[i])
		}
	}
	c.pages.Add(uint64(moved))
	if len(b.Offs) < len(vs) {
		err = fmt.Errorf("%s: %w (%d of %d pages written back)", c.f.Path(), backing.ErrFull, len(b.Offs), len(vs))
		c.failed(err)
		return moved, err
	}
	return moved, nil
}

// swap points v's entry at off on the file if it is still the one v
// copied, calling release with the entry it replaces. Under the store's lock.
func (s *Store) swap(v victim, off uint64, release func(old pageindex.Entry)) bool {
	if s.pools[v.p.name] != v.p {
		return false
	}
	w := v.p.ix.Walk(true)
	defer w.Done()
	ix := w.At(v.key)
	cur, ok := ix.Get(v.key)
	if !ok || cur&^pageindex.IdleBits != v.e&^pageindex.IdleBits {
		return false
	}
	ix.Set(v.key, cur&pageindex.IdleBits|pageindex.OnFileBit|cur&pageindex.KeepBits|pageindex.Entry(off>>s.file.shift))
	release(cur)
	return true
}

// Writeback moves the pages mode picks (for Idle, those of minAge epochs
// or more) to the backing file, in rounds, and says how many went and
// their bytes.
func (s *Store) Writeback(mode Mode, minAge int) (pages, bytes uint64, err error) {
	c := s.file
	if c == nil {
		return 0, 0, errors.New("no backing file")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return s.writebackLocked(mode, minAge)
}

func (s *Store) writebackLocked(mode Mode, minAge int) (pages, bytes uint64, err error) {
	c := s.file
	for {
		s.mu.Lock()
		vs := s.pick(func(e pageindex.Entry) bool { return e.HasObject() && mode.takes(e, minAge) }, roundMax)
		if len(vs) == 0 {
			s.mu.Unlock()
			return pages, bytes, nil
		}
		n, err := s.moveOut(vs, func() {})
		pages += uint64(n)
		for _, v := range vs[:n] {
			bytes += uint64(v.e.ObjSize()) // about: which moved is not told
		}
		c.forced.Add(uint64(n))
		if err != nil || n == 0 {
			// n == 0: every page changed under us; the caller may ask again.
			return pages, bytes, err
		}
	}
}

// readOutside reads the pages a View found on the file (res pendingRead)
// without the store's read lock, which the caller holds on entry and on
// return: a slow disk then keeps no writer waiting, nor the readers queued
// behind one. The file's space is held meanwhile (backing.File.Hold), so
// the bytes read are those the entries pointed at. Once the lock is back,
// relook finds the keys anew (pages in RAM may have moved); a page whose
// entry is the one read takes the bytes, and one that changed stays
// pending, for readBack under the lock.
func (s *Store) readOutside(out []pagefmt.Stored, res []Result, relook func() error) error {
	c := s.file
	var idx []int
	var ent []pageindex.Entry
	var rs []backing.Read
	for i := range res {
		if res[i] == pendingRead {
			e := pageindex.Entry(out[i].Fill)
			idx, ent = append(idx, i), append(ent, e)
			rs = append(rs, backing.Read{Off: c.off(e), Len: e.ObjSize()})
		}
	}
	if len(rs) == 0 {
		return nil
	}
	c.f.Hold()
	defer c.f.Unhold()
	s.mu.RUnlock()
	c.f.ReadBatch(rs)
	s.mu.RLock()
	if err := relook(); err != nil {
		return err
	}
	for k, i := range idx {
		if res[i] != pendingRead || pageindex.Entry(out[i].Fill)&^pageindex.IdleBits != ent[k]&^pageindex.IdleBits {
			continue
		}
		out[i].Fill = 0
		if res[i] = checkObject(rs[k].Data, rs[k].Err, &out[i]); res[i] == Failed {
			c.readFailures.Add(1)
		}
	}
	return nil
}

// readBack reads the pages found on the file (res pendingRead, their
// entry in out[i].Fill), all in one batch, and checks their checksums.
// The caller holds the store's read lock.
func (s *Store) readBack(out []pagefmt.Stored, res []Result) {
	c := s.file
	var idx []int
	var rs []backing.Read
	for i := range res {
		if res[i] == pendingRead {
			e := pageindex.Entry(out[i].Fill)
			idx = append(idx, i)
			rs = append(rs, backing.Read{Off: c.off(e), Len: e.ObjSize()})
		}
	}
	if len(rs) == 0 {
		return
	}
	c.f.ReadBatch(rs)
	for k, i := range idx {
		out[i].Fill = 0
		res[i] = checkObject(rs[k].Data, rs[k].Err, &out[i])
		if res[i] == Failed {
			c.readFailures.Add(1)
		}
	}
}

// checkObject checks an object read from the file and points st at it.
func checkObject(obj []byte, err error, st *pagefmt.Stored) Result {
	if err != nil {
		return Failed
	}
	data := obj[checksumSize:len(obj):len(obj)]
	if binary.LittleEndian.Uint32(obj) != crc32.Checksum(data, pagefmt.Castagnoli) {
		return Corrupt
	}
	st.Data = data
	if st.Class == pagefmt.ClassSame {
		st.Fill = binary.LittleEndian.Uint64(data)
	}
	return OK
}

// fileObject reads one page's object from the file, checked.
func (s *Store) fileObject(e pageindex.Entry) ([]byte, bool) {
	rs := []backing.Read{{Off: s.file.off(e), Len: e.ObjSize()}}
	s.file.f.ReadBatch(rs)
	var st pagefmt.Stored
	if checkObject(rs[0].Data, rs[0].Err, &st) != OK {
		return nil, false
	}
	return st.Data, true
}
