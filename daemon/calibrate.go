package daemon

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/corpus"
)

// CalibrationSizes are the batch sizes, in pages, timed at start-up.
var CalibrationSizes = []int{1, 16, 256, 4096}

// Calibration ranks the usable backends for each batch size: small batches
// often belong to the CPU, where a GPU would pay a PCIe round trip, and
// large ones to a GPU.
type Calibration struct {
	Sizes []int
	Order [][]string           // per size, fastest first
	Rate  map[string][]float64 // GB/s per size
}

// Calibrate times every backend on mixed pages at each size; each timing is
// the best of a few runs lasting at least a few milliseconds together.
func Calibrate(ctx context.Context, usable []backends.Backend, pageSize int, codec backends.Codec, sizes []int) (*Calibration, error) {
	maxN := sizes[len(sizes)-1]
	pages := corpus.Pages(corpus.Mixed, maxN, pageSize, 42)
	c := &Calibration{Sizes: sizes, Rate: map[string][]float64{}}
	var out backends.Compressed
	for _, be := range usable {
		b := &backends.Batch{PageSize: pageSize, Codec: codec, Threshold: pageSize * 3 / 4}
		rates := make([]float64, len(sizes))
		for i, n := range sizes {
			b.Pages = pages[:n*pageSize]
			if err := be.Compress(ctx, b, &out); err != nil { // warm-up
				return nil, fmt.Errorf("%s: %w", be.Name(), err)
			}
			best := time.Duration(1 << 62)
			var spent time.Duration
			for run := 0; run < 3 || (spent < 20*time.Millisecond && run < 50); run++ {
				t0 := time.Now()
				if err := be.Compress(ctx, b, &out); err != nil {
					return nil, fmt.Errorf("%s: %w", be.Name(), err)
				}
				el := time.Since(t0)
				spent += el
				best = min(best, el)
			}
			rates[i] = float64(n*pageSize) / best.Seconds() / 1e9
		}
		c.Rate[be.Name()] = rates
	}
	for i := range sizes {
		var names []string
		for _, be := range usable {
			names = append(names, be.Name())
		}
		sort.SliceStable(names, func(a, b int) bool { return c.Rate[names[a]][i] > c.Rate[names[b]][i] })
		c.Order = append(c.Order, names)
	}
	return c, nil
}

// bucket is the index of the largest calibrated size not above n.
func (c *Calibration) bucket(n int) int {
	i := 0
	for j, s := range c.Sizes {
		if s <= n {
			i = j
		}
	}
	return i
}

// coalesceBelow is the batch size under which requests should be merged:
// the smallest size at which the large-batch winner already wins. It is 0
// when one backend wins everywhere, and merging would only add latency.
func (c *Calibration) coalesceBelow() int {
	last := len(c.Sizes) - 1
	winner := c.Order[last][0]
	if c.Order[0][0] == winner {
		return 0
	}
	for i, o := range c.Order {
		if o[0] == winner {
			return c.Sizes[i]
		}
	}
	return 0
}

func (c *Calibration) String() string {
	var b strings.Builder
	for name, r := range c.Rate {
		fmt.Fprintf(&b, "%s:", name)
		for i, s := range c.Sizes {
			fmt.Fprintf(&b, " %d=%.2fGB/s", s, r[i])
		}
		b.WriteString("; ")
	}
	return strings.TrimSuffix(b.String(), "; ")
}
