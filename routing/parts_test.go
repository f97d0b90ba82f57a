package routing

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/backendtest"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/pagefmt"
)

func init() { backendtest.RegisterParted() }

func TestPartedConformance(t *testing.T) {
	backendtest.Run(t, backendtest.TheParted, backendtest.Config{BatchSize: 64})
}

// A batch from a backend that delivers in parts is stored part by part;
// a failure after some parts sends the whole batch to the next backend;
// an error of the store ends the batch without failing the backend.
func TestCompressToParts(t *testing.T) {
	set := backends.Open(backends.Options{PageSize: 4096}, "parted", "cpu")
	defer set.Close()
	d := New(set, Options{Prefer: "parted", Codec: pagefmt.CodecLZ4, PageSize: 4096, Log: slog.New(slog.DiscardHandler)})
	const n = 100
	pages := corpus.Pages(corpus.Mixed, n, 4096, 1)
	ref, _ := cpu.New(backends.Options{})
	check := func(name string, got map[int][]byte, classes map[int]pagefmt.Class, fills map[int]uint64) {
		t.Helper()
		page := make([]byte, 4096)
		for i := range n {
			s := pagefmt.Stored{Class: classes[i], Fill: fills[i], Data: got[i]}
			if !ref.DecodePage(s, page) || !bytes.Equal(page, pages[i*4096:(i+1)*4096]) {
				t.Fatalf("%s: page %d not delivered right", name, i)
			}
		}
	}
	run := func(fail int64, stop error) (string, error, map[int][]byte, map[int]pagefmt.Class, map[int]uint64, []string) {
		backendtest.TheParted.FailAfter.Store(fail)
		defer backendtest.TheParted.FailAfter.Store(0)
		got, classes, fills := map[int][]byte{}, map[int]pagefmt.Class{}, map[int]uint64{}
		var from []string
		b := &pagefmt.Batch{PageSize: 4096, Pages: pages}
		var out pagefmt.Compressed
		name, err := d.Compress(context.Background(), b, &out, func(backend string, lo int, part *pagefmt.Compressed) error {
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
	if err != nil || name != "parted" || len(from) != (n+backendtest.PartPages-1)/backendtest.PartPages {
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
