// Package slab keeps objects of up to a page (and a checksum) in large
// slabs of off-heap memory split into equal slots: the page store's
// arena, the memory behind it, and its registration with a GPU engine's
// device. It knows nothing of keys or pages: callers keep the handles.
package slab

import "errors"

// The arena keeps compressed pages in large slabs split into equal slots,
// one slab size class per slot size (zsmalloc's scheme): no Go allocation
// per page, freed slots are reused, and an empty slab goes back at once.
//
// A Handle is slabIndex<<slotBits | slot.
type Handle uint32

// Slab is the index of the slab h lies in.
func (h Handle) Slab() uint32 { return uint32(h >> slotBits) }

const (
	slotBits  = 12           // up to 4096 slots per slab
	maxSlabs  = 1 << 20      // handles must fit in 32 bits
	numClass  = 64           // class k holds objects of up to k*step bytes
	TopClass  = numClass + 1 // a whole page plus its checksum
	tinySize  = 16           // class 0: same-filled words and the odd tiny block
	SlabPages = 16           // a slab is 16 pages
)

var (
	ErrFull  = errors.New("arena full")
	ErrLimit = errors.New("memory limit reached")
)

type slab struct {
	buf      []byte
	class    uint16
	used     uint16   // live slots
	fresh    uint16   // slots below this were handed out at least once
	free     []uint16 // freed slots to reuse
	partial  int32    // position in its class's partial list, -1 if not there
	draining bool     // being emptied by compaction: no new objects
}

// Arena is not safe for concurrent use: its caller guards it with a lock
// of its own (the store's).
type Arena struct {
	step     int // bytes between size classes (pageSize/numClass)
	slabSize int
	slabs    []*slab  // by index; nil once released
	spare    []uint32 // released indexes to reuse
	partial  [TopClass + 1][]uint32
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

// New makes an arena for pages of pageSize bytes, holding at most limit
// bytes of slabs (0 = no limit).
func New(pageSize int, limit uint64) *Arena {
	a := &Arena{step: pageSize / numClass, slabSize: pageSize * SlabPages, limit: limit}
	a.mem.slabSize, a.mem.maps = a.slabSize, &regions{}
	return a
}

// Few classes keep the partly filled slabs few (at most one per class
// is sparse in steady state); a tiny class spares same-filled pages a
// whole step.
func (a *Arena) classOf(size int) int {
	if size <= tinySize {
		return 0
	}
	return (size + a.step - 1) / a.step
}

func (a *Arena) slotSize(class int) int {
	if class == 0 {
		return tinySize
	}
	return class * a.step
}

// SlotsPer is how many objects a slab of class holds.
func (a *Arena) SlotsPer(class int) int { return min(a.slabSize/a.slotSize(class), 1<<slotBits) }

// Alloc reserves a slot for size bytes and returns it for writing.
func (a *Arena) Alloc(size int) (Handle, []byte, error) {
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
	if int(s.used) == a.SlotsPer(c) {
		a.unlist(idx)
	}
	off := int(slot) * a.slotSize(c)
	return Handle(idx<<slotBits | uint32(slot)), s.buf[off : off+size : off+size], nil
}

func (a *Arena) newSlab(c int) error {
	if a.limit > 0 && a.used+uint64(a.slabSize) > a.limit {
		return ErrLimit
	}
	var idx uint32
	if n := len(a.spare); n > 0 {
		idx, a.spare = a.spare[n-1], a.spare[:n-1]
	} else {
		if len(a.slabs) >= maxSlabs {
			return ErrFull
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

func (a *Arena) list(idx uint32) {
	s := a.slabs[idx]
	s.partial = int32(len(a.partial[s.class]))
	a.partial[s.class] = append(a.partial[s.class], idx)
}

func (a *Arena) unlist(idx uint32) {
	s := a.slabs[idx]
	l := a.partial[s.class]
	last := l[len(l)-1]
	l[s.partial] = last
	a.slabs[last].partial = s.partial
	a.partial[s.class] = l[:len(l)-1]
	s.partial = -1
}

// Bytes returns the object behind h.
func (a *Arena) Bytes(h Handle, size int) []byte {
	s := a.slabs[h>>slotBits]
	off := int(h&(1<<slotBits-1)) * a.slotSize(int(s.class))
	return s.buf[off : off+size]
}

// Free releases h; a slab left empty is returned to the runtime.
func (a *Arena) Free(h Handle) {
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

// Used is the memory of the slabs held, in bytes.
func (a *Arena) Used() uint64 { return a.used }

// Limit is the most memory slabs may hold (0: no limit).
func (a *Arena) Limit() uint64 { return a.limit }

// SetLimit changes the limit; objects already held stay.
func (a *Arena) SetLimit(limit uint64) { a.limit = limit }

// SlabSize is the size of every slab in bytes.
func (a *Arena) SlabSize() int { return a.slabSize }
