package cuda_test

import (
	"bytes"
	"context"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/backendtest"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/backends/cuda"
	"github.com/s4d-project/s4d/backends/internal/dl"
	"github.com/s4d-project/s4d/pagefmt"
)

// openGPU opens the backend or skips the test with the reason.
func openGPU(t testing.TB, o backends.Options) *cuda.Backend {
	t.Helper()
	b, err := cuda.Open(backends.FromEnv(o))
	if backends.IsUnavailable(err) {
		t.Skipf("cuda backend %v", err)
	}
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// Without a driver, a device or nvCOMP the backend must say so through the
// registry, never crash or report itself broken.
func TestUnavailableIsReported(t *testing.T) {
	set := backends.Open(backends.FromEnv(backends.Options{PageSize: 4096}), "cuda")
	defer set.Close()
	st := set.Statuses()
	// One status "cuda", or one per GPU ("cuda0", "cuda1"...) on a host
	// with several: each must say the same as one alone would.
	if len(st) > 1 {
		for _, s := range st {
			if !strings.HasPrefix(s.Name, "cuda") || s.State != backends.StateOK {
				t.Fatalf("statuses: %+v", st)
			}
		}
		st = st[:1]
	} else if len(st) != 1 || st[0].Name != "cuda" {
		t.Fatalf("statuses: %+v", st)
	}
	_, drvErr := dl.Open("libcuda.so.1")
	switch st[0].State {
	case backends.StateOK:
		if drvErr != nil {
			t.Fatalf("ok without libcuda.so.1: %+v", st[0])
		}
		t.Logf("cuda: %s", st[0].Describe)
	case backends.StateUnavailable:
		if st[0].Reason == "" {
			t.Fatal("unavailable without a reason")
		}
		if drvErr != nil && !strings.Contains(st[0].Reason, "libcuda.so.1") {
			t.Errorf("reason does not name the missing driver: %q", st[0].Reason)
		}
		t.Logf("cuda unavailable: %s", st[0].Reason)
	default:
		t.Fatalf("cuda backend %s: %s", st[0].State, st[0].Reason)
	}
}

// A wrong nvCOMP path is a clean 'unavailable' naming nvCOMP.
func TestMissingNvcomp(t *testing.T) {
	if _, err := dl.Open("libcuda.so.1"); err != nil {
		t.Skipf("no driver here (%v): the nvCOMP check comes after it", err)
	}
	_, err := cuda.Open(backends.Options{NvcompLib: "/nonexistent/libnvcomp.so.6"})
	if !backends.IsUnavailable(err) || !strings.Contains(err.Error(), "nvCOMP") {
		// On a machine with a driver but no device the driver check wins.
		if err == nil || !strings.Contains(err.Error(), "device") {
			t.Fatalf("want unavailable naming nvCOMP, got %v", err)
		}
	}
	t.Log(err)
}

func TestMemoryLimit(t *testing.T) {
	openGPU(t, backends.Options{})
	_, err := cuda.Open(backends.FromEnv(backends.Options{GPUMemLimit: 64 << 10}))
	if err == nil || backends.IsUnavailable(err) || !strings.Contains(err.Error(), "gpu memory limit") {
		t.Fatalf("64 KiB limit: want a clear limit error, got %v", err)
	}
	t.Log(err)
	// A limit that only fits small slots still works.
	b := openGPU(t, backends.Options{GPUMemLimit: 96 << 20})
	t.Log(b.Describe())
	pages := corpus.Pages(corpus.Mixed, 3000, 4096, 9)
	roundTrip(t, b, pages, 4096, pagefmt.CodecLZ4)
	// zstd's scratch does not fit beside the buffers: a clear error, and
	// the backend still works afterwards.
	var out pagefmt.Compressed
	err = b.Compress(context.Background(), &pagefmt.Batch{PageSize: 4096, Pages: pages, Codec: pagefmt.CodecZstd, Threshold: 3072}, &out)
	if err == nil || !strings.Contains(err.Error(), "gpu memory limit") {
		t.Fatalf("zstd under a 96 MiB limit: want a limit error, got %v", err)
	}
	t.Log(err)
	roundTrip(t, b, pages, 4096, pagefmt.CodecLZ4)
}

func TestConformance(t *testing.T) {
	b := openGPU(t, backends.Options{})
	t.Log(b.Describe())
	backendtest.Run(t, b, backendtest.Config{PageSizes: []int{4096, 16384, 65536}, PartPages: 2*4096 + 100})
}

// A batch larger than one slot runs through both slots in turn.
func TestLargeBatch(t *testing.T) {
	b := openGPU(t, backends.Options{})
	pages := corpus.Pages(corpus.Mixed, 3*4096+123, 4096, 11)
	for _, codec := range []pagefmt.Codec{pagefmt.CodecLZ4, pagefmt.CodecZstd} {
		roundTrip(t, b, pages, 4096, codec)
	}
	// The same pages in a pinned buffer of the backend's, uploaded in place.
	buf, err := b.HostBuffer(len(pages) + 8192)
	if err != nil {
		t.Fatal(err)
	}
	defer b.FreeHostBuffer(buf)
	in := buf[4096 : 4096+len(pages)]
	copy(in, pages)
	for _, codec := range []pagefmt.Codec{pagefmt.CodecLZ4, pagefmt.CodecZstd} {
		roundTrip(t, b, in, 4096, codec)
	}
}

func roundTrip(t *testing.T, b backends.Backend, pages []byte, ps int, codec pagefmt.Codec) {
	t.Helper()
	ref, err := cpu.New(backends.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	in := &pagefmt.Batch{PageSize: ps, Pages: pages, Codec: codec, Threshold: ps * 3 / 4}
	var out pagefmt.Compressed
	if err := b.Compress(context.Background(), in, &out); err != nil {
		t.Fatalf("%v: compress: %v", codec, err)
	}
	if len(out.Sum) != in.Len() {
		t.Fatalf("%v: %d checksums for %d pages", codec, len(out.Sum), in.Len())
	}
	for i := range in.Len() {
		var want uint32
		if out.Class[i] != pagefmt.ClassZero {
			want = crc32.Checksum(out.Bytes(i, in), crc32.MakeTable(crc32.Castagnoli))
		}
		if out.Sum[i] != want {
			t.Fatalf("%v page %d (%v): checksum %08x, want %08x", codec, i, out.Class[i], out.Sum[i], want)
		}
	}
	counts := map[pagefmt.Class]int{}
	got := make([]byte, ps)
	d := &pagefmt.Decompression{PageSize: ps, Dst: make([]byte, len(pages))}
	for i := range in.Len() {
		want, fill := pagefmt.Classify(in.Page(i))
		c := out.Class[i]
		if want != 0 && (c != want || out.Fill[i] != fill) {
			t.Fatalf("%v page %d: class %v, want %v", codec, i, c, want)
		}
		s := pagefmt.Stored{Class: c, Fill: out.Fill[i], Data: out.Bytes(i, in)}
		if !ref.DecodePage(s, got) || !bytes.Equal(got, in.Page(i)) {
			if dir := os.Getenv("S4D_DUMP"); dir != "" {
				os.WriteFile(filepath.Join(dir, codec.String()+".page"), in.Page(i), 0o644)
				os.WriteFile(filepath.Join(dir, codec.String()+".data"), s.Data, 0o644)
			}
			t.Errorf("%v page %d (%v, %d bytes): CPU decoder disagrees", codec, i, c, len(s.Data))
			return
		}
		counts[c]++
		d.Src = append(d.Src, s)
	}
	if err := b.Decompress(context.Background(), d); err != nil {
		t.Fatalf("%v: decompress: %v", codec, err)
	}
	for i := range in.Len() {
		if d.Failed[i] || !bytes.Equal(d.Dst[i*ps:(i+1)*ps], in.Page(i)) {
			t.Fatalf("%v page %d (%v): GPU decompress differs (failed %v)", codec, i, out.Class[i], d.Failed[i])
		}
	}
	t.Logf("%v: %d pages, classes %v, %d bytes of data", codec, in.Len(), counts, len(out.Data))
}

// cpuRef opens the cpu backend, the reference the GPU's output is held to.
func cpuRef(tb testing.TB) *cpu.Backend {
	tb.Helper()
	ref, err := cpu.New(backends.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ref.Close() })
	return ref
}

// storedByCPU compresses pages with the cpu backend (LZ4) and returns what
// the store would hold for each.
func storedByCPU(tb testing.TB, ref *cpu.Backend, pages []byte, ps, threshold int) []pagefmt.Stored {
	tb.Helper()
	in := &pagefmt.Batch{PageSize: ps, Pages: pages, Codec: pagefmt.CodecLZ4, Threshold: threshold}
	var out pagefmt.Compressed
	if err := ref.Compress(context.Background(), in, &out); err != nil {
		tb.Fatal(err)
	}
	src := make([]pagefmt.Stored, in.Len())
	for i := range src {
		src[i] = pagefmt.Stored{Class: out.Class[i], Fill: out.Fill[i], Data: out.Bytes(i, in)}
	}
	return src
}

// Pages compressed by the cpu backend (pierrec/lz4, not our kernel) decode
// on the GPU to the same bytes, into ordinary and into pinned memory (the
// kernel's output then comes back straight into the caller's buffer).
func TestDecodeForeignBlocks(t *testing.T) {
	gpu := openGPU(t, backends.Options{})
	ref := cpuRef(t)
	const n, ps = 3000, 4096 // more than one slot's worth is not needed; odd counts are
	pinned, err := gpu.HostBuffer(n * ps)
	if err != nil {
		t.Fatal(err)
	}
	defer gpu.FreeHostBuffer(pinned)
	// Every kind, and runs of 100 text pages between runs of other kinds:
	// a few runs of LZ4 pages come back each straight to its place.
	var runs []byte
	for k := range n / 100 {
		kind := corpus.Text
		if k%2 == 1 {
			kind = corpus.Kinds[k%len(corpus.Kinds)]
		}
		runs = append(runs, corpus.Pages(kind, 100, ps, uint64(k))...)
	}
	for _, kind := range append(corpus.Kinds, "runs") {
		pages := runs
		if kind != "runs" {
			pages = corpus.Pages(kind, n, ps, 11)
		}
		src := storedByCPU(t, ref, pages, ps, ps*3/4)
		for _, dst := range [][]byte{make([]byte, n*ps), pinned} {
			clear(dst)
			d := &pagefmt.Decompression{PageSize: ps, Src: src, Dst: dst}
			if err := gpu.Decompress(context.Background(), d); err != nil {
				t.Fatalf("%s: %v", kind, err)
			}
			for i := range n {
				if d.Failed[i] || !bytes.Equal(dst[i*ps:(i+1)*ps], pages[i*ps:(i+1)*ps]) {
					t.Fatalf("%s: page %d (%v, %d bytes) differs (failed %v)", kind, i, src[i].Class, len(src[i].Data), d.Failed[i])
				}
			}
		}
	}
}

// Damaged LZ4 blocks: the GPU never faults, and agrees with pierrec/lz4:
// a block one decoder takes the other takes too, with the same page.
func TestDecodeDamagedBlocks(t *testing.T) {
	gpu := openGPU(t, backends.Options{})
	ref := cpuRef(t)
	const ps = 4096
	pages := append(corpus.Pages(corpus.Text, 64, ps, 3), corpus.Pages(corpus.Pointers, 64, ps, 4)...)
	valid := storedByCPU(t, ref, pages, ps, ps)
	r := rand.New(rand.NewPCG(1, 2))
	var src []pagefmt.Stored
	for len(src) < 4000 {
		v := valid[r.IntN(len(valid))]
		if v.Class != pagefmt.ClassLZ4 {
			continue
		}
		b := append([]byte(nil), v.Data...)
		switch r.IntN(3) {
		case 0: // a byte changed
			b[r.IntN(len(b))] = uint8(r.IntN(256))
		case 1: // cut short
			b = b[:r.IntN(len(b))]
		default: // a few bytes changed
			for range 1 + r.IntN(4) {
				b[r.IntN(len(b))] ^= uint8(1 + r.IntN(255))
			}
		}
		src = append(src, pagefmt.Stored{Class: pagefmt.ClassLZ4, Data: b})
	}
	d := &pagefmt.Decompression{PageSize: ps, Src: src, Dst: make([]byte, len(src)*ps)}
	if err := gpu.Decompress(context.Background(), d); err != nil {
		t.Fatalf("a batch of damaged blocks failed whole: %v", err)
	}
	got, agreeOK := make([]byte, ps), 0
	for i, s := range src {
		ok := ref.DecodePage(s, got)
		if ok != !d.Failed[i] {
			t.Fatalf("block %d (%d bytes): pierrec/lz4 ok=%v, gpu ok=%v", i, len(s.Data), ok, !d.Failed[i])
		}
		if ok {
			agreeOK++
			if !bytes.Equal(got, d.Dst[i*ps:(i+1)*ps]) {
				t.Fatalf("block %d: both decode it, to different pages", i)
			}
		}
	}
	t.Logf("%d damaged blocks, %d still decode to a page on both", len(src), agreeOK)
}

// A page that fails to decode straight into pinned memory is zeroed there:
// nothing of what the GPU decoded for an earlier batch (another client's
// pages) reaches the caller.
func TestFailedPageLeaksNothing(t *testing.T) {
	gpu := openGPU(t, backends.Options{})
	const n, ps = 64, 4096
	pages := corpus.Pages(corpus.Text, n, ps, 5)
	src := storedByCPU(t, cpuRef(t), pages, ps, ps)
	dst, err := gpu.HostBuffer(n * ps)
	if err != nil {
		t.Fatal(err)
	}
	defer gpu.FreeHostBuffer(dst)
	d := &pagefmt.Decompression{PageSize: ps, Src: src, Dst: dst}
	for range 8 { // through every slot: each holds these pages decoded
		if err := gpu.Decompress(context.Background(), d); err != nil || !bytes.Equal(dst, pages) {
			t.Fatalf("first batch: %v", err)
		}
	}
	// The same places, page 7's block cut short.
	src[7].Data = src[7].Data[:len(src[7].Data)/2]
	for i := range dst {
		dst[i] = 0xEE
	}
	if err := gpu.Decompress(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if !d.Failed[7] {
		t.Fatal("a cut block decoded")
	}
	if !bytes.Equal(dst[7*ps:8*ps], make([]byte, ps)) {
		t.Fatal("a failed page's place holds other bytes than zeros")
	}
	if !bytes.Equal(dst[8*ps:], pages[8*ps:]) || !bytes.Equal(dst[:7*ps], pages[:7*ps]) {
		t.Fatal("the other pages differ")
	}
}
