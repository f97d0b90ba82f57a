package daemon

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/cpu"
)

// faulty fails every batch, as a GPU that lost its device would.
type faulty struct{}

func (faulty) Name() string     { return "faulty" }
func (faulty) Describe() string { return "always fails" }
func (faulty) Compress(context.Context, *backends.Batch, *backends.Compressed) error {
	return errors.New("device lost")
}
func (faulty) Decompress(context.Context, *backends.Decompression) error {
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
	d := NewDispatcher(set, "auto", backends.CodecLZ4, 4096, slog.New(slog.DiscardHandler))
	if d.InUse() != "faulty" {
		t.Fatalf("in use: %s", d.InUse())
	}
	pages := corpus.Pages(corpus.Mixed, 100, 4096, 1)
	var out backends.Compressed
	name, err := d.Compress(context.Background(), 4096, pages, &out)
	if err != nil || name != "cpu" {
		t.Fatalf("compress went to %q: %v", name, err)
	}
	ref, _ := cpu.New(backends.Options{})
	page := make([]byte, 4096)
	b := &backends.Batch{PageSize: 4096, Pages: pages}
	for i := range 100 {
		if !ref.DecodePage(backends.Stored{Class: out.Class[i], Fill: out.Fill[i], Data: out.Bytes(i, b)}, page) ||
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

func TestParseSize(t *testing.T) {
	for in, want := range map[string]uint64{"0": 0, "4096": 4096, "4K": 4096, "1M": 1 << 20, "2G": 2 << 30, "1GiB": 1 << 30, "3t": 3 << 40} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "M", "-1", "1X", "99999999999T"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}

func TestValidate(t *testing.T) {
	c := Defaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, ps := range []int{0, 2048, 5000, 131072} {
		c := Defaults()
		c.PageSize = ps
		if c.Validate() == nil {
			t.Errorf("page size %d accepted", ps)
		}
	}
	c.Codec = "gzip"
	if c.Validate() == nil {
		t.Error("codec gzip accepted")
	}
}
