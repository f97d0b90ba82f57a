package pagecache

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/pageindex"
)

// What the store asks of the levels below its RAM. The store knows only
// that a page may live off RAM, at a place a Tier chose; what is there
// (a backing file, a remote store) and when pages go there is the cold
// tier's (package cold), which registers itself with SetTier. A PUT
// stays in the store unless the memory limit refuses it room.

// Loc is where a page off RAM lives: a number the Tier chose when it
// moved the page (Relocate), kept in the page's entry in place of an
// arena handle, and handed back to the Tier to read or forget the page.
type Loc uint32

// TierRead asks a Tier for one page's object: its checksum, then its
// stored bytes, as they were in the arena. Read fills Data or Err.
type TierRead struct {
	Loc  Loc
	Len  int
	Data []byte
	Err  error
}

// Tier is the levels below the store's RAM, as the store calls them.
type Tier interface {
	// MakeRoom moves pages off RAM (Relocate) until the arena can take
	// need more bytes under its limit. No lock of the store is held.
	MakeRoom(need uint64) error
	// Read fills rs, in one batch. No lock of the store is held (a read
	// may take seconds); a Hold stands.
	Read(rs []TierRead)
	// Hold keeps every place off RAM from reuse until unhold is called,
	// so that pages found under the store's lock may be read without it
	// though they be freed meanwhile. Holds nest.
	Hold() (unhold func())
	// Forget releases the place of a page off RAM, replaced or deleted.
	// The store's write lock is held: it must not call the store.
	Forget(loc Loc, size int)
	// Note records, durably, that pool is changing, before the first
	// PUT or DEL of it since a Records that found it still (see
	// Records): a crash then finds the pool marked changed rather than
	// an older version of it. An error fails the PUT or DEL. No lock of
	// the store is held; it may call Records.
	Note(pool string) error
}

// noteWait lets the PUTs and DELs that find a Note of their pool under
// way wait for it: none may answer before the note is durable.
type noteWait struct {
	done chan struct{}
	err  error
}

// changing has the Tier note p's change if its last record of p is
// whole. Called with the store's lock held, and p.writers counting the
// caller; the lock is dropped while the note is written.
func (s *Store) changing(p *pool) error {
	if !p.clean || s.tier == nil {
		return nil
	}
	w := p.note
	if w == nil { // the first: it writes the note
		w = &noteWait{done: make(chan struct{})}
		p.note = w
		s.mu.Unlock()
		w.err = s.tier.Note(p.name)
		s.mu.Lock()
		p.note = nil
		if w.err == nil {
			p.clean = false
		}
		close(w.done)
		return w.err
	}
	s.mu.Unlock()
	<-w.done
	s.mu.Lock()
	return w.err
}

// SetTier registers the levels below RAM; nil leaves the store in RAM
// alone. Call it before the store is used, or with no page off RAM.
func (s *Store) SetTier(t Tier) {
	s.mu.Lock()
	s.tier = t
	s.mu.Unlock()
}

// pendingRead marks, between finding and reading, a page found off RAM;
// callers never see it.
const pendingRead Result = 0xFE

// readRounds bounds how often readOutside reads again pages whose entry
// changed while it read them: each round needs the page moved off RAM
// anew meanwhile, so a page still changing after this many answers
// Failed rather than keep its reader (never wrong bytes).
const readRounds = 8

// pendingReads lists the reads of the pages found off RAM (res
// pendingRead, their entry parked in out[i].Fill), with their indexes.
func pendingReads(out []pagefmt.Stored, res []Result) (idx []int, ent []pageindex.Entry, rs []TierRead) {
	for i := range res {
		if res[i] == pendingRead {
			e := pageindex.Entry(out[i].Fill)
			idx, ent = append(idx, i), append(ent, e)
			rs = append(rs, TierRead{Loc: Loc(e.Handle()), Len: e.ObjSize()})
		}
	}
	return idx, ent, rs
}

// tierGot is one page read off RAM: its index, the entry it was read for
// and what the Tier answered.
type tierGot struct {
	i int
	e pageindex.Entry
	r TierRead
}

// readOutside reads the pages found off RAM (res pendingRead) without the
// store's read lock, which the caller holds on entry and on return: a slow
// disk or a cluster failing over then keeps no writer waiting, nor the
// readers queued behind one. The Tier holds every place off RAM meanwhile,
// so an entry found again unchanged still names the bytes read. Once the
// lock is back, relook finds the keys anew, parking the entries of those
// off RAM again as pending; a page whose entry is one read takes those
// bytes, and one that changed is read in the next round. No Tier read
// happens under the lock.
func (s *Store) readOutside(out []pagefmt.Stored, res []Result, relook func() error) error {
	var got []tierGot
	var unhold func()
	defer func() {
		if unhold != nil {
			unhold()
		}
	}()
	for round := 0; ; round++ {
		settle(out, res, got)
		idx, ent, rs := pendingReads(out, res)
		if len(rs) == 0 {
			return nil
		}
		if round == readRounds {
			for _, i := range idx {
				res[i], out[i].Fill = Failed, 0
			}
			return nil
		}
		if unhold == nil {
			unhold = s.tier.Hold() // to the end: got's bytes stay those of their places
		}
		s.mu.RUnlock()
		s.tier.Read(rs)
		s.mu.RLock()
		if err := relook(); err != nil {
			return err
		}
		for k, i := range idx {
			got = append(got, tierGot{i: i, e: ent[k], r: rs[k]})
		}
	}
}

// settle gives each page still pending the bytes read for its entry, if
// any were (the latest read of an index wins).
func settle(out []pagefmt.Stored, res []Result, got []tierGot) {
	for k := len(got) - 1; k >= 0; k-- {
		g := got[k]
		if res[g.i] != pendingRead || pageindex.Entry(out[g.i].Fill)&^pageindex.IdleBits != g.e&^pageindex.IdleBits {
			continue
		}
		out[g.i].Fill = 0
		res[g.i] = checkObject(g.r.Data, g.r.Err, &out[g.i])
	}
}

// checkObject checks an object read off RAM and points st at it.
func checkObject(obj []byte, err error, st *pagefmt.Stored) Result {
	if err != nil {
		return Failed
	}
	if len(obj) < checksumSize {
		return Corrupt
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

// CheckObject checks an object as a Tier keeps it (checksum, then stored
// bytes) and returns its stored bytes; false if they fail the checksum.
func CheckObject(obj []byte) ([]byte, bool) {
	var st pagefmt.Stored
	if checkObject(obj, nil, &st) != OK {
		return nil, false
	}
	return st.Data, true
}
