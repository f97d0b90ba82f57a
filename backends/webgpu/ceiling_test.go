// Ceiling benchmarks (issue 29): what the host copies and the transfers
// alone reach at the engine's sizes, to set beside the kernels alone
// (BenchmarkKernel64MiB, BenchmarkDecompressKernel64MiB) and the whole
// engine (BenchmarkCompress64MiB, BenchmarkDecompress64MiB, which run
// the cpu engine in the same process).

package webgpu

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/pagefmt"
)

// ceilPages is the daemon's batch: 4096 pages of 4 KiB (16 MiB).
const ceilPages = 4096

// BenchmarkCeilingHostCopy is the staging memcpy alone: 16 MiB into the
// mapped staging buffer (dst=staging, what PUT's copy in writes to) and
// into ordinary memory (dst=heap), on 1..16 goroutines.
func BenchmarkCeilingHostCopy(bm *testing.B) {
	b := open(bm)
	pages := benchPages(bm)[:ceilPages*PageSize]
	s := <-b.slots
	defer func() { b.slots <- s }()
	staged, err := b.stagedSlice(s, ceilPages)
	if err != nil {
		bm.Fatal(err)
	}
	heap := make([]byte, len(pages))
	for _, dst := range []struct {
		name string
		buf  []byte
	}{{"staging", staged}, {"heap", heap}} {
		for _, t := range []int{1, 2, 4, 8, 16} {
			bm.Run(fmt.Sprintf("dst=%s/threads=%d", dst.name, t), func(bm *testing.B) {
				bm.SetBytes(int64(len(pages)))
				for bm.Loop() {
					ceilCopy(dst.buf, pages, t)
				}
			})
		}
	}
	if !bytes.Equal(staged, pages) || !bytes.Equal(heap, pages) {
		bm.Fatal("copied bytes differ")
	}
}

// ceilCopy is parallelCopy with exactly t goroutines, even on small
// slices, so the thread counts mean what they say.
func ceilCopy(dst, src []byte, t int) {
	if t == 1 {
		copy(dst, src)
		return
	}
	var wg sync.WaitGroup
	per := (len(src) + t - 1) / t
	for lo := 0; lo < len(src); lo += per {
		hi := min(lo+per, len(src))
		wg.Add(1)
		go func() {
			defer wg.Done()
			copy(dst[lo:hi], src[lo:hi])
		}()
	}
	wg.Wait()
}

// BenchmarkCeilingCopyOnly moves 4096-page batches through the engine's
// own buffers with no compute pass: up is PUT's transfers (stage, copy to
// the device), down is GET's (device to readback, copy out), both is a
// round trip. callers batches run at once, each on its own slot (the
// daemon's clients overlap so). This is what the engine could reach with
// an infinitely fast kernel; the gap from here to the targets is the
// implementation's and the driver's.
func BenchmarkCeilingCopyOnly(bm *testing.B) {
	b := open(bm)
	pages := benchPages(bm)[:ceilPages*PageSize]
	var slots []*slot
	for range numSlots {
		slots = append(slots, <-b.slots)
	}
	for range extraSlots {
		slots = append(slots, <-b.extra)
	}
	defer func() {
		for _, s := range slots {
			if s.extra {
				b.extra <- s
			} else {
				b.slots <- s
			}
		}
	}()
	dsts := make([][]byte, len(slots))
	for i := range dsts {
		dsts[i] = make([]byte, len(pages))
	}
	// Fill every slot's device buffer once, so down-only reads real pages.
	for i, s := range slots {
		if err := b.copyPass(s, pages, dsts[i], ceilPages, true, true, 8); err != nil {
			bm.Fatal(err)
		}
		if !bytes.Equal(dsts[i], pages) {
			bm.Fatal("pages differ after a round trip through the device")
		}
	}
	for _, mode := range []string{"up", "down", "both"} {
		up, down := mode != "down", mode != "up"
		for _, callers := range []int{1, 2, 4} {
			if callers > len(slots) {
				continue
			}
			// As the engine: a lone batch copies on every core, overlapping
			// ones on 8 goroutines each.
			procs := 8
			if callers == 1 {
				procs = runtime.GOMAXPROCS(0)
			}
			bm.Run(fmt.Sprintf("%s/callers=%d", mode, callers), func(bm *testing.B) {
				bm.SetBytes(int64(callers * len(pages)))
				cpu0 := cpuSeconds()
				for bm.Loop() {
					eachCaller(bm, callers, func(g int) error { return b.copyPass(slots[g], pages, dsts[g], ceilPages, up, down, procs) })
				}
				bm.StopTimer()
				gb := float64(callers*len(pages)) * float64(bm.N) / 1e9
				bm.ReportMetric((cpuSeconds()-cpu0)/gb, "core-s/GB")
			})
		}
	}
	for i := range dsts {
		if !bytes.Equal(dsts[i], pages) {
			bm.Fatal("pages differ after the copies")
		}
	}
}

// BenchmarkDecompressParallel has 8 callers expand 4096-page batches at
// once (the daemon's GETs), on a backend of its own with 2 and with 4
// decompression sets (numDSlots: the old and the new default), and with
// the cpu engine in the same run.
func BenchmarkDecompressParallel(bm *testing.B) {
	open(bm) // skips without the library
	pages := benchPages(bm)
	c, err := cpu.New(backends.Options{})
	if err != nil {
		bm.Fatal(err)
	}
	defer c.Close()
	const callers = 8
	nb := len(pages) / (ceilPages * PageSize)
	srcs := make([][]pagefmt.Stored, nb)
	for k := range nb {
		part := pages[k*ceilPages*PageSize : (k+1)*ceilPages*PageSize]
		in := &pagefmt.Batch{PageSize: PageSize, Pages: part, Codec: pagefmt.CodecLZ4, Threshold: PageSize * 3 / 4}
		out := &pagefmt.Compressed{}
		if err := c.Compress(context.Background(), in, out); err != nil {
			bm.Fatal(err)
		}
		for i := range in.Len() {
			srcs[k] = append(srcs[k], pagefmt.Stored{Class: out.Class[i], Fill: out.Fill[i], Data: out.Bytes(i, in)})
		}
	}
	run := func(bm *testing.B, b backends.Backend) {
		ds := make([]*pagefmt.Decompression, callers)
		for g := range ds {
			ds[g] = &pagefmt.Decompression{PageSize: PageSize, Src: srcs[g%nb], Dst: make([]byte, ceilPages*PageSize)}
		}
		bm.SetBytes(int64(callers * ceilPages * PageSize))
		cpu0 := cpuSeconds()
		for bm.Loop() {
			eachCaller(bm, callers, func(g int) error { return b.Decompress(context.Background(), ds[g]) })
		}
		bm.StopTimer()
		bm.ReportMetric((cpuSeconds()-cpu0)/(float64(callers*ceilPages*PageSize)*float64(bm.N)/1e9), "core-s/GB")
		for g, d := range ds {
			k := g % nb
			if !bytes.Equal(d.Dst, pages[k*ceilPages*PageSize:(k+1)*ceilPages*PageSize]) {
				bm.Fatalf("caller %d: decompressed pages differ", g)
			}
		}
	}
	for _, n := range []int{2, 4} {
		bm.Run(fmt.Sprintf("webgpu/dslots=%d", n), func(bm *testing.B) {
			old := numDSlots
			numDSlots = n
			b, err := New(webgpuh(backends.Options{}), true)
			numDSlots = old
			if err != nil {
				bm.Fatal(err)
			}
			defer b.Close()
			run(bm, b)
		})
	}
	bm.Run("cpu", func(bm *testing.B) { run(bm, c) })
}
