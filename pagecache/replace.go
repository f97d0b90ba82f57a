package pagecache

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/pageindex"
	"github.com/s4d-project/s4d/slab"
)

// Recompression in the background: a job picks pages (Coldest), reads
// their stored bytes (ReadRefs), compresses them harder elsewhere, and
// hands back what it wants kept (Replace). The store's part is to do that
// without a foreground request ever waiting on the job for more than a
// short lock hold, and without a newer write ever being undone.

// An entry whose bytes recompression has tried carries pageindex.TriedBit:
// kept or not, the job leaves them alone until the page is written again
// (a write makes a fresh entry, without the bit).

// ReadRefs copies out the stored bytes of refs, checksums checked, into
// scratch (grown as needed and returned), without refreshing their ages:
// a background job is not a use. out[i] is valid where ok[i]; a page that
// changed or went since it was found, or fails its checksum, is not.
func (s *Store) ReadRefs(refs []PageRef, scratch []byte, out []pagefmt.Stored, ok []bool) ([]pagefmt.Stored, []byte) {
	out = out[:0]
	need := 0
	for _, r := range refs {
		need += checksumSize + r.Size
	}
	if cap(scratch) < need {
		scratch = make([]byte, need)
	}
	scratch = scratch[:0]
	s.mu.RLock()
	defer s.mu.RUnlock()
	for i, r := range refs {
		out = append(out, pagefmt.Stored{Class: r.Class})
		ok[i] = false
		e, found := r.p.ix.Get(r.Key)
		// The shard's lock may go: the store's read lock keeps the
		// object where it is (compaction and frees take the write lock).
		if !found || !sameBytes(e, r.e) || r.OnFile() {
			continue
		}
		if !e.HasObject() {
			ok[i] = true
			continue
		}
		off := len(scratch)
		scratch = append(scratch, s.arena.Bytes(e.Handle(), e.ObjSize())...)
		obj := scratch[off:]
		data := obj[checksumSize:]
		if binary.LittleEndian.Uint32(obj) != crc32.Checksum(data, pagefmt.Castagnoli) {
			continue
		}
		out[i].Data = data
		if r.Class == pagefmt.ClassSame {
			out[i].Fill = binary.LittleEndian.Uint64(data)
		}
		ok[i] = true
	}
	return out, scratch
}

// sameBytes says whether two entries hold the same stored bytes in the
// same place: they may differ in age only.
func sameBytes(a, b pageindex.Entry) bool { return a&^pageindex.AgeMask == b&^pageindex.AgeMask }

// Replace stores page i of c (compressed from b by backend) in place of
// refs[i] for every i with keep[i], and marks the other refs tried. Each
// change is made only if the page is still as Coldest found it, whatever
// its age since: a PUT or DEL that came in between wins, and the new
// bytes are dropped. A replaced page keeps its age. Kept pages that the
// memory limit leaves no room for are dropped too, and left untried for
// a later round.
func (s *Store) Replace(refs []PageRef, b *pagefmt.Batch, c *pagefmt.Compressed, backend uint8, keep []bool) Replaced {
	var out Replaced
	n := len(refs)
	h := make([]slab.Handle, n)
	buf := make([][]byte, n)
	// As in Put: slots reserved under the lock, filled without it, and
	// compaction (which moves objects) kept out meanwhile.
	s.gate.RLock()
	defer s.gate.RUnlock()
	noRoom := make([]bool, n) // kept, but the memory limit had no slot: left untried
	s.mu.Lock()
	for i := range refs {
		if keep[i] {
			var err error
			if h[i], buf[i], err = s.arena.Alloc(checksumSize + int(c.Size[i])); err != nil {
				keep[i], noRoom[i] = false, true
			}
		}
	}
	s.mu.Unlock()
	for i := range refs {
		if keep[i] {
			data := c.Bytes(i, b)
			binary.LittleEndian.PutUint32(buf[i], crc32.Checksum(data, pagefmt.Castagnoli))
			copy(buf[i][checksumSize:], data)
		}
	}
	old := make([]pageindex.Entry, n) // what each replaced page held; 0: not replaced
	for i, r := range refs {
		w := r.p.ix.Walk(true)
		if e := w.At(r.Key).Ref(r.Key); e != nil {
			switch cur := *e; {
			case !sameBytes(cur, r.e):
				out.Changed++
			case keep[i]:
				*e = pageindex.MakeEntry(h[i], int(c.Size[i]), c.Class[i], backend) | cur&pageindex.AgeMask | pageindex.TriedBit
				old[i] = cur
			case !noRoom[i]:
				*e = cur | pageindex.TriedBit
			}
		} else {
			out.Changed++
		}
		w.Done()
	}
	s.mu.Lock()
	for i, r := range refs {
		switch {
		case old[i] != 0:
			s.forget(r.p, old[i])
			s.account(r.p, pageindex.MakeEntry(h[i], int(c.Size[i]), c.Class[i], backend), +1)
			out.Pages++
			out.Before += uint64(old[i].Size())
			out.After += uint64(c.Size[i])
		case keep[i]:
			s.arena.Free(h[i]) // the page changed: a newer write won
		}
	}
	s.mu.Unlock()
	return out
}

// Replaced says what Replace did.
type Replaced struct {
	Pages         int    // replaced
	Changed       int    // left alone: written or deleted since they were found
	Before, After uint64 // stored bytes of the pages replaced, before and after
}
