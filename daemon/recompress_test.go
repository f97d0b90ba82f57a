package daemon

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/ipc"
)

// IDLE and RECOMPRESS through a daemon: counts, marks, lists, and pages
// that come back byte for byte, smaller, after recompression.
func TestIdleAndRecompress(t *testing.T) {
	c := serveInProcess(t, "cpu")
	ctx := context.Background()
	const n = 512
	// Text compresses further with zstd; random pages stay raw (huge).
	pages := append(corpus.Pages(corpus.Text, n-64, 4096, 1), corpus.Pages(corpus.Random, 64, 4096, 2)...)
	keys := seqKeys(0, n)
	if _, err := c.Put(ctx, "cold", keys, pages); err != nil {
		t.Fatal(err)
	}
	before, _ := c.Stats(ctx, "cold")

	r, err := c.Idle(ctx, &ipc.IdleRequest{MinAge: time.Hour})
	if err != nil || len(r.Pools) != 1 || r.Pools[0].Pages != n || r.Pools[0].IdlePages != 0 || r.EpochSeconds != 60 {
		t.Fatalf("idle an hour, before any epoch: %+v %v", r, err)
	}
	r, err = c.Idle(ctx, &ipc.IdleRequest{Pool: "cold", Flags: ipc.IdleMark, MinAge: time.Hour, List: 3})
	if err != nil || r.Marked != n || r.Pools[0].IdlePages != n || len(r.Pages) != 3 || r.Pages[0].AgeEpochs != 63 {
		t.Fatalf("marked idle: %+v %v", r, err)
	}

	huge, err := c.Recompress(ctx, &ipc.RecompressRequest{Flags: ipc.RecompressHuge})
	if err != nil || huge.PagesTried != 64 || huge.PagesKept != 0 {
		t.Fatalf("huge (random) pages: %+v %v", huge, err)
	}
	res, err := c.Recompress(ctx, &ipc.RecompressRequest{Pool: "cold", Flags: ipc.RecompressIdle, MinAge: time.Hour})
	if err != nil || res.PagesTried != n-64 || res.PagesKept == 0 || res.BytesSaved == 0 || res.Backend != "cpu" {
		t.Fatalf("idle pages: %+v %v", res, err)
	}
	got, codes, err := c.Get(ctx, "cold", keys)
	if err != nil || ipc.PageError(keys, codes) != nil || !bytes.Equal(got, pages) {
		t.Fatalf("pages after recompression: %v %v", err, ipc.PageError(keys, codes))
	}
	after, _ := c.Stats(ctx, "cold")
	if saved := before.Pools[0].StoredBytes - after.Pools[0].StoredBytes; saved != res.BytesSaved {
		t.Fatalf("the pool shrank by %d bytes, recompression says %d", saved, res.BytesSaved)
	}
	if st := after.Recompress; st == nil || st.Runs != 2 || st.PagesKept != res.PagesKept || st.PagesTried != n {
		t.Fatalf("STATS recompress: %+v", st)
	}
	info, _ := c.Inspect(ctx, "cold", keys[:1], false)
	if info[0].Class != "zstd" {
		t.Fatalf("key 0 is %s after recompression", info[0].Class)
	}
	// The GET made every page young; tried pages are not tried again.
	if r, _ = c.Idle(ctx, &ipc.IdleRequest{MinAge: time.Minute}); r.Pools[0].IdlePages != 0 {
		t.Fatalf("idle after a GET of every page: %+v", r.Pools)
	}
	c.Idle(ctx, &ipc.IdleRequest{Flags: ipc.IdleMark})
	if again, _ := c.Recompress(ctx, &ipc.RecompressRequest{Flags: ipc.RecompressIdle | ipc.RecompressHuge}); again.PagesTried != 0 {
		t.Fatalf("pages tried a second time: %+v", again)
	}
}

func TestColdBadInput(t *testing.T) {
	c := serveInProcess(t, "cpu")
	ctx := context.Background()
	var e *ipc.Error
	for _, tc := range []struct {
		name string
		call func() error
		code ipc.Code
	}{
		{"no pages chosen", func() error { _, err := c.Recompress(ctx, &ipc.RecompressRequest{}); return err }, ipc.CodeMalformed},
		{"age beyond 63 epochs", func() error {
			_, err := c.Recompress(ctx, &ipc.RecompressRequest{Flags: ipc.RecompressIdle, MinAge: 24 * time.Hour})
			return err
		}, ipc.CodeMalformed},
		{"no such pool", func() error {
			_, err := c.Recompress(ctx, &ipc.RecompressRequest{Pool: "none", Flags: ipc.RecompressHuge})
			return err
		}, ipc.CodeNotFound},
		{"bad pool name", func() error { _, err := c.Idle(ctx, &ipc.IdleRequest{Pool: "a b"}); return err }, ipc.CodeBadPool},
		{"unknown idle flag", func() error { _, err := c.Idle(ctx, &ipc.IdleRequest{Flags: 4}); return err }, ipc.CodeMalformed},
	} {
		if err := tc.call(); !errors.As(err, &e) || e.Code != tc.code {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.code)
		}
	}
}
