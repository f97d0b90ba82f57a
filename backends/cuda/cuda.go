// Package cuda is the NVIDIA backend: our PTX kernels classify pages and
// pack results, nvCOMP's low-level batched API compresses them (raw LZ4
// blocks, standard zstd frames). The driver (libcuda.so.1) and nvCOMP
// (libnvcomp.so.N) are loaded at run time; without them the backend
// reports itself unavailable.
package cuda

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/cuda/cu"
	"github.com/s4d-project/s4d/backends/internal/dl"
	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/ptx"
)

func init() {
	backends.Register("cuda", 20, OpenAll)
}

const (
	// slotBytes is how much of a batch one in-flight slot carries. On the
	// H100 with 64 MiB batches of a live process, 32 MiB slots gave 12.5
	// GB/s (LZ4), 16 MiB 10.7, 8 MiB 8.0, 4 MiB 5.3: nvCOMP runs better on
	// more chunks per call than the finer overlap gains.
	slotBytes = 16 << 20
	// defaultMemLimit caps device memory when no --gpu-mem-limit is given:
	// nvCOMP's zstd scratch alone takes 0.5-1.2 GiB.
	defaultMemLimit = 2 << 30
	minSlotPages    = 16
	minDriver       = 12000 // CUDA 12.0, the oldest driver nvCOMP 5 runs on
)

// nvCOMP option structs, zero meaning the documented defaults (byte data,
// no bitshuffle, automatic decompression backend). layout_test.go checks
// them against the C declarations.
type (
	lz4CompressOpts struct {
		DataType   int32
		Bitshuffle int32
		_          [56]byte
	}
	lz4DecompressOpts struct {
		Backend      int32
		SortBeforeHW int32
		DataType     int32
		Bitshuffle   int32
		_            [48]byte
	}
	zstdCompressOpts   struct{ _ [64]byte }
	zstdDecompressOpts struct {
		Backend int32
		_       [60]byte
	}
)

func asOpts[T any](v T) cu.Opts { return *(*cu.Opts)(unsafe.Pointer(&v)) }

// Backend runs batches on one GPU (devices.go opens one per GPU). All CUDA calls happen on one goroutine
// locked to its OS thread, where the primary context is current; callers
// hand it work through a channel, which also serialises batches.
type Backend struct {
	opts     backends.Options
	describe string
	ordinal  int    // the device's CUDA ordinal
	name     string // "cuda" alone, "cuda<ordinal>" among several
	node     int    // NUMA node of its PCIe link, -1 unknown
	bdf      string // its PCI address
	grp      *group // the memory registered with the GPUs, shared by all devices
	reqs     chan func()
	quit     chan struct{}
	done     chan struct{}

	// Owned by the worker goroutine.
	cu, nvl                                              *dl.Lib
	drv                                                  cu.Driver
	nv                                                   cu.Nvcomp
	lz4, zstd                                            cu.Codec
	dev                                                  cu.Device
	ctx                                                  cu.Context
	mod                                                  cu.Module
	fClassify, fScan, fBuild, fFinalize, fFixup, fGather cu.Func
	fLZ4, fCRC, fUnpack, fPlace, fFetch                  cu.Func
	limit                                                int64
	slotBytes                                            int     // bytes of pages per slot
	numSlots                                             int     // pieces in flight (numSlots, or S4D_CUDA_SLOTS)
	cfg                                                  *config // buffers for the current page size
	ownLZ4                                               bool    // LZ4 by our kernel (s4d_lz4), not nvCOMP
	serialUp                                             bool    // pieces' uploads one after another (Tuning.CUDASharedUploads: not)

	cfgMu sync.RWMutex // held for reading by batches using cfg
	// Time spent staging, submitting, waiting for the GPU and unpacking
	// (index 3 unused), summed over batches, for tuning; read by tests.
	trace  [5]atomic.Int64
	stages stageClock // the breakdown by stage (Stages)
}

// Open loads the driver and nvCOMP, picks the first GPU of o.GPUs (GPU 0
// by default) and prepares buffers for o.PageSize. Missing pieces give a
// backends.Unavailable error. OpenAll opens every GPU.
func Open(o backends.Options) (*Backend, error) {
	ord := 0
	if len(o.GPUs) > 0 {
		ord = o.GPUs[0]
	}
	return openDevice(o, ord, "cuda", newGroup(o, false))
}

func openDevice(o backends.Options, ordinal int, name string, g *group) (*Backend, error) {
	if o.PageSize == 0 {
		o.PageSize = 4096
	}
	b := &Backend{opts: o, reqs: make(chan func()), quit: make(chan struct{}), done: make(chan struct{}),
		ordinal: ordinal, name: name, node: -1, grp: g}
	b.slotBytes, b.numSlots = slotBytes, numSlots
	if t := o.Tuning; t.CUDASlots > 0 {
		b.numSlots = t.CUDASlots
	}
	if t := o.Tuning; t.CUDASlotMiB > 0 {
		b.slotBytes = t.CUDASlotMiB << 20
	}
	b.ownLZ4, b.serialUp = !o.Tuning.CUDANvcompLZ4, !o.Tuning.CUDASharedUploads
	b.limit = o.GPUMemLimit
	if b.limit <= 0 {
		b.limit = defaultMemLimit
	}
	started := make(chan error)
	go b.worker(started)
	if err := <-started; err != nil {
		return nil, err
	}
	return b, nil
}

func (b *Backend) worker(started chan<- error) {
	runtime.LockOSThread() // the context stays current on this thread only
	defer close(b.done)
	b.grp.add(b)
	if err := b.setup(); err != nil {
		b.teardown()
		started <- err
		return
	}
	started <- nil
	for {
		select {
		case fn := <-b.reqs:
			fn()
		case <-b.quit:
			b.teardown()
			return
		}
	}
}

// do runs fn on the worker and waits for it. Once fn is handed over the
// caller waits for it even if ctx ends: fn works on the caller's buffers.
func (b *Backend) do(ctx context.Context, fn func() error) error {
	errc := make(chan error, 1)
	select {
	case b.reqs <- func() { errc <- fn() }:
	case <-b.quit:
		return errors.New("cuda: backend closed")
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-errc
}

func (b *Backend) Name() string     { return b.name }
func (b *Backend) Describe() string { return b.describe }

// Close frees every GPU resource. It is safe to call more than once.
func (b *Backend) Close() error {
	select {
	case <-b.quit:
	default:
		close(b.quit)
	}
	<-b.done
	return nil
}

func (b *Backend) setup() error {
	var err error
	if b.cu, err = dl.Open("libcuda.so.1"); err != nil {
		return backends.Unavailable("no NVIDIA driver: %v", err)
	}
	if err := b.drv.Load(b.cu); err != nil {
		return backends.Unavailable("NVIDIA driver too old: %v", err)
	}
	d := &b.drv
	if err := d.Init(); err != nil {
		return backends.Unavailable("no usable CUDA device: %v", err)
	}
	ver, err := d.DriverVersion()
	if err != nil {
		return backends.Unavailable("%v", err)
	}
	if ver < minDriver {
		return backends.Unavailable("NVIDIA driver supports CUDA %d.%d; need %d.%d or newer",
			ver/1000, ver%1000/10, minDriver/1000, minDriver%1000/10)
	}
	n, err := d.DeviceCount()
	if err != nil || n == 0 {
		return backends.Unavailable("no CUDA device (count %d, %v)", n, err)
	}
	if b.ordinal >= n {
		return backends.Unavailable("no CUDA device %d (%d visible)", b.ordinal, n)
	}
	if b.dev, err = d.Device(b.ordinal); err != nil {
		return backends.Unavailable("%v", err)
	}
	major, _ := d.DeviceAttr(b.dev, 75) // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
	minor, _ := d.DeviceAttr(b.dev, 76)
	name := d.DeviceName(b.dev)
	if major*10+minor < 75 {
		return backends.Unavailable("%s has compute capability %d.%d; need 7.5 or newer", name, major, minor)
	}
	b.node = b.numaNode()
	b.drv.Portable = b.grp.multi
	// Without it only the waits cost more; the backend works either way.
	syncErr := d.BlockingSync(b.dev)
	ctx, err := d.PrimaryCtx(b.dev)
	if err != nil {
		return backends.Unavailable("%v", err)
	}
	b.ctx = ctx
	if err := d.SetCurrent(ctx); err != nil {
		return err
	}
	if err := b.openNvcomp(); err != nil {
		return err
	}
	nmaj, nmin, npatch, err := b.nv.Version()
	if err != nil {
		return err
	}
	if nmaj < 5 {
		return backends.Unavailable("%s is nvCOMP %d.%d; need 5.0 or newer", b.nvl.Path, nmaj, nmin)
	}
	if err := b.loadKernels(); err != nil {
		return err
	}
	if err := b.checkAlignments(); err != nil {
		return err
	}
	if b.cfg, err = b.newConfig(b.opts.PageSize); err != nil {
		return err
	}
	// The breakdown's time origin: each stage's busy time is the union
	// of its intervals on all streams, placed on one clock.
	if b.stages.epoch, err = d.TimingEvent(); err != nil {
		return err
	}
	if err := d.Record(b.stages.epoch, b.cfg.slots[0].s); err != nil {
		return err
	}
	if err := d.Sync(b.cfg.slots[0].s); err != nil {
		return err
	}
	b.describe = fmt.Sprintf("%s (sm_%d%d%s) via nvCOMP %d.%d.%d, CUDA driver %d.%d, %d slots of %d pages, nvCOMP scratch %v",
		name, major, minor, b.where(), nmaj, nmin, npatch, ver/1000, ver%1000/10, b.numSlots, b.cfg.pages, b.cfg.temps)
	if b.ownLZ4 {
		b.describe += ", LZ4 by s4d_lz4 for pages up to 4 KiB"
	}
	if syncErr != nil {
		b.describe += ", spinning waits (" + syncErr.Error() + ")"
	}
	return nil
}

func (b *Backend) teardown() {
	defer b.grp.drop(b)
	if b.ctx == nil {
		b.grp.leave(b)
	} else {
		// Batches in flight finish (or fail at their next worker call)
		// before the buffers they use go.
		b.cfgMu.Lock()
		defer b.cfgMu.Unlock()
		b.drv.EventDestroy(b.stages.epoch)
		keepCtx := b.grp.leave(b)
		b.cfg.free(&b.drv)
		if b.mod != nil {
			b.drv.UnloadModule(b.mod)
		}
		if !keepCtx {
			b.drv.ReleasePrimaryCtx(b.dev)
		}
		b.ctx = nil
	}
	// The libraries stay loaded: nvCOMP's CUDA runtime registers exit
	// handlers that must still find their code.
}

// nvcompCandidates lists where libnvcomp is looked for: an explicit path
// alone, else the usual sonames (LD_LIBRARY_PATH, ldconfig) and the places
// pip installs the nvidia-libnvcomp-cu1x / nvidia-nvcomp-cu1x wheels.
func nvcompCandidates(explicit string) []string {
	if explicit != "" {
		return []string{explicit}
	}
	c := []string{"libnvcomp.so.6", "libnvcomp.so.5"}
	var found []string
	home, _ := os.UserHomeDir()
	for _, root := range []string{"/usr/local/lib/s4d", "/usr/local/lib/python3*/dist-packages",
		"/usr/local/lib/python3*/site-packages", "/usr/lib/python3/dist-packages", "/usr/lib/python3*/site-packages",
		filepath.Join(home, ".local/lib/python3*/site-packages"), "/opt/*/lib/python3*/site-packages",
		"/opt/*/.venv/lib/python3*/site-packages"} {
		for _, sub := range []string{"libnvcomp.so.*", "nvidia/libnvcomp/lib64/libnvcomp.so.*", "nvidia/nvcomp/libnvcomp.so.*"} {
			m, _ := filepath.Glob(filepath.Join(root, sub))
			found = append(found, m...)
		}
	}
	// Newest soname first (libnvcomp.so.6 before .so.5).
	sort.SliceStable(found, func(i, j int) bool { return filepath.Base(found[i]) > filepath.Base(found[j]) })
	return append(c, found...)
}

func (b *Backend) openNvcomp() error {
	var err error
	if b.nvl, err = dl.Open(nvcompCandidates(b.opts.NvcompLib)...); err != nil {
		return backends.Unavailable("nvCOMP not found (pip install nvidia-libnvcomp-cu13, or --nvcomp-lib/S4D_NVCOMP_LIB): %v", err)
	}
	if err := b.nv.Load(b.nvl); err != nil {
		return backends.Unavailable("%v", err)
	}
	for _, c := range []struct {
		codec *cu.Codec
		name  string
	}{{&b.lz4, "LZ4"}, {&b.zstd, "Zstd"}} {
		if err := c.codec.Load(b.nvl, c.name); err != nil {
			return backends.Unavailable("nvCOMP version not supported: %v", err)
		}
	}
	return nil
}

func (b *Backend) loadKernels() error {
	src := ptx.Kernels
	if p := b.opts.Tuning.CUDAPTX; p != "" {
		// A freshly generated PTX, to test kernels before committing them.
		var err error
		if src, err = os.ReadFile(p); err != nil {
			return err
		}
	}
	if len(src) == 0 {
		return errors.New("no PTX embedded: run make ptx on a machine with nvcc")
	}
	var err error
	if b.mod, err = b.drv.LoadModule(src); err != nil {
		return err
	}
	for _, f := range []struct {
		p    *cu.Func
		name string
	}{{&b.fClassify, "s4d_classify"}, {&b.fScan, "s4d_scan"}, {&b.fBuild, "s4d_build"},
		{&b.fFinalize, "s4d_finalize"}, {&b.fFixup, "s4d_fixup"}, {&b.fGather, "s4d_gather"},
		{&b.fLZ4, "s4d_lz4"}, {&b.fCRC, "s4d_crc"}, {&b.fUnpack, "s4d_unpack"},
		{&b.fPlace, "s4d_place"}, {&b.fFetch, "s4d_fetch"}} {
		if *f.p, err = b.drv.Function(b.mod, f.name); err != nil {
			return err
		}
	}
	return nil
}

var (
	lz4C  = asOpts(lz4CompressOpts{})
	lz4D  = asOpts(lz4DecompressOpts{})
	zstdC = asOpts(zstdCompressOpts{})
	zstdD = asOpts(zstdDecompressOpts{})
)

// bufAlign is the alignment every buffer and chunk we hand nvCOMP keeps:
// input pages sit at multiples of the page size, outputs and packed
// compressed pages at multiples of 8, device allocations at 256.
const bufAlign = 8

func (b *Backend) checkAlignments() error {
	for _, c := range []struct {
		codec    *cu.Codec
		compress bool
		o        cu.Opts
	}{{&b.lz4, true, lz4C}, {&b.lz4, false, lz4D}, {&b.zstd, true, zstdC}, {&b.zstd, false, zstdD}} {
		a, err := c.codec.Alignments(&b.nv, c.compress, c.o)
		if err != nil {
			return err
		}
		if a.Input > bufAlign || a.Output > bufAlign || a.Temp > 256 {
			return fmt.Errorf("nvCOMP %s needs alignment %+v; this backend keeps %d", c.codec.Name, a, bufAlign)
		}
	}
	return nil
}

func (b *Backend) codec(c pagefmt.Codec) (*cu.Codec, cu.Opts, cu.Opts) {
	if c == pagefmt.CodecZstd {
		return &b.zstd, zstdC, zstdD
	}
	return &b.lz4, lz4C, lz4D
}
