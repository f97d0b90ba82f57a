package backing

// The allocator packs objects into runs of free blocks: many objects to
// a block, an object crossing into the next block of its run where it
// must, each at a multiple of the unit (its handle). A block is free
// again once every object in it is freed; runs are found next-fit from a
// cursor, so freed space anywhere in the file is reused.
//
// Per block it keeps one 16-bit word: the live bytes of the objects in
// it, or one of the marks below. That is all the file's index costs in
// RAM (0.5 KiB per MiB of file).
const (
	markHeld       = 0xFFFF // headers and the checkpoint index
	markQuarantine = 0xFFFE // freed since the last checkpoint (persist)
	markDeferred   = 0xFFFD // emptied while readers held the file (Hold)
	maxRunBlocks   = 256    // 1 MiB: one write
)

type allocator struct {
	live      []uint16
	cursor    uint64
	free      uint64   // blocks that may be taken now
	pending   []uint32 // blocks quarantined since the last checkpoint began
	releasing []uint32 // blocks a checkpoint in progress will release
	// quarantine keeps freed blocks from reuse until a checkpoint no
	// longer refers to them: after a crash, the last checkpoint's pages
	// must still be where it says.
	quarantine  bool
	objs, bytes uint64 // live objects and their bytes
	// holders are reads under way outside the store's lock; blocks
	// emptied meanwhile wait in deferred, so that no read meets bytes
	// written there for another page.
	holders  int
	deferred []uint32
}

func (a *allocator) init(blocks uint64, quarantine bool) {
	a.live = make([]uint16, blocks)
	for b := 0; b < headerBlocks; b++ {
		a.live[b] = markHeld
	}
	a.free = blocks - headerBlocks
	a.cursor = headerBlocks
	a.quarantine = quarantine
}

func isFree(w uint16) bool { return w == 0 }

// use counts [off, off+size) as live; the blocks must be free or in use.
func (a *allocator) use(off uint64, size int) {
	end := off + uint64(size)
	for b := off / BlockSize; b*BlockSize < end; b++ {
		lo, hi := max(off, b*BlockSize), min(end, (b+1)*BlockSize)
		if a.live[b] == 0 {
			a.free--
		}
		a.live[b] += uint16(hi - lo)
	}
	a.objs++
	a.bytes += uint64(size)
}

// release frees [off, off+size), a block left empty going back (or into
// quarantine).
func (a *allocator) release(off uint64, size int) {
	end := off + uint64(size)
	for b := off / BlockSize; b*BlockSize < end; b++ {
		lo, hi := max(off, b*BlockSize), min(end, (b+1)*BlockSize)
		a.live[b] -= uint16(hi - lo)
		if a.live[b] == 0 {
			a.emptied(uint32(b))
		}
	}
	a.objs--
	a.bytes -= uint64(size)
}

func (a *allocator) emptied(b uint32) {
	if a.holders > 0 {
		a.live[b] = markDeferred
		a.deferred = append(a.deferred, b)
		return
	}
	a.settle(b)
}

// settle makes an emptied block free, or quarantines it.
func (a *allocator) settle(b uint32) {
	a.live[b] = 0
	if a.quarantine {
		a.live[b] = markQuarantine
		a.pending = append(a.pending, b)
		return
	}
	a.free++
}

// findRun returns the first run of free blocks at or after the cursor
// (wrapping once) that holds at least need blocks, up to want blocks.
func (a *allocator) findRun(need, want uint64) (start, n uint64, ok bool) {
	total := uint64(len(a.live))
	if a.free < need {
		return 0, 0, false
	}
	b, scanned := a.cursor, uint64(0)
	for scanned < total {
		if b >= total {
			b = headerBlocks
		}
		if !isFree(a.live[b]) {
			b++
			scanned++
			continue
		}
		s := b
		for b < total && isFree(a.live[b]) && b-s < want {
			b++
		}
		scanned += b - s
		if b-s >= need {
			a.cursor = b
			return s, b - s, true
		}
	}
	return 0, 0, false
}

// hold marks n blocks at start as held (the checkpoint index).
func (a *allocator) hold(start, n uint64) {
	for b := start; b < start+n; b++ {
		if a.live[b] == 0 {
			a.free--
		}
		a.live[b] = markHeld
	}
}

// unhold gives held blocks back (or quarantines them).
func (a *allocator) unhold(start, n uint64) {
	for b := start; b < start+n; b++ {
		a.live[b] = 0
		a.emptied(uint32(b))
	}
}

// beginCheckpoint sets aside the blocks quarantined so far: the
// checkpoint being taken no longer refers to them.
func (a *allocator) beginCheckpoint() {
	a.releasing = append(a.releasing, a.pending...)
	a.pending = a.pending[:0]
}

// endCheckpoint frees what beginCheckpoint set aside, once the
// checkpoint is durable; if it failed, they wait for the next.
func (a *allocator) endCheckpoint(ok bool) {
	if !ok {
		a.pending = append(a.pending, a.releasing...)
	} else {
		for _, b := range a.releasing {
			a.live[b] = 0
			a.free++
		}
	}
	a.releasing = a.releasing[:0]
}

// Sparse returns a test for objects that lie on a block holding fewer
// than maxLive live bytes: moving those objects elsewhere frees the
// blocks. The blocks are noted now; the test needs no lock.
func (bf *File) Sparse(maxLive int) func(off uint64, size int) bool {
	bf.mu.Lock()
	set := make([]uint64, (len(bf.a.live)+63)/64)
	for b, w := range bf.a.live {
		if w != 0 && w < markDeferred && int(w) < maxLive {
			set[b/64] |= 1 << (b % 64)
		}
	}
	bf.mu.Unlock()
	return func(off uint64, size int) bool {
		end := off + uint64(size)
		for b := off / BlockSize; b*BlockSize < end; b++ {
			if b/64 < uint64(len(set)) && set[b/64]&(1<<(b%64)) != 0 {
				return true
			}
		}
		return false
	}
}
