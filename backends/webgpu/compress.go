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
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/s4d-project/s4d/pagefmt"
)

const metaWords = 4

// slot is one round's buffers on the device. A caller holds a slot for
// its rounds; its fields are touched by that caller between device jobs
// and by the device thread inside them, never both at once.
type slot struct {
	capPages                   int
	in, packed, meta, total    C.WGPUBuffer
	zero, params               C.WGPUBuffer
	upload, readback           C.WGPUBuffer
	bg                         C.WGPUBindGroup
	uploadWait, rbWait         *C.s4d_wait
	errWait                    *C.s4d_wait
	uploadPending, uploadReady bool // a MapAsync(write) is outstanding / done
	n, total32                 int
	meta32                     []uint32
	guess, got                 int                // packed bytes asked for with the metadata
	data                       []byte             // the packed bytes, mapped
	extra                      bool               // one of the extraSlots
	part                       pagefmt.Compressed // a round handed to CompressParts' deliver
	vs                         *vkSlot            // the Vulkan runtime's side (nil on webgpu.h)
	used                       time.Time          // when a batch last handed it back (idle.go)
}

func (s *slot) free(p *C.s4d_procs) {
	C.s4d_bind_group_free(p, s.bg)
	for _, x := range []C.WGPUBuffer{s.in, s.packed, s.meta, s.total, s.zero, s.params, s.upload, s.readback} {
		C.s4d_buffer_free(p, x)
	}
	s.bg, s.in, s.packed, s.meta, s.total, s.zero, s.params, s.upload, s.readback = nil, nil, nil, nil, nil, nil, nil, nil, nil
	s.capPages, s.uploadPending, s.uploadReady = 0, false, false
}

// rbDataOff is where the packed bytes go in the readback buffer, after
// the metadata and the total.
func rbDataOff(n int) int { return (n*metaWords*4 + 16 + 255) &^ 255 }

// ensure grows s's buffers to hold n pages. Device thread only; the
// staging buffer must not be waiting for a map.
func (b *Backend) ensure(s *slot, n int) error {
	if n <= s.capPages {
		return nil
	}
	s.free(b.d.p)
	c := 64
	for c < n {
		c *= 2
	}
	d, p := b.d, b.d.p
	pages := uint64(c) * PageSize
	metaSize := uint64(c * metaWords * 4)
	st := C.WGPUFlags(C.S4D_BUFFER_STORAGE)
	C.s4d_push_errors(p, d.dev)
	// COPY_SRC too: the copy-only ceiling benchmark reads the pages back.
	s.in = C.s4d_create_buffer(p, d.dev, st|C.S4D_BUFFER_COPY_DST|C.S4D_BUFFER_COPY_SRC, C.uint64_t(pages), 0)
	s.packed = C.s4d_create_buffer(p, d.dev, st|C.S4D_BUFFER_COPY_SRC, C.uint64_t(pages), 0)
	s.meta = C.s4d_create_buffer(p, d.dev, st|C.S4D_BUFFER_COPY_SRC, C.uint64_t(metaSize), 0)
	s.total = C.s4d_create_buffer(p, d.dev, st|C.S4D_BUFFER_COPY_SRC|C.S4D_BUFFER_COPY_DST, 16, 0)
	s.zero = C.s4d_create_buffer(p, d.dev, C.S4D_BUFFER_COPY_SRC, 16, 0) // buffers start zeroed
	s.params = C.s4d_create_buffer(p, d.dev, C.S4D_BUFFER_UNIFORM|C.S4D_BUFFER_COPY_DST, 16, 0)
	s.upload = C.s4d_create_buffer(p, d.dev, C.S4D_BUFFER_MAP_WRITE|C.S4D_BUFFER_COPY_SRC, C.uint64_t(pages), 1)
	s.readback = C.s4d_create_buffer(p, d.dev, C.S4D_BUFFER_MAP_READ|C.S4D_BUFFER_COPY_DST, C.uint64_t(uint64(rbDataOff(c))+pages), 0)
	s.bg = bindGroup(d, b.compress, bind{s.in, pages}, bind{s.packed, pages}, bind{s.meta, metaSize}, bind{s.params, 16}, bind{s.total, 16})
	if err := d.popErrors(s.errWait); err != nil {
		s.free(p)
		return fmt.Errorf("webgpu: buffers for %d pages: %w", c, err)
	}
	s.capPages, s.uploadReady = c, true
	return nil
}

// stage returns the mapped staging memory of s for n pages, growing the
// buffers first if needed. The caller has awaited any pending map.
func (b *Backend) stage(s *slot, n int) ([]byte, error) {
	var ptr unsafe.Pointer
	err := b.d.do(func() error {
		if s.uploadPending {
			s.uploadPending = false
			if s.uploadWait.status != C.S4D_STATUS_SUCCESS {
				return fmt.Errorf("webgpu: staging map failed: %s", waitMsg(s.uploadWait))
			}
			s.uploadReady = true
		}
		if err := b.ensure(s, n); err != nil {
			return err
		}
		if !s.uploadReady {
			return errors.New("webgpu: staging buffer not mapped")
		}
		ptr = C.s4d_mapped(b.d.p, s.upload, 0, C.size_t(n*PageSize))
		if ptr == nil {
			return errors.New("webgpu: staging buffer has no mapped range")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(ptr), n*PageSize), nil
}

// submit runs the kernel over the n staged pages and asks for the
// metadata and the first s.guess bytes of the packed blocks in the same
// submission, so that a round usually needs one round trip. Device
// thread only.
func (b *Backend) submit(s *slot, n, threshold int) error {
	d, p := b.d, b.d.p
	C.s4d_unmap(p, s.upload)
	s.uploadReady = false
	var prm [16]byte
	binary.LittleEndian.PutUint32(prm[0:], uint32(n))
	binary.LittleEndian.PutUint32(prm[4:], uint32(threshold))
	cprm := C.CBytes(prm[:])
	defer C.free(cprm)
	metaBytes := n * metaWords * 4
	off := rbDataOff(s.capPages)
	s.n = n
	s.got = min(n*PageSize, max(256<<10, s.guess)&^3)
	C.s4d_push_errors(p, d.dev)
	C.s4d_write(p, d.queue, s.params, 0, cprm, 16)
	enc := C.s4d_encoder(p, d.dev)
	C.s4d_copy(p, enc, s.upload, 0, s.in, 0, C.uint64_t(n*PageSize))
	C.s4d_copy(p, enc, s.zero, 0, s.total, 0, 16)
	C.s4d_dispatch(p, enc, b.compress, s.bg, C.uint32_t(n), 1)
	C.s4d_copy(p, enc, s.meta, 0, s.readback, 0, C.uint64_t(metaBytes))
	C.s4d_copy(p, enc, s.total, 0, s.readback, C.uint64_t(metaBytes), 16)
	C.s4d_copy(p, enc, s.packed, 0, s.readback, C.uint64_t(off), C.uint64_t(s.got))
	C.s4d_submit(p, d.queue, enc)
	// Map the staging buffer again for the slot's next round now: the
	// map completes once the copy above has run.
	resetWait(s.uploadWait)
	C.s4d_map_async(p, s.upload, C.S4D_MAP_WRITE, 0, C.size_t(s.capPages*PageSize), s.uploadWait)
	s.uploadPending = true
	if err := d.popErrors(s.errWait); err != nil {
		return err
	}
	resetWait(s.rbWait)
	C.s4d_map_async(p, s.readback, C.S4D_MAP_READ, 0, C.size_t(off+s.got), s.rbWait)
	return nil
}

// readMeta reads the mapped metadata. If the packed blocks are longer
// than what came back with it, it unmaps and asks for the rest (more
// is true); else s.data points at them, still mapped. Device thread only.
func (b *Backend) readMeta(s *slot) (more bool, err error) {
	d, p := b.d, b.d.p
	if s.rbWait.status != C.S4D_STATUS_SUCCESS {
		return false, fmt.Errorf("webgpu: readback map failed: %s", waitMsg(s.rbWait))
	}
	metaBytes := s.n * metaWords * 4
	off := rbDataOff(s.capPages)
	src := C.s4d_const_mapped(p, s.readback, 0, C.size_t(off+s.got))
	if src == nil {
		C.s4d_unmap(p, s.readback)
		return false, errors.New("webgpu: readback has no mapped range")
	}
	raw := unsafe.Slice((*byte)(src), off+s.got)
	s.meta32 = pagefmt.Resize(s.meta32, s.n*metaWords)
	for i := range s.meta32 {
		s.meta32[i] = binary.LittleEndian.Uint32(raw[4*i:])
	}
	total := int(binary.LittleEndian.Uint32(raw[metaBytes:]))
	if total > s.n*PageSize || total%4 != 0 {
		C.s4d_unmap(p, s.readback)
		return false, fmt.Errorf("webgpu: packed size %d out of range", total)
	}
	s.total32 = total
	// The next guess: this round's size and a quarter more.
	s.guess = total + total/4
	if total <= s.got {
		s.data = raw[off : off+total]
		return false, d.fault()
	}
	C.s4d_unmap(p, s.readback)
	C.s4d_push_errors(p, d.dev)
	enc := C.s4d_encoder(p, d.dev)
	C.s4d_copy(p, enc, s.packed, C.uint64_t(s.got), s.readback, C.uint64_t(off+s.got), C.uint64_t(total-s.got))
	C.s4d_submit(p, d.queue, enc)
	if err := d.popErrors(s.errWait); err != nil {
		return false, err
	}
	resetWait(s.rbWait)
	C.s4d_map_async(p, s.readback, C.S4D_MAP_READ, C.size_t(off), C.size_t(total), s.rbWait)
	return true, d.fault()
}

// phaseNs sums the time rounds spend in each step (stage, copy in,
// submit, result wait, metadata, second wait, copy out); benchmarks
// report it to show where a batch's time goes.
var phaseNs [7]atomic.Int64

func lap(k int, t0 *time.Time) {
	now := time.Now()
	phaseNs[k].Add(int64(now.Sub(*t0)))
	*t0 = now
}

// round compresses pages [lo, hi) of in on slot s: staging, kernel,
// metadata and packed bytes (appended to out.Data under mu, or with pt
// set handed to its deliver straight from the mapped readback).
func (b *Backend) round(s *slot, in *pagefmt.Batch, out *pagefmt.Compressed, lo, hi int, mu *sync.Mutex, tn *turn, pt *parts, r int) error {
	if b.vk != nil {
		return b.vkRound(s, in, out, lo, hi, mu, tn, pt, r)
	}
	m := hi - lo
	t0 := time.Now()
	defer tn.release()
	if s.uploadPending {
		if err := b.d.await(s.uploadWait, "staging map"); err != nil {
			return err
		}
	}
	if m > s.capPages {
		// Growing frees the staging buffer: it must not be mid-map.
		if err := b.d.do(func() error { return b.ensure(s, m) }); err != nil {
			return err
		}
	}
	buf, err := b.stage(s, m)
	if err != nil {
		return err
	}
	lap(0, &t0)
	tn.wait()
	parallelCopy(buf, in.Pages[lo*PageSize:hi*PageSize], tn.procs())
	tn.release()
	lap(1, &t0)
	if err := b.d.do(func() error { return b.submit(s, m, in.Threshold) }); err != nil {
		return err
	}
	lap(2, &t0)
	if err := b.d.await(s.rbWait, "readback"); err != nil {
		return err
	}
	lap(3, &t0)
	var more bool
	if err := b.d.do(func() (err error) { more, err = b.readMeta(s); return }); err != nil {
		return err
	}
	lap(4, &t0)
	if more {
		if err := b.d.await(s.rbWait, "packed readback"); err != nil {
			return err
		}
		off := rbDataOff(s.capPages)
		if err := b.d.do(func() error {
			if s.rbWait.status != C.S4D_STATUS_SUCCESS {
				return fmt.Errorf("webgpu: readback map failed: %s", waitMsg(s.rbWait))
			}
			src := C.s4d_const_mapped(b.d.p, s.readback, C.size_t(off), C.size_t(s.total32))
			if src == nil {
				C.s4d_unmap(b.d.p, s.readback)
				return errors.New("webgpu: readback has no mapped range")
			}
			s.data = unsafe.Slice((*byte)(src), s.total32)
			return nil
		}); err != nil {
			return err
		}
		lap(5, &t0)
	}
	defer b.d.do(func() error { C.s4d_unmap(b.d.p, s.readback); s.data = nil; return nil })
	if pt != nil {
		return pt.deliverRound(b, s, r, lo, uint32(min(in.Threshold, PageSize)))
	}
	mu.Lock()
	defer mu.Unlock()
	base := len(out.Data)
	out.Data = slices.Grow(out.Data, len(s.data))[:base+len(s.data)] // no zeroing: copied over
	parallelCopy(out.Data[base:], s.data, 8)
	lap(6, &t0)
	return b.fill(s, out, lo, uint32(base), len(s.data), uint32(min(in.Threshold, PageSize)))
}

// fill checks the round's metadata and writes it into out.
func (b *Backend) fill(s *slot, out *pagefmt.Compressed, lo int, base uint32, total int, limit uint32) error {
	for k := range s.n {
		i := lo + k
		mt := s.meta32[k*metaWords : (k+1)*metaWords]
		class, size := pagefmt.Class(mt[0]), mt[1]
		out.Class[i], out.Size[i], out.Off[i], out.Fill[i] = class, size, 0, 0
		// The kernel sums lz4 and raw pages' stored bytes (meta word 3);
		// a same page's 8 bytes are summed here, a zero page's sum is 0.
		out.Sum[i] = mt[3]
		switch class {
		case pagefmt.ClassZero:
			if size != 0 {
				return fmt.Errorf("webgpu: page %d: zero page of size %d", i, size)
			}
			out.Sum[i] = 0
		case pagefmt.ClassSame:
			out.Fill[i] = uint64(mt[2]) | uint64(mt[3])<<32
			out.Sum[i] = out.Checksum(i, nil)
		case pagefmt.ClassLZ4:
			if size == 0 || size > limit || mt[2]%4 != 0 || uint64(mt[2])+uint64(size) > uint64(total) {
				return fmt.Errorf("webgpu: page %d: lz4 block of %d bytes at %d out of range", i, size, mt[2])
			}
			out.Off[i] = base + mt[2]
		case pagefmt.ClassRaw:
			if size != PageSize {
				return fmt.Errorf("webgpu: page %d: raw of size %d", i, size)
			}
		default:
			return fmt.Errorf("webgpu: page %d: unknown class %d", i, mt[0])
		}
	}
	return nil
}

// roundSplit: a batch of n pages goes in rounds of about n/roundSplit
// (at least minRound), so that the slots are busy on one large batch.
// With copyTurns the rounds of a batch copy into staging one after the
// other (each with all cores), so that the first round's upload and
// kernel start while the later rounds are still copied. When other
// batches are under way they keep the slots busy instead: a batch then
// goes in rounds of up to busyRound pages, fewer and larger dispatches,
// over the extra slots too (see numSlots for what it gained).
var (
	roundSplit = 2
	minRound   = 2048
	busyRound  = 8192
	copyTurns  = true
)

// turn orders the staging copies of a batch's rounds: round r copies once
// round r-1 has (or has given up). Nil: no order.
type turn struct {
	prev <-chan struct{}
	done chan struct{}
	once sync.Once
}

func (t *turn) wait() {
	if t != nil && t.prev != nil {
		<-t.prev
	}
}

func (t *turn) release() {
	if t != nil {
		t.once.Do(func() { close(t.done) })
	}
}

// procs is how many goroutines copy: all cores when copies take turns.
func (t *turn) procs() int {
	if t != nil {
		return runtime.GOMAXPROCS(0)
	}
	return 8
}

// Compress classifies and LZ4-compresses the batch on the GPU: LZ4 batches
// of PageSize pages only (Takes). Any device error fails the whole batch;
// the caller redoes it elsewhere.
func (b *Backend) Compress(ctx context.Context, in *pagefmt.Batch, out *pagefmt.Compressed) error {
	if !b.Takes(in.Codec, in.PageSize) {
		return errNotTaken
	}
	out.Reset(in.Len())
	out.Sum = pagefmt.Resize(out.Sum, in.Len()) // filled unasked: the kernel's sums cost the host nothing
	return b.compressBatch(ctx, in, out, nil)
}

// CompressParts is Compress handing each round to deliver, in order, from
// the mapped readback buffer (backends.PartCompressor): the daemon's store
// copies the blocks from there, so the copy into out.Data is saved.
func (b *Backend) CompressParts(ctx context.Context, in *pagefmt.Batch, deliver func(lo int, part *pagefmt.Compressed) error) error {
	if !b.Takes(in.Codec, in.PageSize) {
		return errNotTaken
	}
	return b.compressBatch(ctx, in, nil, deliver)
}

func (b *Backend) compressBatch(ctx context.Context, in *pagefmt.Batch, out *pagefmt.Compressed, deliver func(int, *pagefmt.Compressed) error) error {
	n := in.Len()
	if n == 0 {
		return ctx.Err()
	}
	if err := b.usable(); err != nil {
		return err
	}
	if b.vk != nil {
		pp := &b.vk.prof.put
		pp.calls.Add(1)
		pp.active.enter()
		defer pp.active.leave()
	}
	per := min(maxRound, max(minRound, (n+roundSplit-1)/roundSplit))
	busy := b.active.Add(1) > 1
	defer b.active.Add(-1)
	if busy {
		per = min(n, busyRound)
	}
	rounds := (n + per - 1) / per
	cuts := make([]int, rounds+1)
	for r := range cuts {
		cuts[r] = min(r*per, n)
	}
	var (
		mu    sync.Mutex
		next  atomic.Int64
		wg    sync.WaitGroup
		errs  = make([]error, numSlots+cap(b.extra))
		turns = make([]*turn, rounds)
	)
	if copyTurns && !busy {
		for r := range turns {
			turns[r] = &turn{done: make(chan struct{})}
			if r > 0 {
				turns[r].prev = turns[r-1].done
			}
		}
	}
	var pt *parts
	if deliver != nil {
		pt = newParts(rounds, deliver)
		defer pt.releaseAll()
	}
	work := func(g int) {
		defer wg.Done()
		var s *slot
		ok := true
		ts := time.Now()
		extra := b.extra
		if !busy {
			extra = nil // a nil channel: never chosen
		}
		select {
		case s = <-b.slots:
		case s = <-extra:
		case <-b.gone:
			ok = false
		}
		if !ok {
			errs[g] = errClosed
			return
		}
		if b.vk != nil {
			b.vk.prof.put.add(pSlot, &ts)
		}
		defer func() {
			s.used = time.Now()
			if s.extra {
				b.extra <- s
			} else {
				b.slots <- s
			}
		}()
		for {
			r := int(next.Add(1)) - 1
			if r >= rounds {
				return
			}
			if err := ctx.Err(); err != nil {
				turns[r].release()
				pt.release(r)
				errs[g] = err
				return
			}
			if err := b.usable(); err != nil {
				turns[r].release()
				pt.release(r)
				errs[g] = err
				return
			}
			err := b.round(s, in, out, cuts[r], cuts[r+1], &mu, turns[r], pt, r)
			pt.release(r) // a failed round lets the next ones see it
			if err != nil {
				next.Store(int64(rounds))
				if de, ok := err.(deliverError); ok {
					errs[g] = de.err // the caller's, as it is: the backend is fine
					return
				}
				errs[g] = b.fail(err)
				return
			}
		}
	}
	g := min(rounds, numSlots)
	if busy {
		g = min(rounds, numSlots+cap(b.extra))
	}
	wg.Add(g)
	for k := 1; k < g; k++ {
		go work(k)
	}
	work(0)
	wg.Wait()
	if pt != nil && pt.err != nil {
		return pt.err // deliver's error, as it is
	}
	return errors.Join(errs...)
}

// kernelPass reruns the kernel reps times on the n pages staged by the
// last round of slot s, without transfers, and waits for them: it
// measures what the device itself sustains. For benchmarks.
func (b *Backend) kernelPass(s *slot, n, reps int) error {
	d, p := b.d, b.d.p
	err := d.do(func() error {
		// params.n as in a round of n pages.
		var prm [16]byte
		binary.LittleEndian.PutUint32(prm[0:], uint32(n))
		binary.LittleEndian.PutUint32(prm[4:], PageSize*3/4)
		cprm := C.CBytes(prm[:])
		defer C.free(cprm)
		C.s4d_push_errors(p, d.dev)
		C.s4d_write(p, d.queue, s.params, 0, cprm, 16)
		enc := C.s4d_encoder(p, d.dev)
		for range reps {
			C.s4d_copy(p, enc, s.zero, 0, s.total, 0, 16)
			C.s4d_dispatch(p, enc, b.compress, s.bg, C.uint32_t(n), 1)
		}
		C.s4d_copy(p, enc, s.total, 0, s.readback, 0, 16)
		C.s4d_submit(p, d.queue, enc)
		if err := d.popErrors(s.errWait); err != nil {
			return err
		}
		resetWait(s.rbWait)
		C.s4d_map_async(p, s.readback, C.S4D_MAP_READ, 0, 16, s.rbWait)
		return nil
	})
	if err != nil {
		return err
	}
	if err := d.await(s.rbWait, "kernel pass"); err != nil {
		return err
	}
	return d.do(func() error { C.s4d_unmap(p, s.readback); return d.fault() })
}
