package routing

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/pagefmt"
)

// DecodeParallel is how many batches of up to DecodeChunk pages are timed
// decoding at once: the daemon decodes GETs in such chunks, several
// clients' at a time, and a GPU overlaps their round trips where the CPU
// engine already spreads one batch over every core.
const DecodeParallel = 4

// decodeRig is where decompression is timed: for an engine that registers
// memory with its device (backends.Pinner), as the daemon runs it, the
// stored blocks in a registered mapping laid out as the store's slots
// (16-aligned, a 4-byte checksum in front) and the pages coming back into
// registered memory (a client's memfd); plain memory otherwise.
type decodeRig struct {
	blocks, dst []byte
	release     []func()
}

func newDecodeRig(be backends.Backend, maxPages, pageSize int) *decodeRig {
	r := &decodeRig{}
	nb, nd := maxPages*(pageSize+16), max(maxPages, DecodeParallel*DecodeChunk)*pageSize
	if p, ok := be.(backends.Pinner); ok {
		if r.blocks = r.mapPinned(p, nb); r.blocks != nil {
			r.dst = r.mapPinned(p, nd)
		}
		if r.dst == nil {
			r.free()
		}
	}
	if r.dst == nil {
		r.blocks, r.dst = make([]byte, nb), make([]byte, nd)
	}
	return r
}

func (r *decodeRig) mapPinned(p backends.Pinner, n int) []byte {
	m, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil
	}
	unpin, err := p.Pin(m)
	if err != nil {
		unix.Munmap(m)
		return nil
	}
	r.release = append(r.release, func() { unpin(); unix.Munmap(m) })
	return m
}

func (r *decodeRig) free() {
	for _, f := range r.release {
		f()
	}
	r.release, r.blocks, r.dst = nil, nil, nil
}

// rate times decoding the n pages of b compressed in out, DecodeParallel
// batches at once up to DecodeChunk pages, and returns GB/s of pages.
func (r *decodeRig) rate(ctx context.Context, be backends.Backend, b *pagefmt.Batch, out *pagefmt.Compressed, n, pageSize int, deadline time.Time) (float64, error) {
	src := make([]pagefmt.Stored, n)
	off := 0
	for j := range n {
		data := out.Bytes(j, b)
		at := off + 4
		src[j] = pagefmt.Stored{Class: out.Class[j], Fill: out.Fill[j], Data: r.blocks[at : at+len(data) : at+len(data)]}
		copy(src[j].Data, data)
		off = (at + len(data) + 15) &^ 15
	}
	par := 1
	if n <= DecodeChunk {
		par = DecodeParallel
	}
	ds := make([]pagefmt.Decompression, par)
	for k := range ds {
		ds[k] = pagefmt.Decompression{PageSize: pageSize, Src: src, Dst: r.dst[k*n*pageSize : (k+1)*n*pageSize]}
	}
	t, err := fastest(ctx, func() error {
		if par == 1 {
			return be.Decompress(ctx, &ds[0])
		}
		errs := make([]error, par)
		var wg sync.WaitGroup
		for k := range ds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[k] = be.Decompress(ctx, &ds[k])
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	}, deadline)
	if err != nil {
		return 0, err
	}
	return float64(par*n*pageSize) / t.Seconds() / 1e9, nil
}
