package webgpu

/*
#include <stdlib.h>
#include "glue.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/internal/dl"
	"github.com/s4d-project/s4d/wgsl"
)

// DefaultLib is where `make deps` installs Dawn.
const DefaultLib = "/usr/local/lib/s4d/libwebgpu_wrapper.so"

// WgpuNativeLib is where `make deps` installs wgpu-native, the second
// implementation, tried when Dawn is absent.
const WgpuNativeLib = "/usr/local/lib/s4d/libwgpu_native.so"

// libCandidates lists where a webgpu.h implementation is looked for: an
// explicit path alone if one is given, else the install path, next to the
// binary, then the usual sonames.
func libCandidates(explicit string) []string {
	if explicit != "" {
		return []string{explicit}
	}
	c := []string{DefaultLib}
	if exe, err := os.Executable(); err == nil {
		dir := filepath.Dir(exe)
		c = append(c, filepath.Join(dir, "libwebgpu_wrapper.so"), filepath.Join(dir, "../lib/s4d/libwebgpu_wrapper.so"))
	}
	return append(c, WgpuNativeLib, "libwebgpu_wrapper.so", "libwebgpu_dawn.so", "libwgpu_native.so")
}

// A library is loaded once per process and never unloaded: Dawn keeps
// threads of its own.
var (
	libMu         sync.Mutex
	libProcs      = map[string]*C.s4d_procs{}
	togglesUsedFn = map[*C.s4d_procs]unsafe.Pointer{}
	// wgpuNative marks libraries that export wgpuGetVersion, which only
	// wgpu-native does: its feature values differ from Dawn's.
	wgpuNative = map[*C.s4d_procs]bool{}
)

// defaultToggles are the Dawn device toggles asked for unless
// Tuning.WebGPUToggles (S4D_WEBGPU_TOGGLES: a comma-separated list, "-"
// for none, "!name" to disable one) says otherwise: the kernels index only within their arrays and zero the
// workgroup memory they read first, so Dawn's bounds clamps and
// zero-filling are left out (the compress kernel ran 11% faster on the
// H100). Libraries other than Dawn ignore the descriptor.
var defaultToggles = []string{"disable_robustness", "disable_workgroup_init"}

func deviceToggles(v string) []string {
	if v == "" {
		return defaultToggles
	}
	var t []string
	for _, x := range strings.Split(v, ",") {
		if x = strings.TrimSpace(x); x != "" && x != "-" {
			t = append(t, x)
		}
	}
	return t
}

func loadLib(explicit string) (*C.s4d_procs, string, error) {
	libMu.Lock()
	defer libMu.Unlock()
	cands := libCandidates(explicit)
	for _, c := range cands {
		if p, ok := libProcs[c]; ok {
			return p, c, nil
		}
	}
	lib, err := dl.Open(cands...)
	if err != nil {
		return nil, "", backends.Unavailable("no webgpu library (run `make deps`): %v", err)
	}
	p, err := loadProcs(lib)
	if err != nil {
		return nil, "", backends.Unavailable("%v", err)
	}
	libProcs[lib.Path] = p
	// Optional: Dawn's list of the toggles a device uses, to report them.
	if f, err := lib.Sym("_ZN4dawn6native14GetTogglesUsedEP14WGPUDeviceImpl"); err == nil {
		togglesUsedFn[p] = f
	}
	if _, err := lib.Sym("wgpuGetVersion"); err == nil {
		wgpuNative[p] = true
	}
	return p, lib.Path, nil
}

// device owns one WebGPU device. Every call into the library runs on one
// goroutine locked to its OS thread (Dawn objects are not thread-safe),
// fed through jobs; callbacks are delivered there during ProcessEvents.
type device struct {
	p       *C.s4d_procs
	jobs    chan func()
	inst    C.WGPUInstance
	adapter C.WGPUAdapter
	dev     C.WGPUDevice
	queue   C.WGPUQueue
	st      *C.s4d_devstate
	lim     *C.s4d_limits
	desc    string
	subMax  uint32
	closed  bool
	// subgroups: the device was opened with the subgroups feature.
	subgroups bool
	// native: the library is wgpu-native (see wgpuNative).
	native bool
	// toggles: the Dawn toggles asked for that the device uses.
	toggles string
	// Waits registered by await, completed by the loop (device thread).
	pending []*pend
}

type pend struct {
	w     *C.s4d_wait
	done  chan error
	what  string
	start time.Time
}

// loop runs jobs; while waits are pending it also polls the library for
// events between jobs, so callers waiting for the GPU (await) do not hold
// the thread and other batches can be staged and submitted meanwhile.
func (d *device) loop() {
	runtime.LockOSThread()
	idle := 0
	for {
		if len(d.pending) == 0 {
			f, ok := <-d.jobs
			if !ok {
				return
			}
			f()
			continue
		}
		select {
		case f, ok := <-d.jobs:
			if !ok {
				d.reap(errClosed)
				return
			}
			f()
			continue
		default:
		}
		C.s4d_process_events(d.p, d.inst)
		if d.reap(nil) {
			idle = 0
			continue
		}
		if idle++; idle > pollSpins {
			time.Sleep(pollSleep(idle))
		}
	}
}

// pollSpins is how many polls in a row go without sleeping after a job
// or a completion. Each ProcessEvents costs Dawn several microseconds,
// and with the daemon's many rounds in flight completions come every
// millisecond or so: 64 spins after each kept the thread busy (12-15% of
// the daemon's CPU profile, H100, issue 29, also with longer sleeps).
const pollSpins = 4

// pollSleep is how long the device thread sleeps between polls once a
// wait has been pending for idle polls: 20 us at first, doubling every 8
// polls up to 80 us. A round takes milliseconds, so the longer sleeps add
// at most ~2% to it.
func pollSleep(idle int) time.Duration {
	return 20 * time.Microsecond << min((idle-pollSpins-1)/8, 2)
}

// reap completes the pending waits that are done, or all of them with
// err (or the device's loss). It reports whether any completed.
func (d *device) reap(err error) bool {
	if err == nil && d.st != nil && d.st.lost != 0 {
		err = fmt.Errorf("webgpu: device lost: %s", d.faultMsg())
	}
	k, got := 0, false
	for _, p := range d.pending {
		switch {
		case err != nil:
			p.done <- fmt.Errorf("waiting for %s: %w", p.what, err)
		case p.w.done != 0:
			p.done <- nil
		case time.Since(p.start) > waitTimeout:
			p.done <- fmt.Errorf("webgpu: %s did not complete in %v", p.what, waitTimeout)
		default:
			d.pending[k] = p
			k++
			continue
		}
		got = true
	}
	clear(d.pending[k:])
	d.pending = d.pending[:k]
	return got
}

// await blocks the calling goroutine (not the device thread) until w
// completes; the device thread goes on running other jobs meanwhile.
func (d *device) await(w *C.s4d_wait, what string) error {
	ch := make(chan error, 1)
	d.jobs <- func() {
		d.pending = append(d.pending, &pend{w: w, done: ch, what: what, start: time.Now()})
	}
	return <-ch
}

// do runs f on the device thread and returns its error.
func (d *device) do(f func() error) error {
	done := make(chan error, 1)
	d.jobs <- func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("webgpu: panic on device thread: %v", r)
			}
		}()
		done <- f()
	}
	return <-done
}

func newWait() *C.s4d_wait {
	return (*C.s4d_wait)(C.calloc(1, C.size_t(unsafe.Sizeof(C.s4d_wait{}))))
}

func resetWait(w *C.s4d_wait) { *w = C.s4d_wait{} }

// waitTimeout bounds any single wait: a GPU that hangs this long is
// treated as lost and the batch is redone on the CPU.
const waitTimeout = 60 * time.Second

// wait polls events until w completes. Device thread only.
func (d *device) wait(w *C.s4d_wait, what string) error {
	start := time.Now()
	for spins := 0; ; spins++ {
		if w.done != 0 {
			return nil
		}
		C.s4d_process_events(d.p, d.inst)
		if w.done != 0 {
			return nil
		}
		if d.st != nil && d.st.lost != 0 {
			return fmt.Errorf("webgpu: device lost while waiting for %s: %s", what, d.faultMsg())
		}
		if spins > 64 {
			// Long kernels: stop spinning a core.
			time.Sleep(20 * time.Microsecond)
			if time.Since(start) > waitTimeout {
				return fmt.Errorf("webgpu: %s did not complete in %v", what, waitTimeout)
			}
		}
	}
}

func (d *device) faultMsg() string {
	return cstr(unsafe.Slice((*byte)(unsafe.Pointer(&d.st.msg[0])), len(d.st.msg)))
}

// fault reports a device loss or an uncaptured error.
func (d *device) fault() error {
	if d.st.lost != 0 {
		return fmt.Errorf("webgpu: device lost: %s", d.faultMsg())
	}
	if d.st.errors != 0 {
		return fmt.Errorf("webgpu: device error: %s", d.faultMsg())
	}
	return nil
}

// openDevice finds an adapter and opens a device with the adapter's own
// limits. A Null adapter, or a CPU adapter unless allowCPU, is reported
// unavailable.
func openDevice(libPath string, allowCPU, noSubgroups bool, toggles string) (*device, error) {
	p, path, err := loadLib(libPath)
	if err != nil {
		return nil, err
	}
	d := &device{p: p, jobs: make(chan func()), native: wgpuNative[p]}
	go d.loop()
	err = d.do(func() error { return d.init(allowCPU, noSubgroups, toggles) })
	if err != nil {
		d.do(func() error { d.release(); return nil })
		close(d.jobs)
		return nil, err
	}
	d.desc += " [" + filepath.Base(path) + "]"
	return d, nil
}

// subgroupFeatures lists the feature values that mean subgroups. Dawn's
// webgpu.h revisions put Subgroups at 0x11 or 0x12; in wgpu-native's
// header 0x11 is DualSourceBlending and 0x12 the standard Subgroups,
// beside its own native Subgroup feature (0x00030021).
func subgroupFeatures(native bool) []uint32 {
	if native {
		return []uint32{0x12, 0x00030021}
	}
	return []uint32{0x11, 0x12}
}

func (d *device) init(allowCPU, noSubgroups bool, toggles string) error {
	p := d.p
	d.inst = C.s4d_create_instance(p)
	if d.inst == nil {
		return backends.Unavailable("webgpu: no instance")
	}
	w := newWait()
	defer C.free(unsafe.Pointer(w))
	C.s4d_request_adapter(p, d.inst, w)
	if err := d.wait(w, "adapter"); err != nil {
		return backends.Unavailable("%v", err)
	}
	if w.status != C.S4D_STATUS_SUCCESS || w.handle == nil {
		return backends.Unavailable("webgpu: no adapter: %s", waitMsg(w))
	}
	d.adapter = C.WGPUAdapter(w.handle)

	info := (*C.s4d_info)(C.calloc(1, C.size_t(unsafe.Sizeof(C.s4d_info{}))))
	defer C.free(unsafe.Pointer(info))
	var descBuf [256]C.char
	if C.s4d_adapter_info(p, d.adapter, info, &descBuf[0], C.size_t(len(descBuf))) != C.S4D_STATUS_SUCCESS {
		return backends.Unavailable("webgpu: adapter info unavailable")
	}
	backend, atype := uint32(info.i.backendType), uint32(info.i.adapterType)
	d.subMax = uint32(info.i.subgroupMaxSize)
	desc := C.GoString(&descBuf[0])
	C.s4d_adapter_info_free(p, info)
	if backend == C.S4D_BACKEND_NULL || backend == 0 {
		return backends.Unavailable("webgpu: only the Null adapter (no usable Vulkan driver; Dawn needs Mesa >= 25 for lavapipe)")
	}
	if atype == C.S4D_ADAPTER_CPU && !allowCPU {
		return backends.Unavailable("webgpu: only a CPU adapter (%s); set S4D_WEBGPU_ALLOW_CPU=1 to use it", desc)
	}
	d.desc = fmt.Sprintf("%s via %s", desc, backendName(backend))
	if atype == C.S4D_ADAPTER_CPU {
		d.desc += " (CPU adapter)"
	}

	d.lim = (*C.s4d_limits)(C.calloc(1, C.size_t(unsafe.Sizeof(C.s4d_limits{}))))
	if C.s4d_adapter_limits(p, d.adapter, d.lim) != C.S4D_STATUS_SUCCESS {
		return backends.Unavailable("webgpu: adapter limits unavailable")
	}
	d.st = (*C.s4d_devstate)(C.calloc(1, C.size_t(unsafe.Sizeof(C.s4d_devstate{}))))
	// The subgroups feature's value differs between implementations and
	// webgpu.h revisions; those the adapter has are asked for, and the
	// kernel with subgroups is only used if it compiles.
	feats := (*[4]C.uint32_t)(C.calloc(4, 4))
	defer C.free(unsafe.Pointer(feats))
	nf := 0
	if !noSubgroups {
		for _, f := range subgroupFeatures(d.native) {
			if C.s4d_has_feature(p, d.adapter, C.uint32_t(f)) != 0 {
				feats[nf] = C.uint32_t(f)
				nf++
			}
		}
	}
	d.subgroups = nf > 0
	// "!name" disables a toggle (tintgen's experiments); the rest enable.
	var tgl, off []string
	for _, t := range deviceToggles(toggles) {
		if n, ok := strings.CutPrefix(t, "!"); ok {
			off = append(off, n)
		} else {
			tgl = append(tgl, t)
		}
	}
	ctg := (*[8]*C.char)(C.calloc(8, C.size_t(unsafe.Sizeof(uintptr(0)))))
	defer C.free(unsafe.Pointer(ctg))
	ntg := min(len(tgl), len(ctg))
	for i := range ntg {
		ctg[i] = C.CString(tgl[i])
		defer C.free(unsafe.Pointer(ctg[i]))
	}
	coff := (*[8]*C.char)(C.calloc(8, C.size_t(unsafe.Sizeof(uintptr(0)))))
	defer C.free(unsafe.Pointer(coff))
	noff := min(len(off), len(coff))
	for i := range noff {
		coff[i] = C.CString(off[i])
		defer C.free(unsafe.Pointer(coff[i]))
	}
	resetWait(w)
	C.s4d_request_device(p, d.adapter, d.lim, w, d.st, &feats[0], C.size_t(nf), &ctg[0], C.size_t(ntg), &coff[0], C.size_t(noff))
	if err := d.wait(w, "device"); err != nil {
		return err
	}
	if w.status != C.S4D_STATUS_SUCCESS || w.handle == nil {
		return fmt.Errorf("webgpu: device request failed: %s", waitMsg(w))
	}
	d.dev = C.WGPUDevice(w.handle)
	d.queue = C.s4d_queue(p, d.dev)
	// Report which of the asked-for toggles the device took.
	if f := togglesUsedFn[p]; f != nil && ntg > 0 {
		var buf [2048]C.char
		C.s4d_toggles_used(f, d.dev, &buf[0], C.size_t(len(buf)))
		used := "," + C.GoString(&buf[0]) + ","
		var on []string
		for _, t := range tgl[:ntg] {
			if strings.Contains(used, ","+t+",") {
				on = append(on, t)
			}
		}
		d.toggles = strings.Join(on, ",")
	}
	return nil
}

func backendName(b uint32) string {
	switch b {
	case 3:
		return "D3D11"
	case 4:
		return "D3D12"
	case 5:
		return "Metal"
	case 6:
		return "Vulkan"
	case 7:
		return "OpenGL"
	case 8:
		return "OpenGLES"
	}
	return fmt.Sprintf("backend %d", b)
}

// lose destroys the device while it is in use, as a GPU reset would; the
// loss test uses it. Device thread only.
func (d *device) lose() { C.s4d_device_destroy(d.p, d.dev) }

// release frees the device objects. Device thread only.
func (d *device) release() {
	C.s4d_device_free(d.p, d.dev, d.queue)
	C.s4d_adapter_free(d.p, d.adapter)
	C.s4d_instance_free(d.p, d.inst)
	d.dev, d.queue, d.adapter, d.inst = nil, nil, nil, nil
}

// checkErrors pops the two error scopes pushed by pushErrors.
func (d *device) popErrors(w *C.s4d_wait) error {
	var errs []error
	for range 2 {
		resetWait(w)
		C.s4d_pop_error(d.p, d.dev, w)
		if err := d.wait(w, "error scope"); err != nil {
			return err
		}
		if w.status == C.S4D_STATUS_SUCCESS && w._type != 1 {
			errs = append(errs, fmt.Errorf("webgpu: error type %d: %s", w._type, waitMsg(w)))
		}
	}
	return errors.Join(errs...)
}

func (d *device) pipeline(src, entry string) (C.WGPUComputePipeline, error) {
	code := C.CString(src)
	defer C.free(unsafe.Pointer(code))
	ent := C.CString(entry)
	defer C.free(unsafe.Pointer(ent))
	w := newWait()
	defer C.free(unsafe.Pointer(w))
	C.s4d_push_errors(d.p, d.dev)
	pl := C.s4d_create_pipeline(d.p, d.dev, code, C.size_t(len(src)), ent)
	if err := d.popErrors(w); err != nil {
		C.s4d_pipeline_free(d.p, pl)
		return nil, fmt.Errorf("%s: %w", entry, err)
	}
	if pl == nil {
		return nil, fmt.Errorf("%s: %w", entry, errNil)
	}
	return pl, nil
}

// stopPhase makes the compress kernel stop after a phase; for timing
// the phases in benchmarks only (pages come out raw).
var stopPhase, tuneBits = 0, 0

// chainDepth is the compress kernel's chain depth (wgsl.Params.Depth; 0:
// pagelz4's, with pagelz4's bytes). Issue 29 trades ratio for speed down to
// the cpu engine's ratio, no lower (TestRatio; see README).
var chainDepth = defaultChainDepth

const defaultChainDepth = 2

// exactKernel reports whether the kernel's parameters are pagelz4's, so
// that every block it stores is pagelz4's block.
func exactKernel(p wgsl.Params) bool {
	return (p.Depth == 0 || p.Depth == wgsl.PagelzDepth) && p.Tune&(15|32) == 0
}

// kernelParams sets the compress kernel's constants, or says why the
// adapter's workgroup memory is too small for it.
// offersSubgroups reports whether the adapter lists one of the feature
// values that mean subgroups for this implementation.
func (d *device) offersSubgroups() bool {
	ok := false
	d.do(func() error {
		for _, f := range subgroupFeatures(d.native) {
			ok = ok || C.s4d_has_feature(d.p, d.adapter, C.uint32_t(f)) != 0
		}
		return nil
	})
	return ok
}

// source returns a kernel's WGSL for this device. wgpu-native's shader
// compiler (Naga, wgpu 0.32) rejects the `enable subgroups;` directive as
// not yet implemented, yet takes the subgroup builtins once the device has
// its Subgroup feature, so the directive is left out there.
func (d *device) source(src string, kp wgsl.Params) string {
	s := wgsl.Source(src, kp)
	if d.native && kp.Subgroups {
		s = strings.Replace(s, "enable subgroups;", "", 1)
	}
	return s
}

func kernelParams(pageSize int, wgStorage uint32, subgroups bool) (wgsl.Params, error) {
	p := wgsl.Params{PageWords: pageSize / 4, Subgroups: subgroups, Stop: stopPhase, Tune: tuneBits, Depth: chainDepth}
	if need := wgsl.WorkgroupBytes(p); need > int(wgStorage) {
		return wgsl.Params{}, fmt.Errorf("webgpu: the compress kernel needs %d bytes of workgroup memory, the adapter offers %d", need, wgStorage)
	}
	return p, nil
}
