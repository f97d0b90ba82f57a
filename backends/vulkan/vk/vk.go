// Package vk is s4d's own Vulkan binding for issue 41's runtime: libvulkan
// is loaded at run time (never linked), a device is opened with timeline
// semaphores and a transfer queue, host memory (a client's memfd mapping,
// the store's slabs) is imported with VK_EXT_external_memory_host, and
// copies between buffers run several in flight.
//
// It is the bottom layer only: no shaders yet. Its measurements are in
// docs/benchmarks/2026-12-02-vulkan-host-import.md (backends/vulkan/vkprobe
// made them). A Device is not safe for concurrent use: like the webgpu and
// cuda engines, drive it from one goroutine.
package vk

/*
#include "glue.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
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
}

// Info describes an opened device.
type Info struct {
	Name, Driver string
	API          uint32 // VK_MAKE_API_VERSION packed
	Vendor       uint32
	CPU          bool // a CPU implementation (lavapipe)
	HostImport   bool // VK_EXT_external_memory_host
	// ImportAlign is minImportedHostPointerAlignment: an imported range's
	// address and size are multiples of it.
	ImportAlign  int
	TransferOnly bool // copies go to a transfer-only queue family
}

// Device is one opened Vulkan device.
type Device struct {
	lib  *dl.Lib
	d    *C.s4dvk_dev // C memory: the driver keeps pointers into it
	info Info
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
	if C.s4dvk_open(C.PFN_vkGetInstanceProcAddr(gipa), C.int(o.Device), d, &why[0], C.size_t(len(why))) != 0 {
		C.s4dvk_close(d)
		C.free(unsafe.Pointer(d))
		return nil, &Unavailable{Reason: C.GoString(&why[0])}
	}
	return &Device{lib: lib, d: d, info: Info{
		Name:         C.GoString(&d.name[0]),
		Driver:       C.GoString(&d.driver[0]),
		API:          uint32(d.api),
		Vendor:       uint32(d.vendor),
		CPU:          d.cpu != 0,
		HostImport:   d.hostImport != 0,
		ImportAlign:  int(d.minAlign),
		TransferOnly: d.transferOnly != 0,
	}}, nil
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
	if b.d == nil {
		return
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

// Ticket is the timeline value a submitted copy signals when done.
type Ticket uint64

// Copy submits the regions from src to dst on the transfer queue and
// returns at once; up to 8 copies are in flight (a ninth waits for the
// first). Copy as few regions as possible: NVIDIA's copy engine pays per
// region (one per 4 KiB page ran at 1.5-2.2 GB/s, 1 MiB runs at 44-47).
func (d *Device) Copy(dst, src *Buffer, regions []Region) (Ticket, error) {
	if len(regions) == 0 {
		return Ticket(d.d.submitted), nil
	}
	rs := make([]C.VkBufferCopy, len(regions))
	for i, r := range regions {
		if r.Src < 0 || r.Dst < 0 || r.Size <= 0 || r.Src+r.Size > src.Size || r.Dst+r.Size > dst.Size {
			return 0, fmt.Errorf("vulkan: copy region %d (%d -> %d, %d bytes) outside the buffers (%d, %d bytes)", i, r.Src, r.Dst, r.Size, src.Size, dst.Size)
		}
		rs[i] = C.VkBufferCopy{srcOffset: C.VkDeviceSize(r.Src), dstOffset: C.VkDeviceSize(r.Dst), size: C.VkDeviceSize(r.Size)}
	}
	var t C.uint64_t
	if err := check(C.s4dvk_copy(d.d, src.buf, dst.buf, &rs[0], C.uint32_t(len(rs)), &t)); err != nil {
		return 0, fmt.Errorf("vulkan: copy: %w", err)
	}
	return Ticket(t), nil
}

// Wait blocks until the copy of t (and every one submitted before it) is
// done and its writes are visible to the host, or timeout passes.
func (d *Device) Wait(t Ticket, timeout time.Duration) error {
	if err := check(C.s4dvk_wait(d.d, C.uint64_t(t), C.uint64_t(timeout.Nanoseconds()))); err != nil {
		return fmt.Errorf("vulkan: waiting for copy %d: %w", t, err)
	}
	return nil
}

// Done reports whether the copy of t has finished, without waiting.
func (d *Device) Done(t Ticket) (bool, error) {
	var v C.uint64_t
	if err := check(C.s4dvk_counter(d.d, &v)); err != nil {
		return false, err
	}
	return uint64(v) >= uint64(t), nil
}

// layoutOf reports a size or offset computed by the C compiler from vkmin.h.
func layoutOf(k int) int64 { return int64(C.s4dvk_layout(C.int(k))) }
