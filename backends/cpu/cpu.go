// Package cpu is the reference backend: LZ4 (pierrec/lz4) and zstd
// (klauspost/compress) on every core. Every other backend's output must
// decode here.
package cpu

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/internal/par"
	"github.com/s4d-project/s4d/pagefmt"
)

func init() {
	backends.Register("cpu", 0, func(o backends.Options) (backends.Backend, error) { return New(o) })
}

// chunk is how many pages one goroutine takes at a time: large enough to
// amortise the hand-off, small enough to balance a batch over all cores.
const chunk = 16

// Backend compresses on the CPU. It is safe for concurrent use.
type Backend struct {
	workers int
	lz4     sync.Pool // *pageLZ4, reused for its hash table
	zenc    *zstd.Encoder
	zdec    *zstd.Decoder
	// zstrong is for Strong batches, made on first use: its encoders take
	// memory that a daemon that never recompresses need not hold.
	zstrong     *zstd.Encoder
	zstrongOnce sync.Once
	zstrongErr  error
}

// New opens a CPU backend with o.Workers goroutines per batch (0 = one per core).
func New(o backends.Options) (*Backend, error) {
	w := o.Workers
	if w <= 0 {
		w = runtime.GOMAXPROCS(0)
	}
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderConcurrency(w),
		zstd.WithEncoderCRC(false), // pages carry their own integrity
		zstd.WithZeroFrames(true),
		zstd.WithSingleSegment(true),
		zstd.WithLowerEncoderMem(true))
	if err != nil {
		return nil, fmt.Errorf("zstd encoder: %w", err)
	}
	// Output is capped at one page by DecodeAllCapLimit; the memory limit
	// only has to admit the windows other encoders declare (nvCOMP: 1 MiB)
	// while refusing absurd ones.
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(w),
		zstd.WithDecoderMaxMemory(8<<20),
		zstd.WithDecodeAllCapLimit(true))
	if err != nil {
		return nil, fmt.Errorf("zstd decoder: %w", err)
	}
	b := &Backend{workers: w, zenc: enc, zdec: dec}
	b.lz4.New = func() any { return new(pageLZ4) }
	return b, nil
}

// StrongLevel is the zstd level of Strong batches. On 4 KiB pages of a
// Python heap (248 MiB, 2 cores) zstd gave ratio 8.18 at the fastest
// level, 8.54 at this one (about half its speed) and 9.03 at the best (a
// fifth of it); LZ4 3.73.
var StrongLevel = zstd.SpeedBetterCompression

// strong makes the encoder of Strong batches.
func (b *Backend) strong() error {
	b.zstrongOnce.Do(func() {
		b.zstrong, b.zstrongErr = zstd.NewWriter(nil,
			zstd.WithEncoderLevel(StrongLevel),
			zstd.WithEncoderConcurrency(b.workers),
			zstd.WithEncoderCRC(false),
			zstd.WithZeroFrames(true),
			zstd.WithSingleSegment(true),
			zstd.WithLowerEncoderMem(true))
	})
	return b.zstrongErr
}

func (b *Backend) Name() string     { return "cpu" }
func (b *Backend) Describe() string { return fmt.Sprintf("%d workers", b.workers) }
func (b *Backend) Close() error {
	b.zdec.Close()
	if b.zstrong != nil {
		b.zstrong.Close()
	}
	return b.zenc.Close()
}

// parallel runs fn over [0,n) in chunks, on up to b.workers goroutines.
// Small batches run on the caller's goroutine: a 4 KiB PUT must not pay
// for a hand-off.
func (b *Backend) parallel(n int, fn func(lo, hi int)) { par.For(n, chunk, b.workers, fn) }

// Compress classifies every page and compresses the rest with the batch's
// codec. Page i's bytes go to Data[i*Threshold:], so pages compress in
// parallel without a packing pass; the gaps are never read.
func (b *Backend) Compress(ctx context.Context, in *pagefmt.Batch, out *pagefmt.Compressed) error {
	n := in.Len()
	out.Reset(n)
	t := in.Threshold
	if cap(out.Data) < n*t {
		out.Data = make([]byte, n*t)
	}
	out.Data = out.Data[:n*t]
	if in.Strong && in.Codec == pagefmt.CodecZstd {
		if err := b.strong(); err != nil {
			return err
		}
	}
	if in.Sums {
		if cap(out.Sum) < n {
			out.Sum = make([]uint32, n)
		}
		out.Sum = out.Sum[:n]
	}
	b.parallel(n, func(lo, hi int) {
		var lc *pageLZ4
		if in.Codec == pagefmt.CodecLZ4 {
			lc = b.lz4.Get().(*pageLZ4)
			defer b.lz4.Put(lc)
		}
		for i := lo; i < hi; i++ {
			b.compressPage(in, out, i, lc)
			if in.Sums {
				// Here, while the bytes are in this core's cache, rather
				// than by the store in a pass of its own.
				out.Sum[i] = out.Checksum(i, in)
			}
		}
	})
	return ctx.Err()
}

func (b *Backend) compressPage(in *pagefmt.Batch, out *pagefmt.Compressed, i int, lc *pageLZ4) {
	page := in.Page(i)
	if c, fill := pagefmt.Classify(page); c != 0 {
		out.Class[i], out.Fill[i], out.Off[i], out.Size[i] = c, fill, 0, 8
		if c == pagefmt.ClassZero {
			out.Size[i] = 0
		}
		return
	}
	t := in.Threshold
	dst := out.Data[i*t : i*t+t : i*t+t]
	n := 0
	switch in.Codec {
	case pagefmt.CodecLZ4:
		// A block that does not fit in the threshold comes back as 0: the
		// page is then stored raw.
		n = lc.compress(page, dst)
	case pagefmt.CodecZstd:
		enc := b.zenc
		if in.Strong {
			enc = b.zstrong
		}
		// EncodeAll may move its output to a larger buffer on the way to
		// a frame that fits after all (seen at the stronger levels): the
		// bytes must end up in dst.
		if r := enc.EncodeAll(page, dst[:0]); len(r) <= t {
			n = copy(dst, r)
		}
	}
	out.Fill[i], out.Off[i] = 0, uint32(i*t)
	if n == 0 {
		out.Class[i], out.Size[i] = pagefmt.ClassRaw, uint32(in.PageSize)
		return
	}
	out.Class[i], out.Size[i] = in.Codec.Class(), uint32(n)
}

// Decompress expands every page; a page that does not decode to exactly
// one page is flagged, never returned short.
func (b *Backend) Decompress(ctx context.Context, d *pagefmt.Decompression) error {
	n := len(d.Src)
	d.Failed = pagefmt.Resize(d.Failed, n)
	clear(d.Failed)
	d.CorruptFlags()
	ps := d.PageSize
	b.parallel(n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			// Checked right before decoding, the bytes are read from
			// cache the second time.
			if !d.Src[i].SumOK() {
				d.Corrupt[i], d.Failed[i] = true, true
				continue
			}
			d.Failed[i] = !b.DecodePage(d.Src[i], d.Dst[i*ps:(i+1)*ps:(i+1)*ps])
		}
	})
	return ctx.Err()
}

// ChecksSums marks the cpu engine as checking pages' sums as it decodes.
func (b *Backend) ChecksSums() {}

// DecodePage expands one stored page into dst (exactly one page long).
func (b *Backend) DecodePage(s pagefmt.Stored, dst []byte) bool {
	switch s.Class {
	case pagefmt.ClassLZ4:
		n, err := lz4.UncompressBlock(s.Data, dst)
		return err == nil && n == len(dst)
	case pagefmt.ClassZstd:
		r, err := b.zdec.DecodeAll(s.Data, dst[:0])
		return err == nil && len(r) == len(dst) && &r[0] == &dst[0]
	}
	return pagefmt.DecodePlain(s, dst)
}
