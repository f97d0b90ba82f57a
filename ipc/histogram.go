package ipc

import "time"

// Histogram is a distribution of durations in STATS, in the form
// Prometheus takes: fixed bounds, the same on every host, so that hosts'
// histograms add up.
type Histogram struct {
	Bounds []float64 `json:"bounds_seconds"` // upper bounds, ascending
	// Counts[i] were at most Bounds[i] and more than the bound before; the
	// last, one more than Bounds, is past every bound.
	Counts []uint64 `json:"counts"`
	Sum    float64  `json:"sum_seconds"`
}

// NewHistogram builds a Histogram from bounds, per-bucket counts (one
// more than bounds) and their total time.
func NewHistogram(bounds []time.Duration, counts []uint64, sum time.Duration) *Histogram {
	h := &Histogram{Bounds: make([]float64, len(bounds)), Counts: append([]uint64(nil), counts...), Sum: sum.Seconds()}
	for i, b := range bounds {
		h.Bounds[i] = b.Seconds()
	}
	return h
}
