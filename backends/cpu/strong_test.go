package cpu

import (
	"bytes"
	"context"
	"testing"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/corpus"
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
		in := &backends.Batch{PageSize: 4096, Pages: pages, Codec: backends.CodecZstd, Threshold: 3072, Strong: strong}
		var out backends.Compressed
		if err := b.Compress(context.Background(), in, &out); err != nil {
			t.Fatal(err)
		}
		var sum uint64
		page := make([]byte, 4096)
		for i := range out.Class {
			sum += uint64(out.Size[i])
			if !b.DecodePage(backends.Stored{Class: out.Class[i], Fill: out.Fill[i], Data: out.Bytes(i, in)}, page) || !bytes.Equal(page, in.Page(i)) {
				t.Fatalf("page %d (strong %v) does not decode", i, strong)
			}
		}
		return sum
	}
	fast, strong := total(false), total(true)
	if strong >= fast {
		t.Fatalf("strong %d bytes, fast %d", strong, fast)
	}
	t.Logf("fast %d bytes, strong %d", fast, strong)
}
