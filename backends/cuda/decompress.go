package cuda

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/s4d-project/s4d/pagefmt"
)

// unpackMax is the largest page s4d_unpack decodes (UNPACK_MAX in ptx/s4d.cu);
// larger pages' LZ4 blocks go to nvCOMP.
const unpackMax = 4096

// unpackWarps is s4d_unpack's pages per block (UNPACK_WARPS).
const unpackWarps = 8

// Decompress expands pages. Zero, same-filled and raw pages are written
// here, on the caller's cores, while the GPU works: they would only cross
// PCIe twice for nothing. LZ4 pages are decoded by s4d_unpack, only they
// going over the link (compressed up, decoded down). zstd pages, and LZ4
// pages larger than s4d_unpack takes, go to nvCOMP.
//
// Pages still to check (pagefmt.Stored.Check) are checked on the GPU as
// they pass through s4d_unpack (s4d_crc over the blocks it decodes), and on
// the host before decoding otherwise: nvCOMP's zstd decoder and the host's
// fills then never see damaged bytes.
func (b *Backend) Decompress(ctx context.Context, d *pagefmt.Decompression) error {
	n, ps := len(d.Src), d.PageSize
	if cap(d.Failed) < n {
		d.Failed = make([]bool, n)
	}
	d.Failed = d.Failed[:n]
	clear(d.Failed)
	d.CorruptFlags()
	allOnGPU := ps <= unpackMax && b.inPinned(d.Dst) && !hasZstd(d.Src)
	if !allOnGPU {
		parallelFor(n, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				// LZ4 pages that s4d_unpack decodes are checked there.
				if st := &d.Src[i]; st.Check && (st.Class != pagefmt.ClassLZ4 || ps > unpackMax) {
					d.CheckSums(i, i+1)
				}
			}
		})
	}
	var lz4, zstd []int
	for i, s := range d.Src {
		if d.Corrupt[i] {
			d.Failed[i] = true
			continue
		}
		switch s.Class {
		case pagefmt.ClassLZ4:
			lz4 = append(lz4, i)
		case pagefmt.ClassZstd:
			// nvCOMP's zstd decoder trusts its input: reject what is not
			// even a zstd frame here rather than hand it over.
			if len(s.Data) < 4 || binary.LittleEndian.Uint32(s.Data) != 0xFD2FB528 {
				d.Failed[i] = true
				continue
			}
			zstd = append(zstd, i)
		}
	}
	host := func() {
		t := time.Now()
		defer func() { b.stages.add(stHost, time.Since(t).Seconds(), 0) }()
		parallelFor(n, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				if c := d.Src[i].Class; c != pagefmt.ClassLZ4 && c != pagefmt.ClassZstd && !d.Corrupt[i] {
					d.Failed[i] = !pagefmt.DecodePlain(d.Src[i], d.Dst[i*ps:(i+1)*ps])
				}
			}
		})
	}
	// Into registered memory (a client's memfd) the GPU writes the pages
	// of every class, zero pages too, so the batch comes back in place
	// with no work on the host (clearing the zero pages of a live
	// process's memory was a third of the daemon's CPU for its GETs): only
	// zstd pages would need another path.
	if allOnGPU && n > 0 {
		lz4 = lz4[:0]
		for i := range n {
			lz4 = append(lz4, i)
		}
		host = nil
	} else if len(lz4) == 0 && len(zstd) == 0 {
		host()
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
		for lo := 0; lo < len(lz4); lo += c.pages {
			if err := b.unpack(c, s, d, lz4[lo:min(lo+c.pages, len(lz4))], host); err != nil {
				return err
			}
			host = nil
		}
	} else if len(lz4) > 0 {
		if err := b.do(ctx, func() error { return b.decompress(c, s, d, pagefmt.CodecLZ4, lz4) }); err != nil {
			return err
		}
	}
	if host != nil {
		host()
	}
	if len(zstd) > 0 {
		if err := b.do(ctx, func() error { return b.decompress(c, s, d, pagefmt.CodecZstd, zstd) }); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// ChecksSums marks the cuda engine as checking pages' sums (see Decompress).
func (b *Backend) ChecksSums() {}

func hasZstd(src []pagefmt.Stored) bool {
	for i := range src {
		if src[i].Class == pagefmt.ClassZstd {
			return true
		}
	}
	return false
}

// maxRuns is the most runs of adjacent pages a piece is copied back in
// straight to pinned memory; a piece in more runs than that comes back
// in one copy and is then copied to its places (each copy the driver
// queues costs microseconds).
const maxRuns = 64

// unpack decodes the pages idx of d (at most a slot's worth; LZ4 pages,
// or pages of any class but zstd) with s4d_unpack. Blocks in memory registered with the GPU (the store's slabs)
// are fetched from there by s4d_fetch, across PCIe, with nothing done on
// the host; others are packed into the slot's pinned buffer on the
// caller's cores and go up in one copy. They come back decoded. Into pinned
// memory (a client's registered shared buffer) each run of adjacent pages
// comes back straight to its place; otherwise the pages come back to the
// slot's pinned buffer, back to back, and are copied to their places.
// meanwhile, if set, runs on the caller while the GPU works.
func (b *Backend) unpack(c *config, s *slot, d *pagefmt.Decompression, idx []int, meanwhile func()) error {
	t0 := time.Now()
	ps, l, m := d.PageSize, c.lay, len(idx)
	runs := s.runs[:0]
	for j, i := range idx {
		if j == 0 || i != idx[j-1]+1 {
			runs = append(runs, j)
		}
	}
	s.runs = runs
	direct := len(runs) <= maxRuns && b.inPinned(d.Dst)
	offs, size, src := u32s(s.harr, l.offs, m), u32s(s.harr, l.psize, m), u64s(s.harr, l.dst, m)
	cls, ccls := s.harr[l.cls:l.cls+m], s.harr[l.fill:l.fill+m]
	used, hosted, check := 0, 0, false
	look := b.lookup()
	for j, i := range idx {
		st := &d.Src[i]
		data := st.Data
		cls[j] = uint8(st.Class)
		// s4d_crc's class: a block at offs for every page but a zero one.
		ccls[j] = uint8(pagefmt.ClassLZ4)
		if st.Class == pagefmt.ClassZero {
			ccls[j] = uint8(pagefmt.ClassZero)
		}
		check = check || st.Check
		offs[j], size[j], src[j] = uint32(used), uint32(len(data)), 0
		switch st.Class {
		case pagefmt.ClassZero:
			size[j] = 0
			continue
		case pagefmt.ClassSame:
			size[j] = 8 // its word: fetched where stored so, else Fill
		}
		// A block longer than a page is no valid stored page; the kernel
		// reports a size of 0 as failed.
		if len(data) > ps {
			size[j] = 0
			continue
		}
		if len(data) > 0 && int(size[j]) == len(data) {
			if a := look.devAddr(data); a != 0 && a%4 == 0 {
				src[j] = uint64(a)
			}
		}
		if src[j] == 0 && size[j] > 0 {
			hosted++
		}
		used += (int(size[j]) + 7) &^ 7
	}
	look.done()
	if hosted > 0 {
		defer b.stages.add(stStaged, 0, used)
		parallelFor(m, func(lo, hi int) {
			for j := lo; j < hi; j++ {
				if size[j] == 0 || src[j] != 0 {
					continue
				}
				if st := &d.Src[idx[j]]; st.Class == pagefmt.ClassSame {
					binary.LittleEndian.PutUint64(s.hpacked[offs[j]:], st.Fill)
				} else {
					copy(s.hpacked[offs[j]:], st.Data)
				}
			}
		})
	}
	t1 := time.Now()
	// Queued from this thread, not the worker's: the slot's stream is this
	// batch's alone, and concurrent GETs would otherwise queue one behind
	// the other (and behind PUTs) for the worker.
	err := b.onThread(func() error {
		dr, a := &b.drv, func(off int) uint64 { return s.darr + uint64(off) }
		if err := dr.Record(s.times[0], s.s); err != nil {
			return err
		}
		if hosted > 0 {
			if err := dr.HtoD(s.dpacked, s.hpacked[:used], s.s); err != nil {
				return err
			}
		}
		// offs and psize are adjacent: one upload.
		if err := dr.HtoD(a(l.offs), s.harr[l.offs:l.psize+4*m], s.s); err != nil {
			return err
		}
		if err := dr.HtoD(a(l.cls), cls, s.s); err != nil {
			return err
		}
		// The fetch comes after the host's upload, which also covers the
		// places of the fetched blocks.
		if hosted < m {
			if err := dr.HtoD(a(l.dst), s.harr[l.dst:l.dst+8*m], s.s); err != nil {
				return err
			}
			if err := dr.Launch(b.fFetch, grid(m*32, blockThreads), blockThreads, s.s, uint64(m), a(l.dst),
				a(l.psize), a(l.offs), s.dpacked); err != nil {
				return err
			}
		}
		if check {
			// s4d_crc over the blocks as they lie in dpacked: every class
			// but zero reads as a block (pos = offs, stride 1).
			if err := dr.HtoD(a(l.fill), ccls, s.s); err != nil {
				return err
			}
			if err := dr.Launch(b.fCRC, grid(m, blockThreads), blockThreads, s.s, uint64(m), a(l.fill), a(l.fill),
				a(l.offs), a(l.psize), s.din, uint64(ps), s.dpacked, uint64(1), a(l.sums)); err != nil {
				return err
			}
		}
		if err := dr.Record(s.times[1], s.s); err != nil {
			return err
		}
		if err := dr.Launch(b.fUnpack, grid(m, unpackWarps), unpackWarps*32, s.s, uint64(m), a(l.offs), a(l.psize),
			s.dpacked, s.din, uint64(ps), a(l.status), a(l.cls)); err != nil {
			return err
		}
		if err := dr.Record(s.times[2], s.s); err != nil {
			return err
		}
		if direct {
			for r, j := range runs {
				end := m
				if r+1 < len(runs) {
					end = runs[r+1]
				}
				i := idx[j]
				if err := dr.DtoH(d.Dst[i*ps:(i+end-j)*ps], s.din+uint64(j*ps), s.s); err != nil {
					return err
				}
			}
		} else if err := dr.DtoH(s.hin[:m*ps], s.din, s.s); err != nil {
			return err
		}
		if err := dr.DtoH(s.harr[l.status:l.status+4*m], a(l.status), s.s); err != nil {
			return err
		}
		if check {
			if err := dr.DtoH(s.harr[l.sums:l.sums+4*m], a(l.sums), s.s); err != nil {
				return err
			}
		}
		return dr.Record(s.times[3], s.s)
	})
	if meanwhile != nil {
		meanwhile()
	}
	t2 := time.Now()
	if err == nil {
		// The events are read with the context current, on this thread.
		err = b.onThread(func() error {
			if err := b.drv.Sync(s.s); err != nil {
				return err
			}
			b.account(&s.times, used+16*m, m*ps+4*m)
			return nil
		})
	}
	if err != nil {
		b.onThread(func() error { return b.drv.Sync(s.s) }) // the slot is reused only once idle
		return err
	}
	t3 := time.Now()
	status, sums := u32s(s.harr, l.status, m), u32s(s.harr, l.sums, m)
	parallelFor(m, func(lo, hi int) {
		for j := lo; j < hi; j++ {
			i := idx[j]
			if st := &d.Src[i]; check && st.Check {
				st.Check = false
				if size[j] > 0 && sums[j] != st.Sum {
					d.Corrupt[i] = true
				}
			}
			if status[j] != 0 || d.Corrupt[i] {
				d.Failed[i] = true
			} else if !direct {
				copy(d.Dst[i*ps:(i+1)*ps], s.hin[j*ps:(j+1)*ps])
			}
		}
	})
	b.trace[0].Add(int64(t1.Sub(t0)))
	b.trace[1].Add(int64(t2.Sub(t1)))
	b.trace[2].Add(int64(t3.Sub(t2)))
	b.trace[4].Add(int64(time.Since(t3)))
	b.stages.add(stHost, t1.Sub(t0).Seconds()+time.Since(t3).Seconds(), 0)
	return nil
}

// decompress runs nvCOMP over the pages idx of dd, all of one codec.
func (b *Backend) decompress(c *config, s *slot, dd *pagefmt.Decompression, codec pagefmt.Codec, idx []int) error {
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

func (b *Backend) runDecompress(c *config, s *slot, codec pagefmt.Codec, take []int, used int, dd *pagefmt.Decompression) error {
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
