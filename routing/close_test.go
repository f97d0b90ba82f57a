package routing

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/pagefmt"
)

var closeOnce sync.Once // registers bulky2 once however often the test runs

// Close waits for the coalescer and the merged batches it runs; small
// batches after it go alone, and none is left waiting.
func TestCloseJoinsCoalescer(t *testing.T) {
	closeOnce.Do(func() {
		ref, _ := cpu.New(backends.Options{})
		bk := &bulky{cpu: ref}
		backends.Register("bulky2", 50, func(backends.Options) (backends.Backend, error) { return bk, nil })
	})
	set := backends.Open(backends.Options{PageSize: 4096}, "bulky2", "cpu")
	defer set.Close()
	d := New(set, Options{Prefer: "auto", Codec: pagefmt.CodecLZ4, PageSize: 4096, Log: slog.New(slog.DiscardHandler)})
	cal := &Calibration{Sizes: []int{1, 16, 256}, Order: [][]string{{"cpu", "bulky2"}, {"cpu", "bulky2"}, {"bulky2", "cpu"}}}
	d.SetCalibration(cal, 50*time.Millisecond)
	d.small.mu.Lock()
	d.small.rate, d.small.start = 1e9, time.Now().Add(time.Hour)
	d.small.mu.Unlock()

	pages := corpus.Pages(corpus.Mixed, 64, 4096, 5)
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out pagefmt.Compressed
			_, errs[g] = d.Compress(context.Background(), &pagefmt.Batch{PageSize: 4096, Pages: pages[g*4*4096 : (g+1)*4*4096]}, &out, nil)
		}()
	}
	time.Sleep(10 * time.Millisecond) // some batches are waiting for company
	closed := make(chan struct{})
	go func() { d.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	wg.Wait()
	for g, err := range errs {
		if err != nil {
			t.Fatalf("batch %d: %v", g, err)
		}
	}
	// After Close: no coalescer to hand to, the batch goes alone.
	var out pagefmt.Compressed
	if name, err := d.Compress(context.Background(), &pagefmt.Batch{PageSize: 4096, Pages: pages[:4*4096]}, &out, nil); err != nil || name != "cpu" {
		t.Fatalf("after Close: %s %v", name, err)
	}
	d.SetCalibration(cal, 50*time.Millisecond) // starts no coalescer again
	if d.below.Load() != 0 {
		t.Fatal("merging turned back on after Close")
	}
	d.Close() // twice is harmless
}

func TestCalibrateStopsWithContext(t *testing.T) {
	set := backends.Open(backends.Options{PageSize: 4096}, "cpu")
	defer set.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	t0 := time.Now()
	_, err := Calibrate(ctx, set.Usable(), 4096, pagefmt.CodecLZ4, CalibrationSizes)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("calibration under an ended context: %v", err)
	}
	if el := time.Since(t0); el > 5*time.Second {
		t.Fatalf("took %v to notice", el)
	}
}
