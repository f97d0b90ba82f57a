package cuda

import (
	"fmt"
	"unsafe"

	"github.com/s4d-project/s4d/backends/cuda/cu"
	"github.com/s4d-project/s4d/pagefmt"
)

// layout places the per-page arrays of one slot in a single allocation,
// mirrored byte for byte in pinned host memory, so any run of them moves
// in one copy. Regions are 256-byte aligned.
type layout struct {
	// nvCOMP's arrays; for decompression the host fills the first four.
	inPtr, inSize, outPtr, bufSize, outSize, status int
	// Our kernels' arrays; dst: where s4d_place writes each page, or
	// s4d_fetch reads it.
	need, pos, dst int
	// What comes back to the host after compression, contiguous.
	meta, err, fill, offs, psize, sums, cls int
	total                                   int
}

func newLayout(p int) layout {
	var l layout
	at := 0
	next := func(n int) int {
		o := at
		at += (n + 255) &^ 255
		return o
	}
	l.inPtr, l.inSize, l.outPtr, l.bufSize = next(8*p), next(8*p), next(8*p), next(8*p)
	l.outSize, l.status = next(8*p), next(4*p)
	l.need, l.pos, l.dst = next(4*p), next(4*(p+1)), next(8*p)
	l.meta = at
	l.err, l.fill, l.offs, l.psize, l.sums, l.cls = next(8), next(8*p), next(4*(p+1)), next(4*p), next(4*p), next(p)
	l.total = at
	return l
}

// slot is one batch's worth of buffers and the stream that works on them.
type slot struct {
	s                        cu.Stream
	place                    cu.Stream // s4d_place's, at the highest priority (UrgentStream)
	harrDev                  cu.DevPtr // harr's device address: s4d_place reads its destinations there
	nvDone                   cu.Event  // recorded after this slot's nvCOMP call
	upDone                   cu.Event  // recorded after this slot's upload of pages
	din, dout, dpacked, darr cu.DevPtr
	hin, hpacked, harr       []byte
	hpackedDev               cu.DevPtr          // hpacked's device address: kernels may pack straight into it
	packedOnHost             bool               // the piece queued packed its output into hpacked itself
	placing                  bool               // the piece queued is placed by the store, not packed
	part                     pagefmt.Compressed // a delivered piece's results, pointing into hpacked
	runs                     []int              // s4d_unpack: where each run of adjacent pages starts
	times                    slotTimes          // timing events of the stage breakdown
	placer                   slotPlacer         // a delivered part's Place
	bounce                   []int              // pages placed through hpacked
}

func u64s(b []byte, off, n int) []uint64 {
	return unsafe.Slice((*uint64)(unsafe.Pointer(&b[off])), n)
}

func u32s(b []byte, off, n int) []uint32 {
	return unsafe.Slice((*uint32)(unsafe.Pointer(&b[off])), n)
}

func i32s(b []byte, off, n int) []int32 {
	return unsafe.Slice((*int32)(unsafe.Pointer(&b[off])), n)
}

// config is everything sized by the page size: slot buffers, nvCOMP's
// temporary space and output stride.
//
// The slots share one nvCOMP scratch buffer: zstd's runs to hundreds of
// MiB whatever the batch, too much to hold more than once. Each slot's
// nvCOMP call waits for the one queued before it (lastNv), while uploads,
// our kernels and downloads of the slots still overlap.
type config struct {
	pageSize, pages int    // pages per slot
	stride          int    // bytes per compressed chunk slot (nvCOMP's bound, 8-aligned)
	temps           [4]int // nvCOMP scratch bytes: LZ4 compress, decompress, zstd compress, decompress
	dtemp           cu.DevPtr
	temp            int // bytes allocated at dtemp; grown on first use of a codec
	lay             layout
	slots           []*slot
	idle            chan *slot // slots no batch holds
	lastNv          cu.Event   // the last slot's nvCOMP call queued (worker only)
	lastUp          cu.Event   // the last piece's upload queued (worker only)
	slotBytes       int64      // device bytes of all slots, without scratch
}

// numSlots is how many pieces of batches can be on the GPU or being
// unpacked at once: enough that batches of several callers keep both the
// copy engines and the kernels busy.
//
// Eight: a piece holds its slot for two round trips (its sizes come down,
// then s4d_place writes into the store's slots), and the daemon's clients
// each keep one piece in flight; 12 or 16 measured no faster.
const numSlots = 8

func tempIndex(codec pagefmt.Codec, compress bool) int {
	i := 0
	if codec == pagefmt.CodecZstd {
		i = 2
	}
	if !compress {
		i++
	}
	return i
}

// scratch returns nvCOMP's scratch for codec, growing it within the
// memory limit.
func (b *Backend) scratch(c *config, codec pagefmt.Codec, compress bool) (cu.DevPtr, int, error) {
	need := max(c.temps[tempIndex(codec, compress)], 256)
	if need <= c.temp {
		return c.dtemp, c.temp, nil
	}
	if c.slotBytes+int64(need) > b.limit {
		return 0, 0, fmt.Errorf("cuda: gpu memory limit of %d bytes is too small: nvCOMP %v needs %d bytes of scratch besides %d bytes of buffers",
			b.limit, codec, need, c.slotBytes)
	}
	for _, s := range c.slots {
		if err := b.drv.Sync(s.s); err != nil {
			return 0, 0, err
		}
	}
	b.drv.Free(c.dtemp)
	c.dtemp, c.temp = 0, 0
	p, err := b.drv.Alloc(need)
	if err != nil {
		return 0, 0, fmt.Errorf("cuda: allocating %d bytes of nvCOMP scratch: %w", need, err)
	}
	c.dtemp, c.temp = p, need
	return p, need, nil
}

func (c *config) free(d *cu.Driver) {
	if c == nil {
		return
	}
	for _, s := range c.slots {
		if s == nil {
			continue
		}
		d.StreamDestroy(s.s)
		d.StreamDestroy(s.place)
		d.EventDestroy(s.nvDone)
		d.EventDestroy(s.upDone)
		for _, e := range s.times {
			d.EventDestroy(e)
		}
		for _, p := range []cu.DevPtr{s.din, s.dout, s.dpacked, s.darr} {
			d.Free(p)
		}
		d.HostFree(s.hin)
		d.HostFree(s.hpacked)
		d.HostFree(s.harr)
	}
	d.Free(c.dtemp)
}

// newConfig sizes the slots for pageSize within the device memory limit,
// halving the pages per slot until they fit.
func (b *Backend) newConfig(pageSize int) (*config, error) {
	if pageSize < 64 || pageSize%16 != 0 || pageSize > 1<<20 {
		return nil, fmt.Errorf("cuda: page size %d not supported", pageSize)
	}
	maxOut := 0
	for _, c := range []struct {
		codec *cu.Codec
		o     cu.Opts
	}{{&b.lz4, lz4C}, {&b.zstd, zstdC}} {
		m, err := c.codec.MaxOutput(&b.nv, pageSize, c.o)
		if err != nil {
			return nil, err
		}
		maxOut = max(maxOut, m)
	}
	c := &config{pageSize: pageSize, stride: (maxOut + 7) &^ 7}
	// The packed output region reuses stride-sized room per page, which
	// must hold a page plus the 8-byte rounding of the packed offsets.
	c.stride = max(c.stride, pageSize+8)
	// Slots shrink until they and LZ4's scratch fit the limit; zstd's
	// scratch is checked when a zstd batch first needs it.
	for p := max(b.slotBytes/pageSize, minSlotPages); ; p /= 2 {
		for qi, q := range []struct {
			codec    *cu.Codec
			compress bool
			o        cu.Opts
		}{{&b.lz4, true, lz4C}, {&b.lz4, false, lz4D}, {&b.zstd, true, zstdC}, {&b.zstd, false, zstdD}} {
			t, err := q.codec.TempSize(&b.nv, q.compress, p, pageSize, q.o, nil)
			if err != nil {
				return nil, err
			}
			c.temps[qi] = t
		}
		c.pages, c.lay = p, newLayout(p)
		c.slotBytes = int64(b.numSlots) * (int64(p)*int64(pageSize+2*c.stride) + int64(c.lay.total) + 3*256)
		need := c.slotBytes + int64(max(c.temps[0], c.temps[1]))
		if need <= b.limit {
			break
		}
		if p/2 < minSlotPages {
			return nil, fmt.Errorf("cuda: gpu memory limit of %d bytes is too small: %d-byte pages need at least %d bytes (%d slots of %d pages)",
				b.limit, pageSize, need, b.numSlots, p)
		}
	}
	d := &b.drv
	c.idle = make(chan *slot, b.numSlots)
	c.slots = make([]*slot, b.numSlots)
	for i := range c.slots {
		s := &slot{}
		c.slots[i] = s
		var err error
		if s.s, err = d.StreamCreate(); err != nil {
			c.free(d)
			return nil, err
		}
		if s.place, err = d.UrgentStream(); err != nil {
			c.free(d)
			return nil, err
		}
		if s.nvDone, err = d.EventCreate(); err != nil {
			c.free(d)
			return nil, err
		}
		if s.upDone, err = d.EventCreate(); err != nil {
			c.free(d)
			return nil, err
		}
		for i := range s.times {
			if s.times[i], err = d.TimingEvent(); err != nil {
				c.free(d)
				return nil, err
			}
		}
		for _, a := range []struct {
			p *cu.DevPtr
			n int
		}{{&s.din, c.pages * pageSize}, {&s.dout, c.pages * c.stride}, {&s.dpacked, c.pages * c.stride},
			{&s.darr, c.lay.total}} {
			if *a.p, err = d.Alloc(a.n); err != nil {
				c.free(d)
				return nil, fmt.Errorf("cuda: allocating %d bytes of device memory: %w", a.n, err)
			}
		}
		for _, a := range []struct {
			p *[]byte
			n int
		}{{&s.hin, c.pages * pageSize}} {
			if *a.p, err = d.HostAlloc(a.n); err != nil {
				c.free(d)
				return nil, fmt.Errorf("cuda: allocating %d bytes of pinned host memory: %w", a.n, err)
			}
		}
	}
	for _, s := range c.slots {
		for _, a := range []struct {
			h   *[]byte
			dev *cu.DevPtr
			n   int
		}{{&s.hpacked, &s.hpackedDev, c.pages * c.stride}, {&s.harr, &s.harrDev, c.lay.total}} {
			var err error
			if *a.h, *a.dev, err = d.HostMapped(a.n); err != nil {
				c.free(d)
				return nil, fmt.Errorf("cuda: allocating %d bytes of mapped pinned host memory: %w", a.n, err)
			}
		}
	}
	for _, sl := range c.slots {
		c.idle <- sl
	}
	return c, nil
}

// configFor returns buffers for pageSize, replacing those of another size.
func (b *Backend) configFor(pageSize int) (*config, error) {
	if b.cfg != nil && b.cfg.pageSize == pageSize {
		return b.cfg, nil
	}
	if b.cfg != nil {
		for _, s := range b.cfg.slots {
			if err := b.drv.Sync(s.s); err != nil {
				return nil, err
			}
		}
		b.cfg.free(&b.drv)
		b.cfg = nil
	}
	c, err := b.newConfig(pageSize)
	if err != nil {
		return nil, err
	}
	b.cfg = c
	return c, nil
}
