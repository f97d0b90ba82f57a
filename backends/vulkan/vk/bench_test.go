package vk

import (
	"cmp"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/vulkan/spirv"
)

// cpuSeconds is the process's user+system time (every thread, the
// driver's too).
func cpuSeconds() float64 {
	var r syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r)
	return float64(r.Utime.Nano()+r.Stime.Nano()) / 1e9
}

// BenchmarkCompress is the PUT path of a Vulkan runtime without staging:
// batches of 4096 pages, 4 in flight, each one a counter clear, the compress
// kernel and the readback of its metadata and packed bytes into imported
// host memory. "imported": the kernel reads the client's pages straight
// from imported host memory (across PCIe on a GPU); "device": the pages
// were put in device memory first (the kernel alone, the ceiling).
// S4D_BENCH_MIB sets the pages' size (default 256), S4D_BENCH_SG=1 the
// subgroup kernel, S4D_BENCH_EXACT=1 pagelz4's chain depth (default: the
// engine's, as backends/webgpu's benchmarks run). Each compiler's module
// runs in turn (tint/..., naga/...; S4D_VULKAN_SPIRV picks one).
// S4D_BENCH_FILE takes the pages from a file (the daemon benchmarks'
// corpus compresses slower), S4D_BENCH_HOSTOUT=1 adds "hostout" and
// S4D_BENCH_DEPTH the batches in flight (see benchCompress),
// S4D_BENCH_MEMFD=1 puts the pages in a shared memfd mapping, as a
// client's buffer is, instead of anonymous memory (which may get huge
// pages).
// Reports GB/s of pages and core-s/GB.
func BenchmarkCompress(b *testing.B) {
	d, err := Open(Options{Device: -1})
	if err != nil {
		b.Skip(err)
	}
	b.Cleanup(d.Close) // first registered, so it runs after the buffers' cleanups
	b.Logf("%+v", d.Info())
	mib := 256
	if v, err := strconv.Atoi(os.Getenv("S4D_BENCH_MIB")); err == nil && v > 0 {
		mib = v
	}
	const ps, batch, depth, threshold = 4096, 4096, 4, 3072
	total := mib << 20 / (batch * ps) * (batch * ps)
	if total == 0 {
		total = batch * ps
	}
	mem := hostMem
	if os.Getenv("S4D_BENCH_MEMFD") == "1" {
		mem = memfdMem
	}
	pages, in := mem(b, d, total)
	// The webgpu benchmarks' pages (64 MiB of corpus.Mixed, repeated), or
	// S4D_BENCH_FILE's (the daemon benchmarks' corpus, say).
	mix := corpus.Pages(corpus.Mixed, 16384, ps, 5)
	if f := os.Getenv("S4D_BENCH_FILE"); f != "" {
		if mix, err = os.ReadFile(f); err != nil || len(mix) < ps {
			b.Fatalf("S4D_BENCH_FILE: %d bytes, %v", len(mix), err)
		}
		mix = mix[:min(len(mix), total)/ps*ps]
	}
	for off := 0; off < total; off += len(mix) {
		copy(pages[off:], mix)
	}
	devPages := devMem(b, d, total)
	up, _ := d.Copy(devPages, in, []Region{{0, 0, int64(total)}}, Ticket{})
	if err := d.Wait(up, time.Minute); err != nil {
		b.Fatal(err)
	}
	aux, prm := hostMem(b, d, 4096)
	binary.LittleEndian.PutUint32(aux[0:], batch)
	binary.LittleEndian.PutUint32(aux[4:], threshold)
	_, out := hostMem(b, d, depth*(batch*16+16+batch*ps))
	sets := testSets(b)
	// S4D_BENCH_SPV_DIR: one more set, DIR/compress.spv and
	// DIR/compress_sg.spv with entry point dawn_entry_point (tintgen's
	// output under other toggles), named S4D_BENCH_SPV_NAME.
	if dir := os.Getenv("S4D_BENCH_SPV_DIR"); dir != "" {
		x := spirv.Set{Name: cmp.Or(os.Getenv("S4D_BENCH_SPV_NAME"), "extra"), CompressEntry: "dawn_entry_point"}
		for _, f := range []struct {
			to   *[]byte
			name string
		}{{&x.Compress, "compress.spv"}, {&x.CompressSubgroups, "compress_sg.spv"}, {&x.CompressExact, "compress_exact.spv"}} {
			if *f.to, err = os.ReadFile(filepath.Join(dir, f.name)); err != nil {
				b.Fatal(err)
			}
		}
		sets = append(sets, x)
	}
	for _, set := range sets {
		code := set.Compress
		if os.Getenv("S4D_BENCH_SG") == "1" {
			code = set.CompressSubgroups
		}
		if os.Getenv("S4D_BENCH_EXACT") == "1" {
			code = set.CompressExact
		}
		wheres := []string{"imported", "device"}
		if os.Getenv("S4D_BENCH_HOSTOUT") == "1" {
			wheres = append(wheres, "hostout")
		}
		for _, where := range wheres {
			benchCompress(b, d, set.Name+"/"+where, code, set.CompressEntry, where, in, devPages, prm, out, total)
		}
	}
}

// where: "imported" (pages in imported host memory), "device" (pages in
// device memory), or "hostout": pages imported and the kernel writing its
// results straight into imported host memory, nothing copied, as the
// engine's Vulkan runtime does. S4D_BENCH_DEPTH sets the batches in
// flight (default 4).
func benchCompress(b *testing.B, d *Device, name string, code []byte, entry string, where string, in, devPages, prm, out *Buffer, total int) {
	const ps, batch = 4096, 4096
	depth := 4
	if v, err := strconv.Atoi(os.Getenv("S4D_BENCH_DEPTH")); err == nil && v > 0 {
		depth = v
	}
	type slot struct {
		k                    *Kernel
		packed, info, counts *Buffer
		countsOff            int64
		last                 Ticket
	}
	slotOut := int64(batch*16 + 16 + batch*ps)
	// hostout's layout in a slot's own host buffer: info, counts, packed.
	const hInfo, hCounts, hPacked = 0, batch * 16, batch*16 + 256
	b.Run(name, func(b *testing.B) {
		src := in
		if where == "device" {
			src = devPages
		}
		slots := make([]slot, depth)
		for i := range slots {
			s := &slots[i]
			var err error
			if s.k, err = d.NewKernel(code, entry, Storage, Storage, Storage, Uniform, Storage); err != nil {
				b.Fatal(err)
			}
			defer s.k.Release()
			if where == "hostout" {
				_, h := hostMem(b, d, hPacked+batch*ps)
				s.packed, s.info, s.counts, s.countsOff = h, h, h, hCounts
				s.k.Bind(1, h, hPacked, batch*ps)
				s.k.Bind(2, h, hInfo, batch*16)
				s.k.Bind(4, h, hCounts, 16)
			} else {
				s.packed, s.info, s.counts = devMem(b, d, batch*ps), devMem(b, d, batch*16), devMem(b, d, 16)
				s.k.Bind(1, s.packed, 0, s.packed.Size)
				s.k.Bind(2, s.info, 0, s.info.Size)
				s.k.Bind(4, s.counts, 0, 16)
			}
			s.k.Bind(3, prm, 0, 16)
		}
		nb := total / (batch * ps)
		b.SetBytes(int64(total))
		b.ResetTimer()
		c0 := cpuSeconds()
		for range b.N {
			for i := range nb {
				s := &slots[i%depth]
				if err := d.Wait(s.last, time.Minute); err != nil {
					b.Fatal(err)
				}
				s.k.Bind(0, src, int64(i*batch*ps), batch*ps)
				z, err := d.Copy(s.counts, prm, []Region{{1024, s.countsOff, 16}}, Ticket{})
				if err != nil {
					b.Fatal(err)
				}
				ran, err := s.k.Dispatch(batch, 1, 1, z)
				if err != nil {
					b.Fatal(err)
				}
				// The metadata and counter, then packed bytes: half a page
				// a page, about what a ratio of 2 needs (the runtime would
				// read the counter first and copy what was written).
				o := int64(i%4) * slotOut // out holds 4 slots: deeper ones share (nothing reads them)
				if where == "hostout" {
					s.last = ran // the results are in host memory already
				} else if _, err = d.Copy(out, s.info, []Region{{0, o, batch * 16}}, ran); err == nil {
					if _, err = d.Copy(out, s.counts, []Region{{0, o + batch*16, 16}}, ran); err == nil {
						s.last, err = d.Copy(out, s.packed, []Region{{0, o + batch*16 + 16, batch * ps / 2}}, ran)
					}
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			for i := range slots {
				if err := d.Wait(slots[i].last, time.Minute); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StopTimer()
		b.ReportMetric((cpuSeconds()-c0)/(float64(total)*float64(b.N)/1e9), "core-s/GB")
	})
}

// memfdMem is n bytes of a shared memfd mapping, imported.
func memfdMem(t testing.TB, d *Device, n int) ([]byte, *Buffer) {
	t.Helper()
	fd, err := unix.MemfdCreate("s4d-bench", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, int64(n)); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(fd, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += 4096 {
		m[i] = 0 // allocated before the import, as a client's filled buffer is
	}
	return m, importMapped(t, d, m)
}
