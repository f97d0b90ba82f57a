package daemon

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/backendtest"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/ipc"
)

// parted finishes batches in parts of 16 pages, as a GPU's slots do: each
// part is compressed by the cpu backend into one output reused for every
// part, so a caller that kept a part's memory would see it overwritten.
// With failAfter > 0 it fails once that many parts were delivered.
type parted struct {
	cpu       *cpu.Backend
	failAfter atomic.Int64
}

const partPages = 16

func (p *parted) Name() string     { return "parted" }
func (p *parted) Describe() string { return "parts of 16 pages" }
func (p *parted) Close() error     { return nil } // one for every test: never closed
func (p *parted) Compress(ctx context.Context, b *backends.Batch, out *backends.Compressed) error {
	return p.cpu.Compress(ctx, b, out)
}
func (p *parted) Decompress(ctx context.Context, d *backends.Decompression) error {
	return p.cpu.Decompress(ctx, d)
}

func (p *parted) CompressParts(ctx context.Context, b *backends.Batch, deliver func(int, *backends.Compressed) error) error {
	var part backends.Compressed
	for lo, k := 0, int64(0); lo < b.Len(); lo, k = lo+partPages, k+1 {
		if f := p.failAfter.Load(); f > 0 && k == f {
			return errors.New("device lost mid-batch")
		}
		pb := b.Part(lo, min(partPages, b.Len()-lo))
		if err := p.cpu.Compress(ctx, &pb, &part); err != nil {
			return err
		}
		if err := deliver(lo, &part); err != nil {
			return err
		}
		clear(part.Data) // what the caller kept would now be wrong
	}
	return nil
}

var theParted = func() *parted {
	c, err := cpu.New(backends.Options{Workers: 2})
	if err != nil {
		panic(err)
	}
	return &parted{cpu: c}
}()

func init() {
	backends.Register("parted", 80, func(backends.Options) (backends.Backend, error) { return theParted, nil })
}

func TestPartedConformance(t *testing.T) {
	backendtest.Run(t, theParted, backendtest.Config{BatchSize: 64})
}

// A batch from a backend that delivers in parts is stored part by part;
// a failure after some parts sends the whole batch to the next backend;
// an error of the store ends the batch without failing the backend.
func TestCompressToParts(t *testing.T) {
	set := backends.Open(backends.Options{PageSize: 4096}, "parted", "cpu")
	defer set.Close()
	d := NewDispatcher(set, "parted", backends.CodecLZ4, 4096, slog.New(slog.DiscardHandler))
	const n = 100
	pages := corpus.Pages(corpus.Mixed, n, 4096, 1)
	ref, _ := cpu.New(backends.Options{})
	check := func(name string, got map[int][]byte, classes map[int]backends.Class, fills map[int]uint64) {
		t.Helper()
		page := make([]byte, 4096)
		for i := range n {
			s := backends.Stored{Class: classes[i], Fill: fills[i], Data: got[i]}
			if !ref.DecodePage(s, page) || !bytes.Equal(page, pages[i*4096:(i+1)*4096]) {
				t.Fatalf("%s: page %d not delivered right", name, i)
			}
		}
	}
	run := func(fail int64, stop error) (string, error, map[int][]byte, map[int]backends.Class, map[int]uint64, []string) {
		theParted.failAfter.Store(fail)
		defer theParted.failAfter.Store(0)
		got, classes, fills := map[int][]byte{}, map[int]backends.Class{}, map[int]uint64{}
		var from []string
		b := &backends.Batch{PageSize: 4096, Pages: pages}
		var out backends.Compressed
		name, err := d.CompressTo(context.Background(), b, &out, func(backend string, lo int, part *backends.Compressed) error {
			from = append(from, backend)
			if stop != nil && len(from) == 2 {
				return stop
			}
			pb := b.Part(lo, len(part.Class))
			for k := range part.Class {
				got[lo+k] = append([]byte(nil), part.Bytes(k, &pb)...)
				classes[lo+k], fills[lo+k] = part.Class[k], part.Fill[k]
			}
			return nil
		})
		return name, err, got, classes, fills, from
	}

	name, err, got, classes, fills, from := run(0, nil)
	if err != nil || name != "parted" || len(from) != (n+partPages-1)/partPages {
		t.Fatalf("went to %s in %d parts: %v", name, len(from), err)
	}
	check("parts", got, classes, fills)

	stop := errors.New("store refused")
	if name, err, _, _, _, _ := run(0, stop); err != stop || name != "parted" || d.fallbacks.Load() != 0 {
		t.Fatalf("deliver's error: %s %v, %d fallbacks", name, err, d.fallbacks.Load())
	}

	name, err, got, classes, fills, from = run(3, nil)
	if err != nil || name != "cpu" || d.fallbacks.Load() != 1 {
		t.Fatalf("after a failure mid-batch: %s %v, %d fallbacks", name, err, d.fallbacks.Load())
	}
	if len(from) != 4 || from[3] != "cpu" {
		t.Fatalf("delivered by %v", from)
	}
	check("fallback", got, classes, fills)
	if set.Retry(); d.InUse() != "parted" {
		t.Fatalf("in use %s", d.InUse())
	}
}

// Through the daemon: pages compressed in parts come back whole.
func TestDaemonStoresParts(t *testing.T) {
	c := serveInProcess(t, "parted")

	const n = 200
	pages := corpus.Pages(corpus.Mixed, n, 4096, 5)
	keys := seqKeys(1000, n)
	codes, err := c.Put(context.Background(), "p", keys, pages)
	if err != nil || ipc.PageError(keys, codes) != nil {
		t.Fatalf("put: %v %v", err, codes)
	}
	back, codes, err := c.Get(context.Background(), "p", keys)
	if err != nil || ipc.PageError(keys, codes) != nil || !bytes.Equal(back, pages) {
		t.Fatalf("get: %v %v, same %v", err, codes, bytes.Equal(back, pages))
	}
	st, err := c.Stats(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range st.Backends {
		for _, ct := range b.Counters {
			if b.Name == "parted" && ct.Direction == "compress" && ct.Pages != n {
				t.Fatalf("parted compressed %d pages", ct.Pages)
			}
		}
	}
	if st.Mem.Pages != n {
		t.Fatalf("%d pages stored", st.Mem.Pages)
	}
}
