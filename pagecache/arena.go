package pagecache

import "errors"

// The arena keeps compressed pages in large slabs split into equal slots,
// one slab size class per slot size (zsmalloc's scheme): no Go allocation
// per page, freed slots are reused, and an empty slab goes back at once.
//
// A handle is slabIndex<<slotBits | slot.
type handle uint32

const (
	slotBits  = 12           // up to 4096 slots per slab
	maxSlabs  = 1 << 20      // handles must fit in 32 bits
	numClass  = 64           // class k holds objects of up to k*step bytes
	topClass  = numClass + 1 // a whole page plus its checksum
	tinySize  = 16           // class 0: same-filled words and the odd tiny block
	slabPages = 16           // a slab is 16 pages
)

var errArenaFull = errors.New("arena full")
var errLimit = errors.New("memory limit reached")

type slab struct {
	buf      []byte
	class    uint16
	used     uint16   // live slots
	fresh    uint16   // slots below this were handed out at least once
	free     []uint16 // freed slots to reuse
	partial  int32    // position in its class's partial list, -1 if not there
	draining bool     // being emptied by compaction: no new objects
}

type arena struct {
	step     int // bytes between size classes (pageSize/numClass)
	slabSize int
	slabs    []*slab  // by index; nil once released
	spare    []uint32 // released indexes to reuse
	partial  [topClass + 1][]uint32
	used     uint64 // bytes of slabs held
	limit    uint64 // 0 = none
	// Memory of slabs emptied since the last sweep, and before it, for new
	// slabs to reuse. The kernel zeroes every page it hands to a process:
	// under churn (pages freed, others stored) fresh slabs cost a page
	// fault and a clear_page per 4 KiB, a fifth of the CPU of a PUT. What
	// lies here for two sweeps goes back to the kernel. It never exceeds
	// what was in use before, so the memory limit still holds.
	kept, keptOld [][]byte
	mem           slabMem // where slab memory comes from and goes back to
}

func newArena(pageSize int) *arena {
	a := &arena{step: pageSize / numClass, slabSize: pageSize * slabPages}
	a.mem.slabSize, a.mem.maps = a.slabSize, &regions{}
	return a
}

// Few classes keep the partly filled slabs few (at most one per class
// is sparse in steady state); a tiny class spares same-filled pages a
// whole step.
func (a *arena) classOf(size int) int {
	if size <= tinySize {
		return 0
	}
	return (size + a.step - 1) / a.step
}

func (a *arena) slotSize(class int) int {
	if class == 0 {
		return tinySize
	}
	return class * a.step
}

func (a *arena) slotsPer(class int) int { return min(a.slabSize/a.slotSize(class), 1<<slotBits) }

// alloc reserves a slot for size bytes and returns it for writing.
func (a *arena) alloc(size int) (handle, []byte, error) {
	c := a.classOf(size)
	if len(a.partial[c]) == 0 {
		if err := a.newSlab(c); err != nil {
			return 0, nil, err
		}
	}
	list := a.partial[c]
	idx := list[len(list)-1]
	s := a.slabs[idx]
	var slot uint16
	if n := len(s.free); n > 0 {
		slot, s.free = s.free[n-1], s.free[:n-1]
	} else {
		slot = s.fresh
		s.fresh++
	}
	s.used++
	if int(s.used) == a.slotsPer(c) {
		a.unlist(idx)
	}
	off := int(slot) * a.slotSize(c)
	return handle(idx<<slotBits | uint32(slot)), s.buf[off : off+size : off+size], nil
}

func (a *arena) newSlab(c int) error {
	if a.limit > 0 && a.used+uint64(a.slabSize) > a.limit {
		return errLimit
	}
	var idx uint32
	if n := len(a.spare); n > 0 {
		idx, a.spare = a.spare[n-1], a.spare[:n-1]
	} else {
		if len(a.slabs) >= maxSlabs {
			return errArenaFull
		}
		idx = uint32(len(a.slabs))
		a.slabs = append(a.slabs, nil)
	}
	buf, err := a.slabMemory()
	if err != nil {
		a.spare = append(a.spare, idx)
		return err
	}
	a.slabs[idx] = &slab{buf: buf, class: uint16(c), partial: -1}
	a.used += uint64(a.slabSize)
	a.list(idx)
	return nil
}

func (a *arena) list(idx uint32) {
	s := a.slabs[idx]
	s.partial = int32(len(a.partial[s.class]))
	a.partial[s.class] = append(a.partial[s.class], idx)
}

func (a *arena) unlist(idx uint32) {
	s := a.slabs[idx]
	l := a.partial[s.class]
	last := l[len(l)-1]
	l[s.partial] = last
	a.slabs[last].partial = s.partial
	a.partial[s.class] = l[:len(l)-1]
	s.partial = -1
}

// bytes returns the object behind h.
func (a *arena) bytes(h handle, size int) []byte {
	s := a.slabs[h>>slotBits]
	off := int(h&(1<<slotBits-1)) * a.slotSize(int(s.class))
	return s.buf[off : off+size]
}

// free releases h; a slab left empty is returned to the runtime.
func (a *arena) free(h handle) {
	idx := uint32(h >> slotBits)
	s := a.slabs[idx]
	s.free = append(s.free, uint16(h&(1<<slotBits-1)))
	s.used--
	switch {
	case s.used == 0:
		if s.partial >= 0 {
			a.unlist(idx)
		}
		a.slabs[idx] = nil
		a.spare = append(a.spare, idx)
		a.used -= uint64(a.slabSize)
		a.kept = append(a.kept, s.buf)
	case s.partial < 0 && !s.draining:
		a.list(idx)
	}
}

// slabMemory returns memory for a new slab, reusing an emptied one's. Its
// contents do not matter: a slot is always written before it is read.
func (a *arena) slabMemory() ([]byte, error) {
	for _, l := range []*[][]byte{&a.kept, &a.keptOld} {
		if n := len(*l); n > 0 {
			b := (*l)[n-1]
			(*l)[n-1] = nil
			*l = (*l)[:n-1]
			return b, nil
		}
	}
	return a.mem.get()
}

// sweep moves the kept slab memory on by a sweep and returns what was kept
// since before the last one, for the caller to give back (giveBack) and
// then file for reuse (slabMem.reuse).
func (a *arena) sweep() [][]byte {
	let := a.keepPinned(a.keptOld)
	a.keptOld, a.kept = a.kept, nil
	return let
}

// release gives back all kept slab memory at once.
func (a *arena) release() {
	for range 2 {
		let := a.sweep()
		giveBack(let)
		a.mem.reuse(let)
	}
}

// keptBytes is the slab memory kept for reuse.
func (a *arena) keptBytes() uint64 { return uint64(len(a.kept)+len(a.keptOld)) * uint64(a.slabSize) }
