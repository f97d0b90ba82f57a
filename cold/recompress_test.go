package cold

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/corpus"
	_ "github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/pagecache"
	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/routing"
)

// storeWith returns a store holding n text pages in pool "p", compressed
// with LZ4 through a router over the cpu engine.
func storeWith(t *testing.T, n int) (*pagecache.Store, *routing.Router) {
	set := backends.Open(backends.Options{PageSize: 4096}, "cpu")
	t.Cleanup(func() { set.Close() })
	rt := routing.New(set, routing.Options{Prefer: "auto", Codec: pagefmt.CodecLZ4, PageSize: 4096, Log: slog.New(slog.DiscardHandler)})
	s := pagecache.New(4096, 0)
	b := &pagefmt.Batch{PageSize: 4096, Pages: corpus.Pages(corpus.Text, n, 4096, 1)}
	var c pagefmt.Compressed
	if _, err := rt.Compress(context.Background(), b, &c, nil); err != nil {
		t.Fatal(err)
	}
	keys := make([]uint64, n)
	for i := range keys {
		keys[i] = uint64(i)
	}
	if err := s.Put(1, "p", keys, b, &c, 0, make([]pagecache.Result, n)); err != nil {
		t.Fatal(err)
	}
	return s, rt
}

func TestMinSavingAndBusy(t *testing.T) {
	s, rt := storeWith(t, 300)
	var asked atomic.Int64
	r := &Recompressor{Store: s, Router: rt, MinSaving: 0.99, Batch: 64,
		Busy: func() bool { asked.Add(1); return false }}
	res, err := r.Run(context.Background(), Job{Idle: true})
	if err != nil || res.PagesTried != 300 || res.PagesKept != 0 {
		t.Fatalf("a 99%% saving asked for: %+v %v", res, err)
	}
	if asked.Load() != 5 {
		t.Fatalf("asked whether busy %d times for 5 batches", asked.Load())
	}
	// Tried pages stay tried: a laxer job finds nothing left.
	r.MinSaving = 0.01
	if res, _ = r.Run(context.Background(), Job{Idle: true}); res.PagesTried != 0 {
		t.Fatalf("tried again: %+v", res)
	}
	if st := r.Stats(); st.Runs != 2 || st.PagesTried != 300 {
		t.Fatalf("stats %+v", st)
	}
}

func TestOneJobAtATime(t *testing.T) {
	s, rt := storeWith(t, 64)
	r := &Recompressor{Store: s, Router: rt, MinSaving: 0.1}
	r.mu.Lock() // a job running
	if _, err := r.TryRun(context.Background(), Job{Huge: true}); err != ErrRunning {
		t.Fatalf("TryRun beside a job: %v", err)
	}
	r.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Run(ctx, Job{Idle: true}); err == nil {
		t.Fatal("a cancelled job did not stop")
	}
	if _, err := r.Run(context.Background(), Job{UID: 2, Idle: true, Pool: "p"}); err != pagecache.ErrPermission {
		t.Fatalf("another user's pool: %v", err)
	}
}
