package cu

import (
	"fmt"
	"unsafe"

	"github.com/s4d-project/s4d/backends/internal/dl"
)

// Driver holds the driver API's entry points: nothing but pointers, each
// filled from one row of table (the load checks that the rows cover them).
type Driver struct {
	init, driverVersion, deviceCount, deviceGet, deviceName, deviceAttr, deviceMem,
	ctxRetain, ctxRelease, ctxSet, modLoad, modUnload, modFunc, memAlloc, memFree,
	hostAlloc, hostFree, htod, dtoh, memsetD32, streamCreate, streamDestroy, streamSync,
	launch, errName, eventCreate, eventDestroy, eventRecord, streamWait,
	hostRegister, hostUnregister, ctxSetFlags, hostDevPtr, eventElapsed,
	streamCreatePrio, prioRange unsafe.Pointer
	// Portable makes HostAlloc's and HostRegister's memory pinned for
	// every context of the process (CU_MEMHOSTALLOC_PORTABLE, the same
	// bit for registering): with several GPUs, one registration serves all.
	Portable bool
}

// table names each entry point, by the versioned name the headers map it
// to, beside the field it fills.
func (d *Driver) table() []dl.Entry {
	return []dl.Entry{
		{Name: "cuInit", Ptr: &d.init},
		{Name: "cuDriverGetVersion", Ptr: &d.driverVersion},
		{Name: "cuDeviceGetCount", Ptr: &d.deviceCount},
		{Name: "cuDeviceGet", Ptr: &d.deviceGet},
		{Name: "cuDeviceGetName", Ptr: &d.deviceName},
		{Name: "cuDeviceGetAttribute", Ptr: &d.deviceAttr},
		{Name: "cuDeviceTotalMem_v2", Ptr: &d.deviceMem},
		{Name: "cuDevicePrimaryCtxRetain", Ptr: &d.ctxRetain},
		{Name: "cuDevicePrimaryCtxRelease_v2", Ptr: &d.ctxRelease},
		{Name: "cuCtxSetCurrent", Ptr: &d.ctxSet},
		{Name: "cuModuleLoadDataEx", Ptr: &d.modLoad},
		{Name: "cuModuleUnload", Ptr: &d.modUnload},
		{Name: "cuModuleGetFunction", Ptr: &d.modFunc},
		{Name: "cuMemAlloc_v2", Ptr: &d.memAlloc},
		{Name: "cuMemFree_v2", Ptr: &d.memFree},
		{Name: "cuMemHostAlloc", Ptr: &d.hostAlloc},
		{Name: "cuMemFreeHost", Ptr: &d.hostFree},
		{Name: "cuMemcpyHtoDAsync_v2", Ptr: &d.htod},
		{Name: "cuMemcpyDtoHAsync_v2", Ptr: &d.dtoh},
		{Name: "cuMemsetD32Async", Ptr: &d.memsetD32},
		{Name: "cuStreamCreate", Ptr: &d.streamCreate},
		{Name: "cuStreamDestroy_v2", Ptr: &d.streamDestroy},
		{Name: "cuStreamSynchronize", Ptr: &d.streamSync},
		{Name: "cuLaunchKernel", Ptr: &d.launch},
		{Name: "cuGetErrorName", Ptr: &d.errName},
		{Name: "cuEventCreate", Ptr: &d.eventCreate},
		{Name: "cuEventDestroy_v2", Ptr: &d.eventDestroy},
		{Name: "cuEventRecord", Ptr: &d.eventRecord},
		{Name: "cuStreamWaitEvent", Ptr: &d.streamWait},
		{Name: "cuMemHostRegister_v2", Ptr: &d.hostRegister},
		{Name: "cuMemHostUnregister", Ptr: &d.hostUnregister},
		{Name: "cuDevicePrimaryCtxSetFlags_v2", Ptr: &d.ctxSetFlags},
		{Name: "cuMemHostGetDevicePointer_v2", Ptr: &d.hostDevPtr},
		{Name: "cuEventElapsedTime", Ptr: &d.eventElapsed},
		{Name: "cuStreamCreateWithPriority", Ptr: &d.streamCreatePrio},
		{Name: "cuCtxGetStreamPriorityRange", Ptr: &d.prioRange},
	}
}

// checkCovers refuses a table whose rows do not fill every pointer of
// the struct at base exactly once: a field added without its row would
// stay nil and crash at its first call.
func checkCovers(what string, base unsafe.Pointer, size uintptr, t []dl.Entry) error {
	const word = unsafe.Sizeof(unsafe.Pointer(nil))
	if uintptr(len(t))*word != size {
		return fmt.Errorf("cu: %s: %d names for %d entry points", what, len(t), size/word)
	}
	seen := make([]bool, len(t))
	for _, e := range t {
		off := uintptr(unsafe.Pointer(e.Ptr)) - uintptr(base)
		if off >= size || off%word != 0 || seen[off/word] {
			return fmt.Errorf("cu: %s: %s does not fill its own field", what, e.Name)
		}
		seen[off/word] = true
	}
	return nil
}

// pointers is the size of Driver's entry points: they come first, and
// the settings after them (Portable) are no entry points to check.
func (d *Driver) pointers() uintptr { return unsafe.Offsetof(d.Portable) }

// Load finds the driver API's entry points in l (libcuda.so.1).
func (d *Driver) Load(l *dl.Lib) error {
	t := d.table()
	if err := checkCovers("driver", unsafe.Pointer(d), d.pointers(), t); err != nil {
		return err
	}
	return l.Resolve(t)
}

// Load finds nvCOMP's own entry points in l: the version is required, the
// text of statuses is not.
func (n *Nvcomp) Load(l *dl.Lib) error {
	var err error
	if n.props, err = l.Sym("nvcompGetProperties"); err != nil {
		return err
	}
	n.statusString, _ = l.Sym("nvcompGetStatusString")
	return nil
}

// Load finds the batched API of codec name ("LZ4", "Zstd") in l.
func (c *Codec) Load(l *dl.Lib, name string) error {
	c.Name = name
	p := "nvcompBatched" + name
	// 6.x renamed ...GetTempSizeAsync to ...GetTempSize and gave it a
	// stream argument; the symbol present says which one this is.
	var err error
	if c.compTemp, err = l.Sym(p + "CompressGetTempSize"); err == nil {
		c.tempHasStream = true
		c.decompTemp, err = l.Sym(p + "DecompressGetTempSize")
	} else if c.compTemp, err = l.Sym(p + "CompressGetTempSizeAsync"); err == nil {
		c.decompTemp, err = l.Sym(p + "DecompressGetTempSizeAsync")
	}
	if err != nil {
		return err
	}
	return l.Resolve([]dl.Entry{
		{Name: p + "CompressGetRequiredAlignments", Ptr: &c.compAlign},
		{Name: p + "DecompressGetRequiredAlignments", Ptr: &c.decompAlign},
		{Name: p + "CompressGetMaxOutputChunkSize", Ptr: &c.maxOut},
		{Name: p + "CompressAsync", Ptr: &c.compress},
		{Name: p + "DecompressAsync", Ptr: &c.decompress},
	})
}
