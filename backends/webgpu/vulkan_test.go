package webgpu

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/backendtest"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/vulkan/vk"
	"github.com/s4d-project/s4d/pagefmt"
)

// openVK opens the engine on the Vulkan runtime, or skips saying why
// (S4D_REQUIRE_VULKAN=1 makes that a failure).
func openVK(t testing.TB) *Backend {
	t.Helper()
	b, err := New(backends.Options{WGSLRuntime: RuntimeVulkan}, true)
	if err != nil {
		if backends.IsUnavailable(err) && os.Getenv("S4D_REQUIRE_VULKAN") != "1" {
			t.Skipf("no Vulkan runtime here: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	t.Logf("%s", b.Describe())
	return b
}

// kernelsHere skips tests that dispatch the kernels on a CPU device
// unless S4D_VULKAN_KERNELS=1: lavapipe (Mesa 25, LLVM 15) compiles a
// compress module at its first dispatch, Tint's in 25-40 s, naga's for
// minutes with ~7 GB (LLVM's coroutine split; backends/vulkan/README.md),
// cached on disk after.
// It looks before the kernels are built (seconds on lavapipe).
func kernelsHere(t testing.TB) {
	t.Helper()
	if os.Getenv("S4D_VULKAN_KERNELS") == "1" {
		return
	}
	if d, err := vk.Open(vk.Options{Device: -1}); err == nil {
		cpu := d.Info().CPU
		d.Close()
		if cpu {
			t.Skip("lavapipe compiles the compress kernel for 25 s (Tint) to minutes (naga) at its first dispatch: S4D_VULKAN_KERNELS=1 runs it")
		}
	}
}

// memfdPages returns n bytes of a sealed memfd mapped shared, as the
// daemon maps a client's buffer (read-only for a PUT unless write).
func memfdPages(t testing.TB, src []byte, write bool) []byte {
	t.Helper()
	fd, err := unix.MemfdCreate("s4d-vk-test", unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := unix.Pwrite(fd, src, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		t.Fatal(err)
	}
	prot := unix.PROT_READ
	if write {
		prot |= unix.PROT_WRITE
	}
	m, err := unix.Mmap(fd, 0, len(src), prot, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(m) })
	return m
}

// Imports are counted against the pin limit, found by address for a
// batch, refused past the limit, and released only once no batch holds
// them. A read-only mapping (how the daemon maps a PUT) is imported too:
// NVIDIA refuses it as it is, so it is made writable first.
// importDevice opens a Vulkan device for the runtime without its kernels
// (building them takes lavapipe seconds; importing needs none), or skips
// where there is none or it cannot import host memory. The caller closes
// it.
func importDevice(t *testing.T) *vk.Device {
	t.Helper()
	d, err := vk.Open(vk.Options{Device: -1})
	if err != nil {
		if os.Getenv("S4D_REQUIRE_VULKAN") == "1" {
			t.Fatal(err)
		}
		t.Skipf("no Vulkan here: %v", err)
	}
	if !d.Info().HostImport {
		d.Close()
		t.Skipf("%s has no VK_EXT_external_memory_host", d.Info().Name)
	}
	return d
}

func TestVulkanPin(t *testing.T) {
	d := importDevice(t)
	defer d.Close()
	rt := &vkrt{d: d, info: d.Info(), pinLimit: 1 << 30}
	src := corpus.Pages(corpus.Text, 64, PageSize, 3)
	ro := memfdPages(t, src, false)
	unpin, err := rt.pin(ro)
	if err != nil {
		t.Fatalf("read-only memfd mapping: %v", err)
	}
	// The first lookup starts the import and stages; once it is in, the
	// pages are read in place.
	if im, _ := rt.lookup(ro[5*PageSize : 9*PageSize]); im != nil {
		t.Fatal("the first lookup waited for the import")
	}
	rt.importing.Wait()
	im, off := rt.lookup(ro[5*PageSize : 9*PageSize])
	if im == nil || off != 5*PageSize {
		t.Fatalf("lookup inside the import: %v at %d", im, off)
	}
	t.Logf("read-only mapping imported through a writable alias: %v", im.alias != nil)
	if x, _ := rt.lookup(src[:PageSize]); x != nil {
		t.Fatal("Go memory found in an import")
	}
	// Unpinning waits for the batch holding it.
	released := make(chan struct{})
	go func() { unpin(); close(released) }()
	select {
	case <-released:
		t.Fatal("unpin did not wait for the batch using the import")
	case <-time.After(100 * time.Millisecond):
	}
	rt.done(im)
	<-released
	if rt.pinned != 0 || len(rt.imports) != 0 {
		t.Fatalf("after unpin: %d bytes pinned, %d imports", rt.pinned, len(rt.imports))
	}
	rt.pinLimit = int64(len(ro)) - PageSize
	refused := rt.nRefused.Load()
	if _, err := rt.pin(ro); !errors.Is(err, errPinLimit) {
		t.Fatalf("past the pin limit: %v", err)
	}
	if rt.nRefused.Load() != refused+1 || rt.pinned != 0 {
		t.Fatalf("refusal not counted (%d) or bytes left pinned (%d)", rt.nRefused.Load()-refused, rt.pinned)
	}
	// The slots' own imported buffers count against the limit too: a
	// mapping that fits alone is refused beside them.
	rt.pinLimit = int64(len(ro))
	hb, err := rt.newHostBuf(PageSize)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.pin(ro); !errors.Is(err, errPinLimit) {
		t.Fatalf("past the pin limit with the slots' buffers: %v", err)
	}
	hb.free()
	if rt.slotBytes.Load() != 0 {
		t.Fatalf("%d slot bytes counted after the buffer's free", rt.slotBytes.Load())
	}
	if d := rt.describe(""); !strings.Contains(d, "runtime vulkan") || !strings.Contains(d, "refused 2") || !strings.Contains(d, "imports 1 ") {
		t.Fatalf("describe: %s", d)
	}
	// A mapping that outlives the engine (the daemon closes its engines
	// before the connections let go): its unpin comes after the device
	// is gone and must only forget it.
	rt.pinLimit = 1 << 30
	late, err := rt.pin(ro)
	if err != nil {
		t.Fatal(err)
	}
	rt.close()
	late()
	if _, err := rt.pin(ro); !errors.Is(err, errClosed) || rt.pinned != 0 {
		t.Fatalf("pin after close: %v, %d bytes pinned", err, rt.pinned)
	}
}

// Warming (the router's cue to send a batch elsewhere) holds only while a
// pinned mapping's import is under way: the first ask starts it, and it
// ends imported or refused; memory in no pinned mapping is not warming.
func TestVulkanWarming(t *testing.T) {
	d := importDevice(t)
	rt := &vkrt{d: d, info: d.Info(), pinLimit: 1 << 30}
	defer rt.close()
	src := corpus.Pages(corpus.Text, 64, PageSize, 3)
	mem := memfdPages(t, src, true)
	if _, err := rt.pin(mem); err != nil {
		t.Fatal(err)
	}
	if !rt.warming(mem[PageSize : 3*PageSize]) {
		t.Fatal("a fresh pinned mapping is not warming")
	}
	rt.importing.Wait()
	if rt.warming(mem[PageSize : 3*PageSize]) {
		t.Fatal("still warming once imported")
	}
	if im, off := rt.lookup(mem[PageSize : 3*PageSize]); im == nil || off != PageSize {
		t.Fatalf("not read in place once imported: %v at %d", im, off)
	} else {
		rt.done(im)
	}
	if rt.warming(src[:PageSize]) {
		t.Fatal("memory in no pinned mapping is warming")
	}
	// A mapping the driver is never offered (read-only, of a file opened
	// read-only: no writable alias) is refused, and staged for good.
	f := filepath.Join(t.TempDir(), "pages")
	if err := os.WriteFile(f, src, 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(f, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	ro, err := unix.Mmap(fd, 0, len(src), unix.PROT_READ, unix.MAP_SHARED)
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(ro)
	if _, err := rt.pin(ro); err != nil {
		t.Fatal(err)
	}
	rt.warming(ro)
	rt.importing.Wait()
	if rt.warming(ro) || rt.nRefused.Load() != 1 {
		t.Fatalf("a refused mapping: warming %v, refused %d", rt.warming(ro), rt.nRefused.Load())
	}
}

// With host import refused (forced by S4D_VULKAN_NO_IMPORT=1, as on a
// driver without it), auto runs the kernels through webgpu.h and says why.
func TestAutoFallsBackWithoutImport(t *testing.T) {
	open(t) // skips without the webgpu.h library
	t.Setenv(envNoImport, "1")
	b, err := New(backends.FromEnv(backends.Options{WGSLRuntime: RuntimeAuto}), true)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	d := b.Describe()
	t.Log(d)
	if b.vk != nil || !strings.Contains(d, "runtime webgpu.h") {
		t.Fatalf("auto with imports refused: %s", d)
	}
}

// Auto takes the Vulkan runtime on a GPU that imports host memory, and
// webgpu.h elsewhere (a CPU device such as lavapipe, or imports refused),
// saying why.
func TestAutoPrefersVulkan(t *testing.T) {
	b, err := New(backends.FromEnv(backends.Options{WGSLRuntime: RuntimeAuto}), true)
	if err != nil {
		t.Skipf("neither runtime here: %v", err)
	}
	defer b.Close()
	r, verr := openVulkan(backends.FromEnv(backends.Options{}), true, true)
	if verr == nil {
		r.close()
		if b.vk == nil || !strings.Contains(b.Describe(), "taken by auto") {
			t.Fatalf("auto did not take the Vulkan runtime on a GPU that imports host memory: %s", b.Describe())
		}
		return
	}
	if b.vk != nil || !strings.Contains(b.Describe(), "vulkan runtime not taken: ") {
		t.Fatalf("auto where the Vulkan runtime is not taken (%v): %s", verr, b.Describe())
	}
}

// The shared suite on the Vulkan runtime: batches from Go memory go
// through the slots' staging.
func TestVulkanConformance(t *testing.T) {
	kernelsHere(t)
	b := openVK(t)
	backendtest.Run(t, pinBackend{b}, backendtest.Config{PageSizes: []int{4096, 8192}, PartPages: 2*minRound + 300})
	if b.vk.nStaged.Load() == 0 {
		t.Fatal("no batch was staged")
	}
}

// The shared suite with GET's blocks copied to device memory before the
// decompress kernel parses them, as on a discrete GPU (forced here with
// S4D_VULKAN_DEVIN=1: lavapipe is a CPU device).
func TestVulkanDevIn(t *testing.T) {
	kernelsHere(t)
	t.Setenv(envDevIn, "1")
	b := openVK(t)
	backendtest.Run(t, pinBackend{b}, backendtest.Config{PageSizes: []int{4096}})
	used := false
	for _, ds := range b.dall {
		used = used || ds.vs.din != nil
	}
	if !used {
		t.Fatal("no decompression slot has a device copy of its input")
	}
}

// Pages in an imported mapping are read in place (counted), pages
// elsewhere staged, and both come back from the CPU decoder and from the
// engine's own decompress kernel, several callers at once.
func TestVulkanImportedRoundTrip(t *testing.T) {
	kernelsHere(t)
	b := openVK(t)
	var src []byte
	for _, k := range corpus.Kinds {
		src = append(src, corpus.Pages(k, 300, PageSize, 7)...)
	}
	mem := memfdPages(t, src, false)
	unpin, err := pinBackend{b}.Pin(mem)
	if err != nil {
		t.Fatal(err)
	}
	defer unpin()
	// A fresh mapping's first rounds are staged while it imports.
	staged0 := b.vk.nStaged.Load()
	checkRoundTrip(t, b, mem[:PageSize*minRound], PageSize*3/4)
	if b.vk.nStaged.Load() == staged0 || b.vk.nDirect.Load() != 0 {
		t.Fatalf("the first round of a fresh mapping: staged %d, direct %d", b.vk.nStaged.Load()-staged0, b.vk.nDirect.Load())
	}
	b.vk.importing.Wait()
	direct, staged := b.vk.nDirect.Load(), b.vk.nStaged.Load()
	var wg sync.WaitGroup
	for g, pages := range [][]byte{mem, mem[PageSize*100:], src, mem[:PageSize*(minRound+7)]} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := checkRoundTrip(t, b, pages, PageSize*3/4)
			in := &pagefmt.Batch{PageSize: PageSize, Pages: pages}
			n := in.Len()
			d := &pagefmt.Decompression{PageSize: PageSize, Dst: make([]byte, len(pages)), Src: make([]pagefmt.Stored, n)}
			for i := range n {
				d.Src[i] = pagefmt.Stored{Class: out.Class[i], Fill: out.Fill[i], Data: out.Bytes(i, in)}
			}
			if err := b.Decompress(context.Background(), d); err != nil {
				t.Errorf("caller %d: decompress: %v", g, err)
				return
			}
			for i := range n {
				if d.Failed[i] || string(d.Dst[i*PageSize:(i+1)*PageSize]) != string(in.Page(i)) {
					t.Errorf("caller %d: page %d differs after the engine's decompress (failed %v)", g, i, d.Failed[i])
					return
				}
			}
		}()
	}
	wg.Wait()
	if b.vk.nDirect.Load() == direct || b.vk.nStaged.Load() == staged {
		t.Fatalf("batches from imported memory %d, staged %d: both paths should have run", b.vk.nDirect.Load()-direct, b.vk.nStaged.Load()-staged)
	}
}

// A refused import (forced) leaves the engine working: that mapping's
// batches are staged, and the refusal is counted.
func TestVulkanImportRefusedStages(t *testing.T) {
	t.Setenv(envNoImport, "1")
	kernelsHere(t)
	b := openVK(t)
	src := corpus.Pages(corpus.Mixed, 256, PageSize, 5)
	mem := memfdPages(t, src, true)
	if _, err := (pinBackend{b}).Pin(mem); !errors.Is(err, vk.ErrImportRefused) {
		t.Fatalf("pin with imports refused: %v", err)
	}
	checkRoundTrip(t, b, mem, PageSize*3/4)
	if b.vk.nRefused.Load() != 1 || b.vk.nStaged.Load() == 0 || b.vk.nDirect.Load() != 0 {
		t.Fatalf("refused %d, staged %d, direct %d", b.vk.nRefused.Load(), b.vk.nStaged.Load(), b.vk.nDirect.Load())
	}
}

// The writable alias NVIDIA's import needs for a PUT's read-only mapping
// shows the same pages (a client's later writes too), and is refused
// where the descriptor does not allow writing.
func TestWritableAlias(t *testing.T) {
	src := corpus.Pages(corpus.Text, 4, PageSize, 8)
	ro := memfdPages(t, src, false)
	if writable(ro) {
		t.Fatal("a read-only mapping reported writable")
	}
	a, err := writableAlias(ro)
	if err != nil {
		t.Fatal(err)
	}
	am := unsafe.Slice((*byte)(a), len(ro))
	defer unix.MunmapPtr(a, uintptr(len(ro)))
	if !writable(am) || string(am) != string(src) {
		t.Fatal("the alias is not a writable view of the same pages")
	}
	am[5] ^= 0xff // as the file's owner would write
	if ro[5] != src[5]^0xff {
		t.Fatal("the alias is a copy, not the same pages")
	}
	fd, err := unix.MemfdCreate("s4d-vk-ro", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	unix.Ftruncate(fd, PageSize)
	rfd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(fd), unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(rfd)
	m, err := unix.Mmap(rfd, 0, PageSize, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	if a, err := writableAlias(m); err == nil {
		unix.MunmapPtr(a, PageSize)
		t.Fatal("a writable alias of a file opened read-only")
	}
}

// The engine opens on the Vulkan runtime wherever Vulkan is (lavapipe
// too: building the pipelines needs no dispatch), says so, builds the
// module the subgroups setting asks for, and closes.
func TestVulkanOpen(t *testing.T) {
	noSG := os.Getenv("S4D_WEBGPU_NO_SUBGROUPS") == "1"
	b, err := New(backends.Options{WGSLRuntime: RuntimeVulkan, WebGPUNoSubgroups: noSG}, true)
	if err != nil {
		if backends.IsUnavailable(err) && os.Getenv("S4D_REQUIRE_VULKAN") != "1" {
			t.Skipf("no Vulkan runtime here: %v", err)
		}
		t.Fatal(err)
	}
	d := b.Describe()
	if b.vk == nil || !strings.Contains(d, "runtime vulkan") || (noSG && b.Subgroups()) {
		t.Fatalf("%s (subgroups %v)", d, b.Subgroups())
	}
	if err := b.Close(); err != nil || b.usable() == nil {
		t.Fatalf("close: %v, usable after: %v", err, b.usable())
	}
}
