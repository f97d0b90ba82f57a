package daemon

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/client"
	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/settings"
)

// BenchmarkRoundTrip times one PUT of a single 4 KiB page through an
// in-process daemon, the latency a swap-like client sees: a text page
// (compression dominates) and a zero page (the request path alone).
func BenchmarkRoundTrip(b *testing.B) {
	for _, kind := range []corpus.Kind{corpus.Text, corpus.Pointers, corpus.Zero} {
		b.Run(string(kind), func(b *testing.B) { roundTrip(b, kind) })
	}
}

func roundTrip(b *testing.B, kind corpus.Kind) {
	c := serveInProcess(b, "cpu")
	page := corpus.Pages(kind, 1, 4096, 1)
	b.SetBytes(4096)
	for b.Loop() {
		if _, err := c.Put(context.Background(), "rt", []uint64{1}, page); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGet times a GET of 4096 stored pages through an in-process
// daemon: over the socket into fresh memory (Get) or the caller's (GetInto),
// into a memfd, and, as the reference, the cpu engine decoding the same
// pages in this process with nothing around it.
func BenchmarkGet(b *testing.B) {
	c := serveInProcess(b, "cpu")
	const n = 4096
	pages := corpus.Pages(corpus.Mixed, n, 4096, 1)
	keys := seqKeys(0, n)
	if _, err := c.Put(context.Background(), "g", keys, pages); err != nil {
		b.Fatal(err)
	}
	b.Run("socket", func(b *testing.B) {
		b.SetBytes(int64(len(pages)))
		for b.Loop() {
			if _, _, err := c.Get(context.Background(), "g", keys); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("into", func(b *testing.B) {
		dst := make([]byte, len(pages))
		b.SetBytes(int64(len(pages)))
		for b.Loop() {
			if _, err := c.GetInto(context.Background(), "g", keys, dst); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("engine", func(b *testing.B) {
		e, err := cpu.New(backends.Options{})
		if err != nil {
			b.Fatal(err)
		}
		in := pagefmt.Batch{PageSize: 4096, Pages: pages, Codec: pagefmt.CodecLZ4, Threshold: 3072}
		var out pagefmt.Compressed
		if err := e.Compress(context.Background(), &in, &out); err != nil {
			b.Fatal(err)
		}
		d := pagefmt.Decompression{PageSize: 4096, Src: make([]pagefmt.Stored, n), Dst: make([]byte, len(pages))}
		for i := range d.Src {
			d.Src[i] = pagefmt.Stored{Class: out.Class[i], Fill: out.Fill[i], Data: out.Bytes(i, &in)}
		}
		b.SetBytes(int64(len(pages)))
		for b.Loop() {
			if err := e.Decompress(context.Background(), &d); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("memfd", func(b *testing.B) {
		buf, _ := client.NewPageBuffer(len(pages))
		defer buf.Close()
		b.SetBytes(int64(len(pages)))
		for b.Loop() {
			if _, err := c.GetBuffer(context.Background(), "g", keys, buf, 0, 4096); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// serveInProcess starts a cpu-only daemon in this process for the
// benchmark's lifetime and returns a client connected to it.
// serveInProcess runs a daemon in the test's process on a socket of its
// own, preferring backend, until the test ends.
func serveInProcess(tb testing.TB, backend string) *client.Client {
	floor := lastGoroutine()
	cfg := settings.Defaults()
	cfg.Socket = filepath.Join(tb.TempDir(), "s.sock")
	cfg.Backend = backend
	cfg.Log = slog.New(slog.DiscardHandler)
	d, err := New(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := d.Listen(); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- d.Serve(ctx) }()
	c := &client.Client{Socket: cfg.Socket}
	tb.Cleanup(func() { c.Close(); cancel(); <-done; checkNoLeaks(tb, floor) })
	return c
}

// seqKeys returns the n keys from first on.
func seqKeys(first uint64, n int) []uint64 {
	keys := make([]uint64, n)
	for i := range keys {
		keys[i] = first + uint64(i)
	}
	return keys
}
