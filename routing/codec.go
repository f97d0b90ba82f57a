package routing

import (
	"context"

	"github.com/s4d-project/s4d/backends"
)

// Background work may compress with a codec of its own (recompression:
// zstd at a stronger level), which the start-up calibration, made with the
// foreground's codec, does not rank: a GPU that wins at LZ4 may lose at
// zstd, or the reverse. Such batches are ranked by a calibration of their
// own, measured when the work first needs it (CalibrateAs).

// CalibrateAs times usable backends on batches of codec (Strong as asked)
// at each size, as Calibrate does for the foreground's codec.
func CalibrateAs(ctx context.Context, usable []backends.Backend, pageSize int, codec backends.Codec, strong bool, sizes []int) (*Calibration, error) {
	return calibrate(ctx, usable, backends.Batch{PageSize: pageSize, Codec: codec, Threshold: pageSize * 3 / 4, Strong: strong}, sizes)
}

// SetCodecCalibration makes CompressAs batches of codec follow c.
func (d *Router) SetCodecCalibration(codec backends.Codec, c *Calibration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.codecCal == nil {
		d.codecCal = map[backends.Codec]*Calibration{}
	}
	d.codecCal[codec] = c
}

// CodecCalibration is what SetCodecCalibration was given for codec, or nil.
func (d *Router) CodecCalibration(codec backends.Codec) *Calibration {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.codecCal[codec]
}

// CompressAs compresses b with codec (b.Strong as set) on the backend
// fastest for that codec at b's size, falling back down the chain as
// Compress does; the results are left whole in out. Without a calibration
// for codec, a codec other than the foreground's goes to the backends in
// their order of preference.
func (d *Router) CompressAs(ctx context.Context, b *backends.Batch, codec backends.Codec, out *backends.Compressed) (string, error) {
	return d.compressWith(ctx, codec, d.chainAs(codec, b.Len()), b, out, nil)
}

func (d *Router) chainAs(codec backends.Codec, n int) []backends.Backend {
	usable := d.set.Usable()
	cal := d.CodecCalibration(codec)
	switch {
	case len(usable) <= 1 || d.Preference() != "auto":
		return d.chainFor(n, false)
	case cal != nil:
		return rank(usable, cal.Order[cal.bucket(n)])
	case codec == d.codec:
		return d.chain(n)
	}
	return usable
}

// Usable lists the backends in service, in their order of preference.
func (d *Router) Usable() []backends.Backend { return d.set.Usable() }

// CompressCodec is Compress for a batch that a pool wants compressed with
// its own codec (0: the foreground's): one of another codec than the
// foreground's goes to the backend fastest for that codec, never merged
// with other batches.
func (d *Router) CompressCodec(ctx context.Context, b *backends.Batch, codec backends.Codec, out *backends.Compressed, deliver Deliver) (string, error) {
	if codec == 0 || codec == d.codec {
		return d.Compress(ctx, b, out, deliver)
	}
	return d.compressWith(ctx, codec, d.chainAs(codec, b.Len()), b, out, deliver)
}
