package backendtest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/pagefmt"
)

// Parted is a test backend that finishes batches in parts of 16 pages, as a GPU's slots do: each
// part is compressed by the cpu backend into one output reused for every
// part, so a caller that kept a part's memory would see it overwritten.
// With FailAfter > 0 it fails once that many parts were delivered.
type Parted struct {
	cpu       *cpu.Backend
	FailAfter atomic.Int64
}

// PartPages is the size of Parted's parts.
const PartPages = 16

func (p *Parted) Name() string     { return "parted" }
func (p *Parted) Describe() string { return "parts of 16 pages" }
func (p *Parted) Close() error     { return nil } // one for every test: never closed
func (p *Parted) Compress(ctx context.Context, b *pagefmt.Batch, out *pagefmt.Compressed) error {
	return p.cpu.Compress(ctx, b, out)
}
func (p *Parted) Decompress(ctx context.Context, d *pagefmt.Decompression) error {
	return p.cpu.Decompress(ctx, d)
}

func (p *Parted) CompressParts(ctx context.Context, b *pagefmt.Batch, deliver func(int, *pagefmt.Compressed) error) error {
	var part pagefmt.Compressed
	for lo, k := 0, int64(0); lo < b.Len(); lo, k = lo+PartPages, k+1 {
		if f := p.FailAfter.Load(); f > 0 && k == f {
			return errors.New("device lost mid-batch")
		}
		pb := b.Part(lo, min(PartPages, b.Len()-lo))
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

// TheParted is the one Parted backend, registered as "parted" by
// RegisterParted.
var TheParted = func() *Parted {
	c, err := cpu.New(backends.Options{Workers: 2})
	if err != nil {
		panic(err)
	}
	return &Parted{cpu: c}
}()

var registerParted sync.Once

// RegisterParted makes TheParted known to the registry as "parted",
// preferred over the cpu backend.
func RegisterParted() {
	registerParted.Do(func() {
		backends.Register("parted", 80, func(backends.Options) (backends.Backend, error) { return TheParted, nil })
	})
}
