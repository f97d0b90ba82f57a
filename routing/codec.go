package routing

import (
	"context"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/pagefmt"
)

// Background work may compress with a codec of its own (recompression:
// zstd at a stronger level), which the start-up calibration, made with the
// foreground's codec, does not rank: a GPU that wins at LZ4 may lose at
// zstd, or the reverse. Such batches are ranked by a calibration of their
// own, measured when the work first needs it (CalibrateAs). So are the
// batches of a pool whose codec is not the daemon's.

// CalibrateAs times usable backends on batches of codec (Strong as asked)
// at each size, as Calibrate does for the foreground's codec.
func CalibrateAs(ctx context.Context, usable []backends.Backend, pageSize int, codec pagefmt.Codec, strong bool, sizes []int) (*Calibration, error) {
	return calibrate(ctx, usable, pagefmt.Batch{PageSize: pageSize, Codec: codec, Threshold: pageSize * 3 / 4, Strong: strong}, sizes)
}

// SetCodecCalibration makes Compress rank batches of codec, and strong
// ones, by c.
func (r *Router) SetCodecCalibration(codec pagefmt.Codec, c *Calibration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.codecCal == nil {
		r.codecCal = map[pagefmt.Codec]*Calibration{}
	}
	r.codecCal[codec] = c
}

// CodecCalibration is what SetCodecCalibration was given for codec, or nil.
func (r *Router) CodecCalibration(codec pagefmt.Codec) *Calibration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.codecCal[codec]
}

// chainAs ranks the backends for a batch of codec of n pages: by codec's
// own calibration where there is one; without, a codec other than the
// foreground's goes to the backends in their order of preference.
func (r *Router) chainAs(codec pagefmt.Codec, n int) []backends.Backend {
	usable := r.set.Usable()
	cal := r.CodecCalibration(codec)
	switch {
	case len(usable) <= 1 || r.Preference() != "auto":
		return r.chainFor(n, false)
	case cal != nil:
		return rank(usable, cal.Order[cal.bucket(n)])
	case codec == r.codec:
		return r.chain(n)
	}
	return usable
}

// Usable lists the backends in service, in their order of preference.
func (r *Router) Usable() []backends.Backend { return r.set.Usable() }
