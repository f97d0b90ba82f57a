package cpu

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/pagefmt"
)

// A Strong zstd batch is smaller than the foreground level's, and decodes.
func TestStrongZstd(t *testing.T) {
	b, err := New(backends.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	pages := corpus.Pages(corpus.Mixed, 256, 4096, 7)
	total := func(strong bool) uint64 {
		in := &pagefmt.Batch{PageSize: 4096, Pages: pages, Codec: pagefmt.CodecZstd, Threshold: 3072, Strong: strong}
		var out pagefmt.Compressed
		if err := b.Compress(context.Background(), in, &out); err != nil {
			t.Fatal(err)
		}
		var sum uint64
		page := make([]byte, 4096)
		for i := range out.Class {
			sum += uint64(out.Size[i])
			if !b.DecodePage(pagefmt.Stored{Class: out.Class[i], Fill: out.Fill[i], Data: out.Bytes(i, in)}, page) || !bytes.Equal(page, in.Page(i)) {
				t.Fatalf("page %d (strong %v) does not decode", i, strong)
			}
		}
		return sum
	}
	// Pages that compress to about the threshold: EncodeAll may move its
	// output elsewhere on the way to a frame that fits after all.
	pages = nearThreshold(128)
	total(false)
	total(true)
	pages = corpus.Pages(corpus.Mixed, 256, 4096, 7)
	fast, strong := total(false), total(true)
	if strong >= fast {
		t.Fatalf("strong %d bytes, fast %d", strong, fast)
	}
	t.Logf("fast %d bytes, strong %d", fast, strong)
}

// nearThreshold makes n pages of random bytes, fewer in each, and text
// after them: some compress to just under the threshold.
func nearThreshold(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	text := corpus.Pages(corpus.Text, n, 4096, 9)
	for i := range n {
		page := text[i*4096 : (i+1)*4096]
		for j := range 1800 + 10*i {
			page[j] = byte(r.Uint32())
		}
	}
	return text
}
