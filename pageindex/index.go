package pageindex

import (
	"math/bits"
	"sync/atomic"
)

// Index maps a pool's keys to packed entries. It is a Robin Hood hash table
// of 16-byte slots (key, entry) with a maximum load of 0.9. It doubles while
// small, then grows by a quarter, so the metadata per stored page of a large
// pool stays between 18 and 23 bytes. (Growing by quarters from the start
// cost a new pool 205-227 ns per key filled, rehashing mostly; doubling up to
// doubleBelow, 106-136 ns, for the same final size at 262144 keys.)
// An entry of 0 marks an empty slot (every stored entry has a class).
type Index struct {
	slots []Slot
	n     int
}

// Slot is one key and its entry.
type Slot struct {
	key uint64
	e   Entry
}

const (
	minIndexSlots = 64
	doubleBelow   = 1 << 14 // slots (256 KiB) under which a table doubles
	maxLoadNum    = 9       // load <= 9/10
	maxLoadDen    = 10
)

// home maps a key to its preferred slot: a mixed hash scaled to the table
// size (no power-of-two rounding, which would waste up to half the table).
func (ix *Index) home(key uint64) int {
	h := key * 0x9E3779B97F4A7C15
	h ^= h >> 29
	hi, _ := bits.Mul64(h*0xBF58476D1CE4E5B9, uint64(len(ix.slots)))
	return int(hi)
}

func (ix *Index) dist(key uint64, pos int) int {
	d := pos - ix.home(key)
	if d < 0 {
		d += len(ix.slots)
	}
	return d
}

func (ix *Index) find(key uint64) int {
	if len(ix.slots) == 0 {
		return -1
	}
	pos := ix.home(key)
	for d := 0; ; d++ {
		s := &ix.slots[pos]
		if s.Load() == 0 || ix.dist(s.key, pos) < d {
			return -1
		}
		if s.key == key {
			return pos
		}
		if pos++; pos == len(ix.slots) {
			pos = 0
		}
	}
}

// Has says whether key is stored.
func (ix *Index) Has(key uint64) bool { return ix.find(key) >= 0 }

func (ix *Index) Get(key uint64) (Entry, bool) {
	if p := ix.find(key); p >= 0 {
		return ix.slots[p].Load(), true
	}
	return 0, false
}

// Ref returns key's entry in place, nil if there is none, for the caller
// to read and change under the shard's write lock.
func (ix *Index) Ref(key uint64) *Entry {
	if p := ix.find(key); p >= 0 {
		return &ix.slots[p].e
	}
	return nil
}

// Set stores e under key and returns the entry it replaced, if any. One
// walk from the key's home either finds the key or reaches the first slot
// it may take (an empty one, or one richer than it), where it goes in.
func (ix *Index) Set(key uint64, e Entry) (old Entry, replaced bool) {
	if len(ix.slots) == 0 {
		ix.grow()
	}
	pos := ix.home(key)
	for d := 0; ; d++ {
		s := &ix.slots[pos]
		if s.e != 0 && s.key == key {
			old, s.e = s.e, e
			return old, true
		}
		if s.e == 0 || ix.dist(s.key, pos) < d {
			break
		}
		if pos++; pos == len(ix.slots) {
			pos = 0
		}
	}
	ix.n++
	if ix.n*maxLoadDen > len(ix.slots)*maxLoadNum {
		ix.grow() // the walk's place is stale: a fresh one
		pos = ix.home(key)
	}
	ix.insert(Slot{key, e}, pos)
	return 0, false
}

// insert places a key known to be absent, starting at pos (its home or
// any slot on its way from there), displacing richer slots.
func (ix *Index) insert(s Slot, pos int) {
	for d := ix.dist(s.key, pos); ; d++ {
		cur := &ix.slots[pos]
		if cur.e == 0 {
			*cur = s
			return
		}
		if cd := ix.dist(cur.key, pos); cd < d {
			s, *cur = *cur, s
			d = cd
		}
		if pos++; pos == len(ix.slots) {
			pos = 0
		}
	}
}

func (ix *Index) grow() {
	n := len(ix.slots) + len(ix.slots)/4
	if len(ix.slots) < doubleBelow {
		n = 2 * len(ix.slots)
	}
	if n < minIndexSlots {
		n = minIndexSlots
	}
	old := ix.slots
	ix.slots = make([]Slot, n)
	for _, s := range old {
		if s.e != 0 {
			ix.insert(s, ix.home(s.key))
		}
	}
}

// Del removes key, shifting the following cluster back so no tombstones remain.
func (ix *Index) Del(key uint64) (Entry, bool) {
	pos := ix.find(key)
	if pos < 0 {
		return 0, false
	}
	old := ix.slots[pos].e
	for {
		next := pos + 1
		if next == len(ix.slots) {
			next = 0
		}
		ns := ix.slots[next]
		if ns.e == 0 || ix.dist(ns.key, next) == 0 {
			ix.slots[pos] = Slot{}
			break
		}
		ix.slots[pos] = ns
		pos = next
	}
	ix.n--
	return old, true
}

// Bytes is the memory the index holds.
func (ix *Index) Bytes() uint64 { return uint64(len(ix.slots)) * 16 }

// Each calls fn for every stored key; fn may change the entry in place.
func (ix *Index) Each(fn func(key uint64, e *Entry)) {
	for i := range ix.slots {
		if ix.slots[i].e != 0 {
			fn(ix.slots[i].key, &ix.slots[i].e)
		}
	}
}

// Ages change without a write lock. Every entry carries its page's age:
//   - a write makes a fresh entry, of age 0;
//   - a read clears the age in place (GetTouch), only when it is not 0
//     already, so a page read again within an epoch costs one load. The
//     reader holds its shard's read lock: writers are shut out, and
//     readers race only each other, through atomics (find and Get load
//     entries atomically for that reason);
//   - a tick of the epoch adds one to every age, also under read locks
//     and through compare-and-swap, a chunk of slots at a time
//     (Shards.EachShared).

// Load reads a slot's entry; see above for why atomically.
func (s *Slot) Load() Entry { return Entry(atomic.LoadUint64((*uint64)(&s.e))) }

// CAS changes a slot's entry from old to new, if it is still old.
func (s *Slot) CAS(old, new Entry) bool {
	return atomic.CompareAndSwapUint64((*uint64)(&s.e), uint64(old), uint64(new))
}

// GetTouch is Get for a read of the page: its age starts again. The
// caller holds the shard's read lock at least.
func (ix *Index) GetTouch(key uint64) (Entry, bool) {
	p := ix.find(key)
	if p < 0 {
		return 0, false
	}
	s := &ix.slots[p]
	for {
		e := s.Load()
		if e&AgeMask == 0 || s.CAS(e, e&^AgeMask) {
			return e &^ AgeMask, true
		}
	}
}
