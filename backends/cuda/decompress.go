package cuda

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/s4d-project/s4d/backends"
)

// unpackMax is the largest page s4d_unpack decodes (UNPACK_MAX in ptx/s4d.cu);
// larger pages' LZ4 blocks go to nvCOMP.
const unpackMax = 4096

// unpackWarps is s4d_unpack's pages per block (UNPACK_WARPS).
const unpackWarps = 8

// skipClass makes s4d_unpack leave a page alone (status 2).
const skipClass = 0xff

// Decompress expands pages. Batches with compressed pages are written on
// the GPU whole by s4d_unpack (zero, same-filled and raw pages too), so
// that each piece comes back in one copy, straight into the caller's
// memory when it is pinned. zstd pages, and LZ4 pages larger than
// s4d_unpack takes, go to nvCOMP. A batch with nothing to decode is written
// here.
func (b *Backend) Decompress(ctx context.Context, d *backends.Decompression) error {
	n, ps := len(d.Src), d.PageSize
	if cap(d.Failed) < n {
		d.Failed = make([]bool, n)
	}
	d.Failed = d.Failed[:n]
	clear(d.Failed)
	var lz4, zstd []int
	for i, s := range d.Src {
		switch s.Class {
		case backends.ClassLZ4:
			lz4 = append(lz4, i)
		case backends.ClassZstd:
			// nvCOMP's zstd decoder trusts its input: reject what is not
			// even a zstd frame here rather than hand it over.
			if len(s.Data) < 4 || binary.LittleEndian.Uint32(s.Data) != 0xFD2FB528 {
				d.Failed[i] = true
				continue
			}
			zstd = append(zstd, i)
		}
	}
	if len(lz4) == 0 && len(zstd) == 0 {
		for i, s := range d.Src {
			d.Failed[i] = !hostPage(s, d.Dst[i*ps:(i+1)*ps])
		}
		return ctx.Err()
	}
	c, release, err := b.use(ctx, ps)
	if err != nil {
		return err
	}
	defer release()
	var s *slot
	select {
	case s = <-c.idle:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { c.idle <- s }()
	if ps <= unpackMax {
		for lo := 0; lo < n; lo += c.pages {
			if err := b.unpack(ctx, c, s, d, lo, min(c.pages, n-lo)); err != nil {
				return err
			}
		}
	} else {
		for i, s := range d.Src {
			if s.Class != backends.ClassLZ4 && s.Class != backends.ClassZstd {
				d.Failed[i] = !hostPage(s, d.Dst[i*ps:(i+1)*ps])
			}
		}
		if err := b.do(ctx, func() error { return b.decompress(c, s, d, backends.CodecLZ4, lz4) }); err != nil {
			return err
		}
	}
	if len(zstd) > 0 {
		if err := b.do(ctx, func() error { return b.decompress(c, s, d, backends.CodecZstd, zstd) }); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// hostPage writes a zero, same-filled or raw page; false for anything else.
func hostPage(s backends.Stored, dst []byte) bool {
	switch s.Class {
	case backends.ClassZero:
		clear(dst)
		return true
	case backends.ClassSame:
		backends.FillPage(dst, s.Fill)
		return true
	case backends.ClassRaw:
		return len(s.Data) == len(dst) && copy(dst, s.Data) == len(dst)
	}
	return false
}

// unpack writes pages [lo, lo+cnt) of d with s4d_unpack. Their stored bytes
// are packed into the slot's pinned buffer on the caller's cores; the
// pages come back into d.Dst directly if it is pinned, else through the
// slot's pinned buffer. Pages the kernel skips (zstd) keep whatever was
// written at their place until nvCOMP's pass.
func (b *Backend) unpack(ctx context.Context, c *config, s *slot, d *backends.Decompression, lo, cnt int) error {
	t0 := time.Now()
	ps, l := d.PageSize, c.lay
	cls, fill := s.harr[l.cls:l.cls+cnt], u64s(s.harr, l.fill, cnt)
	offs, size := u32s(s.harr, l.offs, cnt), u32s(s.harr, l.psize, cnt)
	used := 0
	for j := range cnt {
		st := d.Src[lo+j]
		cls[j], fill[j], offs[j], size[j] = uint8(st.Class), st.Fill, uint32(used), uint32(len(st.Data))
		switch st.Class {
		case backends.ClassZero, backends.ClassSame:
			size[j] = 0
		case backends.ClassLZ4, backends.ClassRaw:
			// The stride holds a page and its rounding; anything longer
			// is no valid stored page.
			if len(st.Data) == 0 || len(st.Data) > ps {
				d.Failed[lo+j], cls[j] = true, skipClass
				continue
			}
			used += (len(st.Data) + 7) &^ 7
		case backends.ClassZstd:
			size[j] = 0 // nvCOMP's, after
		default:
			d.Failed[lo+j], cls[j] = true, skipClass
		}
	}
	parallelFor(cnt, func(a, z int) {
		for j := a; j < z; j++ {
			if size[j] > 0 && cls[j] != skipClass {
				copy(s.hpacked[offs[j]:], d.Src[lo+j].Data)
			}
		}
	})
	dst := d.Dst[lo*ps : (lo+cnt)*ps]
	direct := b.inPinned(dst)
	into := dst
	if !direct {
		into = s.hin[:cnt*ps]
	}
	t1 := time.Now()
	err := b.do(ctx, func() error {
		dr, a := &b.drv, func(off int) uint64 { return s.darr + uint64(off) }
		if err := dr.HtoD(s.dpacked, s.hpacked[:used], s.s); err != nil {
			return err
		}
		if err := dr.HtoD(a(l.meta), s.harr[l.meta:l.total], s.s); err != nil {
			return err
		}
		if err := dr.Launch(b.fUnpack, grid(cnt, unpackWarps), unpackWarps*32, s.s, uint64(cnt), a(l.cls), a(l.fill),
			a(l.offs), a(l.psize), s.dpacked, s.din, uint64(ps), a(l.status)); err != nil {
			return err
		}
		if err := dr.DtoH(into, s.din, s.s); err != nil {
			return err
		}
		return dr.DtoH(s.harr[l.status:l.status+4*cnt], a(l.status), s.s)
	})
	t2 := time.Now()
	if err == nil {
		err = b.onThread(func() error { return b.drv.Sync(s.s) })
	}
	if err != nil {
		b.onThread(func() error { return b.drv.Sync(s.s) }) // the slot is reused only once idle
		return err
	}
	t3 := time.Now()
	defer func() {
		b.trace[0].Add(int64(t1.Sub(t0)))
		b.trace[1].Add(int64(t2.Sub(t1)))
		b.trace[2].Add(int64(t3.Sub(t2)))
		b.trace[4].Add(int64(time.Since(t3)))
	}()
	status := u32s(s.harr, l.status, cnt)
	parallelFor(cnt, func(a, z int) {
		for j := a; j < z; j++ {
			if cls[j] == skipClass || cls[j] == uint8(backends.ClassZstd) {
				continue
			}
			if status[j] != 0 {
				d.Failed[lo+j] = true
			} else if !direct {
				copy(dst[j*ps:(j+1)*ps], into[j*ps:(j+1)*ps])
			}
		}
	})
	return nil
}

// decompress runs nvCOMP over the pages idx of dd, all of one codec.
func (b *Backend) decompress(c *config, s *slot, dd *backends.Decompression, codec backends.Codec, idx []int) error {
	for len(idx) > 0 {
		// As many pages as fit the slot, by count and by compressed bytes.
		// A page longer than a chunk's bound is no valid block: flagged.
		l, ps := c.lay, c.pageSize
		inPtr, inSize := u64s(s.harr, l.inPtr, c.pages), u64s(s.harr, l.inSize, c.pages)
		outPtr, bufSize := u64s(s.harr, l.outPtr, c.pages), u64s(s.harr, l.bufSize, c.pages)
		var take []int
		used, k := 0, 0
		for ; k < len(idx) && len(take) < c.pages; k++ {
			data := dd.Src[idx[k]].Data
			if len(data) == 0 || len(data) > c.stride {
				dd.Failed[idx[k]] = true
				continue
			}
			if used+len(data) > len(s.hpacked) {
				break
			}
			j := len(take)
			inPtr[j], inSize[j] = s.dpacked+uint64(used), uint64(len(data))
			outPtr[j], bufSize[j] = s.din+uint64(j*ps), uint64(ps)
			used += (len(data) + bufAlign - 1) &^ (bufAlign - 1)
			take = append(take, idx[k])
		}
		idx = idx[k:]
		if len(take) == 0 {
			continue
		}
		// The offsets are set; the bytes are copied on all cores.
		parallelFor(len(take), func(lo, hi int) {
			for j := lo; j < hi; j++ {
				copy(s.hpacked[inPtr[j]-s.dpacked:], dd.Src[take[j]].Data)
			}
		})
		if err := b.runDecompress(c, s, codec, take, used, dd); err != nil {
			b.drv.Sync(s.s) // its buffers are free again only once the slot is idle
			return err
		}
	}
	return nil
}

func (b *Backend) runDecompress(c *config, s *slot, codec backends.Codec, take []int, used int, dd *backends.Decompression) error {
	d, l, ps, cnt := &b.drv, c.lay, c.pageSize, len(take)
	nc, _, dopts := b.codec(codec)
	a := func(off int) uint64 { return s.darr + uint64(off) }
	temp, tempSize, err := b.scratch(c, codec, false)
	if err != nil {
		return err
	}
	// The four host-filled arrays are adjacent: one upload.
	if err := d.HtoD(s.dpacked, s.hpacked[:used], s.s); err != nil {
		return err
	}
	if err := d.HtoD(a(l.inPtr), s.harr[l.inPtr:l.outSize], s.s); err != nil {
		return err
	}
	if err := nc.Decompress(&b.nv, a(l.inPtr), a(l.inSize), a(l.bufSize), a(l.outSize), cnt, temp, tempSize,
		a(l.outPtr), dopts, a(l.status), s.s); err != nil {
		return err
	}
	if err := d.DtoH(s.hin[:cnt*ps], s.din, s.s); err != nil {
		return err
	}
	if err := d.DtoH(s.harr[l.outSize:l.need], a(l.outSize), s.s); err != nil {
		return err
	}
	if err := d.Sync(s.s); err != nil {
		return err
	}
	actual, status := u64s(s.harr, l.outSize, cnt), i32s(s.harr, l.status, cnt)
	parallelFor(cnt, func(lo, hi int) {
		for j := lo; j < hi; j++ {
			i := take[j]
			if status[j] != 0 || actual[j] != uint64(ps) {
				dd.Failed[i] = true
				continue
			}
			copy(dd.Dst[i*ps:(i+1)*ps], s.hin[j*ps:(j+1)*ps])
		}
	})
	return nil
}
