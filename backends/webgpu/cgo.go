package webgpu

/*
#include "glue.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/s4d-project/s4d/backends/internal/dl"
)

// procNames lists the entry points in the order of s4d_procs' fields.
var procNames = []string{
	"wgpuCreateInstance", "wgpuInstanceProcessEvents", "wgpuInstanceRequestAdapter", "wgpuInstanceRelease",
	"wgpuAdapterGetInfo", "wgpuAdapterInfoFreeMembers", "wgpuAdapterGetLimits", "wgpuAdapterHasFeature",
	"wgpuAdapterRequestDevice", "wgpuAdapterRelease",
	"wgpuDeviceGetQueue", "wgpuDeviceCreateBuffer", "wgpuDeviceCreateShaderModule", "wgpuDeviceCreateComputePipeline",
	"wgpuDeviceCreateBindGroup", "wgpuDeviceCreateCommandEncoder", "wgpuDevicePushErrorScope", "wgpuDevicePopErrorScope",
	"wgpuDeviceDestroy", "wgpuDeviceRelease",
	"wgpuComputePipelineGetBindGroupLayout", "wgpuComputePipelineRelease", "wgpuBindGroupLayoutRelease",
	"wgpuBindGroupRelease", "wgpuShaderModuleRelease",
	"wgpuBufferDestroy", "wgpuBufferRelease", "wgpuBufferGetMappedRange", "wgpuBufferGetConstMappedRange",
	"wgpuBufferMapAsync", "wgpuBufferUnmap",
	"wgpuCommandEncoderBeginComputePass", "wgpuCommandEncoderCopyBufferToBuffer", "wgpuCommandEncoderFinish",
	"wgpuCommandEncoderRelease",
	"wgpuComputePassEncoderSetPipeline", "wgpuComputePassEncoderSetBindGroup", "wgpuComputePassEncoderDispatchWorkgroups",
	"wgpuComputePassEncoderEnd", "wgpuComputePassEncoderRelease", "wgpuCommandBufferRelease",
	"wgpuQueueSubmit", "wgpuQueueWriteBuffer", "wgpuQueueRelease",
}

// loadProcs resolves every entry point into a C-allocated table (it is
// read from C for the life of the process, so it must not be Go memory).
func loadProcs(lib *dl.Lib) (*C.s4d_procs, error) {
	n := len(procNames)
	if uintptr(n)*unsafe.Sizeof(uintptr(0)) != unsafe.Sizeof(C.s4d_procs{}) {
		return nil, errors.New("webgpu: procedure table out of step with its names")
	}
	p := (*C.s4d_procs)(C.calloc(1, C.size_t(unsafe.Sizeof(C.s4d_procs{}))))
	slots := unsafe.Slice((*unsafe.Pointer)(unsafe.Pointer(p)), n)
	for i, name := range procNames {
		sym, err := lib.Sym(name)
		if err != nil {
			C.free(unsafe.Pointer(p))
			return nil, err
		}
		slots[i] = sym
	}
	return p, nil
}

// layoutOf reports a size or offset computed by the C compiler from wgpu.h.
func layoutOf(k int) int64 { return int64(C.s4d_layout(C.int(k))) }

func cstr(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

func waitMsg(w *C.s4d_wait) string {
	return cstr(unsafe.Slice((*byte)(unsafe.Pointer(&w.msg[0])), len(w.msg)))
}

var errNil = fmt.Errorf("webgpu: call returned no object")
