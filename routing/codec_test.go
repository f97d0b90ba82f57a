package routing

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/pagefmt"
)

// recorder is the cpu backend under another name, noting the codec and
// level of every batch it compresses.
type recorder struct {
	*cpu.Backend
	mu   sync.Mutex
	seen []pagefmt.Batch
}

func (r *recorder) Name() string { return "recorder" }

func (r *recorder) Compress(ctx context.Context, b *pagefmt.Batch, out *pagefmt.Compressed) error {
	r.mu.Lock()
	r.seen = append(r.seen, pagefmt.Batch{Codec: b.Codec, Strong: b.Strong})
	r.mu.Unlock()
	return r.Backend.Compress(ctx, b, out)
}

func (r *recorder) last() pagefmt.Batch {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.seen) == 0 {
		return pagefmt.Batch{}
	}
	return r.seen[len(r.seen)-1]
}

var theRecorder *recorder

func init() {
	backends.Register("recorder", 50, func(o backends.Options) (backends.Backend, error) {
		c, err := cpu.New(o)
		theRecorder = &recorder{Backend: c}
		return theRecorder, err
	})
}

func TestCompressOtherCodec(t *testing.T) {
	set := backends.Open(backends.Options{PageSize: 4096}, "recorder", "cpu")
	defer set.Close()
	d := New(set, Options{Prefer: "auto", Codec: pagefmt.CodecLZ4, PageSize: 4096, Log: slog.New(slog.DiscardHandler)})
	pages := corpus.Pages(corpus.Text, 64, 4096, 1)
	var out pagefmt.Compressed
	b := &pagefmt.Batch{PageSize: 4096, Pages: pages, Codec: pagefmt.CodecZstd, Strong: true}
	// Not calibrated for zstd: the backends in their order.
	if name, err := d.Compress(context.Background(), b, &out, nil); err != nil || name != "recorder" {
		t.Fatalf("strong zstd went to %s: %v", name, err)
	}
	if got := theRecorder.last(); got.Codec != pagefmt.CodecZstd || !got.Strong || out.Class[0] != pagefmt.ClassZstd {
		t.Fatalf("the backend was asked for %v strong=%v, gave %v", got.Codec, got.Strong, out.Class[0])
	}
	// Calibrated for zstd: its ranking, not the foreground's.
	cal, err := CalibrateAs(context.Background(), set.Usable(), 4096, pagefmt.CodecZstd, true, []int{1, 64})
	if err != nil || !theRecorder.last().Strong {
		t.Fatalf("calibration: %v, strong batches timed: %v", err, theRecorder.last().Strong)
	}
	cal.Order = [][]string{{"cpu", "recorder"}, {"cpu", "recorder"}}
	d.SetCodecCalibration(pagefmt.CodecZstd, cal)
	d.SetCalibration(&Calibration{Sizes: []int{1}, Order: [][]string{{"recorder", "cpu"}}}, 0)
	if name, _ := d.Compress(context.Background(), b, &out, nil); name != "cpu" {
		t.Fatalf("calibrated zstd went to %s", name)
	}
	// The foreground keeps its codec and calibration.
	fg := &pagefmt.Batch{PageSize: 4096, Pages: pages}
	if name, _ := d.Compress(context.Background(), fg, &out, nil); name != "recorder" || theRecorder.last().Codec != pagefmt.CodecLZ4 || theRecorder.last().Strong {
		t.Fatalf("foreground batch went to %s as %+v", name, theRecorder.last())
	}
	// A pool's own codec: zstd, at the foreground's level.
	fg.Codec = pagefmt.CodecZstd
	if name, err := d.Compress(context.Background(), fg, &out, nil); err != nil || name != "cpu" ||
		out.Class[0] != pagefmt.ClassZstd || fg.Strong {
		t.Fatalf("a pool's zstd: %s %v %v", name, err, out.Class[0])
	}
	fg.Codec = 0
	if name, _ := d.Compress(context.Background(), fg, &out, nil); name != "recorder" || out.Class[0] != pagefmt.ClassLZ4 {
		t.Fatalf("codec 0: %s %v", name, out.Class[0])
	}
	st := d.Stats()
	var zstdOut uint64
	for _, bs := range st {
		for _, c := range bs.Counters {
			if c.Codec.String() == "zstd" && c.Direction == "compress" && bs.Name == "cpu" {
				zstdOut = c.Pages
			}
		}
	}
	if zstdOut != 128 {
		t.Fatalf("zstd pages counted on cpu: %d", zstdOut)
	}
}
