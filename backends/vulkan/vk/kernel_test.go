package vk

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"testing"
	"time"

	"github.com/pierrec/lz4/v4"
	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/pagelz4"
	"github.com/s4d-project/s4d/backends/vulkan/spirv"
	"github.com/s4d-project/s4d/pagefmt"
)

// hostMem returns n bytes of zeroed anonymous memory (page aligned, outside
// the Go heap), imported into d.
func hostMem(t testing.TB, d *Device, n int) ([]byte, *Buffer) {
	t.Helper()
	n = (n + 4095) &^ 4095
	m, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	return m, importMapped(t, d, m)
}

// importMapped imports the mapping m into d; both go at the test's end.
func importMapped(t testing.TB, d *Device, m []byte) *Buffer {
	t.Helper()
	b, err := d.Import(m)
	if err != nil {
		unix.Munmap(m)
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Release(); unix.Munmap(m) })
	return b
}

func devMem(t testing.TB, d *Device, n int) *Buffer {
	t.Helper()
	b, err := d.NewBuffer(int64(n))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Release)
	return b
}

// TestCompressKernel runs the WGSL compress kernel, compiled to SPIR-V by
// naga (package spirv), through this binding the way the Vulkan runtime
// would: the client's pages read by the kernel straight from imported
// memory, its outputs in device memory, the counter cleared by a copy
// before the dispatch and the results copied back after it, each step
// waiting for the one before on the other queue. Every page must come
// out as pagelz4 (the CPU reference the webgpu and cuda kernels match)
// and CRC-32C writes it; the engine's kernels must decode back.
//
// Not part of `make test` (S4D_VULKAN_KERNELS=1 runs it): lavapipe
// compiles the module at its first dispatch, and LLVM 15 takes more than
// minutes (and ~7 GB) over naga's compress module, longer than the wait;
// a compile Mesa has cached on disk runs at once (see
// backends/vulkan/README.md). It passed on an H200.
func TestCompressKernel(t *testing.T) {
	if os.Getenv("S4D_VULKAN_KERNELS") == "" && os.Getenv("S4D_VULKAN_ALL_KERNELS") == "" {
		t.Skip("S4D_VULKAN_KERNELS=1 runs it (lavapipe compiles the kernel for minutes)")
	}
	d := open(t)
	if !d.Info().HostImport {
		t.Skip("no VK_EXT_external_memory_host")
	}
	const ps, threshold = 4096, 3072
	var src []byte
	for _, k := range corpus.Kinds {
		src = append(src, corpus.Pages(k, 16, ps, 41)...)
	}
	n := len(src) / ps
	pages, in := hostMem(t, d, len(src))
	copy(pages, src)
	aux, prm := hostMem(t, d, 4096) // params at 0, 16 zero bytes at 1024
	binary.LittleEndian.PutUint32(aux[0:], uint32(n))
	binary.LittleEndian.PutUint32(aux[4:], threshold)
	packed, info, total := devMem(t, d, n*ps), devMem(t, d, n*16), devMem(t, d, 16)
	res, out := hostMem(t, d, n*16+16+n*ps) // info, total, packed

	type variant struct {
		name, entry string
		code        []byte
		exact       bool
	}
	// Both compilers' modules, or the one S4D_VULKAN_SPIRV names.
	var variants []variant
	for _, set := range testSets(t) {
		vs := []variant{{set.Name + "/compress_exact", set.CompressEntry, set.CompressExact, true},
			{set.Name + "/compress", set.CompressEntry, set.Compress, false}, {set.Name + "/compress_sg", set.CompressEntry, set.CompressSubgroups, false}}
		// Building a compress pipeline takes lavapipe ~3 s: `make test` runs
		// the one with pagelz4's bytes; S4D_VULKAN_ALL_KERNELS=1 adds the
		// engine's two (its chain depth, with and without subgroups), checked
		// by decoding.
		if os.Getenv("S4D_VULKAN_ALL_KERNELS") == "" {
			vs = vs[:1]
		}
		variants = append(variants, vs...)
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			k, err := d.NewKernel(v.code, v.entry, Storage, Storage, Storage, Uniform, Storage)
			if err != nil {
				t.Fatal(err)
			}
			defer k.Release()
			for i, b := range []struct {
				buf  *Buffer
				size int64
			}{{in, int64(n * ps)}, {packed, packed.Size}, {info, info.Size}, {prm, 16}, {total, 16}} {
				if err := k.Bind(i, b.buf, 0, b.size); err != nil {
					t.Fatal(err)
				}
			}
			clear(res)
			zero, err := d.Copy(total, prm, []Region{{1024, 0, 16}}, Ticket{})
			if err != nil {
				t.Fatal(err)
			}
			ran, err := k.Dispatch(n, 1, 1, zero)
			if err != nil {
				t.Fatal(err)
			}
			var last Ticket
			for _, c := range []struct {
				from     *Buffer
				at, size int64
			}{{info, 0, int64(n * 16)}, {total, int64(n * 16), 16}, {packed, int64(n*16 + 16), int64(n * ps)}} {
				if last, err = d.Copy(out, c.from, []Region{{0, c.at, c.size}}, ran); err != nil {
					t.Fatal(err)
				}
			}
			if err := d.Wait(last, time.Minute); err != nil {
				z, _ := d.Done(zero)
				r, _ := d.Done(ran)
				t.Fatalf("%v (counter cleared: %v, kernel done: %v)", err, z, r)
			}
			checkCompressed(t, src, res, n, threshold, v.exact)
		})
	}
}

// checkCompressed compares the kernel's output (info: class, size,
// offset or fill low, CRC or fill high per page; then the packed total;
// then the packed blocks) with pagefmt.Classify and pagelz4 (exact), or
// checks that every block decodes to its page (the engine's depth).
func checkCompressed(t *testing.T, src, res []byte, n, threshold int, exact bool) {
	t.Helper()
	const ps = 4096
	word := func(i int) uint32 { return binary.LittleEndian.Uint32(res[4*i:]) }
	total := int(word(4 * n))
	packed := res[n*16+16:]
	if total <= 0 || total > n*ps {
		t.Fatalf("packed total %d", total)
	}
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	var s pagelz4.Scratch
	dst := make([]byte, threshold)
	lz4s := 0
	for i := range n {
		page := src[i*ps : (i+1)*ps]
		class, size, w2, w3 := pagefmt.Class(word(4*i)), int(word(4*i+1)), word(4*i+2), word(4*i+3)
		if c, fill := pagefmt.Classify(page); c != 0 {
			got := uint64(w2) | uint64(w3)<<32
			if class != c || (c == pagefmt.ClassSame && got != fill) || (c == pagefmt.ClassZero && size != 0) {
				t.Fatalf("page %d: class %v size %d fill %#x, want %v %#x", i, class, size, got, c, fill)
			}
			continue
		}
		if !exact {
			got := make([]byte, ps)
			switch {
			case class == pagefmt.ClassRaw && size == ps && w3 == crc32.Checksum(page, castagnoli):
			case class != pagefmt.ClassLZ4 || size <= 0 || size > threshold || int(w2)+size > total:
				t.Fatalf("page %d: class %v, %d bytes at %d", i, class, size, w2)
			case w3 != crc32.Checksum(packed[w2:int(w2)+size], castagnoli):
				t.Fatalf("page %d: CRC %#x of its block is wrong", i, w3)
			default:
				if k, err := lz4.UncompressBlock(packed[w2:int(w2)+size], got); err != nil || k != ps || !bytes.Equal(got, page) {
					t.Fatalf("page %d: its block does not decode to it (%d bytes, %v)", i, k, err)
				}
				lz4s++
			}
			continue
		}
		m := pagelz4.Compress(page, dst, &s)
		switch {
		case m == 0:
			if class != pagefmt.ClassRaw || size != ps || w3 != crc32.Checksum(page, castagnoli) {
				t.Fatalf("page %d: pagelz4 does not fit it under %d bytes; the kernel gave class %v, %d bytes, CRC %#x", i, threshold, class, size, w3)
			}
		case class != pagefmt.ClassLZ4 || size != m || int(w2)+size > total:
			t.Fatalf("page %d: class %v, %d bytes at %d; pagelz4 wrote %d", i, class, size, w2, m)
		case !bytes.Equal(packed[w2:int(w2)+size], dst[:m]):
			t.Fatalf("page %d: the kernel's block differs from pagelz4's", i)
		case w3 != crc32.Checksum(dst[:m], castagnoli):
			t.Fatalf("page %d: CRC %#x, want %#x", i, w3, crc32.Checksum(dst[:m], castagnoli))
		default:
			lz4s++
		}
	}
	if lz4s == 0 {
		t.Fatal("no page was compressed: the test checked nothing")
	}
	t.Logf("%d pages, %d lz4, packed %d bytes", n, lz4s, total)
}

// testSets are the SPIR-V sets the kernel tests and benchmarks run: both
// compilers', or the one S4D_VULKAN_SPIRV names.
func testSets(tb testing.TB) []spirv.Set {
	if os.Getenv(spirv.EnvCompiler) == "" {
		return spirv.Sets()
	}
	s, err := spirv.Selected()
	if err != nil {
		tb.Fatal(err)
	}
	return []spirv.Set{s}
}
