package cpu_test

import (
	"bytes"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/backendtest"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/pagefmt"
)

func TestConformance(t *testing.T) {
	b, err := cpu.New(backends.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	backendtest.Run(t, b, backendtest.Config{PageSizes: []int{4096, 16384, 65536}})
}

func TestOneWorker(t *testing.T) {
	b, err := cpu.New(backends.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	backendtest.Run(t, b, backendtest.Config{})
}

// A standard frame whose header declares a 1 MiB window (as nvCOMP's do)
// still decodes to its page.
func TestZstdLargeWindow(t *testing.T) {
	b, _ := cpu.New(backends.Options{})
	page := corpus.Pages(corpus.Text, 1, 4096, 1)
	enc, _ := zstd.NewWriter(nil, zstd.WithSingleSegment(false))
	frame := enc.EncodeAll(page, nil)
	// The encoder sizes the window to the input; declare 1 MiB instead
	// (window descriptor: exponent 10, 2^(10+10) bytes).
	if frame[4]&0x20 != 0 {
		t.Fatalf("frame is single-segment: header %x", frame[:6])
	}
	frame[5] = 10 << 3
	got := make([]byte, 4096)
	if !b.DecodePage(pagefmt.Stored{Class: pagefmt.ClassZstd, Data: frame}, got) || !bytes.Equal(got, page) {
		t.Fatal("a 1 MiB-window frame does not decode")
	}
}

// Checksums come with the pages when asked for, and only then.
func TestSumsWhenAsked(t *testing.T) {
	b, _ := cpu.New(backends.Options{})
	in := &pagefmt.Batch{PageSize: 4096, Pages: corpus.Pages(corpus.Mixed, 64, 4096, 3), Codec: pagefmt.CodecLZ4, Threshold: 3072}
	var out pagefmt.Compressed
	if err := b.Compress(t.Context(), in, &out); err != nil || len(out.Sum) != 0 {
		t.Fatalf("unasked: %v, %d checksums", err, len(out.Sum))
	}
	in.Sums = true
	if err := b.Compress(t.Context(), in, &out); err != nil || len(out.Sum) != 64 {
		t.Fatalf("asked: %v, %d checksums", err, len(out.Sum))
	}
	for i, s := range out.Sum {
		if s != out.Checksum(i, in) {
			t.Fatalf("page %d: %#x, want %#x", i, s, out.Checksum(i, in))
		}
	}
}
