package routing

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/pagefmt"
)

// faulty fails every batch, as a GPU that lost its device would.
type faulty struct{}

func (faulty) Name() string     { return "faulty" }
func (faulty) Describe() string { return "always fails" }
func (faulty) Compress(context.Context, *pagefmt.Batch, *pagefmt.Compressed) error {
	return errors.New("device lost")
}
func (faulty) Decompress(context.Context, *pagefmt.Decompression) error {
	return errors.New("device lost")
}
func (faulty) Close() error { return nil }

func init() {
	backends.Register("faulty", 100, func(backends.Options) (backends.Backend, error) { return faulty{}, nil })
	backends.Register("absent", 90, func(backends.Options) (backends.Backend, error) {
		return nil, backends.Unavailable("no such device")
	})
}

func TestFallbackToCPU(t *testing.T) {
	set := backends.Open(backends.Options{PageSize: 4096}, "faulty", "absent", "cpu")
	defer set.Close()
	d := New(set, Options{Prefer: "auto", Codec: pagefmt.CodecLZ4, PageSize: 4096, Log: slog.New(slog.DiscardHandler)})
	if d.InUse() != "faulty" {
		t.Fatalf("in use: %s", d.InUse())
	}
	pages := corpus.Pages(corpus.Mixed, 100, 4096, 1)
	var out pagefmt.Compressed
	name, err := d.Compress(context.Background(), &pagefmt.Batch{PageSize: 4096, Pages: pages}, &out, nil)
	if err != nil || name != "cpu" {
		t.Fatalf("compress went to %q: %v", name, err)
	}
	ref, _ := cpu.New(backends.Options{})
	page := make([]byte, 4096)
	b := &pagefmt.Batch{PageSize: 4096, Pages: pages}
	for i := range 100 {
		if !ref.DecodePage(pagefmt.Stored{Class: out.Class[i], Fill: out.Fill[i], Data: out.Bytes(i, b)}, page) ||
			!bytes.Equal(page, b.Page(i)) {
			t.Fatalf("page %d lost in the fallback", i)
		}
	}
	if d.fallbacks.Load() != 1 || d.InUse() != "cpu" {
		t.Fatalf("fallbacks %d, in use %s", d.fallbacks.Load(), d.InUse())
	}
	states := map[string]backends.Status{}
	for _, st := range set.Statuses() {
		states[st.Name] = st
	}
	if states["faulty"].State != backends.StateFailed || states["absent"].State != backends.StateUnavailable ||
		states["absent"].Reason != "no such device" || states["cpu"].State != backends.StateOK {
		t.Fatalf("statuses %+v", states)
	}
	stats := d.Stats()
	if stats[0].Name != "faulty" || stats[0].Counters[0].Errors != 1 {
		t.Fatalf("error not counted: %+v", stats[0])
	}
	// A failed backend is probed again later and comes back if it opens.
	if back := set.Retry(); len(back) != 1 || back[0] != "faulty" || d.InUse() != "faulty" {
		t.Fatalf("retry brought back %v; in use %s", back, d.InUse())
	}
}

// bulky is fast only on large batches, as a GPU behind PCIe is: every
// batch costs a fixed round trip. It compresses with the CPU backend.
type bulky struct {
	cpu     *cpu.Backend
	batches atomic.Int64
}

func (b *bulky) Name() string     { return "bulky" }
func (b *bulky) Describe() string { return "large batches only" }
func (b *bulky) Compress(ctx context.Context, in *pagefmt.Batch, out *pagefmt.Compressed) error {
	b.batches.Add(1)
	time.Sleep(2 * time.Millisecond)
	return b.cpu.Compress(ctx, in, out)
}
func (b *bulky) Decompress(ctx context.Context, d *pagefmt.Decompression) error {
	return b.cpu.Decompress(ctx, d)
}
func (b *bulky) Close() error { return nil }

func TestCalibrationAndCoalescing(t *testing.T) {
	ref, _ := cpu.New(backends.Options{})
	bk := &bulky{cpu: ref}
	backends.Register("bulky", 50, func(backends.Options) (backends.Backend, error) { return bk, nil })
	set := backends.Open(backends.Options{PageSize: 4096}, "bulky", "cpu")
	defer set.Close()
	d := New(set, Options{Prefer: "auto", Codec: pagefmt.CodecLZ4, PageSize: 4096, Log: slog.New(slog.DiscardHandler)})
	// A synthetic calibration: cpu wins small batches, bulky large ones.
	cal := &Calibration{Sizes: []int{1, 16, 256}, Order: [][]string{{"cpu", "bulky"}, {"cpu", "bulky"}, {"bulky", "cpu"}}}
	d.SetCalibration(cal, 20*time.Millisecond)
	if got := cal.CoalesceBelow(); got != 256 {
		t.Fatalf("coalesce below %d", got)
	}
	if c := d.chain(1); c[0].Name() != "cpu" {
		t.Fatalf("1 page goes to %s", c[0].Name())
	}
	if c := d.chain(1000); c[0].Name() != "bulky" {
		t.Fatalf("1000 pages go to %s", c[0].Name())
	}
	// A lone small batch goes straight to the cpu: too little traffic to fill
	// a bulky batch within the wait.
	if name, _ := d.Compress(context.Background(), &pagefmt.Batch{PageSize: 4096, Pages: corpus.Pages(corpus.Text, 1, 4096, 9)}, &pagefmt.Compressed{}, nil); name != "cpu" || bk.batches.Load() != 0 {
		t.Fatalf("a lone page went to %s", name)
	}
	// Under heavy small-batch traffic, 64 concurrent 4-page batches travel
	// together on bulky.
	d.small.mu.Lock()
	d.small.rate, d.small.start = 1e9, time.Now().Add(time.Hour)
	d.small.mu.Unlock()
	pages := corpus.Pages(corpus.Mixed, 256, 4096, 3)
	var wg sync.WaitGroup
	outs := make([]pagefmt.Compressed, 64)
	names := make([]string, 64)
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			names[g], err = d.Compress(context.Background(), &pagefmt.Batch{PageSize: 4096, Pages: pages[g*4*4096 : (g+1)*4*4096]}, &outs[g], nil)
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := bk.batches.Load(); n == 0 || n >= 32 {
		t.Fatalf("64 small batches made %d bulky batches", n)
	}
	got := make([]byte, 4096)
	for g := range 64 {
		if names[g] != "bulky" {
			t.Fatalf("batch %d went to %s", g, names[g])
		}
		b := &pagefmt.Batch{PageSize: 4096, Pages: pages[g*4*4096 : (g+1)*4*4096]}
		for i := range 4 {
			s := pagefmt.Stored{Class: outs[g].Class[i], Fill: outs[g].Fill[i], Data: outs[g].Bytes(i, b)}
			if !ref.DecodePage(s, got) || !bytes.Equal(got, b.Page(i)) {
				t.Fatalf("batch %d page %d wrong after merging", g, i)
			}
		}
	}
	// Forcing a backend bypasses merging.
	d.SetPreference("cpu")
	before := bk.batches.Load()
	if name, _ := d.Compress(context.Background(), &pagefmt.Batch{PageSize: 4096, Pages: pages[:4096]}, &outs[0], nil); name != "cpu" || bk.batches.Load() != before {
		t.Fatalf("forced cpu went to %s", name)
	}
}

func TestCalibrate(t *testing.T) {
	set := backends.Open(backends.Options{PageSize: 4096}, "cpu")
	defer set.Close()
	cal, err := Calibrate(context.Background(), set.Usable(), 4096, pagefmt.CodecLZ4, []int{1, 64})
	if err != nil {
		t.Fatal(err)
	}
	if r := cal.Rate["cpu"]; len(r) != 2 || r[0] <= 0 || r[1] <= 0 || cal.Order[1][0] != "cpu" || cal.CoalesceBelow() != 0 {
		t.Fatalf("calibration %+v", cal)
	}
}
