package webgpu

/*
#include <stdlib.h>
#include "glue.h"
*/
import "C"

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/s4d-project/s4d/pagefmt"
)

// dslot holds one decompression's buffers (numDSlots of them).
type dslot struct {
	cap, srcCap                        int
	src, desc, out, status, params, rd C.WGPUBuffer
	bg                                 C.WGPUBindGroup
	wait, errWait                      *C.s4d_wait
	up                                 C.WGPUBuffer // MapWrite staging: desc, then blocks
	upWait                             *C.s4d_wait
	upCap                              int
	upPending, upReady                 bool
	lastN                              int       // LZ4 pages of the last round (benchmarks)
	vs                                 *vkDSlot  // the Vulkan runtime's side (nil on webgpu.h)
	used                               time.Time // when a batch last handed it back (idle.go)
}

func (s *dslot) free(p *C.s4d_procs) {
	C.s4d_bind_group_free(p, s.bg)
	for _, x := range []C.WGPUBuffer{s.src, s.desc, s.out, s.status, s.params, s.rd, s.up} {
		C.s4d_buffer_free(p, x)
	}
	s.bg, s.src, s.desc, s.out, s.status, s.params, s.rd, s.up = nil, nil, nil, nil, nil, nil, nil, nil
	s.cap, s.srcCap, s.upCap, s.upPending, s.upReady = 0, 0, 0, false, false
}

// Decompress expands the LZ4 pages of d with the decompress kernel and
// the other classes on the CPU (a fill or a copy) while the GPU works.
// Only LZ4 blocks go up. Pages still to check (pagefmt.Stored.Check) are
// checked on the host as their bytes are read anyway: a raw page just
// before its copy, an LZ4 block just before it is packed (a separate pass
// over the batch first read every stored byte from memory twice, and did
// so before the GPU started). Pages of PageSize only, and no zstd pages
// (Takes): the router sends those batches elsewhere; a zstd page that
// comes anyway is flagged. A block that does not decode to exactly one
// page is flagged in d.Failed.
func (b *Backend) Decompress(ctx context.Context, d *pagefmt.Decompression) error {
	if d.PageSize != PageSize {
		return errNotTaken
	}
	n := len(d.Src)
	if cap(d.Failed) < n {
		d.Failed = make([]bool, n)
	}
	d.Failed = d.Failed[:n]
	clear(d.Failed)
	d.CorruptFlags()
	if b.vk != nil {
		pg := &b.vk.prof.get
		pg.calls.Add(1)
		pg.active.enter()
		defer pg.active.leave()
	}
	if b.vk != nil {
		if done, err := b.vkGet(ctx, d); done {
			return err
		}
	}
	var lz, plain []int
	for i, s := range d.Src {
		if s.Class == pagefmt.ClassLZ4 {
			lz = append(lz, i)
		} else {
			plain = append(plain, i)
		}
	}
	other := func() { plainPages(d, plain) }
	if len(lz) == 0 {
		other()
		return ctx.Err()
	}
	if err := b.usable(); err != nil {
		return err
	}
	ts := time.Now()
	var s *dslot
	select {
	case s = <-b.dslots:
	case <-b.gone:
		return errClosed
	}
	defer func() { s.used = time.Now(); b.dslots <- s }()
	if b.vk != nil {
		b.vk.prof.get.add(pSlot, &ts)
	}
	if err := b.usable(); err != nil {
		return err // closed while waiting for the buffers
	}
	for lo := 0; lo < len(lz); lo += maxRound {
		if err := ctx.Err(); err != nil {
			return err
		}
		idx := lz[lo:min(lo+maxRound, len(lz))]
		var f func()
		if lo == 0 {
			f = other
		}
		if err := b.decompress(s, d, idx, f); err != nil {
			return b.fail(err)
		}
	}
	return nil
}

// plainPages fills or copies the pages idx of d (no LZ4 ones) on several
// goroutines: one cannot keep up with the GPU.
func plainPages(d *pagefmt.Decompression, idx []int) {
	inParallel(len(idx), 16, 256, func(lo, hi int) {
		for _, i := range idx[lo:hi] {
			// Checked just before the copy reads the same bytes.
			d.CheckSums(i, i+1)
			d.Failed[i] = d.Corrupt[i] || !pagefmt.DecodePlain(d.Src[i], d.Dst[i*PageSize:(i+1)*PageSize:(i+1)*PageSize])
		}
	})
}

// inParallel runs f over [0, n) in up to maxG pieces of at least per
// items, on as many goroutines, and waits for them.
func inParallel(n, maxG, per int, f func(lo, hi int)) {
	g := min(runtime.GOMAXPROCS(0), maxG, max(1, n/per))
	var wg sync.WaitGroup
	for k := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(k*n/g, (k+1)*n/g)
		}()
	}
	wg.Wait()
}

// ChecksSums marks the engine as checking pages' sums (see Decompress).
func (b *Backend) ChecksSums() {}

// blocksBytes is the room the LZ4 blocks idx of d take packed (4-byte
// aligned each; a block over 1 MiB is cut, and flagged by the kernel).
func blocksBytes(d *pagefmt.Decompression, idx []int) int {
	total := 0
	for _, i := range idx {
		total += (min(len(d.Src[i].Data), 1<<20) + 3) &^ 3
	}
	return max(total, 4)
}

// packBlocks writes the kernel's input for the blocks idx of d: desc
// (offset and length per block) and the blocks into src, from several
// goroutines, checking each block's sum first (d.Corrupt sized). Both
// runtimes use it.
func packBlocks(desc, src []byte, d *pagefmt.Decompression, idx []int) {
	n := len(idx)
	off := 0
	for k, i := range idx {
		l := min(len(d.Src[i].Data), 1<<20)
		binary.LittleEndian.PutUint32(desc[8*k:], uint32(off))
		binary.LittleEndian.PutUint32(desc[8*k+4:], uint32(l))
		off += (l + 3) &^ 3
	}
	inParallel(n, 8, 512, func(lo, hi int) {
		for k := lo; k < hi; k++ {
			d.CheckSums(idx[k], idx[k]+1)
			o := int(binary.LittleEndian.Uint32(desc[8*k:]))
			l := int(binary.LittleEndian.Uint32(desc[8*k+4:]))
			copy(src[o:o+l], d.Src[idx[k]].Data)
			clear(src[o+l : o+((l+3)&^3)])
		}
	})
}

// decompress runs the kernel over the pages idx of d; meanwhile (the GPU
// busy) it runs meanwhile on this goroutine.
func (b *Backend) decompress(s *dslot, d *pagefmt.Decompression, idx []int, meanwhile func()) error {
	if b.vk != nil {
		return b.vkDecompress(s, d, idx, meanwhile)
	}
	dv, p := b.d, b.d.p
	b.dlast.Store(s)
	n := len(idx)
	t0 := time.Now()
	// The staging buffer holds desc (8 bytes a page, padded to 256) then
	// the blocks, 4-byte aligned; it is filled in place, by several
	// goroutines, and copied up by the GPU.
	total := blocksBytes(d, idx)
	descBytes := (8*n + 255) &^ 255
	if s.upPending {
		if err := dv.await(s.upWait, "decompress staging map"); err != nil {
			return err
		}
	}
	var stage unsafe.Pointer
	if err := dv.do(func() error {
		if s.upPending {
			s.upPending = false
			if s.upWait.status != C.S4D_STATUS_SUCCESS {
				return fmt.Errorf("webgpu: staging map failed: %s", waitMsg(s.upWait))
			}
			s.upReady = true
		}
		if err := b.ensureDecomp(s, n, total); err != nil {
			return err
		}
		if !s.upReady {
			return errors.New("webgpu: decompress staging not mapped")
		}
		if stage = C.s4d_mapped(p, s.up, 0, C.size_t(descBytes+total)); stage == nil {
			return errors.New("webgpu: decompress staging has no mapped range")
		}
		return nil
	}); err != nil {
		return err
	}
	buf := unsafe.Slice((*byte)(stage), descBytes+total)
	packBlocks(buf[:8*n], buf[descBytes:], d, idx)
	outBytes, statOff := n*PageSize, n*PageSize
	s.lastN = n
	dlap(0, &t0)
	err := dv.do(func() error {
		var prm [16]byte
		binary.LittleEndian.PutUint32(prm[0:], uint32(n))
		cprm := C.CBytes(prm[:])
		defer C.free(cprm)
		C.s4d_unmap(p, s.up)
		s.upReady = false
		C.s4d_push_errors(p, dv.dev)
		C.s4d_write(p, dv.queue, s.params, 0, cprm, 16)
		enc := C.s4d_encoder(p, dv.dev)
		C.s4d_copy(p, enc, s.up, 0, s.desc, 0, C.uint64_t(descBytes))
		C.s4d_copy(p, enc, s.up, C.uint64_t(descBytes), s.src, 0, C.uint64_t(total))
		C.s4d_dispatch(p, enc, b.decomp, s.bg, C.uint32_t(n), 1)
		C.s4d_copy(p, enc, s.out, 0, s.rd, 0, C.uint64_t(outBytes))
		C.s4d_copy(p, enc, s.status, 0, s.rd, C.uint64_t(statOff), C.uint64_t(4*n))
		C.s4d_submit(p, dv.queue, enc)
		resetWait(s.upWait)
		C.s4d_map_async(p, s.up, C.S4D_MAP_WRITE, 0, C.size_t(s.upCap), s.upWait)
		s.upPending = true
		if err := dv.popErrors(s.errWait); err != nil {
			return err
		}
		resetWait(s.wait)
		C.s4d_map_async(p, s.rd, C.S4D_MAP_READ, 0, C.size_t(outBytes+4*n), s.wait)
		return nil
	})
	if err != nil {
		return err
	}
	dlap(1, &t0)
	if meanwhile != nil {
		meanwhile()
	}
	dlap(2, &t0)
	if err := dv.await(s.wait, "decompress readback"); err != nil {
		return err
	}
	dlap(3, &t0)
	var m unsafe.Pointer
	if err := dv.do(func() error {
		if s.wait.status != C.S4D_STATUS_SUCCESS {
			return fmt.Errorf("webgpu: decompress readback failed: %s", waitMsg(s.wait))
		}
		if m = C.s4d_const_mapped(p, s.rd, 0, C.size_t(outBytes+4*n)); m == nil {
			C.s4d_unmap(p, s.rd)
			return errors.New("webgpu: decompress readback has no mapped range")
		}
		return nil
	}); err != nil {
		return err
	}
	raw := unsafe.Slice((*byte)(m), outBytes+4*n)
	copyOut(raw[:outBytes], raw[statOff:], d, idx)
	dlap(4, &t0)
	return dv.do(func() error { C.s4d_unmap(p, s.rd); return dv.fault() })
}

// copyOut copies the decoded pages (the kernel's output, in idx order)
// to their places in d.Dst, flagging those whose status is not 1 or whose
// sum failed. Runs of
// consecutive pages go in one copy each; the runs are shared out to
// several goroutines (LZ4 pages lie between zero pages, so runs are short
// and one copier is bound by one core). Both runtimes use it.
func copyOut(pages, status []byte, d *pagefmt.Decompression, idx []int) {
	n := len(idx)
	part := func(k0, k1 int) {
		for k := k0; k < k1; {
			e := k
			for e < k1 && idx[e] == idx[k]+(e-k) && binary.LittleEndian.Uint32(status[4*e:]) == 1 && len(d.Src[idx[e]].Data) <= 1<<20 && !d.Corrupt[idx[e]] {
				e++
			}
			if e > k {
				copy(d.Dst[idx[k]*PageSize:(idx[k]+e-k)*PageSize], pages[k*PageSize:e*PageSize])
				k = e
				continue
			}
			d.Failed[idx[k]] = true
			k++
		}
	}
	inParallel(n, 16, 256, part)
}

// dphaseNs sums the time of decompress's steps (pack the blocks, upload
// and submit, CPU-side pages, wait, copy out), for benchmarks.
var dphaseNs [5]atomic.Int64

func dlap(k int, t0 *time.Time) {
	now := time.Now()
	dphaseNs[k].Add(int64(now.Sub(*t0)))
	*t0 = now
}

// ensureDecomp grows the decompression buffers. Device thread only.
func (b *Backend) ensureDecomp(s *dslot, n, srcBytes int) error {
	if n <= s.cap && srcBytes <= s.srcCap {
		return nil
	}
	c, sc := max(s.cap, 64), max(s.srcCap, 1<<16)
	for c < n {
		c *= 2
	}
	for sc < srcBytes {
		sc *= 2
	}
	s.free(b.d.p)
	d, p := b.d, b.d.p
	st := C.WGPUFlags(C.S4D_BUFFER_STORAGE)
	out := uint64(c) * PageSize
	C.s4d_push_errors(p, d.dev)
	s.src = C.s4d_create_buffer(p, d.dev, st|C.S4D_BUFFER_COPY_DST, C.uint64_t(sc), 0)
	s.desc = C.s4d_create_buffer(p, d.dev, st|C.S4D_BUFFER_COPY_DST, C.uint64_t(8*c), 0)
	s.out = C.s4d_create_buffer(p, d.dev, st|C.S4D_BUFFER_COPY_SRC, C.uint64_t(out), 0)
	s.status = C.s4d_create_buffer(p, d.dev, st|C.S4D_BUFFER_COPY_SRC, C.uint64_t(4*c), 0)
	s.params = C.s4d_create_buffer(p, d.dev, C.S4D_BUFFER_UNIFORM|C.S4D_BUFFER_COPY_DST, 16, 0)
	s.rd = C.s4d_create_buffer(p, d.dev, C.S4D_BUFFER_MAP_READ|C.S4D_BUFFER_COPY_DST, C.uint64_t(out+uint64(4*c)), 0)
	s.upCap = (8*c+255)&^255 + sc
	s.up = C.s4d_create_buffer(p, d.dev, C.S4D_BUFFER_MAP_WRITE|C.S4D_BUFFER_COPY_SRC, C.uint64_t(s.upCap), 1)
	s.bg = bindGroup(d, b.decomp, bind{s.src, uint64(sc)}, bind{s.desc, uint64(8 * c)}, bind{s.out, out},
		bind{s.status, uint64(4 * c)}, bind{s.params, 16})
	if err := d.popErrors(s.errWait); err != nil {
		s.free(p)
		return fmt.Errorf("webgpu: decompression buffers for %d pages: %w", c, err)
	}
	s.cap, s.srcCap, s.upReady = c, sc, true
	return nil
}

// dkernelPass reruns the decompress kernel reps times over the blocks of
// the last round, without transfers, and waits for it. For benchmarks.
func (b *Backend) dkernelPass(reps int) error {
	d, p, s := b.d, b.d.p, b.dlast.Load()
	b.idleMu.RLock()
	defer b.idleMu.RUnlock()
	if s.bg == nil {
		return errors.New("webgpu: the slot's buffers were freed (idle)")
	}
	err := d.do(func() error {
		C.s4d_push_errors(p, d.dev)
		enc := C.s4d_encoder(p, d.dev)
		for range reps {
			C.s4d_dispatch(p, enc, b.decomp, s.bg, C.uint32_t(s.lastN), 1)
		}
		C.s4d_copy(p, enc, s.status, 0, s.rd, 0, 16)
		C.s4d_submit(p, d.queue, enc)
		if err := d.popErrors(s.errWait); err != nil {
			return err
		}
		resetWait(s.wait)
		C.s4d_map_async(p, s.rd, C.S4D_MAP_READ, 0, 16, s.wait)
		return nil
	})
	if err != nil {
		return err
	}
	if err := d.await(s.wait, "decompress kernel pass"); err != nil {
		return err
	}
	return d.do(func() error { C.s4d_unmap(p, s.rd); return d.fault() })
}
