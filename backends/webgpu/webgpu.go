// Package webgpu compresses batches of pages with WGSL kernels on any GPU
// reachable through the standard webgpu.h C ABI (Dawn), loaded at run time.
//
// One batch round on the device: the pages are copied into a mapped
// MapWrite staging buffer, copied to the GPU, classified and LZ4-compressed
// one page per workgroup, compacted (scan + gather), and only the per-page
// metadata and the packed LZ4 bytes are read back through a MapRead buffer.
// All buffers are kept and grown, never shrunk.
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
	"os"
	"runtime"
	"sync"
	"unsafe"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/wgsl"
)

func init() {
	backends.Register("webgpu", 10, func(o backends.Options) (backends.Backend, error) {
		return New(o, os.Getenv("S4D_WEBGPU_ALLOW_CPU") == "1")
	})
}

// PageSize is the page size the kernels are built for; other sizes and
// zstd batches are handed to the cpu backend.
const PageSize = 4096

// maxRound caps the pages of one device round (64 MiB of 4 KiB pages):
// it bounds the buffers and keeps the dispatch within one dimension.
const maxRound = 16384

// Backend runs the WGSL kernels on one WebGPU device.
type Backend struct {
	mu     sync.Mutex // one batch on the device at a time
	d      *device
	cpu    *cpu.Backend
	kp     wgsl.Params
	failed error

	// Device thread state.
	compress, scan, gather C.WGPUComputePipeline
	capPages               int
	in, slots, meta        C.WGPUBuffer
	total, params, packed  C.WGPUBuffer
	upload, readback       C.WGPUBuffer
	bgCompress, bgScan     C.WGPUBindGroup
	bgGather               C.WGPUBindGroup
	uploadWait, rbWait     *C.s4d_wait
	errWait                *C.s4d_wait
	uploadPending          bool // a MapAsync(write) of upload is outstanding
	uploadMapped           bool

	// Decompression (device thread state).
	decomp                     C.WGPUComputePipeline
	dCap, dSrcCap              int
	dSrc, dDesc, dOut, dStatus C.WGPUBuffer
	dParams, dRead             C.WGPUBuffer
	bgDecomp                   C.WGPUBindGroup

	// Results of the last round, read on the caller's goroutine.
	metaOut []uint32
	dataOut []byte
}

// New opens the WebGPU backend. allowCPU accepts a CPU adapter (Mesa's
// lavapipe): it is correct but slower than the cpu backend, so the
// registry only uses one when S4D_WEBGPU_ALLOW_CPU=1.
func New(o backends.Options, allowCPU bool) (*Backend, error) {
	d, err := openDevice(o.WebGPULib, allowCPU)
	if err != nil {
		return nil, err
	}
	c, err := cpu.New(backends.Options{Workers: o.Workers})
	if err != nil {
		d.close()
		return nil, err
	}
	b := &Backend{d: d, cpu: c}
	if err := d.do(b.setup); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

func (d *device) close() {
	if d.closed {
		return
	}
	d.closed = true
	d.do(func() error { d.release(); return nil })
	close(d.jobs)
}

func (b *Backend) setup() error {
	d := b.d
	kp, err := kernelParams(PageSize, uint32(d.lim.l.maxComputeWorkgroupStorageSize))
	if err != nil {
		return backends.Unavailable("%v", err)
	}
	if d.lim.l.maxComputeInvocationsPerWorkgroup < 256 {
		return backends.Unavailable("webgpu: adapter allows only %d invocations per workgroup", d.lim.l.maxComputeInvocationsPerWorkgroup)
	}
	b.kp = kp
	if b.compress, err = d.pipeline(wgsl.Source(wgsl.Compress, kp), "compress"); err != nil {
		return err
	}
	if b.scan, err = d.pipeline(wgsl.Source(wgsl.Compact, kp), "scan"); err != nil {
		return err
	}
	if b.gather, err = d.pipeline(wgsl.Source(wgsl.Compact, kp), "gather"); err != nil {
		return err
	}
	if b.decomp, err = d.pipeline(wgsl.Source(wgsl.Decompress, kp), "decompress"); err != nil {
		return err
	}
	b.uploadWait, b.rbWait, b.errWait = newWait(), newWait(), newWait()
	d.desc += fmt.Sprintf(", workgroup memory %d B, hash 2^%d", uint32(d.lim.l.maxComputeWorkgroupStorageSize), kp.HashBits)
	return nil
}

func (b *Backend) Name() string     { return "webgpu" }
func (b *Backend) Describe() string { return b.d.desc }

// Close releases the device. It waits for a batch in flight.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.d.closed {
		return nil
	}
	b.d.do(func() error {
		b.freeBuffers()
		C.s4d_pipeline_free(b.d.p, b.compress)
		C.s4d_pipeline_free(b.d.p, b.scan)
		C.s4d_pipeline_free(b.d.p, b.gather)
		C.s4d_pipeline_free(b.d.p, b.decomp)
		for _, w := range []*C.s4d_wait{b.uploadWait, b.rbWait, b.errWait} {
			C.free(unsafe.Pointer(w))
		}
		return nil
	})
	b.d.close()
	return b.cpu.Close()
}

func (b *Backend) freeBuffers() {
	p := b.d.p
	for _, g := range []C.WGPUBindGroup{b.bgCompress, b.bgScan, b.bgGather} {
		C.s4d_bind_group_free(p, g)
	}
	for _, x := range []C.WGPUBuffer{b.in, b.slots, b.meta, b.total, b.params, b.packed, b.upload, b.readback} {
		C.s4d_buffer_free(p, x)
	}
	b.bgCompress, b.bgScan, b.bgGather = nil, nil, nil
	b.in, b.slots, b.meta, b.total, b.params, b.packed, b.upload, b.readback = nil, nil, nil, nil, nil, nil, nil, nil
	b.capPages, b.uploadPending, b.uploadMapped = 0, false, false
	b.freeDecompBuffers()
}

func (b *Backend) freeDecompBuffers() {
	C.s4d_bind_group_free(b.d.p, b.bgDecomp)
	for _, x := range []C.WGPUBuffer{b.dSrc, b.dDesc, b.dOut, b.dStatus, b.dParams, b.dRead} {
		C.s4d_buffer_free(b.d.p, x)
	}
	b.bgDecomp, b.dSrc, b.dDesc, b.dOut, b.dStatus, b.dParams, b.dRead = nil, nil, nil, nil, nil, nil, nil
	b.dCap, b.dSrcCap = 0, 0
}

const metaWords = 4

var errClosed = errors.New("webgpu: backend closed")

func rbDataOff(n int) int { return (n*metaWords*4 + 16 + 255) &^ 255 }

// ensure grows the buffers to hold n pages. Device thread only.
func (b *Backend) ensure(n int) error {
	if n <= b.capPages {
		return nil
	}
	if b.uploadPending {
		// Let the outstanding map finish before the buffer goes.
		if err := b.d.wait(b.uploadWait, "staging map"); err != nil {
			return err
		}
	}
	b.freeBuffers()
	c := 64
	for c < n {
		c *= 2
	}
	d, p := b.d, b.d.p
	ps := uint64(PageSize)
	pages := uint64(c) * ps
	st := C.WGPUFlags(C.S4D_BUFFER_STORAGE)
	C.s4d_push_errors(p, d.dev)
	b.in = C.s4d_create_buffer(p, d.dev, st|C.S4D_BUFFER_COPY_DST, C.uint64_t(pages), 0)
	b.slots = C.s4d_create_buffer(p, d.dev, st, C.uint64_t(pages), 0)
	b.meta = C.s4d_create_buffer(p, d.dev, st|C.S4D_BUFFER_COPY_SRC, C.uint64_t(c*metaWords*4), 0)
	b.total = C.s4d_create_buffer(p, d.dev, st|C.S4D_BUFFER_COPY_SRC, 16, 0)
	b.params = C.s4d_create_buffer(p, d.dev, C.S4D_BUFFER_UNIFORM|C.S4D_BUFFER_COPY_DST, 16, 0)
	b.packed = C.s4d_create_buffer(p, d.dev, st|C.S4D_BUFFER_COPY_SRC, C.uint64_t(pages), 0)
	b.upload = C.s4d_create_buffer(p, d.dev, C.S4D_BUFFER_MAP_WRITE|C.S4D_BUFFER_COPY_SRC, C.uint64_t(pages), 1)
	b.readback = C.s4d_create_buffer(p, d.dev, C.S4D_BUFFER_MAP_READ|C.S4D_BUFFER_COPY_DST, C.uint64_t(uint64(rbDataOff(c))+pages), 0)
	metaSize := uint64(c * metaWords * 4)
	b.bgCompress = bindGroup(d, b.compress, bind{b.in, pages}, bind{b.slots, pages}, bind{b.meta, metaSize}, bind{b.params, 16})
	b.bgScan = bindGroup(d, b.scan, bind{b.meta, metaSize}, bind{b.total, 16}, bind{b.params, 16})
	b.bgGather = bindGroup(d, b.gather, bind{b.meta, metaSize}, bind{b.slots, pages}, bind{b.packed, pages}, bind{b.params, 16})
	if err := d.popErrors(b.errWait); err != nil {
		b.freeBuffers()
		return fmt.Errorf("webgpu: buffers for %d pages: %w", c, err)
	}
	b.capPages, b.uploadMapped = c, true
	return nil
}

type bind struct {
	buf  C.WGPUBuffer
	size uint64
}

// bindGroup binds the buffers to bindings 0, 1, ... of group 0.
func bindGroup(d *device, pl C.WGPUComputePipeline, binds ...bind) C.WGPUBindGroup {
	n := len(binds)
	bufs := (*[8]C.WGPUBuffer)(C.calloc(8, C.size_t(unsafe.Sizeof(C.WGPUBuffer(nil)))))
	sizes := (*[8]C.uint64_t)(C.calloc(8, 8))
	defer C.free(unsafe.Pointer(bufs))
	defer C.free(unsafe.Pointer(sizes))
	for k := range n {
		bufs[k] = binds[k].buf
		sizes[k] = C.uint64_t(binds[k].size)
	}
	return C.s4d_bind_group(d.p, d.dev, pl, &bufs[0], &sizes[0], C.int(n))
}

// stage makes the upload buffer mapped and returns its memory for n pages.
func (b *Backend) stage(n int) (unsafe.Pointer, error) {
	if err := b.ensure(n); err != nil {
		return nil, err
	}
	if b.uploadPending {
		if err := b.d.wait(b.uploadWait, "staging map"); err != nil {
			return nil, err
		}
		b.uploadPending = false
		if b.uploadWait.status != C.S4D_STATUS_SUCCESS {
			return nil, fmt.Errorf("webgpu: staging map failed: %s", waitMsg(b.uploadWait))
		}
		b.uploadMapped = true
	}
	if !b.uploadMapped {
		return nil, errors.New("webgpu: staging buffer not mapped")
	}
	ptr := C.s4d_mapped(b.d.p, b.upload, 0, C.size_t(n*PageSize))
	if ptr == nil {
		return nil, errors.New("webgpu: staging buffer has no mapped range")
	}
	return ptr, nil
}

// run compresses the n staged pages and reads back metadata and packed
// bytes into b.metaOut / b.dataOut. Device thread only.
func (b *Backend) run(n, threshold int) error {
	d, p := b.d, b.d.p
	C.s4d_unmap(p, b.upload)
	b.uploadMapped = false
	var prm [16]byte
	binary.LittleEndian.PutUint32(prm[0:], uint32(n))
	binary.LittleEndian.PutUint32(prm[4:], uint32(threshold))
	cprm := C.CBytes(prm[:])
	defer C.free(cprm)

	C.s4d_push_errors(p, d.dev)
	C.s4d_write(p, d.queue, b.params, 0, cprm, 16)
	enc := C.s4d_encoder(p, d.dev)
	C.s4d_copy(p, enc, b.upload, 0, b.in, 0, C.uint64_t(n*PageSize))
	C.s4d_dispatch(p, enc, b.compress, b.bgCompress, C.uint32_t(n), 1)
	C.s4d_dispatch(p, enc, b.scan, b.bgScan, 1, 1)
	C.s4d_dispatch(p, enc, b.gather, b.bgGather, C.uint32_t(n), 1)
	metaBytes := n * metaWords * 4
	C.s4d_copy(p, enc, b.meta, 0, b.readback, 0, C.uint64_t(metaBytes))
	C.s4d_copy(p, enc, b.total, 0, b.readback, C.uint64_t(metaBytes), 16)
	C.s4d_submit(p, d.queue, enc)
	// The staging buffer is free again once the copy above has run: map
	// it for the next batch now, so the wait overlaps other work.
	resetWait(b.uploadWait)
	C.s4d_map_async(p, b.upload, C.S4D_MAP_WRITE, 0, C.size_t(b.capPages*PageSize), b.uploadWait)
	b.uploadPending = true
	if err := d.popErrors(b.errWait); err != nil {
		return err
	}

	resetWait(b.rbWait)
	C.s4d_map_async(p, b.readback, C.S4D_MAP_READ, 0, C.size_t(metaBytes+16), b.rbWait)
	if err := d.wait(b.rbWait, "readback"); err != nil {
		return err
	}
	if b.rbWait.status != C.S4D_STATUS_SUCCESS {
		return fmt.Errorf("webgpu: readback map failed: %s", waitMsg(b.rbWait))
	}
	src := C.s4d_const_mapped(p, b.readback, 0, C.size_t(metaBytes+16))
	if src == nil {
		C.s4d_unmap(p, b.readback)
		return errors.New("webgpu: readback has no mapped range")
	}
	raw := unsafe.Slice((*byte)(src), metaBytes+16)
	b.metaOut = resize(b.metaOut, n*metaWords)
	for i := range b.metaOut {
		b.metaOut[i] = binary.LittleEndian.Uint32(raw[4*i:])
	}
	total := int(binary.LittleEndian.Uint32(raw[metaBytes:]))
	C.s4d_unmap(p, b.readback)
	if total > n*PageSize || total%4 != 0 {
		return fmt.Errorf("webgpu: packed size %d out of range", total)
	}
	b.dataOut = resize(b.dataOut, total)
	if total == 0 {
		return d.fault()
	}

	off := rbDataOff(b.capPages)
	C.s4d_push_errors(p, d.dev)
	enc = C.s4d_encoder(p, d.dev)
	C.s4d_copy(p, enc, b.packed, 0, b.readback, C.uint64_t(off), C.uint64_t(total))
	C.s4d_submit(p, d.queue, enc)
	if err := d.popErrors(b.errWait); err != nil {
		return err
	}
	resetWait(b.rbWait)
	C.s4d_map_async(p, b.readback, C.S4D_MAP_READ, C.size_t(off), C.size_t(total), b.rbWait)
	if err := d.wait(b.rbWait, "readback"); err != nil {
		return err
	}
	if b.rbWait.status != C.S4D_STATUS_SUCCESS {
		return fmt.Errorf("webgpu: readback map failed: %s", waitMsg(b.rbWait))
	}
	src = C.s4d_const_mapped(p, b.readback, C.size_t(off), C.size_t(total))
	if src == nil {
		C.s4d_unmap(p, b.readback)
		return errors.New("webgpu: readback has no mapped range")
	}
	copy(b.dataOut, unsafe.Slice((*byte)(src), total))
	C.s4d_unmap(p, b.readback)
	return d.fault()
}

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// copyPages fills the mapped staging memory from several goroutines: one
// thread cannot saturate the bus (measured: 6 GB/s with one, 27 with 8).
func copyPages(dst unsafe.Pointer, src []byte) {
	out := unsafe.Slice((*byte)(dst), len(src))
	const chunk = 1 << 20
	if len(src) <= 4*chunk {
		copy(out, src)
		return
	}
	g := min(runtime.GOMAXPROCS(0), 8)
	var wg sync.WaitGroup
	per := (len(src)/g + chunk - 1) &^ (chunk - 1)
	for lo := 0; lo < len(src); lo += per {
		hi := min(lo+per, len(src))
		wg.Add(1)
		go func() {
			defer wg.Done()
			copy(out[lo:hi], src[lo:hi])
		}()
	}
	wg.Wait()
}

// Compress classifies and LZ4-compresses the batch on the GPU. zstd
// batches and page sizes other than PageSize go to the cpu backend. Any
// device error fails the whole batch; the caller redoes it elsewhere.
func (b *Backend) Compress(ctx context.Context, in *backends.Batch, out *backends.Compressed) error {
	if in.Codec != backends.CodecLZ4 || in.PageSize != PageSize {
		return b.cpu.Compress(ctx, in, out)
	}
	n := in.Len()
	out.Reset(n)
	if n == 0 {
		return ctx.Err()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.d.closed {
		return errClosed
	}
	if b.failed != nil {
		return b.failed
	}
	for lo := 0; lo < n; lo += maxRound {
		if err := ctx.Err(); err != nil {
			return err
		}
		hi := min(lo+maxRound, n)
		if err := b.round(in, out, lo, hi); err != nil {
			b.failed = err
			return err
		}
	}
	return nil
}

func (b *Backend) round(in *backends.Batch, out *backends.Compressed, lo, hi int) error {
	m := hi - lo
	var ptr unsafe.Pointer
	if err := b.d.do(func() (err error) { ptr, err = b.stage(m); return }); err != nil {
		return err
	}
	copyPages(ptr, in.Pages[lo*PageSize:hi*PageSize])
	if err := b.d.do(func() error { return b.run(m, in.Threshold) }); err != nil {
		return err
	}
	base := uint32(len(out.Data))
	out.Data = append(out.Data, b.dataOut...)
	limit := uint32(min(in.Threshold, PageSize))
	for k := range m {
		i := lo + k
		mt := b.metaOut[k*metaWords : (k+1)*metaWords]
		class, size := backends.Class(mt[0]), mt[1]
		out.Class[i], out.Size[i], out.Off[i], out.Fill[i] = class, size, 0, 0
		switch class {
		case backends.ClassZero:
			if size != 0 {
				return fmt.Errorf("webgpu: page %d: zero page of size %d", i, size)
			}
		case backends.ClassSame:
			out.Fill[i] = uint64(mt[2]) | uint64(mt[3])<<32
		case backends.ClassLZ4:
			if size == 0 || size > limit || uint64(mt[2])+uint64(size) > uint64(len(b.dataOut)) {
				return fmt.Errorf("webgpu: page %d: lz4 block of %d bytes at %d out of range", i, size, mt[2])
			}
			out.Off[i] = base + mt[2]
		case backends.ClassRaw:
			if size != PageSize {
				return fmt.Errorf("webgpu: page %d: raw of size %d", i, size)
			}
		default:
			return fmt.Errorf("webgpu: page %d: unknown class %d", i, mt[0])
		}
	}
	return nil
}

// Decompress expands the LZ4 pages of d with the decompress kernel and
// the other classes on the CPU (a fill or a copy). zstd pages and other
// page sizes go to the cpu backend. A block that does not decode to
// exactly one page is flagged in d.Failed.
func (b *Backend) Decompress(ctx context.Context, d *backends.Decompression) error {
	if d.PageSize != PageSize {
		return b.cpu.Decompress(ctx, d)
	}
	n := len(d.Src)
	if cap(d.Failed) < n {
		d.Failed = make([]bool, n)
	}
	d.Failed = d.Failed[:n]
	clear(d.Failed)
	var lz []int
	for i, s := range d.Src {
		if s.Class == backends.ClassLZ4 {
			lz = append(lz, i)
			continue
		}
		d.Failed[i] = !b.cpu.DecodePage(s, d.Dst[i*PageSize:(i+1)*PageSize:(i+1)*PageSize])
	}
	if len(lz) == 0 {
		return ctx.Err()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.d.closed {
		return errClosed
	}
	if b.failed != nil {
		return b.failed
	}
	for lo := 0; lo < len(lz); lo += maxRound {
		if err := ctx.Err(); err != nil {
			return err
		}
		idx := lz[lo:min(lo+maxRound, len(lz))]
		if err := b.d.do(func() error { return b.decompress(d, idx) }); err != nil {
			b.failed = err
			return err
		}
	}
	return nil
}

// decompress runs the kernel over the pages idx of d. Device thread only.
func (b *Backend) decompress(d *backends.Decompression, idx []int) error {
	dv, p := b.d, b.d.p
	n := len(idx)
	desc := make([]byte, 8*n)
	total := 0
	for k, i := range idx {
		l := min(len(d.Src[i].Data), 1<<20)
		binary.LittleEndian.PutUint32(desc[8*k:], uint32(total))
		binary.LittleEndian.PutUint32(desc[8*k+4:], uint32(l))
		total += (l + 3) &^ 3
	}
	src := make([]byte, max(total, 4))
	for k, i := range idx {
		off := binary.LittleEndian.Uint32(desc[8*k:])
		copy(src[off:], d.Src[i].Data)
	}
	if err := b.ensureDecomp(n, len(src)); err != nil {
		return err
	}
	var prm [16]byte
	binary.LittleEndian.PutUint32(prm[0:], uint32(n))
	csrc, cdesc, cprm := C.CBytes(src), C.CBytes(desc), C.CBytes(prm[:])
	defer C.free(csrc)
	defer C.free(cdesc)
	defer C.free(cprm)
	outBytes, statOff := n*PageSize, n*PageSize
	C.s4d_push_errors(p, dv.dev)
	C.s4d_write(p, dv.queue, b.dSrc, 0, csrc, C.size_t(len(src)))
	C.s4d_write(p, dv.queue, b.dDesc, 0, cdesc, C.size_t(len(desc)))
	C.s4d_write(p, dv.queue, b.dParams, 0, cprm, 16)
	enc := C.s4d_encoder(p, dv.dev)
	C.s4d_dispatch(p, enc, b.decomp, b.bgDecomp, C.uint32_t(n), 1)
	C.s4d_copy(p, enc, b.dOut, 0, b.dRead, 0, C.uint64_t(outBytes))
	C.s4d_copy(p, enc, b.dStatus, 0, b.dRead, C.uint64_t(statOff), C.uint64_t(4*n))
	C.s4d_submit(p, dv.queue, enc)
	if err := dv.popErrors(b.errWait); err != nil {
		return err
	}
	resetWait(b.rbWait)
	C.s4d_map_async(p, b.dRead, C.S4D_MAP_READ, 0, C.size_t(outBytes+4*n), b.rbWait)
	if err := dv.wait(b.rbWait, "decompress readback"); err != nil {
		return err
	}
	if b.rbWait.status != C.S4D_STATUS_SUCCESS {
		return fmt.Errorf("webgpu: decompress readback failed: %s", waitMsg(b.rbWait))
	}
	m := C.s4d_const_mapped(p, b.dRead, 0, C.size_t(outBytes+4*n))
	if m == nil {
		C.s4d_unmap(p, b.dRead)
		return errors.New("webgpu: decompress readback has no mapped range")
	}
	raw := unsafe.Slice((*byte)(m), outBytes+4*n)
	for k, i := range idx {
		ok := binary.LittleEndian.Uint32(raw[statOff+4*k:]) == 1 && len(d.Src[i].Data) <= 1<<20
		d.Failed[i] = !ok
		if ok {
			copy(d.Dst[i*PageSize:(i+1)*PageSize], raw[k*PageSize:(k+1)*PageSize])
		}
	}
	C.s4d_unmap(p, b.dRead)
	return dv.fault()
}

// ensureDecomp grows the decompression buffers. Device thread only.
func (b *Backend) ensureDecomp(n, srcBytes int) error {
	if n <= b.dCap && srcBytes <= b.dSrcCap {
		return nil
	}
	c, sc := max(b.dCap, 64), max(b.dSrcCap, 1<<16)
	for c < n {
		c *= 2
	}
	for sc < srcBytes {
		sc *= 2
	}
	b.freeDecompBuffers()
	d, p := b.d, b.d.p
	st := C.WGPUFlags(C.S4D_BUFFER_STORAGE)
	out := uint64(c) * PageSize
	C.s4d_push_errors(p, d.dev)
	b.dSrc = C.s4d_create_buffer(p, d.dev, st|C.S4D_BUFFER_COPY_DST, C.uint64_t(sc), 0)
	b.dDesc = C.s4d_create_buffer(p, d.dev, st|C.S4D_BUFFER_COPY_DST, C.uint64_t(8*c), 0)
	b.dOut = C.s4d_create_buffer(p, d.dev, st|C.S4D_BUFFER_COPY_SRC, C.uint64_t(out), 0)
	b.dStatus = C.s4d_create_buffer(p, d.dev, st|C.S4D_BUFFER_COPY_SRC, C.uint64_t(4*c), 0)
	b.dParams = C.s4d_create_buffer(p, d.dev, C.S4D_BUFFER_UNIFORM|C.S4D_BUFFER_COPY_DST, 16, 0)
	b.dRead = C.s4d_create_buffer(p, d.dev, C.S4D_BUFFER_MAP_READ|C.S4D_BUFFER_COPY_DST, C.uint64_t(out+uint64(4*c)), 0)
	b.bgDecomp = bindGroup(d, b.decomp, bind{b.dSrc, uint64(sc)}, bind{b.dDesc, uint64(8 * c)}, bind{b.dOut, out},
		bind{b.dStatus, uint64(4 * c)}, bind{b.dParams, 16})
	if err := d.popErrors(b.errWait); err != nil {
		b.freeDecompBuffers()
		return fmt.Errorf("webgpu: decompression buffers for %d pages: %w", c, err)
	}
	b.dCap, b.dSrcCap = c, sc
	return nil
}

// kernelPass reruns the kernels reps times on the n pages staged by the
// last round, without transfers, and waits for them: it measures what the
// device itself sustains. Device thread only; for benchmarks.
func (b *Backend) kernelPass(n, reps int) error {
	d, p := b.d, b.d.p
	C.s4d_push_errors(p, d.dev)
	enc := C.s4d_encoder(p, d.dev)
	for range reps {
		C.s4d_dispatch(p, enc, b.compress, b.bgCompress, C.uint32_t(n), 1)
		C.s4d_dispatch(p, enc, b.scan, b.bgScan, 1, 1)
		C.s4d_dispatch(p, enc, b.gather, b.bgGather, C.uint32_t(n), 1)
	}
	C.s4d_copy(p, enc, b.total, 0, b.readback, 0, 16)
	C.s4d_submit(p, d.queue, enc)
	if err := d.popErrors(b.errWait); err != nil {
		return err
	}
	resetWait(b.rbWait)
	C.s4d_map_async(p, b.readback, C.S4D_MAP_READ, 0, 16, b.rbWait)
	if err := d.wait(b.rbWait, "kernel pass"); err != nil {
		return err
	}
	C.s4d_unmap(p, b.readback)
	return d.fault()
}
