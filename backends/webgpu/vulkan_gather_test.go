package webgpu

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/pagefmt"
)

// gatherCase is a GET as the daemon makes one: stored pages in a pinned
// slab mapping laid out as the store lays them (4160-byte slots, each
// page 4 bytes in, behind its sum), one raw page elsewhere, and the destination a window of a
// pinned, writable client memfd mapping at an offset that is not
// 256-aligned.
type gatherCase struct {
	want    []byte // the pages
	src     []pagefmt.Stored
	bad     int // a raw page whose sum is wrong
	badLZ   int // an LZ4 page whose sum is wrong
	unsum   int // a raw page asking no check
	outside int // a raw page in no pinned mapping
}

func newGatherCase(t *testing.T, b *Backend) (*gatherCase, []byte) {
	t.Helper()
	var pages []byte
	for _, k := range corpus.Kinds {
		pages = append(pages, corpus.Pages(k, 120, PageSize, 11)...)
	}
	in := &pagefmt.Batch{PageSize: PageSize, Pages: pages, Codec: pagefmt.CodecLZ4, Threshold: PageSize * 3 / 4}
	out := &pagefmt.Compressed{}
	if err := b.Compress(context.Background(), in, out); err != nil {
		t.Fatal(err)
	}
	slab, err := unix.Mmap(-1, 0, 16<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(slab) })
	unpin, err := pinBackend{b}.Pin(slab)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unpin)
	c := &gatherCase{want: pages, bad: -1, badLZ: -1, unsum: -1, outside: -1}
	at := 0
	for i := range in.Len() {
		data := out.Bytes(i, in)
		s := pagefmt.Stored{Class: out.Class[i], Fill: out.Fill[i], Sum: out.Checksum(i, in), Check: true}
		if len(data) > 0 {
			if s.Class == pagefmt.ClassRaw && c.outside < 0 {
				c.outside = i
				s.Data = append(make([]byte, 0, PageSize), data...)
			} else {
				s.Data = slab[at+4 : at+4+len(data)] // behind its sum, as the store keeps it
				copy(s.Data, data)
				at += 4160
			}
		}
		if s.Class == pagefmt.ClassLZ4 && c.badLZ < 0 {
			c.badLZ = i
			s.Sum++
		}
		if s.Class == pagefmt.ClassRaw && i != c.outside {
			switch {
			case c.bad < 0:
				c.bad = i
				s.Sum++
			case c.unsum < 0:
				c.unsum, s.Check = i, false
			}
		}
		c.src = append(c.src, s)
	}
	if c.bad < 0 || c.badLZ < 0 || c.unsum < 0 || c.outside < 0 {
		t.Fatalf("the corpus gave too few pages (bad raw %d, bad LZ4 %d, unchecked %d, outside %d)", c.bad, c.badLZ, c.unsum, c.outside)
	}
	client := memfdPages(t, make([]byte, 3*len(pages)+2*PageSize), true)
	unpin2, err := pinBackend{b}.Pin(client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unpin2)
	return c, client
}

// get decodes the case into dst (poisoned first) and checks every page:
// each right, the two bad ones flagged Corrupt and left as they were.
func (c *gatherCase) get(t *testing.T, b *Backend, dst []byte) {
	for i := range dst {
		dst[i] = 0xa5
	}
	d := &pagefmt.Decompression{PageSize: PageSize, Src: append([]pagefmt.Stored(nil), c.src...), Dst: dst}
	if err := b.Decompress(context.Background(), d); err != nil {
		t.Errorf("decompress: %v", err)
		return
	}
	for i := range d.Src {
		got := dst[i*PageSize : (i+1)*PageSize]
		if i == c.bad || i == c.badLZ {
			if !d.Failed[i] || !d.Corrupt[i] || got[0] != 0xa5 || crc32.Checksum(got, pagefmt.Castagnoli) == c.src[i].Sum {
				t.Errorf("page %d with a wrong sum: failed %v corrupt %v, written %v", i, d.Failed[i], d.Corrupt[i], got[0] != 0xa5)
			}
			continue
		}
		if d.Failed[i] || string(got) != string(c.want[i*PageSize:(i+1)*PageSize]) {
			t.Errorf("page %d (%v) differs (failed %v)", i, c.src[i].Class, d.Failed[i])
			return
		}
	}
}

// TestVulkanGather: a GET into imported memory is served by the gather
// kernel once the mappings are in (raw pages from the slab checked and
// copied on the GPU, LZ4 pages decoded into place), byte for byte beside
// pages the host fills or copies, from several callers at once, wrong
// sums of either kind caught and left unwritten; before the imports it
// takes the host's path. Both with the LZ4 blocks parsed where the host
// packed them and copied to device memory first on the transfer queue
// (S4D_VULKAN_DEVIN=1), as on a discrete GPU.
func TestVulkanGather(t *testing.T) {
	kernelsHere(t)
	t.Setenv(envGatherShare, "100") // every raw page it can to the GPU
	for _, devIn := range []string{"0", "1"} {
		t.Run("devin="+devIn, func(t *testing.T) {
			t.Setenv(envDevIn, devIn)
			testVulkanGather(t, devIn == "1")
		})
	}
}

func testVulkanGather(t *testing.T, devIn bool) {
	b := openVK(t)
	if b.vk.gather == nil {
		t.Fatalf("no gather kernel: %s", b.vk.gatherNote)
	}
	c, client := newGatherCase(t, b)
	n := len(c.want)
	dst := client[52 : 52+n] // 4-aligned, not 256-aligned
	// The first GET starts the client mapping's import, the second the
	// slab's: neither gathers raw pages.
	for range 2 {
		c.get(t, b, dst)
		b.vk.importing.Wait()
	}
	if got := b.vk.nGathered.Load(); got != 0 {
		t.Fatalf("%d raw pages gathered before the slab was imported", got)
	}
	raw := 0
	for i, s := range c.src {
		if s.Class == pagefmt.ClassLZ4 && c.badLZ < 0 {
			c.badLZ = i
			s.Sum++
		}
		if s.Class == pagefmt.ClassRaw && i != c.outside {
			raw++
		}
	}
	var wg sync.WaitGroup
	for k := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			at := 52 + k*(n+PageSize/2) // disjoint windows
			for range 3 {
				c.get(t, b, client[at:at+n])
			}
		}()
	}
	wg.Wait()
	if got := b.vk.nGathered.Load(); got != int64(9*raw) {
		t.Fatalf("raw pages gathered %d, want %d (9 GETs of %d)", got, 9*raw, raw)
	}
	copied := false
	for _, ds := range b.dall {
		copied = copied || ds.vs.gdin != nil
	}
	if copied != devIn {
		t.Fatalf("a slot's blocks copied to device memory: %v, want %v", copied, devIn)
	}
}

// BenchmarkVulkanGather: GETs of raw pages only (the gather kernel alone
// on the GPU) from imported mappings laid out as the store's slabs into
// an imported memfd, S4D_BENCH_PAR callers (8) of 4096 pages, through the
// engine without the daemon; S4D_BENCH_MIB (1024) MiB a pass. With
// S4D_VULKAN_NO_GATHER=1 the host copies the same pages.
func BenchmarkVulkanGather(bm *testing.B) {
	kernelsHere(bm)
	b := openVK(bm)
	mib, par := envInt("S4D_BENCH_MIB", 1024), envInt("S4D_BENCH_PAR", 8)
	n := mib << 20 / PageSize
	const region, slot = 128 << 20, 4160
	perRegion := region / slot
	src := make([]pagefmt.Stored, n)
	rng := rand.New(rand.NewPCG(1, 2))
	for r := 0; r*perRegion < n; r++ {
		m, err := unix.Mmap(-1, 0, region, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			bm.Fatal(err)
		}
		bm.Cleanup(func() { unix.Munmap(m) })
		unpin, err := pinBackend{b}.Pin(m)
		if err != nil {
			bm.Fatal(err)
		}
		bm.Cleanup(unpin)
		for i := r * perRegion; i < min(n, (r+1)*perRegion); i++ {
			p := m[(i-r*perRegion)*slot+4:][:PageSize]
			for k := 0; k < PageSize; k += 8 {
				binary.LittleEndian.PutUint64(p[k:], rng.Uint64())
			}
			src[i] = pagefmt.Stored{Class: pagefmt.ClassRaw, Data: p, Sum: crc32.Checksum(p, pagefmt.Castagnoli), Check: true}
		}
	}
	dst := memfdPages(bm, make([]byte, n*PageSize), true)
	unpin, err := pinBackend{b}.Pin(dst)
	if err != nil {
		bm.Fatal(err)
	}
	bm.Cleanup(unpin)
	pass := func() {
		var wg sync.WaitGroup
		next := make(chan int, n/4096+1)
		for lo := 0; lo < n; lo += 4096 {
			next <- lo
		}
		close(next)
		for range par {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for lo := range next {
					hi := min(lo+4096, n)
					d := &pagefmt.Decompression{PageSize: PageSize, Src: append([]pagefmt.Stored(nil), src[lo:hi]...), Dst: dst[lo*PageSize : hi*PageSize]}
					if err := b.Decompress(context.Background(), d); err != nil {
						bm.Error(err)
						return
					}
					for i, f := range d.Failed {
						if f {
							bm.Errorf("page %d failed", lo+i)
							return
						}
					}
				}
			}()
		}
		wg.Wait()
	}
	for range 2 { // the imports, then a warm pass
		pass()
		b.vk.importing.Wait()
	}
	if !bytes.Equal(dst[:PageSize], src[0].Data) || !bytes.Equal(dst[(n-1)*PageSize:], src[n-1].Data) {
		bm.Fatal("pages differ")
	}
	g0 := b.vk.nGathered.Load()
	bm.SetBytes(int64(n * PageSize))
	bm.ResetTimer()
	for range bm.N {
		pass()
	}
	bm.StopTimer()
	bm.ReportMetric(float64(b.vk.nGathered.Load()-g0)/float64(bm.N*n), "gathered/page")
	bm.Log(b.vk.prof.describe(b.vk.d))
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
