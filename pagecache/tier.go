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
	// Read fills rs, in one batch. The store's read lock is held, or a
	// Hold stands.
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

// readOutside reads the pages a View found off RAM without the store's
// read lock, which the caller holds on entry and on return: a slow disk
// then keeps no writer waiting, nor the readers queued behind one. The
// Tier holds their places meanwhile, so the bytes read are those the
// entries pointed at. Once the lock is back, relook finds the keys anew
// (pages in RAM may have moved); a page whose entry is the one read
// takes the bytes, and one that changed stays pending, for readBack.
func (s *Store) readOutside(out []pagefmt.Stored, res []Result, relook func() error) error {
	idx, ent, rs := pendingReads(out, res)
	if len(rs) == 0 {
		return nil
	}
	unhold := s.tier.Hold()
	defer unhold()
	s.mu.RUnlock()
	s.tier.Read(rs)
	s.mu.RLock()
	if err := relook(); err != nil {
		return err
	}
	for k, i := range idx {
		if res[i] != pendingRead || pageindex.Entry(out[i].Fill)&^pageindex.IdleBits != ent[k]&^pageindex.IdleBits {
			continue
		}
		out[i].Fill = 0
		res[i] = checkObject(rs[k].Data, rs[k].Err, &out[i])
	}
	return nil
}

// readBack reads the pages found off RAM, all in one batch, and checks
// their checksums. The caller holds the store's read lock.
func (s *Store) readBack(out []pagefmt.Stored, res []Result) {
	idx, _, rs := pendingReads(out, res)
	if len(rs) == 0 {
		return
	}
	s.tier.Read(rs)
	for k, i := range idx {
		out[i].Fill = 0
		res[i] = checkObject(rs[k].Data, rs[k].Err, &out[i])
	}
}

// checkObject checks an object read off RAM and points st at it.
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

// tierObject reads one page's object off RAM, checked.
func (s *Store) tierObject(e pageindex.Entry) ([]byte, bool) {
	rs := []TierRead{{Loc: Loc(e.Handle()), Len: e.ObjSize()}}
	s.tier.Read(rs)
	var st pagefmt.Stored
	if checkObject(rs[0].Data, rs[0].Err, &st) != OK {
		return nil, false
	}
	return st.Data, true
}

// CheckObject checks an object as a Tier keeps it (checksum, then stored
// bytes) and returns its stored bytes; false if they fail the checksum.
func CheckObject(obj []byte) ([]byte, bool) {
	if len(obj) < checksumSize {
		return nil, false
	}
	var st pagefmt.Stored
	if checkObject(obj, nil, &st) != OK {
		return nil, false
	}
	return st.Data, true
}
