package routing

import (
	"bytes"
	"context"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/pagefmt"
)

// lz4only is the cpu backend taking only LZ4 pages of 4 KiB, as the webgpu
// engine does; it counts what reaches it.
type lz4only struct {
	*cpu.Backend
	comp, dec atomic.Int32
}

func (l *lz4only) Name() string { return "lz4only" }
func (l *lz4only) Takes(c pagefmt.Codec, pageSize int) bool {
	return c == pagefmt.CodecLZ4 && pageSize == 4096
}
func (l *lz4only) Compress(ctx context.Context, b *pagefmt.Batch, out *pagefmt.Compressed) error {
	l.comp.Add(1)
	return l.Backend.Compress(ctx, b, out)
}
func (l *lz4only) Decompress(ctx context.Context, d *pagefmt.Decompression) error {
	l.dec.Add(1)
	return l.Backend.Decompress(ctx, d)
}

var theLZ4Only *lz4only

func init() {
	backends.Register("lz4only", 60, func(o backends.Options) (backends.Backend, error) {
		c, err := cpu.New(o)
		theLZ4Only = &lz4only{Backend: c}
		return theLZ4Only, err
	})
}

// TestLimitedBackend: batches a Limited backend does not take go past it,
// in compression, decompression and calibration, without counting as its
// failures.
func TestLimitedBackend(t *testing.T) {
	set := backends.Open(backends.Options{PageSize: 4096}, "lz4only", "cpu")
	defer set.Close()
	d := New(set, Options{Prefer: "auto", Codec: pagefmt.CodecLZ4, PageSize: 4096, Log: slog.New(slog.DiscardHandler)})
	pages := corpus.Pages(corpus.Text, 32, 4096, 3)
	var lz, zs pagefmt.Compressed
	lb, zb := &pagefmt.Batch{PageSize: 4096, Pages: pages}, &pagefmt.Batch{PageSize: 4096, Pages: pages, Codec: pagefmt.CodecZstd}
	if name, err := d.Compress(context.Background(), lb, &lz, nil); err != nil || name != "lz4only" {
		t.Fatalf("lz4 batch went to %s: %v", name, err)
	}
	if name, err := d.Compress(context.Background(), zb, &zs, nil); err != nil || name != "cpu" {
		t.Fatalf("zstd batch went to %s: %v", name, err)
	}
	if theLZ4Only.comp.Load() != 1 || d.Fallbacks() != 0 {
		t.Fatalf("lz4only compressed %d batches, %d fallbacks", theLZ4Only.comp.Load(), d.Fallbacks())
	}
	// A GET of LZ4 pages and zstd pages together goes where both decode.
	src := []pagefmt.Stored{{Class: lz.Class[0], Data: lz.Bytes(0, lb)}, {Class: zs.Class[1], Data: zs.Bytes(1, zb)}}
	dd := pagefmt.Decompression{PageSize: 4096, Src: src, Dst: make([]byte, 2*4096)}
	if err := d.Decompress(context.Background(), &dd); err != nil || theLZ4Only.dec.Load() != 0 {
		t.Fatalf("mixed GET: %v, lz4only decoded %d", err, theLZ4Only.dec.Load())
	}
	if !bytes.Equal(dd.Dst, pages[:2*4096]) {
		t.Fatal("mixed GET decoded wrong")
	}
	dd = pagefmt.Decompression{PageSize: 4096, Src: src[:1], Dst: make([]byte, 4096)}
	if err := d.Decompress(context.Background(), &dd); err != nil || theLZ4Only.dec.Load() != 1 {
		t.Fatalf("LZ4 GET: %v, lz4only decoded %d", err, theLZ4Only.dec.Load())
	}
	// Calibrating zstd times only the backends that take it.
	cal, err := CalibrateAs(context.Background(), set.Usable(), 4096, pagefmt.CodecZstd, false, []int{1})
	if err != nil || cal.Rate["lz4only"] != nil || cal.Rate["cpu"] == nil {
		t.Fatalf("zstd calibration: %v %v", cal, err)
	}
}
