// Package cu calls the CUDA driver API and nvCOMP's batched API through
// entry points found with dlsym, so that s4d builds and starts without
// the CUDA toolkit, the driver or nvCOMP; the cuda engine is built on it.
package cu

/*
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>

// The few CUDA driver API types used here, declared locally: the binary
// must build without the CUDA toolkit's headers.
typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUstream;
typedef unsigned long long CUdeviceptr;

// nvCOMP's option structs (5.x and 6.x layouts). Each is 64 bytes and is
// passed by value; on x86-64 any 64-byte struct goes in memory, so one
// opaque 64-byte type carries all of them through the trampolines.
typedef struct { int32_t data_type; int32_t bitshuffle_mode; char reserved[56]; } s4d_lz4_copts;
typedef struct { int32_t backend; int32_t sort_before_hw_decompress; int32_t data_type; int32_t bitshuffle_mode; char reserved[48]; } s4d_lz4_dopts;
typedef struct { char reserved[64]; } s4d_zstd_copts;
typedef struct { int32_t backend; char reserved[60]; } s4d_zstd_dopts;
typedef struct { char b[64]; } s4d_opts;
typedef struct { size_t input, output, temp; } s4d_align;
typedef struct { uint32_t version, cudart_version; } s4d_props;

static size_t s4d_layout(int i) {
	switch (i) {
	case 0: return sizeof(s4d_lz4_copts);
	case 1: return offsetof(s4d_lz4_copts, bitshuffle_mode);
	case 2: return sizeof(s4d_lz4_dopts);
	case 3: return offsetof(s4d_lz4_dopts, data_type);
	case 4: return offsetof(s4d_lz4_dopts, bitshuffle_mode);
	case 5: return sizeof(s4d_zstd_copts);
	case 6: return sizeof(s4d_zstd_dopts);
	case 7: return sizeof(s4d_align);
	case 8: return sizeof(s4d_props);
	}
	return 0;
}

// Driver API trampolines: each calls a pointer found with dlsym.
static CUresult t_i(void *f, unsigned a) { return ((CUresult(*)(unsigned))f)(a); }
static CUresult t_pint(void *f, int *a) { return ((CUresult(*)(int *))f)(a); }
static CUresult t_devget(void *f, CUdevice *d, int i) { return ((CUresult(*)(CUdevice *, int))f)(d, i); }
static CUresult t_devname(void *f, char *s, int n, CUdevice d) { return ((CUresult(*)(char *, int, CUdevice))f)(s, n, d); }
static CUresult t_devattr(void *f, int *v, int attr, CUdevice d) { return ((CUresult(*)(int *, int, CUdevice))f)(v, attr, d); }
static CUresult t_devmem(void *f, size_t *v, CUdevice d) { return ((CUresult(*)(size_t *, CUdevice))f)(v, d); }
static CUresult t_ctxretain(void *f, CUcontext *c, CUdevice d) { return ((CUresult(*)(CUcontext *, CUdevice))f)(c, d); }
static CUresult t_ctxrelease(void *f, CUdevice d) { return ((CUresult(*)(CUdevice))f)(d); }
static CUresult t_ctxset(void *f, CUcontext c) { return ((CUresult(*)(CUcontext))f)(c); }
static CUresult t_modload(void *f, CUmodule *m, const void *img, char *log, size_t logsize) {
	// CU_JIT_ERROR_LOG_BUFFER (5) and its size (6): a PTX the driver
	// rejects says why.
	int opts[2] = {5, 6};
	void *vals[2] = {log, (void *)logsize};
	return ((CUresult(*)(CUmodule *, const void *, unsigned, int *, void **))f)(m, img, 2, opts, vals);
}
static CUresult t_modunload(void *f, CUmodule m) { return ((CUresult(*)(CUmodule))f)(m); }
static CUresult t_modfunc(void *f, CUfunction *fn, CUmodule m, const char *name) {
	return ((CUresult(*)(CUfunction *, CUmodule, const char *))f)(fn, m, name);
}
static CUresult t_memalloc(void *f, CUdeviceptr *p, size_t n) { return ((CUresult(*)(CUdeviceptr *, size_t))f)(p, n); }
static CUresult t_memfree(void *f, CUdeviceptr p) { return ((CUresult(*)(CUdeviceptr))f)(p); }
static CUresult t_hostalloc(void *f, void **p, size_t n, unsigned flags) { return ((CUresult(*)(void **, size_t, unsigned))f)(p, n, flags); }
static CUresult t_hostfree(void *f, void *p) { return ((CUresult(*)(void *))f)(p); }
static CUresult t_hostregister(void *f, void *p, size_t n, unsigned flags) { return ((CUresult(*)(void *, size_t, unsigned))f)(p, n, flags); }
static CUresult t_ctxflags(void *f, CUdevice d, unsigned flags) { return ((CUresult(*)(CUdevice, unsigned))f)(d, flags); }
static CUresult t_hostdevptr(void *f, CUdeviceptr *d, void *p) { return ((CUresult(*)(CUdeviceptr *, void *, unsigned))f)(d, p, 0); }
static CUresult t_htod(void *f, CUdeviceptr d, const void *h, size_t n, CUstream s) {
	return ((CUresult(*)(CUdeviceptr, const void *, size_t, CUstream))f)(d, h, n, s);
}
static CUresult t_dtoh(void *f, void *h, CUdeviceptr d, size_t n, CUstream s) {
	return ((CUresult(*)(void *, CUdeviceptr, size_t, CUstream))f)(h, d, n, s);
}
static CUresult t_memsetd32(void *f, CUdeviceptr d, unsigned v, size_t n, CUstream s) {
	return ((CUresult(*)(CUdeviceptr, unsigned, size_t, CUstream))f)(d, v, n, s);
}
static CUresult t_streamcreate(void *f, CUstream *s, unsigned flags) { return ((CUresult(*)(CUstream *, unsigned))f)(s, flags); }
static CUresult t_stream(void *f, CUstream s) { return ((CUresult(*)(CUstream))f)(s); }
static CUresult t_streamprio(void *f, CUstream *s, unsigned flags, int prio) { return ((CUresult(*)(CUstream *, unsigned, int))f)(s, flags, prio); }
static CUresult t_priorange(void *f, int *least, int *greatest) { return ((CUresult(*)(int *, int *))f)(least, greatest); }
typedef void *CUevent;
static CUresult t_elapsed(void *f, float *ms, CUevent a, CUevent b) { return ((CUresult(*)(float *, CUevent, CUevent))f)(ms, a, b); }
static CUresult t_eventcreate(void *f, CUevent *e, unsigned flags) { return ((CUresult(*)(CUevent *, unsigned))f)(e, flags); }
static CUresult t_event(void *f, CUevent e) { return ((CUresult(*)(CUevent))f)(e); }
static CUresult t_eventrecord(void *f, CUevent e, CUstream s) { return ((CUresult(*)(CUevent, CUstream))f)(e, s); }
static CUresult t_streamwait(void *f, CUstream s, CUevent e, unsigned flags) { return ((CUresult(*)(CUstream, CUevent, unsigned))f)(s, e, flags); }
static CUresult t_errname(void *f, CUresult r, const char **s) { return ((CUresult(*)(CUresult, const char **))f)(r, s); }

// Kernel parameters are all 8-byte values; the pointer array cuLaunchKernel
// wants is built here, in C memory.
static CUresult t_launch(void *f, CUfunction fn, unsigned gx, unsigned bx, CUstream s, const uint64_t *args, int nargs) {
	void *params[16];
	if (nargs > 16) return 1;
	for (int i = 0; i < nargs; i++) params[i] = (void *)&args[i];
	return ((CUresult(*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void **, void **))f)(
		fn, gx, 1, 1, bx, 1, 1, 0, s, params, NULL);
}

// nvCOMP trampolines. Statuses are 4-byte enums.
static int n_props(void *f, s4d_props *p) { return ((int(*)(s4d_props *))f)(p); }
static const char *n_statusstr(void *f, int st) { return ((const char *(*)(int))f)(st); }
static int n_align(void *f, s4d_opts o, s4d_align *a) { return ((int(*)(s4d_opts, s4d_align *))f)(o, a); }
// 6.x: (n, max_chunk, opts, temp*, max_total, stream); 5.x: no stream.
static int n_temp6(void *f, size_t n, size_t chunk, s4d_opts o, size_t *temp, size_t total, CUstream s) {
	return ((int(*)(size_t, size_t, s4d_opts, size_t *, size_t, CUstream))f)(n, chunk, o, temp, total, s);
}
static int n_temp5(void *f, size_t n, size_t chunk, s4d_opts o, size_t *temp, size_t total) {
	return ((int(*)(size_t, size_t, s4d_opts, size_t *, size_t))f)(n, chunk, o, temp, total);
}
static int n_maxout(void *f, size_t chunk, s4d_opts o, size_t *out) { return ((int(*)(size_t, s4d_opts, size_t *))f)(chunk, o, out); }
static int n_compress(void *f, CUdeviceptr in, CUdeviceptr insz, size_t chunk, size_t n, CUdeviceptr temp, size_t tempsz,
		CUdeviceptr out, CUdeviceptr outsz, s4d_opts o, CUdeviceptr st, CUstream s) {
	return ((int(*)(const void *const *, const size_t *, size_t, size_t, void *, size_t, void *const *, size_t *, s4d_opts, int *, CUstream))f)(
		(const void *const *)in, (const size_t *)insz, chunk, n, (void *)temp, tempsz, (void *const *)out, (size_t *)outsz, o, (int *)st, s);
}
static int n_decompress(void *f, CUdeviceptr in, CUdeviceptr insz, CUdeviceptr bufsz, CUdeviceptr actual, size_t n,
		CUdeviceptr temp, size_t tempsz, CUdeviceptr out, s4d_opts o, CUdeviceptr st, CUstream s) {
	return ((int(*)(const void *const *, const size_t *, const size_t *, size_t *, size_t, void *, size_t, void *const *, s4d_opts, int *, CUstream))f)(
		(const void *const *)in, (const size_t *)insz, (const size_t *)bufsz, (size_t *)actual, n, (void *)temp, tempsz, (void *const *)out, o, (int *)st, s);
}
*/
import "C"

import (
	"strconv"
	"unsafe"
)

// The driver's handles, as Go types: callers only hand them back, and no
// C type leaves the package.
type (
	Device    int32
	Context   unsafe.Pointer
	Module    unsafe.Pointer
	Func      unsafe.Pointer
	Stream    unsafe.Pointer
	Event     unsafe.Pointer
	DevPtr    = uint64
	Opts      = [64]byte
	Alignment struct{ Input, Output, Temp uintptr }
)

// CLayout reports sizes and offsets of the C declarations above, for the
// layout tests of their Go copies.
func CLayout(i int) uintptr { return uintptr(C.s4d_layout(C.int(i))) }

// cuError is a failed driver call.
type cuError struct {
	call string
	code int
	name string
}

func (e *cuError) Error() string { return e.call + ": " + e.name }

func (d *Driver) check(r C.CUresult, call string) error {
	if r == 0 {
		return nil
	}
	name := "CUDA error"
	var s *C.char
	if d.errName != nil && C.t_errname(d.errName, r, &s) == 0 && s != nil {
		name = C.GoString(s)
	}
	return &cuError{call: call, code: int(r), name: name + " (" + strconv.Itoa(int(r)) + ")"}
}

func (d *Driver) Init() error { return d.check(C.t_i(d.init, 0), "cuInit") }

func (d *Driver) DriverVersion() (int, error) {
	var v C.int
	return int(v), d.check(C.t_pint(d.driverVersion, &v), "cuDriverGetVersion")
}

func (d *Driver) DeviceCount() (int, error) {
	var v C.int
	return int(v), d.check(C.t_pint(d.deviceCount, &v), "cuDeviceGetCount")
}

func (d *Driver) Device(i int) (Device, error) {
	var dev C.CUdevice
	err := d.check(C.t_devget(d.deviceGet, &dev, C.int(i)), "cuDeviceGet")
	return Device(dev), err
}

func (d *Driver) DeviceName(dev Device) string {
	var buf [256]C.char
	if C.t_devname(d.deviceName, &buf[0], C.int(len(buf)), C.CUdevice(dev)) != 0 {
		return "unknown GPU"
	}
	return C.GoString(&buf[0])
}

func (d *Driver) DeviceAttr(dev Device, attr int) (int, error) {
	var v C.int
	return int(v), d.check(C.t_devattr(d.deviceAttr, &v, C.int(attr), C.CUdevice(dev)), "cuDeviceGetAttribute")
}

func (d *Driver) DeviceMem(dev Device) (int64, error) {
	var v C.size_t
	return int64(v), d.check(C.t_devmem(d.deviceMem, &v, C.CUdevice(dev)), "cuDeviceTotalMem")
}

func (d *Driver) PrimaryCtx(dev Device) (Context, error) {
	var c C.CUcontext
	err := d.check(C.t_ctxretain(d.ctxRetain, &c, C.CUdevice(dev)), "cuDevicePrimaryCtxRetain")
	return Context(c), err
}

func (d *Driver) ReleasePrimaryCtx(dev Device) {
	C.t_ctxrelease(d.ctxRelease, C.CUdevice(dev))
}

func (d *Driver) SetCurrent(c Context) error {
	return d.check(C.t_ctxset(d.ctxSet, C.CUcontext(c)), "cuCtxSetCurrent")
}

// LoadModule JIT-compiles PTX for the current context.
func (d *Driver) LoadModule(ptx []byte) (Module, error) {
	img := C.CBytes(append(append([]byte(nil), ptx...), 0))
	defer C.free(img)
	const logSize = 4096
	log := (*C.char)(C.calloc(logSize, 1))
	defer C.free(unsafe.Pointer(log))
	var m C.CUmodule
	if err := d.check(C.t_modload(d.modLoad, &m, img, log, logSize), "cuModuleLoadDataEx"); err != nil {
		if s := C.GoString(log); s != "" {
			return nil, &cuError{call: "cuModuleLoadDataEx", code: err.(*cuError).code, name: err.(*cuError).name + ": " + s}
		}
		return nil, err
	}
	return Module(m), nil
}

func (d *Driver) UnloadModule(m Module) { C.t_modunload(d.modUnload, C.CUmodule(m)) }

func (d *Driver) Function(m Module, name string) (Func, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var f C.CUfunction
	err := d.check(C.t_modfunc(d.modFunc, &f, C.CUmodule(m), cs), "cuModuleGetFunction "+name)
	return Func(f), err
}

func (d *Driver) Alloc(n int) (DevPtr, error) {
	var p C.CUdeviceptr
	err := d.check(C.t_memalloc(d.memAlloc, &p, C.size_t(n)), "cuMemAlloc")
	return DevPtr(p), err
}

func (d *Driver) Free(p DevPtr) {
	if p != 0 {
		C.t_memfree(d.memFree, C.CUdeviceptr(p))
	}
}

// HostAlloc returns pinned host memory, which the copy engines reach at
// full PCIe speed without a bounce buffer.
func (d *Driver) HostAlloc(n int) ([]byte, error) {
	var p unsafe.Pointer
	if err := d.check(C.t_hostalloc(d.hostAlloc, &p, C.size_t(n), C.uint(d.portable())), "cuMemHostAlloc"); err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(p), n), nil
}

// HostMapped returns pinned host memory that kernels write straight into
// over PCIe (CU_MEMHOSTALLOC_DEVICEMAP), and its device address: results
// written there need no copy back, only a wait for the kernel.
func (d *Driver) HostMapped(n int) ([]byte, DevPtr, error) {
	var p unsafe.Pointer
	if err := d.check(C.t_hostalloc(d.hostAlloc, &p, C.size_t(n), 0x02), "cuMemHostAlloc"); err != nil {
		return nil, 0, err
	}
	var dp C.CUdeviceptr
	if err := d.check(C.t_hostdevptr(d.hostDevPtr, &dp, p), "cuMemHostGetDevicePointer"); err != nil {
		C.t_hostfree(d.hostFree, p)
		return nil, 0, err
	}
	return unsafe.Slice((*byte)(p), n), DevPtr(dp), nil
}

func (d *Driver) HostFree(b []byte) {
	if len(b) > 0 {
		C.t_hostfree(d.hostFree, unsafe.Pointer(&b[0]))
	}
}

// HostRegister page-locks memory the caller allocated (a mapping of a
// client's memfd), so the copy engines reach it as they reach HostAlloc's.
// Memory mapped read-only (a client's pages to compress) is registered as
// such (CU_MEMHOSTREGISTER_READ_ONLY): locking it for writing would fail.
//
// It is mapped into the device's address space too (DEVICEMAP), so that
// kernels read and write it across PCIe (HostDevPtr gives the address).
func (d *Driver) HostRegister(b []byte) error {
	deviceMap := 0x02 | d.portable()
	err := d.check(C.t_hostregister(d.hostRegister, unsafe.Pointer(&b[0]), C.size_t(len(b)), C.uint(deviceMap)), "cuMemHostRegister")
	if err != nil {
		const readOnly = 0x08
		if C.t_hostregister(d.hostRegister, unsafe.Pointer(&b[0]), C.size_t(len(b)), C.uint(readOnly|deviceMap)) == 0 {
			return nil
		}
	}
	return err
}

func (d *Driver) portable() int {
	if d.Portable {
		return 0x01 // CU_MEMHOSTALLOC_PORTABLE == CU_MEMHOSTREGISTER_PORTABLE
	}
	return 0
}

// HostDevPtr is the device address of pinned host memory (0 if it has none).
func (d *Driver) HostDevPtr(b []byte) DevPtr {
	var dp C.CUdeviceptr
	if C.t_hostdevptr(d.hostDevPtr, &dp, unsafe.Pointer(&b[0])) != 0 {
		return 0
	}
	return DevPtr(dp)
}

func (d *Driver) HostUnregister(b []byte) error {
	return d.check(C.t_hostfree(d.hostUnregister, unsafe.Pointer(&b[0])), "cuMemHostUnregister")
}

// BlockingSync makes waits on dev's primary context sleep instead of
// spinning a core: a batch takes milliseconds, and the CPU is what the
// daemon's users pay for. It must come before the context is first retained.
func (d *Driver) BlockingSync(dev Device) error {
	const schedBlockingSync = 0x04 // CU_CTX_SCHED_BLOCKING_SYNC
	return d.check(C.t_ctxflags(d.ctxSetFlags, C.CUdevice(dev), schedBlockingSync), "cuDevicePrimaryCtxSetFlags")
}

// HtoD and DtoH take pinned host memory only (from HostAlloc): the copy
// runs after the call returns.
func (d *Driver) HtoD(dst DevPtr, src []byte, s Stream) error {
	if len(src) == 0 {
		return nil
	}
	return d.check(C.t_htod(d.htod, C.CUdeviceptr(dst), unsafe.Pointer(&src[0]), C.size_t(len(src)), C.CUstream(s)), "cuMemcpyHtoDAsync")
}

func (d *Driver) DtoH(dst []byte, src DevPtr, s Stream) error {
	if len(dst) == 0 {
		return nil
	}
	return d.check(C.t_dtoh(d.dtoh, unsafe.Pointer(&dst[0]), C.CUdeviceptr(src), C.size_t(len(dst)), C.CUstream(s)), "cuMemcpyDtoHAsync")
}

func (d *Driver) MemsetD32(dst DevPtr, v uint32, n int, s Stream) error {
	return d.check(C.t_memsetd32(d.memsetD32, C.CUdeviceptr(dst), C.uint(v), C.size_t(n), C.CUstream(s)), "cuMemsetD32Async")
}

func (d *Driver) StreamCreate() (Stream, error) {
	var s C.CUstream
	// CU_STREAM_NON_BLOCKING: no implicit sync with the legacy stream
	// that other users of the primary context may use.
	err := d.check(C.t_streamcreate(d.streamCreate, &s, 1), "cuStreamCreate")
	return Stream(s), err
}

// UrgentStream is StreamCreate with the context's highest priority: the
// block scheduler dispatches its kernels' blocks before those still
// waiting from other streams (a piece's s4d_place need not wait behind
// the s4d_lz4 launches of the pieces queued after it).
func (d *Driver) UrgentStream() (Stream, error) {
	var least, greatest C.int
	if err := d.check(C.t_priorange(d.prioRange, &least, &greatest), "cuCtxGetStreamPriorityRange"); err != nil {
		return nil, err
	}
	var s C.CUstream
	err := d.check(C.t_streamprio(d.streamCreatePrio, &s, 1, greatest), "cuStreamCreateWithPriority")
	return Stream(s), err
}

func (d *Driver) StreamDestroy(s Stream) {
	if s != nil {
		C.t_stream(d.streamDestroy, C.CUstream(s))
	}
}

func (d *Driver) EventCreate() (Event, error) {
	var e C.CUevent
	// CU_EVENT_DISABLE_TIMING: ordering only, the cheapest kind.
	err := d.check(C.t_eventcreate(d.eventCreate, &e, 2), "cuEventCreate")
	return Event(e), err
}

// TimingEvent returns an event that records when the stream reached it,
// for the stage breakdown (Elapsed).
func (d *Driver) TimingEvent() (Event, error) {
	var e C.CUevent
	err := d.check(C.t_eventcreate(d.eventCreate, &e, 0), "cuEventCreate")
	return Event(e), err
}

// Elapsed is the time between two completed timing events.
func (d *Driver) Elapsed(from, to Event) (float64, error) {
	var ms C.float
	err := d.check(C.t_elapsed(d.eventElapsed, &ms, C.CUevent(from), C.CUevent(to)), "cuEventElapsedTime")
	return float64(ms) / 1e3, err
}

func (d *Driver) EventDestroy(e Event) {
	if e != nil {
		C.t_event(d.eventDestroy, C.CUevent(e))
	}
}

func (d *Driver) Record(e Event, s Stream) error {
	return d.check(C.t_eventrecord(d.eventRecord, C.CUevent(e), C.CUstream(s)), "cuEventRecord")
}

// Wait makes s wait for the work recorded in e (a never-recorded event is
// already complete).
func (d *Driver) Wait(s Stream, e Event) error {
	return d.check(C.t_streamwait(d.streamWait, C.CUstream(s), C.CUevent(e), 0), "cuStreamWaitEvent")
}

func (d *Driver) Sync(s Stream) error {
	return d.check(C.t_stream(d.streamSync, C.CUstream(s)), "cuStreamSynchronize")
}

func (d *Driver) Launch(f Func, grid, block int, s Stream, args ...uint64) error {
	if grid == 0 {
		return nil
	}
	var a [16]C.uint64_t
	for i, v := range args {
		a[i] = C.uint64_t(v)
	}
	return d.check(C.t_launch(d.launch, C.CUfunction(f), C.uint(grid), C.uint(block), C.CUstream(s), &a[0], C.int(len(args))), "cuLaunchKernel")
}

// nvcomp holds one codec's entry points.
type Codec struct {
	Name                                                 string
	compAlign, decompAlign, compTemp, decompTemp, maxOut unsafe.Pointer
	compress, decompress                                 unsafe.Pointer
	tempHasStream                                        bool // 6.x GetTempSize takes a stream
}

type Nvcomp struct {
	props, statusString unsafe.Pointer
}

func (n *Nvcomp) Version() (major, minor, patch int, err error) {
	var p C.s4d_props
	if st := C.n_props(n.props, &p); st != 0 {
		return 0, 0, 0, n.Status(int(st), "nvcompGetProperties")
	}
	v := int(p.version)
	return v / 1000, v % 1000 / 100, v % 100, nil
}

type nvError struct {
	call   string
	status int
	text   string
}

func (e *nvError) Error() string { return e.call + ": " + e.text }

func (n *Nvcomp) Status(st int, call string) error {
	if st == 0 {
		return nil
	}
	text := "status " + strconv.Itoa(st)
	if n.statusString != nil {
		if s := C.n_statusstr(n.statusString, C.int(st)); s != nil {
			text = C.GoString(s) + " (" + strconv.Itoa(st) + ")"
		}
	}
	return &nvError{call: call, status: st, text: text}
}

func copts(o Opts) C.s4d_opts { return *(*C.s4d_opts)(unsafe.Pointer(&o)) }

func (c *Codec) Alignments(n *Nvcomp, compress bool, o Opts) (Alignment, error) {
	var a C.s4d_align
	f, name := c.decompAlign, "DecompressGetRequiredAlignments"
	if compress {
		f, name = c.compAlign, "CompressGetRequiredAlignments"
	}
	if err := n.Status(int(C.n_align(f, copts(o), &a)), c.Name+" "+name); err != nil {
		return Alignment{}, err
	}
	return Alignment{uintptr(a.input), uintptr(a.output), uintptr(a.temp)}, nil
}

func (c *Codec) TempSize(n *Nvcomp, compress bool, chunks, chunk int, o Opts, s Stream) (int, error) {
	f, name := c.decompTemp, "DecompressGetTempSize"
	if compress {
		f, name = c.compTemp, "CompressGetTempSize"
	}
	var t C.size_t
	var st C.int
	total := C.size_t(chunks * chunk)
	if c.tempHasStream {
		st = C.n_temp6(f, C.size_t(chunks), C.size_t(chunk), copts(o), &t, total, C.CUstream(s))
	} else {
		st = C.n_temp5(f, C.size_t(chunks), C.size_t(chunk), copts(o), &t, total)
	}
	return int(t), n.Status(int(st), c.Name+" "+name)
}

func (c *Codec) MaxOutput(n *Nvcomp, chunk int, o Opts) (int, error) {
	var m C.size_t
	err := n.Status(int(C.n_maxout(c.maxOut, C.size_t(chunk), copts(o), &m)), c.Name+" CompressGetMaxOutputChunkSize")
	return int(m), err
}

func (c *Codec) Compress(n *Nvcomp, in, inSizes DevPtr, chunk, count int, temp DevPtr, tempSize int,
	out, outSizes DevPtr, o Opts, statuses DevPtr, s Stream) error {
	st := C.n_compress(c.compress, C.CUdeviceptr(in), C.CUdeviceptr(inSizes), C.size_t(chunk), C.size_t(count),
		C.CUdeviceptr(temp), C.size_t(tempSize), C.CUdeviceptr(out), C.CUdeviceptr(outSizes), copts(o), C.CUdeviceptr(statuses), C.CUstream(s))
	return n.Status(int(st), c.Name+" CompressAsync")
}

func (c *Codec) Decompress(n *Nvcomp, in, inSizes, bufSizes, actual DevPtr, count int, temp DevPtr, tempSize int,
	out DevPtr, o Opts, statuses DevPtr, s Stream) error {
	st := C.n_decompress(c.decompress, C.CUdeviceptr(in), C.CUdeviceptr(inSizes), C.CUdeviceptr(bufSizes), C.CUdeviceptr(actual),
		C.size_t(count), C.CUdeviceptr(temp), C.size_t(tempSize), C.CUdeviceptr(out), copts(o), C.CUdeviceptr(statuses), C.CUstream(s))
	return n.Status(int(st), c.Name+" DecompressAsync")
}
