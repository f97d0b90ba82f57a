// Package webgpu compresses batches of pages with WGSL kernels on any GPU
// reachable through the standard webgpu.h C ABI (Dawn), loaded at run time.
//
// One batch round on the device: the pages are copied (several goroutines)
// into a mapped MapWrite staging buffer, copied to the GPU, classified and
// LZ4-compressed one page per workgroup, each block appended to a packed
// buffer, and only the per-page metadata and the packed LZ4 bytes are read
// back through a MapRead buffer. Two slots of buffers let two rounds (of
// one batch or of concurrent callers) overlap: one is staged or read back
// while the other's kernels run. Buffers are kept and grown, never shrunk.
package webgpu

/*
#include <stdlib.h>
#include "glue.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/wgsl"
)

func init() {
	backends.Register("webgpu", 10, func(o backends.Options) (backends.Backend, error) {
		b, err := New(o, o.WebGPUCPU)
		if err != nil {
			return nil, err
		}
		if b.vk != nil {
			return pinBackend{b}, nil
		}
		return b, nil
	})
}

// PageSize is the page size the kernels are built for; other sizes and
// zstd batches are handed to the cpu backend.
const PageSize = 4096

// maxRound caps the pages of one device round (64 MiB of 4 KiB pages):
// it bounds the buffers and keeps the dispatch within one dimension.
const maxRound = 16384

// numSlots is how many rounds may be in flight on the device at once for a
// lone batch; extraSlots more serve batches that come while others are
// under way: with the daemon's many clients, four slots keep the queue fed
// better than two (H100, 8 clients, with busyRound: PUT medians 10.3 and
// 9.5 GB/s for 4096- and 16384-page batches over six runs, against 7.8 and
// 7.3 over five; single runs spread 2x on that host). A lone batch keeps to
// the first two: cycling through four, one caller took 8.4-8.8 ms a 64 MiB
// batch against 6.5 (60 batches; 2-3 ms of each waiting for staging, and a
// slower copy into it). A slot's mapped staging, readback and device
// buffers grow to its largest round: for rounds of 8192 pages (half a 64
// MiB batch, or busyRound) 64 MiB of host and 64 of device memory.
var numSlots, extraSlots = 2, 2

// Backend runs the WGSL kernels on one WebGPU device.
type Backend struct {
	// active counts the Compress calls under way (see roundSplit).
	active atomic.Int64
	d      *device // the webgpu.h runtime; nil on the Vulkan runtime
	// vk is the Vulkan runtime (vulkan.go), nil on the webgpu.h one.
	vk       *vkrt
	vkClosed atomic.Bool
	// gone is closed when Close starts: a caller still waiting for a slot
	// then gives up instead of waiting forever for one Close has taken
	// (the router closes a failed engine while batches are in flight).
	gone     chan struct{}
	goneOnce sync.Once
	kp       wgsl.Params
	// features: the adapter's, probed at setup (features.go).
	features []Feature

	fmu    sync.Mutex
	failed error // set once a device error failed a batch

	slots    chan *slot // compression buffers, numSlots of them
	extra    chan *slot // and extraSlots more, for batches that overlap
	all      []*slot
	compress C.WGPUComputePipeline

	decomp C.WGPUComputePipeline
	// Decompression buffers: numDSlots sets, so that one batch's packing
	// and copy-out overlap another's kernel (one set serialized the
	// daemon's GETs: 8 GB/s with 8-16 clients on the H100, issue 29).
	dslots chan *dslot
	dall   []*dslot
	dlast  atomic.Pointer[dslot] // the set of the last decompression (benchmarks)
	// idleMu: the idle sweep (idle.go) holds it while it frees slots'
	// buffers; benchmarks' kernel passes over a slot hold it shared.
	idleMu     sync.RWMutex
	idleKeep   time.Duration // idleFree when opened
	nIdleFreed atomic.Int64  // slots the sweep emptied
}

// numDSlots is how many decompressions may be under way at once. The
// daemon's 8-16 clients GET at once; each decompression holds its set
// from packing to copy-out, so with two the host work of the others
// waited (issue 29: more batches in flight). A set grows to its largest
// batch: 16 MiB of device output and as much mapped readback per 4096
// pages.
var numDSlots = 4

// New opens the WebGPU backend. allowCPU accepts a CPU adapter (Mesa's
// lavapipe): it is correct but slower than the cpu backend, so the
// registry only uses one when the webgpu-cpu setting says so.
//
// o.WGSLRuntime picks what runs the kernels: "vulkan" (vulkan.go: client
// memory imported, no staging copies), "webgpu" (a webgpu.h library), or
// "auto"/"" (vulkan on a GPU that imports host memory, else webgpu.h,
// saying why in Describe). On an H200, in one call, the Vulkan runtime
// stored 1.01x / 1.27x and returned 1.11x / 1.52x what Dawn did (batches
// of 4096 / 16384 pages), at half its PUT CPU
// (docs/benchmarks/2026-12-03-vulkan-auto.md).
func New(o backends.Options, allowCPU bool) (*Backend, error) {
	rt := o.WGSLRuntime
	switch rt {
	case RuntimeVulkan:
		return newVulkan(o, allowCPU, false)
	case RuntimeWebGPU:
		b, err := newWebGPU(o, allowCPU)
		if err == nil {
			b.d.desc += ", runtime webgpu.h (staging copies)"
		}
		return b, err
	case RuntimeAuto, "":
	default:
		return nil, fmt.Errorf("wgsl runtime %q: must be auto, vulkan or webgpu", rt)
	}
	vb, verr := newVulkan(o, allowCPU, true)
	if verr == nil {
		vb.vk.note = "taken by auto: the GPU imports host memory"
		return vb, nil
	}
	why := strings.TrimPrefix(verr.Error(), "unavailable: ")
	b, err := newWebGPU(o, allowCPU)
	if err == nil {
		b.d.desc += ", runtime webgpu.h (staging copies; vulkan runtime not taken: " + why + ")"
		return b, nil
	}
	return nil, fmt.Errorf("%w; vulkan runtime not taken either: %s", err, why)
}

func newWebGPU(o backends.Options, allowCPU bool) (*Backend, error) {
	d, err := openDevice(o.WebGPULib, allowCPU, o.WebGPUNoSubgroups, o.Tuning.WebGPUToggles)
	if err != nil {
		return nil, err
	}
	b := &Backend{d: d, slots: make(chan *slot, numSlots), extra: make(chan *slot, extraSlots), gone: make(chan struct{})}
	if err := d.do(b.setup); err != nil {
		b.Close()
		return nil, err
	}
	b.startSweep()
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
	if d.lim.l.maxComputeInvocationsPerWorkgroup < 128 {
		return backends.Unavailable("webgpu: adapter allows only %d invocations per workgroup", d.lim.l.maxComputeInvocationsPerWorkgroup)
	}
	wgMem := uint32(d.lim.l.maxComputeWorkgroupStorageSize)
	// The kernel with subgroup scans where the device has them and it
	// compiles; else the workgroup-memory one (the same bytes).
	var err error
	for _, sg := range []bool{true, false} {
		if sg && !d.subgroups {
			continue
		}
		kp, kerr := kernelParams(PageSize, wgMem, sg)
		if kerr != nil {
			return backends.Unavailable("%v", kerr)
		}
		if b.compress, err = d.pipeline(d.source(wgsl.Compress, kp), "compress"); err == nil {
			b.kp = kp
			break
		}
	}
	if err != nil {
		return err
	}
	if b.decomp, err = d.pipeline(d.source(wgsl.Decompress, b.kp), "decompress"); err != nil {
		return err
	}
	for range numSlots {
		s := &slot{uploadWait: newWait(), rbWait: newWait(), errWait: newWait()}
		b.all = append(b.all, s)
		b.slots <- s
	}
	for range extraSlots {
		s := &slot{uploadWait: newWait(), rbWait: newWait(), errWait: newWait(), extra: true}
		b.all = append(b.all, s)
		b.extra <- s
	}
	b.dslots = make(chan *dslot, numDSlots)
	for range numDSlots {
		ds := &dslot{wait: newWait(), errWait: newWait(), upWait: newWait()}
		b.dall = append(b.dall, ds)
		b.dslots <- ds
	}
	scan := "workgroup-memory scans"
	if b.kp.Subgroups {
		// wgpu-native leaves the adapter's subgroup sizes at 0.
		scan = "subgroup scans"
		if d.subMax > 0 {
			scan = fmt.Sprintf("subgroup scans (subgroups up to %d)", d.subMax)
		}
	}
	d.desc += fmt.Sprintf(", workgroup memory %d B, %s", wgMem, scan)
	if d.toggles != "" {
		d.desc += ", dawn toggles " + d.toggles
	}
	b.features = d.probeFeatures()
	d.desc += ", " + zeroCopySummary(d.native, b.features)
	return nil
}

func (b *Backend) Name() string { return "webgpu" }

// Describe says what runs the kernels: the device, the runtime and, on
// the Vulkan runtime, the import path with its counts so far.
func (b *Backend) Describe() string {
	if b.vk != nil {
		return b.vk.describe(b.idleNote())
	}
	return b.d.desc + "; idle slots' buffers " + b.idleNote()
}

// Subgroups reports whether the compress kernel uses subgroup operations.
func (b *Backend) Subgroups() bool { return b.kp.Subgroups }

// Close releases the device. It waits for the batches in flight.
func (b *Backend) Close() error {
	b.goneOnce.Do(func() { close(b.gone) })
	if b.vk != nil {
		b.closeVulkan()
		return nil
	}
	if b.d.closed {
		return nil
	}
	for _, s := range b.all {
		if s.extra {
			<-b.extra
		} else {
			<-b.slots
		}
	}
	for range b.dall {
		<-b.dslots
	}
	b.d.do(func() error {
		for _, s := range b.all {
			if s.uploadPending {
				b.d.wait(s.uploadWait, "staging map")
			}
			s.free(b.d.p)
			for _, w := range []*C.s4d_wait{s.uploadWait, s.rbWait, s.errWait} {
				C.free(unsafe.Pointer(w))
			}
		}
		for _, ds := range b.dall {
			if ds.upPending {
				b.d.wait(ds.upWait, "staging map")
			}
			ds.free(b.d.p)
			C.free(unsafe.Pointer(ds.upWait))
			C.free(unsafe.Pointer(ds.wait))
			C.free(unsafe.Pointer(ds.errWait))
		}
		C.s4d_pipeline_free(b.d.p, b.compress)
		C.s4d_pipeline_free(b.d.p, b.decomp)
		return nil
	})
	b.d.close()
	b.all = nil
	return nil
}

// Takes is backends.Limited's: the kernels do LZ4 on 4 KiB pages; the
// router gives zstd batches, GETs with zstd pages and other page sizes to
// another engine.
func (b *Backend) Takes(codec pagefmt.Codec, pageSize int) bool {
	return codec == pagefmt.CodecLZ4 && pageSize == PageSize
}

var errClosed = errors.New("webgpu: backend closed")

// errNotTaken answers a batch Takes refuses, were one to come.
var errNotTaken = errors.New("webgpu: LZ4 on 4 KiB pages only")

// fail records the first device error: the backend refuses batches from
// then on and the dispatcher redoes them elsewhere.
func (b *Backend) fail(err error) error {
	b.fmu.Lock()
	defer b.fmu.Unlock()
	if b.failed == nil {
		b.failed = err
	}
	return err
}

func (b *Backend) usable() error {
	if (b.vk != nil && b.vkClosed.Load()) || (b.d != nil && b.d.closed) {
		return errClosed
	}
	b.fmu.Lock()
	defer b.fmu.Unlock()
	return b.failed
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

// parallelCopy copies src to dst from several goroutines: one thread
// cannot saturate the bus (measured: 6 GB/s with one, 27 with 8).
func parallelCopy(dst, src []byte, procs int) {
	const chunk = 1 << 20
	if len(src) <= 2*chunk {
		copy(dst, src)
		return
	}
	g := min(runtime.GOMAXPROCS(0), procs)
	var wg sync.WaitGroup
	per := (len(src)/g + chunk - 1) &^ (chunk - 1)
	for lo := 0; lo < len(src); lo += per {
		hi := min(lo+per, len(src))
		wg.Add(1)
		go func() {
			defer wg.Done()
			copy(dst[lo:hi], src[lo:hi])
		}()
	}
	wg.Wait()
}
