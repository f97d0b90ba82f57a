package pagecache

import "math/bits"

// index maps a pool's keys to packed entries. It is a Robin Hood hash table
// of 16-byte slots (key, entry) with a maximum load of 0.9. It doubles while
// small, then grows by a quarter, so the metadata per stored page of a large
// pool stays between 18 and 23 bytes. (Growing by quarters from the start
// cost a new pool 205-227 ns per key filled, rehashing mostly; doubling up to
// doubleBelow, 106-136 ns, for the same final size at 262144 keys.)
// An entry of 0 marks an empty slot (every stored entry has a class).
type index struct {
	slots []slot
	n     int
}

type slot struct {
	key uint64
	e   entry
}

const (
	minIndexSlots = 64
	doubleBelow   = 1 << 14 // slots (256 KiB) under which a table doubles
	maxLoadNum    = 9       // load <= 9/10
	maxLoadDen    = 10
)

// home maps a key to its preferred slot: a mixed hash scaled to the table
// size (no power-of-two rounding, which would waste up to half the table).
func (ix *index) home(key uint64) int {
	h := key * 0x9E3779B97F4A7C15
	h ^= h >> 29
	hi, _ := bits.Mul64(h*0xBF58476D1CE4E5B9, uint64(len(ix.slots)))
	return int(hi)
}

func (ix *index) dist(key uint64, pos int) int {
	d := pos - ix.home(key)
	if d < 0 {
		d += len(ix.slots)
	}
	return d
}

func (ix *index) find(key uint64) int {
	if len(ix.slots) == 0 {
		return -1
	}
	pos := ix.home(key)
	for d := 0; ; d++ {
		s := &ix.slots[pos]
		if s.load() == 0 || ix.dist(s.key, pos) < d {
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

func (ix *index) get(key uint64) (entry, bool) {
	if p := ix.find(key); p >= 0 {
		return ix.slots[p].load(), true
	}
	return 0, false
}

// set stores e under key and returns the entry it replaced, if any. One
// walk from the key's home either finds the key or reaches the first slot
// it may take (an empty one, or one richer than it), where it goes in.
func (ix *index) set(key uint64, e entry) (old entry, replaced bool) {
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
	ix.insert(slot{key, e}, pos)
	return 0, false
}

// insert places a key known to be absent, starting at pos (its home or
// any slot on its way from there), displacing richer slots.
func (ix *index) insert(s slot, pos int) {
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

func (ix *index) grow() {
	n := len(ix.slots) + len(ix.slots)/4
	if len(ix.slots) < doubleBelow {
		n = 2 * len(ix.slots)
	}
	if n < minIndexSlots {
		n = minIndexSlots
	}
	old := ix.slots
	ix.slots = make([]slot, n)
	for _, s := range old {
		if s.e != 0 {
			ix.insert(s, ix.home(s.key))
		}
	}
}

// del removes key, shifting the following cluster back so no tombstones remain.
func (ix *index) del(key uint64) (entry, bool) {
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
			ix.slots[pos] = slot{}
			break
		}
		ix.slots[pos] = ns
		pos = next
	}
	ix.n--
	return old, true
}

// bytes is the memory the index holds.
func (ix *index) bytes() uint64 { return uint64(len(ix.slots)) * 16 }

// each calls fn for every stored key; fn may change the entry in place.
func (ix *index) each(fn func(key uint64, e *entry)) {
	for i := range ix.slots {
		if ix.slots[i].e != 0 {
			fn(ix.slots[i].key, &ix.slots[i].e)
		}
	}
}
