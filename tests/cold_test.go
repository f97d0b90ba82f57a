package tests

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/ipc"
)

// The periodic recompression of a real daemon, while a client rewrites
// some keys and reads others all along: pages left alone are
// recompressed, pages read stay as they were (they never get idle),
// pages rewritten hold their newest contents, and every page comes back
// byte for byte.
func TestColdPeriodicRecompression(t *testing.T) {
	d := start(t, "--backend", "cpu", "--idle-epoch", "1s", "--recompress-every", "1s", "--recompress-idle", "3s")
	c := d.client()
	const n, ps = 2048, 4096
	pages := corpus.Pages(corpus.Text, n, ps, 1)
	ks := keys(0, n)
	codes, err := c.Put(ctx(t), "cold", ks, pages)
	allOK(t, "put", ks, codes)
	if err != nil {
		t.Fatal(err)
	}

	// Keys 0-63 rewritten, 64-127 read, until the job has done its work.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	latest := map[uint64][]byte{}
	wg.Add(2)
	go func() {
		defer wg.Done()
		w := d.client()
		for round := uint64(0); ; round++ {
			select {
			case <-stop:
				return
			default:
			}
			p := corpus.Pages(corpus.Pointers, 64, ps, 100+round)
			if codes, err := w.Put(context.Background(), "cold", keys(0, 64), p); err != nil || ipc.PageError(keys(0, 64), codes) != nil {
				t.Errorf("rewrite: %v", err)
				return
			}
			mu.Lock()
			for i := range 64 {
				latest[uint64(i)] = p[i*ps : (i+1)*ps]
			}
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	go func() {
		defer wg.Done()
		r := d.client()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, _, err := r.Get(context.Background(), "cold", keys(64, 64)); err != nil {
				t.Errorf("read: %v", err)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	deadline := time.Now().Add(60 * time.Second)
	var rc *ipc.RecompressStats
	for {
		st, err := c.Stats(ctx(t), "")
		if err != nil {
			t.Fatal(err)
		}
		if rc = st.Recompress; rc != nil && rc.PagesTried >= n-128 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a minute: %+v", rc)
		}
		time.Sleep(200 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if rc.PagesTried != n-128 || rc.PagesKept < (n-128)/2 {
		t.Fatalf("recompression took the wrong pages, or kept few: %+v", rc)
	}

	info, err := c.Inspect(ctx(t), "cold", ks, false)
	if err != nil {
		t.Fatal(err)
	}
	zstd := uint64(0)
	for i, in := range info {
		if i < 128 && in.Class != "lz4" {
			t.Errorf("key %d, used all along, is %s", i, in.Class)
		}
		if in.Class == "zstd" {
			zstd++
		}
	}
	if zstd != rc.PagesKept {
		t.Errorf("%d pages are zstd, %d were recompressed", zstd, rc.PagesKept)
	}
	got, codes, err := c.Get(ctx(t), "cold", ks)
	if err != nil {
		t.Fatal(err)
	}
	allOK(t, "get", ks, codes)
	for i := range n {
		want := pages[i*ps : (i+1)*ps]
		if w, ok := latest[uint64(i)]; ok {
			want = w
		}
		if !bytes.Equal(got[i*ps:(i+1)*ps], want) {
			t.Fatalf("key %d: wrong bytes", i)
		}
	}
}

// s4d ctl idle and recompress against the real binary.
func TestColdCtl(t *testing.T) {
	d := start(t, "--backend", "cpu")
	c := d.client()
	pages := append(corpus.Pages(corpus.Text, 96, 4096, 2), corpus.Pages(corpus.Random, 32, 4096, 3)...)
	if _, err := c.Put(ctx(t), "p", keys(0, 128), pages); err != nil {
		t.Fatal(err)
	}
	if out := d.mustCtl("idle", "--age", "10m", "--noheadings", "--raw"); strings.TrimSpace(out) != "p 0 128 0 0B" {
		t.Fatalf("idle before any epoch: %q", out)
	}
	if out := d.mustCtl("idle", "--mark", "--age", "10m"); !strings.Contains(out, "marked 128 pages idle") {
		t.Fatalf("idle --mark: %q", out)
	}
	if out := d.mustCtl("idle", "--list", "2", "--output", "key,age", "--noheadings", "--raw"); len(strings.Fields(out)) != 4 || !strings.Contains(out, " 63") {
		t.Fatalf("idle --list: %q", out)
	}
	if out := d.mustCtl("recompress", "--huge"); !strings.Contains(out, "recompressed 0 of 32 pages tried") {
		t.Fatalf("recompress --huge (random pages): %q", out)
	}
	if out := d.mustCtl("recompress", "--idle", "1h", "--pool", "p"); !strings.Contains(out, "of 96 pages tried") || !strings.Contains(out, "on cpu") {
		t.Fatalf("recompress --idle: %q", out)
	}
	if out := d.mustCtl("stats"); !strings.Contains(out, "cold pages: recompressed") {
		t.Fatalf("stats: %q", out)
	}
	if f := strings.Fields(d.mustCtl("stats", "--output", "recompressed,recompress-saved", "--bytes", "--noheadings")); len(f) != 2 || f[0] == "0" || f[1] == "0" {
		t.Fatalf("stats --output recompressed,recompress-saved: %q", f)
	}
	if out, err := d.ctl("recompress"); err == nil || !strings.Contains(out, "--idle AGE, --huge, or both") {
		t.Fatalf("recompress without a choice: %v %q", err, out)
	}
	if out, err := d.ctl("recompress", "--huge", "--pool", "nope"); err == nil || !strings.Contains(out, `no pool "nope"`) {
		t.Fatalf("recompress of a missing pool: %v %q", err, out)
	}
	got, _, err := c.Get(ctx(t), "p", keys(0, 128))
	if err != nil || !bytes.Equal(got, pages) {
		t.Fatalf("pages after recompression: %v", err)
	}
}
