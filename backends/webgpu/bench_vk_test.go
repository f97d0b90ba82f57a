package webgpu

import (
	"context"
	"testing"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/backends/vulkan/vk"
	"github.com/s4d-project/s4d/pagefmt"
)

// BenchmarkVulkanDecompress is GET on the Vulkan runtime in this process,
// no daemon: 64 MiB of pages (S4D_BENCH_PAGES, or corpus.Mixed)
// compressed by the engine, then expanded by the whole engine path with
// four callers at once (engine: packing, kernel, copies into place, the
// CPU's classes; cpu: the cpu engine on every core, the reference), and
// by the decompress kernel alone over the blocks it
// already holds (kernel; bytes are the LZ4 pages'). Where the two differ,
// host work is GET's limit.
func BenchmarkVulkanDecompress(bm *testing.B) {
	kernelsHere(bm)
	b := openVK(bm)
	pages := benchPages(bm)
	in := &pagefmt.Batch{PageSize: PageSize, Pages: pages, Codec: pagefmt.CodecLZ4, Threshold: PageSize * 3 / 4}
	out := &pagefmt.Compressed{}
	if err := b.Compress(context.Background(), in, out); err != nil {
		bm.Fatal(err)
	}
	n := in.Len()
	mk := func() *pagefmt.Decompression {
		d := &pagefmt.Decompression{PageSize: PageSize, Dst: make([]byte, len(pages)), Src: make([]pagefmt.Stored, n)}
		for i := range n {
			d.Src[i] = pagefmt.Stored{Class: out.Class[i], Fill: out.Fill[i], Data: out.Bytes(i, in)}
		}
		return d
	}
	c, err := cpu.New(backends.Options{})
	if err != nil {
		bm.Fatal(err)
	}
	defer c.Close()
	for _, e := range []struct {
		name string
		b    backends.Backend
	}{{"engine-4callers", b}, {"cpu-4callers", c}} {
		bm.Run(e.name, func(bm *testing.B) {
			const callers = 4
			var ds [callers]*pagefmt.Decompression
			for g := range ds {
				ds[g] = mk()
			}
			bm.SetBytes(int64(callers * len(pages)))
			cpu0 := cpuSeconds()
			for bm.Loop() {
				eachCaller(bm, callers, func(g int) error { return e.b.Decompress(context.Background(), ds[g]) })
			}
			bm.StopTimer()
			bm.ReportMetric((cpuSeconds()-cpu0)/(float64(callers*len(pages))*float64(bm.N)/1e9), "core-s/GB")
			for i := range n {
				if ds[0].Failed[i] || string(ds[0].Dst[i*PageSize:(i+1)*PageSize]) != string(in.Page(i)) {
					bm.Fatalf("page %d differs", i)
				}
			}
		})
	}
	bm.Run("kernel", func(bm *testing.B) {
		if err := b.Decompress(context.Background(), mk()); err != nil {
			bm.Fatal(err)
		}
		s := b.dlast.Load()
		bm.SetBytes(int64(s.lastN * PageSize))
		for bm.Loop() {
			if err := b.vkDKernelPass(s); err != nil {
				bm.Fatal(err)
			}
		}
		bm.ReportMetric(float64(s.lastN)/float64(n), "lz4-share")
	})
	// The kernel reading its blocks (devin), and writing its pages too
	// (devall), in device memory instead of the slot's imported host
	// memory: whether the parse's dependent reads across PCIe hold it.
	for _, where := range []string{"devin", "devall"} {
		bm.Run("kernel-"+where, func(bm *testing.B) {
			if err := b.Decompress(context.Background(), mk()); err != nil {
				bm.Fatal(err)
			}
			s := b.dlast.Load()
			v, rt, k := s.vs, b.vk, b.vk.decomp
			dev, err := rt.d.NewBuffer(int64(len(v.in.mem)))
			if err != nil {
				bm.Fatal(err)
			}
			defer dev.Release()
			t, err := rt.d.Copy(dev, v.in.buf, []vk.Region{{Src: 0, Dst: 0, Size: int64(len(v.in.mem))}}, vk.Ticket{})
			if err == nil {
				err = rt.d.Wait(t, rt.wait)
			}
			if err != nil {
				bm.Fatal(err)
			}
			type binding struct {
				i         int
				buf       *vk.Buffer
				off, size int64
			}
			dr := int64(vkDescRoom(v.cap))
			binds := []binding{{0, dev, dr, int64(v.lastTotal)}, {1, dev, 0, int64(8 * s.lastN)}}
			if where == "devall" {
				out, err := rt.d.NewBuffer(int64(len(v.out.mem)))
				if err != nil {
					bm.Fatal(err)
				}
				defer out.Release()
				binds = append(binds, binding{2, out, int64(vkPagesOff(v.cap)), int64(s.lastN * PageSize)})
			}
			for _, x := range binds {
				if err := k.BindSet(v.set, x.i, x.buf, x.off, x.size); err != nil {
					bm.Fatal(err)
				}
			}
			bm.SetBytes(int64(s.lastN * PageSize))
			for bm.Loop() {
				if err := b.vkDKernelPass(s); err != nil {
					bm.Fatal(err)
				}
			}
		})
	}
}
