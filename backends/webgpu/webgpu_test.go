package webgpu

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/pierrec/lz4/v4"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/backendtest"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/backends/pagelz4"
	"github.com/s4d-project/s4d/pagefmt"
)

var (
	shared     *Backend
	sharedErr  error
	sharedOnce sync.Once
)

// open returns one backend for the whole test binary (opening a device
// costs a second on lavapipe). It skips only when the library file is
// absent, and fails when it is there but unusable.
func open(t testing.TB) *Backend {
	t.Helper()
	lib := os.Getenv("S4D_WEBGPU_LIB")
	if lib == "" {
		lib = DefaultLib
	}
	if _, err := os.Stat(lib); err != nil {
		if os.Getenv("S4D_REQUIRE_WEBGPU") == "1" {
			t.Fatalf("webgpu library %s missing: run `make deps`", lib)
		}
		t.Skipf("webgpu library %s missing: run `make deps`", lib)
	}
	sharedOnce.Do(func() {
		// Benchmarks may try another kernel shape.
		if v, err := strconv.Atoi(os.Getenv("S4D_TUNE_BITS")); err == nil {
			tuneBits = v
		}
		if v, err := strconv.Atoi(os.Getenv("S4D_TUNE_STOP")); err == nil {
			stopPhase = v
		}
		if v, err := strconv.Atoi(os.Getenv("S4D_TUNE_ROUND_SPLIT")); err == nil {
			roundSplit = v
		}
		if v, err := strconv.Atoi(os.Getenv("S4D_TUNE_SLOTS")); err == nil && v > 0 {
			numSlots = v
		}
		if v, err := strconv.ParseBool(os.Getenv("S4D_TUNE_TURNS")); err == nil {
			copyTurns = v
		}
		// CI runs the suite a second time with the fallback forced.
		shared, sharedErr = New(webgpuh(backends.Options{WebGPUNoSubgroups: os.Getenv("S4D_WEBGPU_NO_SUBGROUPS") == "1"}), true)
	})
	if sharedErr != nil {
		t.Fatalf("open webgpu backend with %s: %v", lib, sharedErr)
	}
	return shared
}

// webgpuh completes o from the environment for the webgpu.h runtime,
// which the tests that open the engine this way are about: auto would take
// the Vulkan runtime on a GPU that imports host memory (it has tests of
// its own). S4D_WGSL_RUNTIME still picks another.
func webgpuh(o backends.Options) backends.Options {
	o = backends.FromEnv(o)
	if o.WGSLRuntime == "" {
		o.WGSLRuntime = RuntimeWebGPU
	}
	return o
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.Close()
	}
	os.Exit(code)
}

func TestConformance(t *testing.T) {
	b := open(t)
	t.Logf("device: %s", b.Describe())
	// PartPages: two rounds at once on the two slots, delivered in order.
	backendtest.Run(t, b, backendtest.Config{PageSizes: []int{4096, 8192}, PartPages: 2*minRound + 300})
}

// A batch larger than one device round exercises the chunking and the
// offsets of the second round's data.
func TestMultiRound(t *testing.T) {
	if testing.Short() {
		t.Skip("large batch")
	}
	b := open(t)
	n := maxRound + 100
	pages := corpus.Pages(corpus.Mixed, n, PageSize, 11)
	checkRoundTrip(t, b, pages, PageSize*3/4)
}

// Batches that overlap go in larger rounds over all the slots (the extra
// ones included): six callers at once, each batch checked on its own, and
// every page that ran on the GPU equal to pagelz4's block.
func TestOverlappingBatches(t *testing.T) {
	b := open(t)
	// A kernel with other parameters than pagelz4's stores other blocks:
	// each batch is then checked by decoding its blocks.
	exact := exactKernel(b.kp)
	const callers = 6
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pages := corpus.Pages(corpus.Mixed, 1000+300*g, PageSize, uint64(40+g))
			in := &pagefmt.Batch{PageSize: PageSize, Pages: pages, Codec: pagefmt.CodecLZ4, Threshold: PageSize * 3 / 4}
			out := &pagefmt.Compressed{}
			if err := b.Compress(context.Background(), in, out); err != nil {
				errs <- err
				return
			}
			check := samePagelz4
			if !exact {
				check = decodesBack
			}
			if _, err := check(in, out); err != nil {
				errs <- fmt.Errorf("caller %d: %w", g, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func checkRoundTrip(t testing.TB, b *Backend, pages []byte, threshold int) *pagefmt.Compressed {
	t.Helper()
	in := &pagefmt.Batch{PageSize: PageSize, Pages: pages, Codec: pagefmt.CodecLZ4, Threshold: threshold}
	out := &pagefmt.Compressed{}
	if err := b.Compress(context.Background(), in, out); err != nil {
		t.Fatalf("compress: %v", err)
	}
	got := make([]byte, PageSize)
	for i := range in.Len() {
		page := in.Page(i)
		switch out.Class[i] {
		case pagefmt.ClassLZ4:
			n, err := lz4.UncompressBlock(out.Bytes(i, in), got)
			if err != nil || n != PageSize || !bytes.Equal(got, page) {
				t.Fatalf("page %d: lz4 block of %d bytes does not decode (n=%d err=%v)", i, out.Size[i], n, err)
			}
		case pagefmt.ClassRaw:
			if c, _ := pagefmt.Classify(page); c != 0 {
				t.Fatalf("page %d: %v page stored raw", i, c)
			}
		case pagefmt.ClassZero, pagefmt.ClassSame:
			if c, f := pagefmt.Classify(page); c != out.Class[i] || f != out.Fill[i] {
				t.Fatalf("page %d: class %v fill %#x, want %v %#x", i, out.Class[i], out.Fill[i], c, f)
			}
		default:
			t.Fatalf("page %d: class %v", i, out.Class[i])
		}
	}
	return out
}

// FuzzCompress feeds arbitrary page contents through the kernel and checks
// that every block decodes with pierrec/lz4 to the original page.
func FuzzCompress(f *testing.F) {
	f.Add([]byte("hello hello hello hello hello"), uint16(3072))
	f.Add(bytes.Repeat([]byte{0}, 40), uint16(100))
	f.Add(bytes.Repeat([]byte{1, 2, 3}, 1000), uint16(4096))
	f.Add(corpus.Pages(corpus.Text, 1, PageSize, 1), uint16(3072))
	f.Add(corpus.Pages(corpus.Pointers, 1, PageSize, 2), uint16(64))
	f.Fuzz(func(t *testing.T, data []byte, threshold uint16) {
		b := open(t)
		if len(data) == 0 {
			return
		}
		// Two pages: the input tiled, and the input followed by zeros.
		pages := make([]byte, 2*PageSize)
		for i := 0; i < PageSize; i += len(data) {
			copy(pages[i:PageSize], data)
		}
		copy(pages[PageSize:], data)
		checkRoundTrip(t, b, pages, int(threshold)%(PageSize+1))
	})
}

// ratio compresses pages with b and returns input bytes / stored bytes.
func ratio(t testing.TB, b backends.Backend, pages []byte) float64 {
	in := &pagefmt.Batch{PageSize: PageSize, Pages: pages, Codec: pagefmt.CodecLZ4, Threshold: PageSize * 3 / 4}
	out := &pagefmt.Compressed{}
	if err := b.Compress(context.Background(), in, out); err != nil {
		t.Fatal(err)
	}
	var stored int
	for i := range in.Len() {
		stored += int(out.Size[i])
	}
	return float64(len(pages)) / float64(max(stored, 1))
}

// The kernel's parse (the longest of several candidates, lazy by one byte)
// must store at least as compactly as the cpu backend's LZ4.
func TestRatio(t *testing.T) {
	b := open(t)
	c, err := cpu.New(backends.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, kind := range []corpus.Kind{corpus.Text, corpus.Pointers, corpus.Mixed, corpus.Threshold} {
		pages := corpus.Pages(kind, 512, PageSize, 21)
		rg, rc := ratio(t, b, pages), ratio(t, c, pages)
		t.Logf("%-9s webgpu %.3f  cpu %.3f  (%.1f%%)", kind, rg, rc, 100*(rg/rc-1))
		if rg < rc {
			t.Errorf("%s: ratio %.3f is below the cpu backend's %.3f", kind, rg, rc)
		}
	}
}

// The kernel runs backends/pagelz4's algorithm: every LZ4 page it stores
// must be exactly pagelz4's block, and every page pagelz4 cannot fit under
// the threshold must come out raw.
func TestSameBytesAsPagelz4(t *testing.T) {
	b := open(t)
	if tuneBits&(15|32) != 0 {
		t.Skip("S4D_TUNE_BITS changes the chain depth or leaves the extension out")
	}
	if !exactKernel(b.kp) {
		// The default kernel trades ratio for speed (chainDepth): a
		// second backend with pagelz4's parameters checks the algorithm.
		chainDepth = 0
		defer func() { chainDepth = defaultChainDepth }()
		var err error
		if b, err = New(webgpuh(backends.Options{WebGPUNoSubgroups: os.Getenv("S4D_WEBGPU_NO_SUBGROUPS") == "1"}), true); err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if !exactKernel(b.kp) {
			t.Fatalf("kernel parameters %+v are not pagelz4's", b.kp)
		}
	}
	var pages []byte
	for _, kind := range corpus.Kinds {
		pages = append(pages, corpus.Pages(kind, 96, PageSize, 33)...)
	}
	out := checkRoundTrip(t, b, pages, PageSize*3/4)
	in := &pagefmt.Batch{PageSize: PageSize, Pages: pages, Threshold: PageSize * 3 / 4}
	lz4s, err := samePagelz4(in, out)
	if err != nil {
		t.Fatal(err)
	}
	if lz4s == 0 {
		t.Fatal("no page was compressed: the test checked nothing")
	}
}

// samePagelz4 checks out against the CPU: zero and same-filled pages by
// pagefmt.Classify, the rest against pagelz4's block (raw where it does
// not fit under the threshold). It returns how many pages were LZ4.
func samePagelz4(in *pagefmt.Batch, out *pagefmt.Compressed) (int, error) {
	var s pagelz4.Scratch
	dst := make([]byte, in.Threshold)
	lz4s := 0
	for i := range in.Len() {
		if c, fill := pagefmt.Classify(in.Page(i)); c != 0 {
			if out.Class[i] != c || out.Fill[i] != fill {
				return lz4s, fmt.Errorf("page %d: class %v fill %#x, want %v %#x", i, out.Class[i], out.Fill[i], c, fill)
			}
			continue
		}
		n := pagelz4.Compress(in.Page(i), dst, &s)
		switch {
		case n == 0 && out.Class[i] != pagefmt.ClassRaw:
			return lz4s, fmt.Errorf("page %d: pagelz4 does not fit it under %d bytes, the kernel stored %v of %d", i, in.Threshold, out.Class[i], out.Size[i])
		case n > 0 && (out.Class[i] != pagefmt.ClassLZ4 || !bytes.Equal(out.Bytes(i, in), dst[:n])):
			return lz4s, fmt.Errorf("page %d: kernel block (class %v, %d bytes) differs from pagelz4's %d bytes", i, out.Class[i], out.Size[i], n)
		}
		if n > 0 {
			lz4s++
		}
	}
	return lz4s, nil
}

// decodesBack checks out by decoding: zero and same-filled pages by
// pagefmt.Classify, every LZ4 block with pierrec/lz4 to its page, raw pages
// as they are. It returns how many pages were LZ4.
func decodesBack(in *pagefmt.Batch, out *pagefmt.Compressed) (int, error) {
	got := make([]byte, in.PageSize)
	lz4s := 0
	for i := range in.Len() {
		page := in.Page(i)
		if c, fill := pagefmt.Classify(page); c != 0 {
			if out.Class[i] != c || out.Fill[i] != fill {
				return lz4s, fmt.Errorf("page %d: class %v fill %#x, want %v %#x", i, out.Class[i], out.Fill[i], c, fill)
			}
			continue
		}
		switch out.Class[i] {
		case pagefmt.ClassLZ4:
			n, err := lz4.UncompressBlock(out.Bytes(i, in), got)
			if err != nil || n != in.PageSize || !bytes.Equal(got, page) || int(out.Size[i]) > in.Threshold {
				return lz4s, fmt.Errorf("page %d: lz4 block of %d bytes does not decode to it (n=%d err=%v)", i, out.Size[i], n, err)
			}
			lz4s++
		case pagefmt.ClassRaw:
			if out.Size[i] != uint32(in.PageSize) {
				return lz4s, fmt.Errorf("page %d: raw page of %d bytes", i, out.Size[i])
			}
		default:
			return lz4s, fmt.Errorf("page %d: class %v", i, out.Class[i])
		}
	}
	return lz4s, nil
}

// The device thread hands back its jobs' errors, and turns a panic into one.
func TestClosedDeviceThread(t *testing.T) {
	d := &device{jobs: make(chan func())}
	go d.loop()
	if err := d.do(func() error { return fmt.Errorf("x") }); err == nil || err.Error() != "x" {
		t.Fatalf("do returned %v", err)
	}
	if err := d.do(func() error { panic("boom") }); err == nil {
		t.Fatal("a panic on the device thread was not reported")
	}
	close(d.jobs)
}

// FuzzDecompress feeds arbitrary bytes as LZ4 blocks to the decompress
// kernel: it must never accept a block that pierrec/lz4 (or, where that
// refuses it, C liblz4) does not decode to the same page, and must accept
// every block that pierrec/lz4 decodes to one.
func FuzzDecompress(f *testing.F) {
	page := corpus.Pages(corpus.Text, 1, PageSize, 3)
	blk := make([]byte, lz4.CompressBlockBound(PageSize))
	n, _ := lz4.CompressBlock(page, blk, nil)
	f.Add(blk[:n])
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add(bytes.Repeat([]byte{0x1f, 0, 0, 0}, 8))
	// Longer than any block that decodes to one page: read from global
	// memory, not through workgroup memory.
	f.Add(append(bytes.Repeat([]byte{0x0f, 'a', 1, 0}, 2000), blk[:n]...))
	long := append([]byte{0xf0}, bytes.Repeat([]byte{0xff}, 16)...)
	long = append(append(long, 1), page...)
	f.Add(append(long, bytes.Repeat([]byte{7}, 2000)...)) // one page of literals, then junk
	f.Add(long)                                           // the same without the junk: valid
	f.Add([]byte{0x1f, 'a', 1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xe2, 0x50, 'a', 'b', 'c', 'd', 'e'})
	f.Fuzz(func(t *testing.T, data []byte) {
		b := open(t)
		d := &pagefmt.Decompression{PageSize: PageSize, Dst: make([]byte, PageSize),
			Src: []pagefmt.Stored{{Class: pagefmt.ClassLZ4, Data: data}}}
		if err := b.Decompress(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		want := make([]byte, PageSize)
		m, err := lz4.UncompressBlock(data, want)
		refOK := err == nil && m == PageSize
		switch {
		case d.Failed[0] && refOK:
			t.Fatalf("kernel rejects a block pierrec/lz4 decodes")
		case !d.Failed[0] && !refOK:
			// pierrec/lz4 refuses some blocks C liblz4 decodes (seen: a
			// 1956-byte one in testdata/fuzz); C liblz4 decides, and fails
			// the test itself when it refuses the block too.
			if c := backendtest.ExternalLZ4(t, [][]byte{data}, PageSize); !bytes.Equal(c, d.Dst) {
				t.Fatalf("kernel and C liblz4 decode differently (pierrec/lz4: %v, %d bytes)", err, m)
			}
		case !d.Failed[0] && !bytes.Equal(d.Dst, want):
			t.Fatalf("kernel and pierrec/lz4 decode differently")
		}
	})
}

// A closed backend refuses batches instead of touching freed objects.
func TestUseAfterClose(t *testing.T) {
	open(t) // skips without the library
	b, err := New(webgpuh(backends.Options{}), true)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	in := &pagefmt.Batch{PageSize: PageSize, Pages: corpus.Pages(corpus.Text, 2, PageSize, 1), Codec: pagefmt.CodecLZ4, Threshold: 3072}
	if err := b.Compress(context.Background(), in, &pagefmt.Compressed{}); err == nil {
		t.Fatal("Compress after Close succeeded")
	}
}

// Losing the device, as a GPU reset does, fails the batch in flight with an
// error (the dispatcher then redoes it on the CPU) and every later batch,
// instead of hanging or handing back bad data.
func TestDeviceLost(t *testing.T) {
	open(t) // skips when the library is absent
	b, err := New(webgpuh(backends.Options{}), true)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	pages := corpus.Pages(corpus.Text, 64, 4096, 1)
	in := &pagefmt.Batch{PageSize: 4096, Pages: pages, Codec: pagefmt.CodecLZ4, Threshold: 3072}
	var out pagefmt.Compressed
	if err := b.Compress(context.Background(), in, &out); err != nil {
		t.Fatalf("before the loss: %v", err)
	}
	b.d.do(func() error { b.d.lose(); return nil })
	for i, op := range []func() error{
		func() error { return b.Compress(context.Background(), in, &out) },
		func() error { return b.Compress(context.Background(), in, &out) },
		func() error {
			d := &pagefmt.Decompression{PageSize: 4096, Dst: make([]byte, 4096),
				Src: []pagefmt.Stored{{Class: pagefmt.ClassLZ4, Data: []byte{0x10, 'a'}}}}
			return b.Decompress(context.Background(), d)
		},
	} {
		done := make(chan error, 1)
		go func() { done <- op() }()
		select {
		case err := <-done:
			if err == nil {
				t.Fatalf("call %d after the loss succeeded", i)
			}
			t.Logf("call %d: %v", i, err)
		case <-time.After(60 * time.Second):
			t.Fatalf("call %d after the loss hangs", i)
		}
	}
}

// The subgroup scans and the workgroup-memory fallback must give the same
// bytes. S4D_WEBGPU_NO_SUBGROUPS=1 forces the fallback (CI runs the whole
// suite both ways); this test compares the two directly where the device
// has subgroups.
// Where the adapter offers subgroups, the subgroup kernel must be the one
// in use: its compile failing (as `enable subgroups;` did on wgpu-native)
// would otherwise fall back silently.
func TestSubgroupsWhereOffered(t *testing.T) {
	b := open(t)
	if os.Getenv("S4D_WEBGPU_NO_SUBGROUPS") == "1" {
		t.Skip("fallback forced")
	}
	if !b.d.offersSubgroups() {
		t.Skipf("adapter offers no subgroups: %s", b.Describe())
	}
	if !b.Subgroups() {
		t.Fatalf("adapter offers subgroups, kernel uses workgroup-memory scans: %s", b.Describe())
	}
}

func TestSubgroupFallbackSame(t *testing.T) {
	b := open(t)
	if !b.Subgroups() {
		t.Skip("the shared backend already runs the fallback")
	}
	f, err := New(webgpuh(backends.Options{WebGPUNoSubgroups: true}), true)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Subgroups() {
		t.Fatal("WebGPUNoSubgroups did not force the fallback")
	}
	var pages []byte
	for _, kind := range corpus.Kinds {
		pages = append(pages, corpus.Pages(kind, 64, PageSize, 9)...)
	}
	a := checkRoundTrip(t, b, pages, PageSize*3/4)
	c := checkRoundTrip(t, f, pages, PageSize*3/4)
	in := &pagefmt.Batch{PageSize: PageSize, Pages: pages}
	for i := range len(pages) / PageSize {
		if a.Class[i] != c.Class[i] || a.Size[i] != c.Size[i] || !bytes.Equal(a.Bytes(i, in), c.Bytes(i, in)) {
			t.Fatalf("page %d: subgroup and fallback kernels differ (%v %d / %v %d)", i, a.Class[i], a.Size[i], c.Class[i], c.Size[i])
		}
	}
}
