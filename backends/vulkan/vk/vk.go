// Package vk is s4d's own Vulkan binding for issue 41's runtime: libvulkan
// is loaded at run time (never linked), a device is opened with timeline
// semaphores and a transfer queue, host memory (a client's memfd mapping,
// the store's slabs) is imported with VK_EXT_external_memory_host, and
// copies between buffers run several in flight.
//
// It is the bottom layer: buffers, copies and compute pipelines, no
// engine yet. Its measurements are in
// docs/benchmarks/2026-12-02-vulkan-host-import.md (backends/vulkan/vkprobe
// made them). A Device may be used from several goroutines: each submission
// (Copy, Dispatch) is recorded by its caller, unlocked, and submitted
// with the others waiting for the same queue in one call (submit.go);
// waits run unlocked; a Kernel's descriptor set is rebound only by the
// one goroutine that owns that set.
package vk

/*
#include "glue.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
	"unsafe"

	"github.com/s4d-project/s4d/backends/internal/dl"
)

// Unavailable says why no device could be opened (no library, no device,
// too old a driver): the engine reports it and the daemon serves without.
type Unavailable struct{ Reason string }

func (u *Unavailable) Error() string { return "vulkan unavailable: " + u.Reason }

// ErrImportRefused is wrapped by Import's error when the driver (or the
// binding's own checks: alignment, no extension) refuses the memory. The
// caller falls back to staging for that memory; the device stays usable.
var ErrImportRefused = errors.New("vulkan: host memory import refused")

// Result is a failing VkResult.
type Result int32

func (r Result) Error() string {
	switch r {
	case -1:
		return "VK_ERROR_OUT_OF_HOST_MEMORY"
	case -2:
		return "VK_ERROR_OUT_OF_DEVICE_MEMORY"
	case -3:
		return "VK_ERROR_INITIALIZATION_FAILED"
	case -4:
		return "VK_ERROR_DEVICE_LOST"
	case -7:
		return "VK_ERROR_EXTENSION_NOT_PRESENT"
	case -8:
		return "VK_ERROR_FEATURE_NOT_PRESENT"
	case -1000072003:
		return "VK_ERROR_INVALID_EXTERNAL_HANDLE"
	case 2:
		return "VK_TIMEOUT"
	}
	return fmt.Sprintf("VkResult(%d)", int32(r))
}

func check(r C.VkResult) error {
	if r == 0 {
		return nil
	}
	return Result(r)
}

// Options choose the library and the device.
type Options struct {
	// Lib is the loader to open; empty: S4D_VULKAN_LIB, then
	// libvulkan.so.1, then libvulkan.so.
	Lib string
	// Device is the physical device index; -1 picks the first that is
	// not a CPU (lavapipe only where nothing else is).
	Device int
	// Robust is whether robustBufferAccess and robustBufferAccess2
	// (VK_EXT_robustness2) are enabled: the driver then bounds every
	// buffer access to its binding's range (out-of-range reads give
	// zeros, writes are dropped), where Tint's modules have no clamps of
	// their own. RobustAuto (the default) enables them where the device
	// has them: they cost nothing measurable on an H200
	// (docs/benchmarks/2026-12-02-vulkan-tint.md). S4D_VULKAN_ROBUST=0 or
	// 1 overrides RobustAuto.
	Robust Robustness
}

// Robustness says whether a device bounds buffer accesses.
type Robustness int

const (
	RobustAuto Robustness = iota // where the device has robustBufferAccess2
	RobustOff
	RobustOn // Open fails without robustBufferAccess2
)

// Info describes an opened device.
type Info struct {
	Name, Driver string
	API          uint32 // VK_MAKE_API_VERSION packed
	Vendor       uint32
	CPU          bool // a CPU implementation (lavapipe)
	Discrete     bool // a discrete GPU (device memory across a bus)
	HostImport   bool // VK_EXT_external_memory_host
	// ImportAlign is minImportedHostPointerAlignment: an imported range's
	// address and size are multiples of it.
	ImportAlign  int
	TransferOnly bool // copies go to a transfer-only queue family
	Robust       bool // robust buffer access enabled (Options.Robust)
}

// Device is one opened Vulkan device.
type Device struct {
	lib      *dl.Lib
	d        *C.s4dvk_dev // C memory: the driver keeps pointers into it
	info     Info
	rings    [2]ring // copies, kernels (C.S4DVK_COPY, C.S4DVK_KERNEL)
	serial   bool    // S4D_VULKAN_SUBMIT=serial (submit.go)
	serialMu sync.Mutex
	stats    submitStats
}

// Open loads the library and opens a device.
func Open(o Options) (*Device, error) {
	cands := []string{o.Lib}
	if o.Lib == "" {
		cands = []string{os.Getenv("S4D_VULKAN_LIB"), "libvulkan.so.1", "libvulkan.so"}
	}
	lib, err := dl.Open(cands...)
	if err != nil {
		return nil, &Unavailable{Reason: err.Error()}
	}
	gipa, err := lib.Sym("vkGetInstanceProcAddr")
	if err != nil {
		return nil, &Unavailable{Reason: err.Error()}
	}
	d := (*C.s4dvk_dev)(C.calloc(1, C.size_t(unsafe.Sizeof(C.s4dvk_dev{}))))
	var why [256]C.char
	r := o.Robust
	if r == RobustAuto {
		switch os.Getenv("S4D_VULKAN_ROBUST") {
		case "0":
			r = RobustOff
		case "1":
			r = RobustOn
		}
	}
	robust := map[Robustness]int{RobustAuto: -1, RobustOff: 0, RobustOn: 1}[r]
	if C.s4dvk_open(C.PFN_vkGetInstanceProcAddr(gipa), C.int(o.Device), C.int(robust), d, &why[0], C.size_t(len(why))) != 0 {
		C.s4dvk_close(d)
		C.free(unsafe.Pointer(d))
		return nil, &Unavailable{Reason: C.GoString(&why[0])}
	}
	dev := &Device{lib: lib, d: d, info: Info{
		Name:         C.GoString(&d.name[0]),
		Driver:       C.GoString(&d.driver[0]),
		API:          uint32(d.api),
		Vendor:       uint32(d.vendor),
		CPU:          d.cpu != 0,
		Discrete:     d.discrete != 0,
		HostImport:   d.hostImport != 0,
		ImportAlign:  int(d.minAlign),
		TransferOnly: d.transferOnly != 0,
		Robust:       d.robust != 0,
	}}
	dev.initRings()
	return dev, nil
}

// Info returns what Open found.
func (d *Device) Info() Info { return d.info }

// Close waits for the device to go idle and releases it. Every Buffer
// must be released first.
func (d *Device) Close() {
	if d.d == nil {
		return
	}
	C.s4dvk_close(d.d)
	C.free(unsafe.Pointer(d.d))
	d.freeRings()
	d.d = nil
}

// Buffer is device memory or imported host memory.
type Buffer struct {
	d    *Device
	buf  C.VkBuffer
	mem  C.VkDeviceMemory
	Size int64
}

// Release frees the buffer (and, for an import, lets the pages go).
// Nothing in flight may still use it.
func (b *Buffer) Release() {
	if b.d == nil || b.d.d == nil {
		return // released, or its device closed (which freed nothing of it: release first)
	}
	C.s4dvk_free(b.d.d, b.buf, b.mem)
	b.d = nil
}

// NewBuffer makes a device-local buffer of size bytes.
func (d *Device) NewBuffer(size int64) (*Buffer, error) {
	b := &Buffer{d: d, Size: size}
	if err := check(C.s4dvk_buffer(d.d, nil, C.uint64_t(size), &b.buf, &b.mem)); err != nil {
		return nil, fmt.Errorf("vulkan: device buffer of %d bytes: %w", size, err)
	}
	return b, nil
}

// Import makes mem (memory outside the Go heap: an mmap'ed region, kept
// mapped until the Buffer is released) the memory of a new buffer; the
// driver pins its pages. Its address and length must be multiples of
// ImportAlign. NVIDIA refuses read-only mappings
// (VK_ERROR_OUT_OF_DEVICE_MEMORY); a refusal wraps ErrImportRefused.
func (d *Device) Import(mem []byte) (*Buffer, error) {
	if !d.info.HostImport {
		return nil, fmt.Errorf("%w: %s has no VK_EXT_external_memory_host", ErrImportRefused, d.info.Name)
	}
	a := d.info.ImportAlign
	if len(mem) == 0 || a <= 0 || uintptr(unsafe.Pointer(&mem[0]))%uintptr(a) != 0 || len(mem)%a != 0 {
		return nil, fmt.Errorf("%w: %d bytes at %p not aligned to %d", ErrImportRefused, len(mem), unsafe.SliceData(mem), a)
	}
	b := &Buffer{d: d, Size: int64(len(mem))}
	if err := check(C.s4dvk_buffer(d.d, unsafe.Pointer(&mem[0]), C.uint64_t(len(mem)), &b.buf, &b.mem)); err != nil {
		return nil, fmt.Errorf("%w: %d bytes: %w", ErrImportRefused, len(mem), err)
	}
	return b, nil
}

// Region is one range of a copy.
type Region struct{ Src, Dst, Size int64 }

// Ticket names a submission: its queue (copies or kernels) and the
// value its timeline reaches when it is done. The zero Ticket is done.
type Ticket struct {
	ring int
	v    uint64
}

// Copy submits the regions from src to dst on the transfer queue, after
// the submission after (a kernel's, or the zero Ticket), and returns at
// once; up to 64 are in flight on a queue (a 65th waits for the oldest).
// Copy as few regions as possible: NVIDIA's copy engine pays per region
// (one per 4 KiB page ran at 1.5-2.2 GB/s, 1 MiB runs at 44-47).
func (d *Device) Copy(dst, src *Buffer, regions []Region, after Ticket) (Ticket, error) {
	if len(regions) == 0 {
		return d.last(C.S4DVK_COPY), nil
	}
	cr := make([]C.VkBufferCopy, len(regions))
	for i, r := range regions {
		if r.Src < 0 || r.Dst < 0 || r.Size <= 0 || r.Src+r.Size > src.Size || r.Dst+r.Size > dst.Size {
			return Ticket{}, fmt.Errorf("vulkan: copy region %d (%d -> %d, %d bytes) outside the buffers (%d, %d bytes)", i, r.Src, r.Dst, r.Size, src.Size, dst.Size)
		}
		cr[i] = C.VkBufferCopy{srcOffset: C.VkDeviceSize(r.Src), dstOffset: C.VkDeviceSize(r.Dst), size: C.VkDeviceSize(r.Size)}
	}
	t, err := d.submit(C.S4DVK_COPY, after, func(i C.int, av C.uint64_t) C.VkResult {
		return C.s4dvk_record_copy(d.d, i, src.buf, dst.buf, &cr[0], C.uint32_t(len(cr)), av)
	})
	if err != nil {
		return Ticket{}, fmt.Errorf("vulkan: copy: %w", err)
	}
	return t, nil
}

// Wait blocks until t (and everything submitted before it to its queue)
// is done and its writes are visible to the host, or timeout passes.
func (d *Device) Wait(t Ticket, timeout time.Duration) error {
	if t.v == 0 {
		return nil
	}
	if err := check(C.s4dvk_wait(d.d, C.int(t.ring), C.uint64_t(t.v), C.uint64_t(timeout.Nanoseconds()))); err != nil {
		return fmt.Errorf("vulkan: waiting for submission %d of queue %d: %w", t.v, t.ring, err)
	}
	return nil
}

// Done reports whether t has finished, without waiting.
func (d *Device) Done(t Ticket) (bool, error) {
	var v C.uint64_t
	if err := check(C.s4dvk_counter(d.d, C.int(t.ring), &v)); err != nil {
		return false, err
	}
	return uint64(v) >= t.v, nil
}

// Binding kinds of a kernel's descriptors.
const (
	Storage = C.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
	Uniform = C.VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER
)

// Kernel is a compute pipeline made from a SPIR-V module (package spirv)
// whose buffers are bindings 0.. of set 0, of the given kinds.
type Kernel struct {
	d     *Device
	k     *C.s4dvk_kernel // C memory: it holds the handles the driver uses
	kinds []int
}

// NewKernel builds the pipeline of the entry point of a SPIR-V module.
func (d *Device) NewKernel(spirv []byte, entry string, kinds ...int) (*Kernel, error) {
	if len(spirv) == 0 || len(spirv)%4 != 0 || len(kinds) == 0 || len(kinds) > 16 {
		return nil, fmt.Errorf("vulkan: kernel %s: %d bytes of SPIR-V, %d bindings", entry, len(spirv), len(kinds))
	}
	code := C.CBytes(spirv) // 4-aligned, as pCode must be
	defer C.free(code)
	ce := C.CString(entry)
	defer C.free(unsafe.Pointer(ce))
	types := make([]C.int32_t, len(kinds))
	for i, k := range kinds {
		types[i] = C.int32_t(k)
	}
	k := &Kernel{d: d, k: (*C.s4dvk_kernel)(C.calloc(1, C.size_t(unsafe.Sizeof(C.s4dvk_kernel{})))), kinds: kinds}
	if err := check(C.s4dvk_kernel_new(d.d, code, C.size_t(len(spirv)), ce, C.uint32_t(len(kinds)), &types[0], k.k)); err != nil {
		C.free(unsafe.Pointer(k.k))
		return nil, fmt.Errorf("vulkan: kernel %s: %w", entry, err)
	}
	return k, nil
}

// Sets is how many descriptor sets a kernel has: as many dispatches may be
// in flight on it, each with its own buffers.
const Sets = C.S4DVK_SETS

// Bind points binding i of set 0 at size bytes of b from off.
func (k *Kernel) Bind(i int, b *Buffer, off, size int64) error { return k.BindSet(0, i, b, off, size) }

// BindSet points binding i of descriptor set set at size bytes of b from
// off. Only while no dispatch with that set is in flight.
func (k *Kernel) BindSet(set, i int, b *Buffer, off, size int64) error {
	if set < 0 || set >= Sets || i < 0 || i >= len(k.kinds) || off < 0 || size <= 0 || off+size > b.Size {
		return fmt.Errorf("vulkan: set %d binding %d: %d bytes at %d of a %d-byte buffer", set, i, size, off, b.Size)
	}
	C.s4dvk_kernel_bind(k.d.d, k.k, C.int(set), C.uint32_t(i), C.int32_t(k.kinds[i]), b.buf, C.uint64_t(off), C.uint64_t(size))
	return nil
}

// Dispatch submits x*y*z workgroups with set 0 on the compute queue after after.
func (k *Kernel) Dispatch(x, y, z int, after Ticket) (Ticket, error) {
	return k.DispatchSet(0, x, y, z, after)
}

// DispatchSet submits x*y*z workgroups with descriptor set set.
func (k *Kernel) DispatchSet(set, x, y, z int, after Ticket) (Ticket, error) {
	if set < 0 || set >= Sets {
		return Ticket{}, fmt.Errorf("vulkan: dispatch with set %d", set)
	}
	return k.dispatch([]int{set}, []int{x}, y, z, after)
}

// DispatchSets submits one dispatch per descriptor set of sets, xs[i]
// workgroups for sets[i], in one submission on the compute queue after
// after: they may run at once.
func (k *Kernel) DispatchSets(sets, xs []int, after Ticket) (Ticket, error) {
	if len(sets) == 0 || len(sets) != len(xs) {
		return Ticket{}, fmt.Errorf("vulkan: %d sets, %d sizes", len(sets), len(xs))
	}
	return k.dispatch(sets, xs, 1, 1, after)
}

// dispatch submits one dispatch per set, xs[i]*y*z workgroups each, in one
// command buffer on the compute queue.
func (k *Kernel) dispatch(sets, xs []int, y, z int, after Ticket) (Ticket, error) {
	cs, cx := make([]C.int32_t, len(sets)), make([]C.uint32_t, len(sets))
	for i, s := range sets {
		if s < 0 || s >= Sets || xs[i] <= 0 {
			return Ticket{}, fmt.Errorf("vulkan: dispatch with set %d, %d workgroups", s, xs[i])
		}
		cs[i], cx[i] = C.int32_t(s), C.uint32_t(xs[i])
	}
	t, err := k.d.submit(C.S4DVK_KERNEL, after, func(i C.int, av C.uint64_t) C.VkResult {
		return C.s4dvk_record_dispatch(k.d.d, i, k.k, &cs[0], &cx[0], C.uint32_t(len(cs)), C.uint32_t(y), C.uint32_t(z), av)
	})
	if err != nil {
		return Ticket{}, fmt.Errorf("vulkan: dispatch: %w", err)
	}
	return t, nil
}

// Release frees the pipeline; nothing of it may be in flight.
func (k *Kernel) Release() {
	if k.k == nil {
		return
	}
	C.s4dvk_kernel_free(k.d.d, k.k)
	C.free(unsafe.Pointer(k.k))
	k.k = nil
}

// layoutOf reports a size or offset computed by the C compiler from vkmin.h.
func layoutOf(k int) int64 { return int64(C.s4dvk_layout(C.int(k))) }
