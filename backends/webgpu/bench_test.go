// Benchmarks of the engine, each beside the cpu engine in the same run
// (README: Measured says how they were run on the H100).

package webgpu

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/pagefmt"
)

func benchPages(tb testing.TB) []byte {
	if p := os.Getenv("S4D_BENCH_PAGES"); p != "" {
		data, err := os.ReadFile(p)
		if err != nil || len(data) < 64<<20 {
			tb.Fatalf("S4D_BENCH_PAGES=%s: %d bytes, %v (want >= 64 MiB)", p, len(data), err)
		}
		return data[:64<<20]
	}
	return corpus.Pages(corpus.Mixed, 64<<20/PageSize, PageSize, 5)
}

// cpuSeconds is the process's user+system CPU time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// BenchmarkCompress64MiB compresses 64 MiB batches end to end (staging,
// kernels, compaction, readback) with this backend and, in the same run,
// with the cpu backend on every core. It reports CPU core-seconds per GB
// and the stored ratio. S4D_BENCH_PAGES names a file of real pages.
func BenchmarkCompress64MiB(bm *testing.B) {
	pages := benchPages(bm)
	in := &pagefmt.Batch{PageSize: PageSize, Pages: pages, Codec: pagefmt.CodecLZ4, Threshold: PageSize * 3 / 4}
	c, err := cpu.New(backends.Options{})
	if err != nil {
		bm.Fatal(err)
	}
	defer c.Close()
	for _, be := range []struct {
		name string
		b    func() backends.Backend
	}{{"webgpu", func() backends.Backend { return open(bm) }}, {"cpu", func() backends.Backend { return c }}} {
		bm.Run(be.name, func(bm *testing.B) {
			b := be.b()
			out := &pagefmt.Compressed{}
			if err := b.Compress(context.Background(), in, out); err != nil {
				bm.Fatal(err)
			}
			bm.SetBytes(int64(len(pages)))
			cpu0 := cpuSeconds()
			bm.ResetTimer()
			for i := range phaseNs {
				phaseNs[i].Store(0)
			}
			for bm.Loop() {
				if err := b.Compress(context.Background(), in, out); err != nil {
					bm.Fatal(err)
				}
			}
			bm.StopTimer()
			gb := float64(len(pages)) * float64(bm.N) / 1e9
			bm.ReportMetric((cpuSeconds()-cpu0)/gb, "core-s/GB")
			if be.name == "webgpu" {
				reportPhases(bm)
			}
			var stored int
			for i := range in.Len() {
				stored += int(out.Size[i])
			}
			bm.ReportMetric(float64(len(pages))/float64(stored), "ratio")
		})
	}
}

// reportPhases reports the mean time per batch of each step of the
// rounds (summed over rounds and slots, so steps that overlap add up).
func reportPhases(bm *testing.B) {
	for i, name := range []string{"stage", "copyin", "submit", "meta-wait", "meta", "data-wait", "copyout"} {
		bm.ReportMetric(float64(phaseNs[i].Load())/float64(bm.N)/1e6, name+"-ms")
	}
}

// BenchmarkCompressParallel64MiB has four callers compress 64 MiB batches
// at once (as the daemon's clients do), with this backend and the cpu
// backend in the same run: rounds of different callers overlap on the
// device's two slots.
func BenchmarkCompressParallel64MiB(bm *testing.B) {
	pages := benchPages(bm)
	in := &pagefmt.Batch{PageSize: PageSize, Pages: pages, Codec: pagefmt.CodecLZ4, Threshold: PageSize * 3 / 4}
	c, err := cpu.New(backends.Options{})
	if err != nil {
		bm.Fatal(err)
	}
	defer c.Close()
	const callers = 4
	for _, be := range []struct {
		name string
		b    func() backends.Backend
	}{{"webgpu", func() backends.Backend { return open(bm) }}, {"cpu", func() backends.Backend { return c }}} {
		bm.Run(be.name, func(bm *testing.B) {
			b := be.b()
			bm.SetBytes(int64(callers * len(pages)))
			cpu0 := cpuSeconds()
			for bm.Loop() {
				eachCaller(bm, callers, func(g int) error { return b.Compress(context.Background(), in, &pagefmt.Compressed{}) })
			}
			bm.StopTimer()
			gb := float64(callers*len(pages)) * float64(bm.N) / 1e9
			bm.ReportMetric((cpuSeconds()-cpu0)/gb, "core-s/GB")
		})
	}
}

// BenchmarkKernel64MiB times the classify + LZ4 + compaction kernels alone
// on 64 MiB already on the device (no transfers).
func BenchmarkKernel64MiB(bm *testing.B) {
	b := open(bm)
	pages := benchPages(bm)
	in := &pagefmt.Batch{PageSize: PageSize, Pages: pages, Codec: pagefmt.CodecLZ4, Threshold: PageSize * 3 / 4}
	out := &pagefmt.Compressed{}
	out.Reset(in.Len())
	out.Sum = pagefmt.Resize(out.Sum, in.Len()) // fill writes the sums, as Compress sizes them
	// The whole batch staged in one slot, in one round.
	s := <-b.slots
	defer func() { b.slots <- s }()
	var mu sync.Mutex
	if err := b.round(s, in, out, 0, in.Len(), &mu, nil, nil, 0); err != nil {
		bm.Fatal(err)
	}
	// Smaller dispatches over the first pages show how the time scales:
	// proportional means the device is busy, flat means latency per page.
	// reps=8 runs the kernel 8 times in one submission: the difference
	// to reps=1 is the device's own time, without a submission's latency.
	cases := [][2]int{{in.Len() / 16, 1}, {in.Len() / 4, 1}, {in.Len(), 1}, {in.Len() / 16, 8}, {in.Len(), 8}}
	// S4D_BENCH_KERNEL_PAGES=n,n,...: other sizes (8 dispatches each), to
	// see how many workgroups the device runs at once.
	for _, f := range strings.Split(os.Getenv("S4D_BENCH_KERNEL_PAGES"), ",") {
		if v, err := strconv.Atoi(f); err == nil && v > 0 && v <= in.Len() {
			cases = append(cases, [2]int{v, 8})
		}
	}
	for _, c := range cases {
		n, reps := c[0], c[1]
		bm.Run(fmt.Sprintf("pages=%d/reps=%d", n, reps), func(bm *testing.B) {
			bm.SetBytes(int64(n * PageSize * reps))
			for bm.Loop() {
				if err := b.kernelPass(s, n, reps); err != nil {
					bm.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecompressKernel64MiB times the decompress kernel alone on the
// LZ4 blocks of 64 MiB of pages already on the device (1 and 8 dispatches
// a submission; bytes are those of the whole batch).
func BenchmarkDecompressKernel64MiB(bm *testing.B) {
	pages := benchPages(bm)
	b := open(bm)
	in := &pagefmt.Batch{PageSize: PageSize, Pages: pages, Codec: pagefmt.CodecLZ4, Threshold: PageSize * 3 / 4}
	out := &pagefmt.Compressed{}
	if err := b.Compress(context.Background(), in, out); err != nil {
		bm.Fatal(err)
	}
	d := &pagefmt.Decompression{PageSize: PageSize, Dst: make([]byte, len(pages))}
	for i := range in.Len() {
		d.Src = append(d.Src, pagefmt.Stored{Class: out.Class[i], Fill: out.Fill[i], Data: out.Bytes(i, in)})
	}
	if err := b.Decompress(context.Background(), d); err != nil {
		bm.Fatal(err)
	}
	if !bytes.Equal(d.Dst, pages) {
		bm.Fatal("decompressed pages differ")
	}
	for _, reps := range []int{1, 8} {
		bm.Run(fmt.Sprintf("lz4pages=%d/reps=%d", b.dlast.Load().lastN, reps), func(bm *testing.B) {
			bm.SetBytes(int64(len(pages) * reps))
			for bm.Loop() {
				if err := b.dkernelPass(reps); err != nil {
					bm.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecompress64MiB expands 64 MiB of stored pages (compressed by
// the cpu backend) with this backend's kernel and with the cpu backend.
func BenchmarkDecompress64MiB(bm *testing.B) {
	pages := benchPages(bm)
	c, err := cpu.New(backends.Options{})
	if err != nil {
		bm.Fatal(err)
	}
	defer c.Close()
	in := &pagefmt.Batch{PageSize: PageSize, Pages: pages, Codec: pagefmt.CodecLZ4, Threshold: PageSize * 3 / 4}
	out := &pagefmt.Compressed{}
	if err := c.Compress(context.Background(), in, out); err != nil {
		bm.Fatal(err)
	}
	d := &pagefmt.Decompression{PageSize: PageSize, Dst: make([]byte, len(pages))}
	for i := range in.Len() {
		d.Src = append(d.Src, pagefmt.Stored{Class: out.Class[i], Fill: out.Fill[i], Data: out.Bytes(i, in)})
	}
	for _, be := range []struct {
		name string
		b    func() backends.Backend
	}{{"webgpu", func() backends.Backend { return open(bm) }}, {"cpu", func() backends.Backend { return c }}} {
		bm.Run(be.name, func(bm *testing.B) {
			b := be.b()
			bm.SetBytes(int64(len(pages)))
			for i := range dphaseNs {
				dphaseNs[i].Store(0)
			}
			for bm.Loop() {
				if err := b.Decompress(context.Background(), d); err != nil {
					bm.Fatal(err)
				}
			}
			bm.StopTimer()
			if be.name == "webgpu" {
				for i, name := range []string{"pack", "upload", "cpu-pages", "wait", "copyout"} {
					bm.ReportMetric(float64(dphaseNs[i].Load())/float64(bm.N)/1e6, name+"-ms")
				}
			}
			if !bytes.Equal(d.Dst, pages) {
				bm.Fatal("decompressed pages differ")
			}
		})
	}
}

// eachCaller runs f for callers 0..callers-1 at once and fails bm on the
// first error: one round of a parallel benchmark.
func eachCaller(bm *testing.B, callers int, f func(g int) error) {
	var wg sync.WaitGroup
	errs := make([]error, callers)
	for g := range callers {
		wg.Go(func() { errs[g] = f(g) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			bm.Fatal(err)
		}
	}
}
