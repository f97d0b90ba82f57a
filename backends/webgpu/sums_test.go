package webgpu

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/pagefmt"
)

// sumPages is a batch for the kernel's checksums: zero, same-filled,
// random (raw) and corpus pages, pages of a random head and a zero tail,
// whose blocks end at every alignment, and short blocks.
func sumPages() []byte {
	r := rand.New(rand.NewPCG(29, 4))
	var pages []byte
	page := make([]byte, PageSize)
	add := func() { pages = append(pages, page...) }
	clear(page)
	add()
	for _, w := range []uint64{1, 0xdeadbeefcafef00d, ^uint64(0)} {
		for i := 0; i < PageSize; i += 8 {
			binary.LittleEndian.PutUint64(page[i:], w)
		}
		add()
	}
	for head := range 70 {
		clear(page)
		for i := range head * 37 {
			page[i] = byte(r.Uint32())
		}
		add()
	}
	// Short blocks: one odd byte in zeros, a period of 3.
	for _, at := range []int{5, 2000, PageSize - 1} {
		clear(page)
		page[at] = 7
		add()
	}
	for i := range page {
		page[i] = "abc"[i%3]
	}
	add()
	for range 3 {
		for i := range page {
			page[i] = byte(r.Uint32())
		}
		add()
	}
	pages = append(pages, corpus.Pages(corpus.Mixed, 300, PageSize, 7)...)
	return pages
}

// checkSums fails unless every page's Sum is hash/crc32's Castagnoli CRC
// of its stored bytes, and it saw every class.
func checkSums(t *testing.T, in *pagefmt.Batch, out *pagefmt.Compressed, lo int, seen map[pagefmt.Class]int) {
	t.Helper()
	if len(out.Sum) != len(out.Class) {
		t.Fatalf("%d sums for %d pages", len(out.Sum), len(out.Class))
	}
	for i := range out.Class {
		want := crc32.Checksum(out.Bytes(i, in), pagefmt.Castagnoli)
		if out.Sum[i] != want {
			t.Fatalf("page %d (%v, %d bytes): sum %#x, want %#x", lo+i, out.Class[i], out.Size[i], out.Sum[i], want)
		}
		seen[out.Class[i]]++
	}
}

func TestKernelSums(t *testing.T) {
	b := open(t)
	in := &pagefmt.Batch{PageSize: PageSize, Pages: sumPages(), Codec: pagefmt.CodecLZ4, Threshold: PageSize * 3 / 4, Sums: true}
	seen := map[pagefmt.Class]int{}
	var out pagefmt.Compressed
	if err := b.Compress(context.Background(), in, &out); err != nil {
		t.Fatal(err)
	}
	checkSums(t, in, &out, 0, seen)
	for _, c := range []pagefmt.Class{pagefmt.ClassZero, pagefmt.ClassSame, pagefmt.ClassLZ4, pagefmt.ClassRaw} {
		if seen[c] == 0 {
			t.Errorf("no %v page in the batch", c)
		}
	}
	// Lz4 blocks of every length mod 4, and short ones.
	short, mods := false, map[uint32]bool{}
	for i, c := range out.Class {
		if c == pagefmt.ClassLZ4 {
			mods[out.Size[i]%4] = true
			short = short || out.Size[i] < 32
		}
	}
	if len(mods) != 4 || !short {
		t.Errorf("lz4 sizes mod 4 seen %v, a block under 32 bytes %v", mods, short)
	}
	// The parts delivered from the mapped readback carry them too.
	err := b.CompressParts(context.Background(), in, func(lo int, part *pagefmt.Compressed) error {
		sub := in.Part(lo, len(part.Class))
		checkSums(t, &sub, part, lo, seen)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
