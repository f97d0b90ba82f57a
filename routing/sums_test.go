package routing

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/pagefmt"
)

// unchecking decodes with the cpu engine but does not say it checks sums,
// as an engine that cannot would; it records whether it was handed any
// page still to check.
type unchecking struct {
	cpu      *cpu.Backend
	sawCheck bool
}

func (u *unchecking) Name() string     { return "unchecking" }
func (u *unchecking) Describe() string { return "checks no sums" }
func (u *unchecking) Compress(ctx context.Context, in *pagefmt.Batch, out *pagefmt.Compressed) error {
	return u.cpu.Compress(ctx, in, out)
}
func (u *unchecking) Decompress(ctx context.Context, d *pagefmt.Decompression) error {
	for _, s := range d.Src {
		u.sawCheck = u.sawCheck || s.Check
	}
	return u.cpu.Decompress(ctx, d)
}
func (u *unchecking) Close() error { return nil }

var theUnchecking *unchecking

func init() {
	backends.Register("unchecking", 80, func(o backends.Options) (backends.Backend, error) {
		c, err := cpu.New(o)
		theUnchecking = &unchecking{cpu: c}
		return theUnchecking, err
	})
}

// Pages the store left to check are checked by the engine that says it
// does (cpu), by the router before any other, and a page whose bytes do
// not match its sum is flagged Corrupt and Failed while the rest decode.
func TestSumsChecked(t *testing.T) {
	const n, ps, bad = 40, 4096, 13
	pages := corpus.Pages(corpus.Mixed, n, ps, 9)
	ref, _ := cpu.New(backends.Options{})
	b := &pagefmt.Batch{PageSize: ps, Pages: pages, Codec: pagefmt.CodecLZ4, Threshold: ps * 3 / 4}
	var out pagefmt.Compressed
	if err := ref.Compress(context.Background(), b, &out); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"cpu", "unchecking"} {
		set := backends.Open(backends.Options{PageSize: ps}, name)
		d := New(set, Options{Prefer: name, Codec: pagefmt.CodecLZ4, PageSize: ps, Log: slog.New(slog.DiscardHandler)})
		dd := &pagefmt.Decompression{PageSize: ps, Src: make([]pagefmt.Stored, n), Dst: make([]byte, n*ps),
			Corrupt: []bool{true, true}} // stale flags from an earlier batch are cleared
		for i := range n {
			dd.Src[i] = pagefmt.Stored{Class: out.Class[i], Fill: out.Fill[i], Data: out.Bytes(i, b),
				Check: true, Sum: out.Checksum(i, b)}
		}
		for i := range n {
			if out.Class[i] != pagefmt.ClassZero && i >= bad {
				dd.Src[i].Sum ^= 1 // the first stored page from bad on is damaged
				break
			}
		}
		if err := d.Decompress(context.Background(), dd); err != nil {
			t.Fatal(err)
		}
		damaged := 0
		for i := range n {
			if dd.Corrupt[i] {
				damaged++
				if !dd.Failed[i] {
					t.Fatalf("%s: page %d corrupt but not failed", name, i)
				}
				continue
			}
			if dd.Failed[i] || !bytes.Equal(dd.Dst[i*ps:(i+1)*ps], b.Page(i)) {
				t.Fatalf("%s: page %d did not come back", name, i)
			}
		}
		if damaged != 1 {
			t.Fatalf("%s: %d pages flagged corrupt, want 1", name, damaged)
		}
		if name == "unchecking" && theUnchecking.sawCheck {
			t.Fatal("a page still to check was handed to an engine that does not check")
		}
		set.Close()
	}
}
