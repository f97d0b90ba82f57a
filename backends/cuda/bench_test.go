package cuda_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/backends/cuda"
	"github.com/s4d-project/s4d/pagefmt"
)

const benchBatch = 64 << 20

// benchPages returns the pages to compress: the private writable memory of
// the process S4D_BENCH_PID (what zram would see of it), else a synthetic
// mixed heap. The result is a whole number of 64 MiB batches.
func benchPages(b *testing.B) ([]byte, string) {
	if pid := os.Getenv("S4D_BENCH_PID"); pid != "" {
		mem, err := snapshot(pid, 4*benchBatch)
		if err != nil {
			b.Fatalf("snapshot of %s: %v", pid, err)
		}
		if len(mem) >= benchBatch {
			return mem[:len(mem)/benchBatch*benchBatch], "pid " + pid
		}
		b.Logf("pid %s has only %d bytes of private memory; using the synthetic corpus", pid, len(mem))
	}
	return corpus.Pages(corpus.Mixed, 2*benchBatch/4096, 4096, 1), "corpus.Mixed"
}

func snapshot(pid string, limit int) ([]byte, error) {
	maps, err := os.Open("/proc/" + pid + "/maps")
	if err != nil {
		return nil, err
	}
	defer maps.Close()
	mem, err := os.Open("/proc/" + pid + "/mem")
	if err != nil {
		return nil, err
	}
	defer mem.Close()
	var out []byte
	sc := bufio.NewScanner(maps)
	for sc.Scan() && len(out) < limit {
		f := strings.Fields(sc.Text())
		if len(f) < 5 || f[1] != "rw-p" || (len(f) > 5 && strings.HasPrefix(f[5], "[v")) {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		n := min(int(end-start), limit-len(out))
		buf := make([]byte, n)
		if m, _ := mem.ReadAt(buf, int64(start)); m > 0 {
			out = append(out, buf[:m/4096*4096]...)
		}
	}
	return out, sc.Err()
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// BenchmarkCompress compares the GPU with the CPU backend on all cores, on
// the same 64 MiB batches, in one run: end-to-end GB/s (pages in, classes
// and packed bytes out in Go memory) and CPU core-seconds spent per GB.
func BenchmarkCompress(b *testing.B) {
	pages, src := benchPages(b)
	zero := 0
	for i := 0; i < len(pages); i += 4096 {
		if c, _ := pagefmt.Classify(pages[i : i+4096]); c == pagefmt.ClassZero {
			zero++
		}
	}
	b.Logf("%d MiB from %s, %.0f%% zero pages", len(pages)>>20, src, 100*float64(zero)/float64(len(pages)/4096))
	gpu := openGPU(b, backends.Options{})
	b.Logf("cuda: %s", gpu.Describe())
	ref, err := cpu.New(backends.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer ref.Close()
	// nvCOMP's LZ4 on the same pages, for comparison with s4d_lz4.
	nvc := openGPU(b, backends.Options{Tuning: backends.Tuning{CUDANvcompLZ4: true}})
	for _, codec := range []pagefmt.Codec{pagefmt.CodecLZ4, pagefmt.CodecZstd} {
		for _, be := range []struct {
			name string
			b    *cuda.Backend
		}{{"cuda", gpu}, {"cuda-pinned", gpu}, {"cuda-registered", gpu}, {"cuda-nvcomp-pinned", nvc}, {"cpu", nil}} {
			if be.name == "cuda-nvcomp-pinned" && codec != pagefmt.CodecLZ4 {
				continue
			}
			b.Run(fmt.Sprintf("%s/%s", be.name, codec), func(b *testing.B) {
				if be.b == nil {
					benchCompress(b, ref, pages, codec)
					return
				}
				src := pages
				switch be.name {
				case "cuda-pinned", "cuda-nvcomp-pinned":
					// Pages already in the backend's pinned memory, as a
					// caller receiving them into a HostBuffer has them.
					buf, err := be.b.HostBuffer(len(pages))
					if err != nil {
						b.Fatal(err)
					}
					defer be.b.FreeHostBuffer(buf)
					copy(buf, pages)
					src = buf
				case "cuda-registered":
					// Pages in the caller's own memory, registered once:
					// the daemon's case with a client's shared memfd.
					mem, err := unix.Mmap(-1, 0, len(pages), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
					if err != nil {
						b.Fatal(err)
					}
					defer unix.Munmap(mem)
					copy(mem, pages)
					unpin, err := be.b.Pin(mem)
					if err != nil {
						b.Fatal(err)
					}
					defer unpin()
					src = mem
				}
				benchCompress(b, be.b, src, codec)
			})
		}
	}
}

func benchCompress(b *testing.B, be backends.Backend, pages []byte, codec pagefmt.Codec) {
	batches := len(pages) / benchBatch
	outs := make([]pagefmt.Compressed, batches)
	in := make([]pagefmt.Batch, batches)
	for i := range in {
		in[i] = pagefmt.Batch{PageSize: 4096, Pages: pages[i*benchBatch : (i+1)*benchBatch], Codec: codec, Threshold: 3072}
		// Warm up: buffers sized, encoders built.
		if err := be.Compress(context.Background(), &in[i], &outs[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(benchBatch)
	g, isGPU := be.(*cuda.Backend)
	if isGPU {
		g.Trace()
	}
	b.ResetTimer()
	cpu0, t0 := cpuSeconds(), time.Now()
	for i := 0; i < b.N; i++ {
		if err := be.Compress(context.Background(), &in[i%batches], &outs[i%batches]); err != nil {
			b.Fatal(err)
		}
	}
	el, cs := time.Since(t0).Seconds(), cpuSeconds()-cpu0
	b.StopTimer()
	gb := float64(b.N) * benchBatch / 1e9
	stored := 0
	for i := range in {
		for p := range in[i].Len() {
			stored += int(outs[i].Size[p])
		}
	}
	if isGPU {
		st, sub, w, f := g.Trace()
		ms := func(d time.Duration) float64 { return d.Seconds() * 1e3 / float64(b.N) }
		b.Logf("per 64 MiB batch, ms: stage %.2f submit %.2f wait %.2f finish %.2f of %.2f",
			ms(st), ms(sub), ms(w), ms(f), el*1e3/float64(b.N))
	}
	b.ReportMetric(gb/el, "GB/s")
	b.ReportMetric(cs/gb, "core-s/GB")
	b.ReportMetric(float64(len(in)*benchBatch)/float64(max(stored, 1)), "ratio")
}

// BenchmarkDecompress expands what the CPU backend stored, on both.
func BenchmarkDecompress(b *testing.B) {
	pages, _ := benchPages(b)
	pages = pages[:benchBatch]
	gpu := openGPU(b, backends.Options{})
	ref, err := cpu.New(backends.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer ref.Close()
	for _, codec := range []pagefmt.Codec{pagefmt.CodecLZ4, pagefmt.CodecZstd} {
		in := &pagefmt.Batch{PageSize: 4096, Pages: pages, Codec: codec, Threshold: 3072}
		var out pagefmt.Compressed
		if err := ref.Compress(context.Background(), in, &out); err != nil {
			b.Fatal(err)
		}
		var src []pagefmt.Stored
		for i := range in.Len() {
			src = append(src, pagefmt.Stored{Class: out.Class[i], Fill: out.Fill[i], Data: out.Bytes(i, in)})
		}
		pinned, err := gpu.HostBuffer(len(pages))
		if err != nil {
			b.Fatal(err)
		}
		defer gpu.FreeHostBuffer(pinned)
		// callers > 1: that many goroutines decode the batch in chunks of
		// 1024 pages, as the daemon's concurrent GETs do.
		for _, c := range []struct {
			name    string
			be      backends.Backend
			dst     []byte
			callers int
		}{{"cuda", gpu, make([]byte, len(pages)), 1}, {"cuda-pinned", gpu, pinned, 1},
			{"cuda-pinned-4callers", gpu, pinned, 4}, {"cpu", ref, make([]byte, len(pages)), 1}} {
			d := &pagefmt.Decompression{PageSize: 4096, Src: src, Dst: c.dst}
			run := func() error {
				if c.callers == 1 {
					return c.be.Decompress(context.Background(), d)
				}
				return decodeChunks(c.be, d, 1024, c.callers)
			}
			b.Run(fmt.Sprintf("%s/%s", c.name, codec), func(b *testing.B) {
				if err := run(); err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(pages)))
				gpu.Trace()
				b.ResetTimer()
				cpu0, t0 := cpuSeconds(), time.Now()
				for i := 0; i < b.N; i++ {
					if err := run(); err != nil {
						b.Fatal(err)
					}
				}
				el, cs := time.Since(t0).Seconds(), cpuSeconds()-cpu0
				if c.be == gpu && codec == pagefmt.CodecLZ4 {
					st, sub, w, f := gpu.Trace()
					ms := func(d time.Duration) float64 { return d.Seconds() * 1e3 / float64(b.N) }
					b.Logf("per 64 MiB, ms summed over callers: pack %.2f submit %.2f wait %.2f finish %.2f; wall %.2f",
						ms(st), ms(sub), ms(w), ms(f), el*1e3/float64(b.N))
				}
				gb := float64(b.N) * float64(len(pages)) / 1e9
				b.ReportMetric(gb/el, "GB/s")
				b.ReportMetric(cs/gb, "core-s/GB")
				for i := range d.Failed {
					if d.Failed[i] {
						b.Fatalf("page %d failed", i)
					}
				}
			})
		}
	}
}

// BenchmarkCompressParallel is BenchmarkCompress's registered case with
// several callers at once, as the daemon's connections call it: the slot
// ring keeps the GPU busy while each caller unpacks its results.
func BenchmarkCompressParallel(b *testing.B) {
	pages, _ := benchPages(b)
	gpu := openGPU(b, backends.Options{})
	mem, err := unix.Mmap(-1, 0, len(pages), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Munmap(mem)
	copy(mem, pages)
	unpin, err := gpu.Pin(mem)
	if err != nil {
		b.Fatal(err)
	}
	defer unpin()
	batches := len(pages) / benchBatch
	for _, callers := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("callers-%d", callers), func(b *testing.B) {
			outs := make([]pagefmt.Compressed, callers)
			run := func(g, i int) error {
				k := (g + i) % batches
				in := pagefmt.Batch{PageSize: 4096, Pages: mem[k*benchBatch : (k+1)*benchBatch], Codec: pagefmt.CodecLZ4, Threshold: 3072}
				return gpu.Compress(context.Background(), &in, &outs[g])
			}
			for g := range callers {
				if err := run(g, 0); err != nil {
					b.Fatal(err)
				}
			}
			gpu.Trace()
			b.SetBytes(benchBatch)
			b.ResetTimer()
			cpu0, t0 := cpuSeconds(), time.Now()
			var wg sync.WaitGroup
			var next atomic.Int64
			for g := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := int(next.Add(1)) - 1; i < b.N; i = int(next.Add(1)) - 1 {
						if err := run(g, i); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			el, cs := time.Since(t0).Seconds(), cpuSeconds()-cpu0
			b.StopTimer()
			gb := float64(b.N) * benchBatch / 1e9
			st, sub, w, f := gpu.Trace()
			ms := func(d time.Duration) float64 { return d.Seconds() * 1e3 / float64(b.N) }
			b.Logf("per 64 MiB batch, ms summed over callers: stage %.2f submit %.2f wait %.2f unpack %.2f; wall %.2f",
				ms(st), ms(sub), ms(w), ms(f), el*1e3/float64(b.N))
			b.ReportMetric(gb/el, "GB/s")
			b.ReportMetric(cs/gb, "core-s/GB")
		})
	}
}

// decodeChunks decodes d in chunks of `chunk` pages on `callers`
// goroutines, each chunk its own call, and gathers the failures into d.
func decodeChunks(be backends.Backend, d *pagefmt.Decompression, chunk, callers int) error {
	n, ps := len(d.Src), d.PageSize
	d.Failed = make([]bool, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				lo := int(next.Add(int64(chunk))) - chunk
				if lo >= n {
					return
				}
				hi := min(lo+chunk, n)
				part := &pagefmt.Decompression{PageSize: ps, Src: d.Src[lo:hi], Dst: d.Dst[lo*ps : hi*ps]}
				if err := be.Decompress(context.Background(), part); err != nil {
					errs <- err
					return
				}
				copy(d.Failed[lo:hi], part.Failed)
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// BenchmarkUnpackParts times s4d_unpack's upload, kernel and download
// apart, on one slot's worth of live-process pages the cpu backend stored.
func BenchmarkUnpackParts(b *testing.B) {
	pages, _ := benchPages(b)
	gpu := openGPU(b, backends.Options{})
	d := &pagefmt.Decompression{PageSize: 4096, Src: storedByCPU(b, cpuRef(b), pages[:benchBatch], 4096, 3072)}
	for b.Loop() {
		up, k, down, n, err := gpu.TimeUnpack(d, 20)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(up.Microseconds()), "us-up")
		b.ReportMetric(float64(k.Microseconds()), "us-kernel")
		b.ReportMetric(float64(down.Microseconds()), "us-down")
		b.ReportMetric(float64(n), "pages")
	}
}
