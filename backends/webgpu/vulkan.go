package webgpu

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/vulkan/spirv"
	"github.com/s4d-project/s4d/backends/vulkan/spirv/wgslsrc"
	"github.com/s4d-project/s4d/backends/vulkan/vk"
	"github.com/s4d-project/s4d/wgsl"
)

// The engine's second runtime (issue 41): the same WGSL kernels, compiled
// to SPIR-V by a pinned naga or by Tint as Dawn runs it (package spirv;
// S4D_VULKAN_SPIRV picks), run through our own Vulkan
// binding (package vk). Client memory is imported with
// VK_EXT_external_memory_host once per mapping (Pin, imported when a
// compress round first reads from it), and the compress
// kernel reads a batch's pages straight from it and writes its results
// into host memory the engine imported for itself: no staging copy and no
// readback copy. A batch whose pages lie in no imported mapping is copied
// into the slot's own imported staging first (counted). Batching, size
// classes and the checks of the results are the webgpu runtime's
// (compressBatch, fill, parts): only a round's device work differs.

// Runtime names, as --wgsl-runtime takes them.
const (
	RuntimeAuto   = "auto"
	RuntimeVulkan = "vulkan"
	RuntimeWebGPU = "webgpu"
)

// envNoImport refuses every host-memory import when set to 1, as a
// driver without VK_EXT_external_memory_host would: auto then takes the
// webgpu.h runtime, vulkan stages every batch (tests force both).
const envNoImport = "S4D_VULKAN_NO_IMPORT"

// vkrt is the Vulkan runtime of one device.
type vkrt struct {
	d        *vk.Device
	info     vk.Info
	compress *vk.Kernel
	decomp   *vk.Kernel
	gather   *vk.Kernel // nil: GETs are not gathered (gatherNote says why)
	// gatherShare is the percentage of a gathered GET's raw pages the
	// GPU copies (the host the rest, at once): S4D_VULKAN_GATHER_SHARE.
	gatherShare int
	sg          bool   // the compress module with subgroup scans
	spv         string // the modules' compiler (spirv.Set's Name)
	noImport    bool
	devIn       bool   // GET's blocks copied to device memory (devInFor)
	note        string // why auto took this runtime, for Describe
	gatherNote  string

	// life: importNow holds it shared while it imports; close holds
	// it alone, so no import runs into a closing device.
	life     sync.RWMutex
	mu       sync.Mutex
	closed   bool // the device is closed: imports are gone with it
	imports  []*vkImport
	pinLimit int64
	pinned   int64 // bytes imported now
	// importing counts the imports under way in the background (lookup).
	importing sync.WaitGroup

	nImports, nRefused, nStaged, nDirect atomic.Int64
	nGathered                            atomic.Int64 // raw pages a GET copied on the GPU
	// slotBytes is the host memory the slots hold now (hostBuf; the
	// sweeper in idle.go frees idle slots').
	slotBytes atomic.Int64
	prof      vkProf
	// wait bounds a dispatch's wait: waitTimeout, but minutes on a CPU
	// device, where lavapipe compiles a kernel at its first dispatch
	// (naga's compress module: minutes, see backends/vulkan/README.md).
	wait time.Duration
}

// vkImport is one imported host mapping. Batches hold it while the
// device may read it; unpin waits for them.
type vkImport struct {
	base, size uintptr
	mem        []byte         // the mapping, until imported
	once       sync.Once      // the driver import (importNow)
	started    bool           // importNow begun (lookup), under vkrt.mu
	tried      bool           // importNow over (imported or refused), under vkrt.mu
	buf        *vk.Buffer     // nil until imported, or refused; under vkrt.mu
	alias      unsafe.Pointer // a writable second mapping of the same pages, imported instead (importNow)
	users      int            // batches using it, under vkrt.mu
	gone       bool           // unpinned: no new users
	idle       *sync.Cond
}

// openVulkan opens the Vulkan runtime, or says why it cannot run here.
// For auto it first checks that host import works, before building the
// kernels (seconds on lavapipe).
func openVulkan(o backends.Options, allowCPU, auto bool) (*vkrt, error) {
	d, err := vk.Open(vk.Options{Device: -1})
	if err != nil {
		return nil, backends.Unavailable("%v", err)
	}
	info := d.Info()
	if info.CPU && !allowCPU {
		d.Close()
		return nil, backends.Unavailable("vulkan: only a CPU device (%s); set S4D_WEBGPU_ALLOW_CPU=1 to use it", info.Name)
	}
	if !info.HostImport {
		// The engine's own result buffers are imported host memory too.
		d.Close()
		return nil, backends.Unavailable("vulkan: %s has no VK_EXT_external_memory_host", info.Name)
	}
	r := &vkrt{d: d, info: info, noImport: os.Getenv(envNoImport) == "1", devIn: devInFor(info), pinLimit: o.GPUPinLimit, wait: waitTimeout}
	if info.CPU {
		r.wait = 30 * time.Minute
	}
	if auto {
		if err := r.importWorks(); err != nil {
			d.Close()
			return nil, backends.Unavailable("vulkan: host import not used here: %v", err)
		}
	}
	if r.pinLimit <= 0 {
		var si unix.Sysinfo_t
		if unix.Sysinfo(&si) == nil {
			r.pinLimit = int64(si.Totalram) * int64(si.Unit) / 4
		}
	}
	// The compress kernel with subgroup scans where the device builds it
	// (it checks the subgroups' shape itself and falls back per workgroup).
	set, err := spirv.Selected()
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("vulkan: %w", err)
	}
	r.spv = set.Name
	mods := [][]byte{set.CompressSubgroups, set.Compress}
	if o.WebGPUNoSubgroups { // --webgpu-no-subgroups holds for both runtimes
		mods = mods[1:]
	}
	for _, m := range mods {
		r.compress, err = d.NewKernel(m, set.CompressEntry, vk.Storage, vk.Storage, vk.Storage, vk.Uniform, vk.Storage)
		if err == nil {
			r.sg = len(m) == len(set.CompressSubgroups)
			break
		}
	}
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("vulkan: %w", err)
	}
	if r.decomp, err = d.NewKernel(set.Decompress, set.DecompressEntry, vk.Storage, vk.Storage, vk.Storage, vk.Storage, vk.Uniform); err != nil {
		r.compress.Release()
		d.Close()
		return nil, fmt.Errorf("vulkan: %w", err)
	}
	r.setupGather(set)
	return r, nil
}

// importWorks tries one small import: auto takes this runtime only where
// it does (and not on a CPU device, where imported memory saves nothing).
func (r *vkrt) importWorks() error {
	if r.noImport {
		return fmt.Errorf("imports refused (%s=1)", envNoImport)
	}
	if r.info.CPU {
		return errors.New("a CPU device (host memory is its memory: nothing to gain)")
	}
	m, err := unix.Mmap(-1, 0, 64<<10, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return err
	}
	defer unix.Munmap(m)
	b, err := r.d.Import(m)
	if err != nil {
		return err
	}
	b.Release()
	return nil
}

// close releases every import (the mappings' unpins, which may come
// later, then only forget them) and the device.
func (r *vkrt) close() {
	// Closed first, so that no lookup starts an import once Wait runs;
	// an import under way then ends early (importNow checks).
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.importing.Wait()
	r.life.Lock()
	defer r.life.Unlock()
	r.mu.Lock()
	r.closed = true
	for _, im := range r.imports {
		if im.buf == nil {
			continue // never imported
		}
		im.buf.Release()
		if im.alias != nil {
			unix.MunmapPtr(im.alias, im.size)
		}
	}
	r.imports = nil
	r.mu.Unlock()
	if r.compress != nil {
		r.compress.Release()
	}
	for _, k := range []*vk.Kernel{r.decomp, r.gather} {
		if k != nil {
			k.Release()
		}
	}
	r.d.Close()
}

// errPinLimit refuses an import past --gpu-pin-limit.
var errPinLimit = errors.New("vulkan: --gpu-pin-limit reached")

// pin registers mem (a client's memfd mapping, or a slab) for import,
// counted against --gpu-pin-limit at once. The driver import itself starts
// when a batch first uses it: a compress round reading pages from it
// (lookup), the router's first question about a batch from it (warming),
// a GET into it or from raw pages in it (vulkan_gather.go); that batch is
// served without it meanwhile. A mapping no batch uses is never imported:
// on an H200 importing pinned about 7 GB/s (1 GiB in 125-170 ms), and when
// done at pin time a first bench call imported 52 slabs besides the
// client's two mappings (2026-12-03-vulkan-limits.md).
func (r *vkrt) pin(mem []byte) (func(), error) {
	if len(mem) == 0 {
		return nil, errors.New("vulkan: nothing to import")
	}
	fail := func(err error) (func(), error) {
		r.nRefused.Add(1)
		return nil, err
	}
	if r.noImport {
		return fail(fmt.Errorf("%w: %s=1", vk.ErrImportRefused, envNoImport))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return fail(errClosed)
	}
	// The slots' own buffers are imported memory too (issue 41: all of it
	// counts against the limit); they are bounded by their count and
	// rounds, so it is the mappings offered on top that are refused.
	if held := r.pinned + r.slotBytes.Load(); held+int64(len(mem)) > r.pinLimit {
		return fail(fmt.Errorf("%w: %d bytes imported (%d of them the slots'), %d more asked, limit %d", errPinLimit, held, r.slotBytes.Load(), len(mem), r.pinLimit))
	}
	r.pinned += int64(len(mem))
	im := &vkImport{base: uintptr(unsafe.Pointer(&mem[0])), size: uintptr(len(mem)), mem: mem}
	im.idle = sync.NewCond(&r.mu)
	r.imports = append(r.imports, im)
	var once sync.Once
	return func() { once.Do(func() { r.unpin(im) }) }, nil
}

// importNow imports im with the driver, once; the caller holds it (a
// user), so neither unpin nor close runs meanwhile. NVIDIA refuses
// read-only mappings, which is how the daemon maps a PUT's memfd: where
// the file allows writing, a second, writable mapping of the same shared
// pages is made and imported instead (writableAlias). The daemon never
// writes through it; the kernels bind the pages read-only. A refusal
// leaves the mapping staged from then on (counted).
func (r *vkrt) importNow(im *vkImport) bool {
	im.once.Do(func() {
		r.life.RLock()
		defer r.life.RUnlock()
		t0 := time.Now()
		defer func() { r.prof.importN.Add(1); r.prof.importNs.Add(int64(time.Since(t0))) }()
		if r.isClosed() {
			return
		}
		mem := im.mem
		// A read-only mapping is never offered to the driver: on NVIDIA one
		// refused import made every later one of the device fail (H200,
		// TestImportKinds), the engine's own buffers included.
		var (
			buf   *vk.Buffer
			err   error
			alias unsafe.Pointer
		)
		if writable(mem) {
			buf, err = r.d.Import(mem)
		} else if alias, err = writableAlias(mem); err == nil {
			if buf, err = r.d.Import(unsafe.Slice((*byte)(alias), len(mem))); err != nil {
				unix.MunmapPtr(alias, uintptr(len(mem)))
				alias = nil
			}
		}
		if err != nil {
			r.nRefused.Add(1)
			return
		}
		r.nImports.Add(1)
		r.mu.Lock()
		im.buf, im.alias = buf, alias
		r.mu.Unlock()
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	return im.buf != nil
}

func (r *vkrt) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// unpin releases an import once no batch uses it.
func (r *vkrt) unpin(im *vkImport) {
	r.mu.Lock()
	im.gone = true
	for im.users > 0 {
		im.idle.Wait()
	}
	for i, x := range r.imports {
		if x == im {
			r.imports = append(r.imports[:i], r.imports[i+1:]...)
			break
		}
	}
	r.pinned -= int64(im.size)
	closed := r.closed
	r.mu.Unlock()
	if closed || im.buf == nil {
		return // released with the device, or never imported
	}
	im.buf.Release()
	if im.alias != nil {
		unix.MunmapPtr(im.alias, im.size)
	}
}

// lookup returns the import holding all of mem and mem's offset in it,
// held for a batch (done lets it go), or nil: the pages are then staged.
// The first lookup of a mapping starts its import in the background
// (importNow) and stages, as do the lookups until the import is in: on an
// H200 importing 1 GiB took 110-240 ms, and rounds that waited for it made
// a client's first PUT from a fresh mapping run at 2.3-2.9 GB/s against
// 8-11 for the cpu engine (2026-12-03-vulkan-raw-skip.md). A mapping the
// driver refused stays staged.
func (r *vkrt) lookup(mem []byte) (im *vkImport, off int64) {
	if len(mem) == 0 {
		return nil, 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	x := r.holding(mem)
	if x == nil {
		return nil, 0
	}
	if x.buf != nil {
		x.users++
		return x, int64(uintptr(unsafe.Pointer(&mem[0])) - x.base)
	}
	r.startImport(x)
	return nil, 0
}

// holding returns the pinned mapping holding all of mem (not empty), or
// nil. Under r.mu.
func (r *vkrt) holding(mem []byte) *vkImport {
	p := uintptr(unsafe.Pointer(&mem[0]))
	for _, x := range r.imports {
		if !x.gone && p >= x.base && p+uintptr(len(mem)) <= x.base+x.size {
			return x
		}
	}
	return nil
}

// startImport starts x's import in the background unless it has begun.
// Under r.mu.
func (r *vkrt) startImport(x *vkImport) {
	if x.started || r.closed {
		return
	}
	// The import holds the mapping as a batch would: an unpin waits
	// for it.
	x.started = true
	x.users++
	r.importing.Add(1)
	go func() {
		defer r.importing.Done()
		r.importNow(x)
		r.mu.Lock()
		x.tried = true
		r.mu.Unlock()
		r.done(x)
	}()
}

// warming reports whether mem lies in a pinned mapping whose import is
// under way, starting it if it has not begun (backends.Warming): a batch
// from it would be staged meanwhile. Memory in no pinned mapping, or in
// one the driver refused, is staged for good, and is not warming.
func (r *vkrt) warming(mem []byte) bool {
	if len(mem) == 0 {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	x := r.holding(mem)
	if x == nil || x.buf != nil || x.tried || r.closed {
		return false
	}
	r.startImport(x)
	return true
}

func (r *vkrt) done(im *vkImport) {
	if im == nil {
		return
	}
	r.mu.Lock()
	if im.users--; im.users == 0 {
		im.idle.Broadcast()
	}
	r.mu.Unlock()
}

// writable reports whether the mapping holding mem allows writing, from
// /proc/self/maps (read once per import).
func writable(mem []byte) bool {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return false
	}
	defer f.Close()
	p := uint64(uintptr(unsafe.Pointer(&mem[0])))
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 2 {
			continue
		}
		lo, hi, ok := strings.Cut(fs[0], "-")
		a, e1 := strconv.ParseUint(lo, 16, 64)
		b, e2 := strconv.ParseUint(hi, 16, 64)
		if ok && e1 == nil && e2 == nil && p >= a && p < b {
			return len(fs[1]) > 1 && fs[1][1] == 'w'
		}
	}
	return false
}

// writableAlias maps the shared pages of mem a second time, writable
// (mremap with an old size of 0 copies a shared mapping), populated for
// writing as a mapping the driver accepts is. It fails where the file
// was not opened for writing.
func writableAlias(mem []byte) (unsafe.Pointer, error) {
	n := uintptr(len(mem))
	a, err := unix.MremapPtr(unsafe.Pointer(&mem[0]), 0, nil, n, unix.MREMAP_MAYMOVE)
	if err != nil {
		return nil, err
	}
	am := unsafe.Slice((*byte)(a), n)
	if err := unix.Mprotect(am, unix.PROT_READ|unix.PROT_WRITE); err != nil {
		unix.MunmapPtr(a, n)
		return nil, err
	}
	unix.Madvise(am, unix.MADV_POPULATE_WRITE) // before 5.14: faulted in by the import
	return a, nil
}

// describe says which runtime and import path the device uses, with the
// counts so far (s4d ctl stats and the log show it); idle says what
// becomes of idle slots' buffers.
func (r *vkrt) describe(idle string) string {
	imp := "client memory imported (VK_EXT_external_memory_host)"
	if r.noImport {
		imp = "client imports refused (" + envNoImport + "=1): every batch staged"
	}
	scan := "workgroup-memory scans"
	if r.sg {
		scan = "subgroup scans"
	}
	if r.info.Robust {
		scan += ", robust buffer access"
	}
	if r.devIn {
		scan += ", GET's blocks copied to device memory"
	}
	r.mu.Lock()
	pinned := r.pinned
	r.mu.Unlock()
	d := fmt.Sprintf("%s via Vulkan (%s), runtime vulkan: %s SPIR-V, %s; %s; imports %d (%d MiB now, limit %d MiB), refused %d; batches from imported memory %d, staged %d; slot buffers %d MiB (%s)",
		r.info.Name, r.info.Driver, r.spv, scan, imp, r.nImports.Load(), pinned>>20, r.pinLimit>>20, r.nRefused.Load(), r.nDirect.Load(), r.nStaged.Load(),
		r.slotBytes.Load()>>20, idle)
	if r.gather != nil {
		d += fmt.Sprintf("; GET into imported client memory gathered on the GPU (%d%% of raw pages; copied there %d)", r.gatherShare, r.nGathered.Load())
	} else {
		d += "; GETs not gathered: " + r.gatherNote
	}
	if r.note != "" {
		d += "; " + r.note
	}
	if profShown {
		d += "; " + r.prof.describe(r.d)
	}
	return d
}

// hostBuf is anonymous memory the engine imported for itself: a slot's
// results, parameters and staging. The kernels write into it and the host
// reads it in place.
type hostBuf struct {
	mem  []byte
	buf  *vk.Buffer
	held *atomic.Int64 // the runtime's slotBytes
}

func (r *vkrt) newHostBuf(size int) (*hostBuf, error) {
	size = (size + 4095) &^ 4095
	m, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("vulkan: %d bytes of host memory: %w", size, err)
	}
	b, err := r.d.Import(m)
	if err != nil {
		unix.Munmap(m)
		return nil, fmt.Errorf("vulkan: importing the engine's own %d bytes: %w", size, err)
	}
	r.slotBytes.Add(int64(size))
	return &hostBuf{mem: m, buf: b, held: &r.slotBytes}, nil
}

func (h *hostBuf) free() {
	if h != nil {
		h.held.Add(-int64(len(h.mem)))
		h.buf.Release()
		unix.Munmap(h.mem)
	}
}

// setupVulkan makes the slots of the Vulkan runtime: the compress kernel's
// constants are the ones the SPIR-V was compiled with.
func (b *Backend) setupVulkan() error {
	b.kp = wgsl.Params{PageWords: PageSize / 4, Subgroups: b.vk.sg, Depth: wgslsrc.EngineDepth}
	all := numSlots + cap(b.extra)
	if all > vkSlotSets || cap(b.dslots) > vkSlotSets {
		return fmt.Errorf("vulkan: %d slots, %d decompression slots, at most %d of each", all, cap(b.dslots), vkSlotSets)
	}
	for i := range all {
		s := &slot{extra: i >= numSlots, vs: &vkSlot{set: i}}
		b.all = append(b.all, s)
		if s.extra {
			b.extra <- s
		} else {
			b.slots <- s
		}
	}
	for i := range cap(b.dslots) {
		ds := &dslot{vs: &vkDSlot{set: i}}
		b.dall = append(b.dall, ds)
		b.dslots <- ds
	}
	return nil
}
