package backing

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"time"
	"unsafe"

	"github.com/s4d-project/s4d/internal/par"
)

// ErrDropped says the device lost a write it reported done.
var ErrDropped = errors.New("write dropped by the device")

func crcOf(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// Batch is a set of objects placed in the file, to be filled and written
// in one go: one write per run of blocks.
type Batch struct {
	Offs  []uint64 // each placed object's offset in the file
	sizes []int
	runs  []run
}

type run struct {
	block uint64 // first block
	buf   []byte // the run's blocks, aligned
}

// Place finds room for objects of the given sizes, in order, packed, and
// counts them as live. It places as many as fit (the rest need another
// file, or compaction): len(b.Offs) says how many.
func (bf *File) Place(sizes []int) *Batch {
	b := &Batch{}
	bf.mu.Lock()
	defer bf.mu.Unlock()
	unit := bf.Unit()
	var cur, end uint64 // the free bytes of the run being filled
	var runStart uint64
	flush := func() {
		if cur > runStart {
			first := runStart / BlockSize
			last := (cur + BlockSize - 1) / BlockSize
			// Whole blocks of the run left unused stay free.
			b.runs = append(b.runs, run{block: first, buf: alignedBuf(int(last-first) * BlockSize)})
		}
		runStart = cur
	}
	left := 0
	for _, s := range sizes {
		left += s
	}
	for _, s := range sizes {
		if cur+uint64(s) > end {
			flush()
			need := (uint64(s) + BlockSize - 1) / BlockSize
			want := min(max(need, (uint64(left)+BlockSize-1)/BlockSize), maxRunBlocks)
			start, n, ok := bf.a.findRun(need, max(want, need))
			if !ok {
				break
			}
			runStart, cur, end = start*BlockSize, start*BlockSize, (start+n)*BlockSize
		}
		bf.a.use(cur, s)
		b.Offs = append(b.Offs, cur)
		b.sizes = append(b.sizes, s)
		cur = (cur + uint64(s) + unit - 1) &^ (unit - 1)
		left -= s
	}
	flush()
	// A run's tail blocks past its last object were never counted: the
	// cursor may have moved past them, and they stay free for the next.
	return b
}

// Slot is where object i's bytes go before Write.
func (b *Batch) Slot(i int) []byte {
	off := b.Offs[i]
	for _, r := range b.runs {
		base := r.block * BlockSize
		if off >= base && off < base+uint64(len(r.buf)) {
			return r.buf[off-base : off-base+uint64(b.sizes[i])]
		}
	}
	panic("backing: object outside its batch's runs")
}

// Bytes is the size of the batch's writes.
func (b *Batch) Bytes() int {
	n := 0
	for _, r := range b.runs {
		n += len(r.buf)
	}
	return n
}

// Write writes the batch's runs, up to 4 at a time. On an error nothing
// the batch placed may be used: the caller frees it (Abandon).
func (bf *File) Write(b *Batch) error {
	t0 := time.Now()
	errs := make([]error, len(b.runs))
	par.Each(len(b.runs), 4, func(i int) {
		errs[i] = bf.writeAt(b.runs[i].buf, int64(b.runs[i].block*BlockSize))
	})
	if bf.verify {
		par.Each(len(b.runs), 4, func(i int) {
			if errs[i] == nil {
				errs[i] = bf.check(b.runs[i])
			}
		})
	}
	for _, err := range errs {
		if err != nil {
			bf.st.writeErrors.Add(1)
			return err
		}
	}
	bf.st.writes.Add(uint64(len(b.runs)))
	bf.st.pagesWritten.Add(uint64(len(b.Offs)))
	bf.st.bytesWritten.Add(uint64(b.Bytes()))
	bf.st.writeNanos.Add(uint64(time.Since(t0)))
	return nil
}

// check reads a run back and compares it with what was written: a device
// may drop a write and still report success (a loop device whose tmpfs
// has filled up does), and a page trusted to it would then be lost.
func (bf *File) check(r run) error {
	back := alignedBuf(len(r.buf))
	if err := bf.readAt(back, int64(r.block*BlockSize)); err != nil {
		return fmt.Errorf("reading back what was written: %w", err)
	}
	if !bytes.Equal(back, r.buf) {
		bf.st.dropped.Add(1)
		return fmt.Errorf("%w: blocks %d-%d read back different from what was written (is the device full?)", ErrDropped, r.block, r.block+uint64(len(r.buf))/BlockSize-1)
	}
	return nil
}

// Abandon frees every object of a batch.
func (bf *File) Abandon(b *Batch) {
	for i, off := range b.Offs {
		bf.Free(off, b.sizes[i])
	}
	b.Offs = nil
}

// Free releases an object's space.
func (bf *File) Free(off uint64, size int) {
	bf.mu.Lock()
	bf.a.release(off, size)
	bf.mu.Unlock()
}

// Hold keeps the space of every object from reuse until Unhold: a reader
// that found objects under its caller's lock may then read them without
// it, though they be freed meanwhile. Holds nest.
func (bf *File) Hold() {
	bf.mu.Lock()
	bf.a.holders++
	bf.mu.Unlock()
}

// Unhold ends a Hold; with the last, blocks emptied meanwhile are free.
func (bf *File) Unhold() {
	bf.mu.Lock()
	if bf.a.holders--; bf.a.holders == 0 {
		for _, b := range bf.a.deferred {
			bf.a.settle(b)
		}
		bf.a.deferred = bf.a.deferred[:0]
	}
	bf.mu.Unlock()
}

// Read asks for one object; ReadBatch fills Data or Err.
type Read struct {
	Off  uint64
	Len  int
	Data []byte
	Err  error
}

// readGap is how far apart two objects may lie and still be read in one
// I/O: reading the blocks between costs less than another request.
const (
	readGap = 32 << 10
	readMax = 1 << 20
)

// ReadBatch reads objects, the ones close together in the file in one
// I/O, several I/Os in parallel. Data points into a buffer of its own.
func (bf *File) ReadBatch(rs []Read) {
	order := make([]int, len(rs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int {
		if rs[x].Off < rs[y].Off {
			return -1
		}
		return 1
	})
	type span struct {
		lo, hi uint64
		reads  []int
	}
	var spans []span
	total := 0
	for _, i := range order {
		lo := rs[i].Off &^ (BlockSize - 1)
		hi := (rs[i].Off + uint64(rs[i].Len) + BlockSize - 1) &^ (BlockSize - 1)
		if n := len(spans); n > 0 && lo <= spans[n-1].hi+readGap && max(hi, spans[n-1].hi)-spans[n-1].lo <= readMax {
			s := &spans[n-1]
			total += int(max(hi, s.hi) - s.hi)
			s.hi = max(hi, s.hi)
			s.reads = append(s.reads, i)
			continue
		}
		spans = append(spans, span{lo: lo, hi: hi, reads: []int{i}})
		total += int(hi - lo)
	}
	buf := alignedBuf(total)
	bufs := make([][]byte, len(spans))
	for i, s := range spans {
		bufs[i], buf = buf[:s.hi-s.lo], buf[s.hi-s.lo:]
	}
	par.Each(len(spans), 8, func(k int) {
		s := spans[k]
		t0 := time.Now()
		err := bf.readAt(bufs[k], int64(s.lo))
		bf.st.observeRead(time.Since(t0))
		if err != nil {
			bf.st.readErrors.Add(1)
		}
		for _, i := range s.reads {
			if err != nil {
				rs[i].Err = err
				continue
			}
			o := rs[i].Off - s.lo
			rs[i].Data = bufs[k][o : o+uint64(rs[i].Len)]
		}
		bf.st.bytesRead.Add(s.hi - s.lo)
	})
	bf.st.pagesRead.Add(uint64(len(rs)))
}
