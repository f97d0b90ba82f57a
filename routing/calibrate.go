package routing

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/pagefmt"
)

// DecodeChunk is how many pages a large GET decodes at a time, under one
// hold of the store's read lock. Measured on a 16-core H100 host (memfd,
// 8 clients): 4096 pages made GETs 28 -> 32-33 GB/s against 1024, from
// fewer fork-joins across the engine's workers; a writer waits at most
// for one chunk's decoding (well under a millisecond there).
const DecodeChunk = 4096

// CalibrationSizes are the batch sizes, in pages, timed at start-up; the
// largest (64 MiB of 4 KiB pages) is where GPUs reach their stride, and a
// large GET is decoded DecodeChunk pages at a time.
var CalibrationSizes = []int{1, 16, 256, 1024, DecodeChunk, 16384}

// Calibration ranks the usable backends for each batch size: small batches
// often belong to the CPU, where a GPU would pay a PCIe round trip, and
// large ones to a GPU.
type Calibration struct {
	Sizes    []int
	Order    [][]string           // compression, per size, fastest first
	Rate     map[string][]float64 // compression GB/s per size
	DecOrder [][]string           // decompression, per size, fastest first
	DecRate  map[string][]float64 // decompression GB/s per size
	// Measured: how many sizes (from the smallest) were timed per
	// backend; the rest repeat the last timed rate.
	Measured map[string]int
}

// CalibrationBudget bounds the time spent timing one backend, so that the
// daemon answers its socket within seconds even on a slow engine (a GPU
// emulated on the CPU by lavapipe took 50 s for all sizes). Sizes that do
// not fit in it take the rate of the largest size measured: for a GPU that
// understates large batches, so routing errs towards the CPU.
var CalibrationBudget = 1500 * time.Millisecond

// Calibrate times every backend on heap-like pages (pointers and small
// integers: every page costs about the same, so sizes compare) at each
// size; each timing is the best of a few runs lasting 20 ms or more,
// within CalibrationBudget per backend. Compression and decompression are
// ranked separately; decompression is timed as the daemon runs it (see
// decodeRig): several chunks at once, from and into registered memory
// where the engine registers memory.
func Calibrate(ctx context.Context, usable []backends.Backend, pageSize int, codec pagefmt.Codec, sizes []int) (*Calibration, error) {
	return calibrate(ctx, usable, pagefmt.Batch{PageSize: pageSize, Codec: codec, Threshold: pageSize * 3 / 4}, sizes)
}

// calibrate times batches made like proto (its pages aside).
func calibrate(ctx context.Context, usable []backends.Backend, proto pagefmt.Batch, sizes []int) (*Calibration, error) {
	pageSize := proto.PageSize
	// The pages are made as the sizes need them: making 64 MiB that a slow
	// engine never gets to would cost more than its budget.
	var pages []byte
	c := &Calibration{Sizes: sizes, Rate: map[string][]float64{}, DecRate: map[string][]float64{}, Measured: map[string]int{}}
	var out pagefmt.Compressed
	// A backend that does not take this codec is not timed, nor ranked:
	// the router passes its batches over anyway.
	usable = taking(usable, pageSize, proto.Codec)
	for _, be := range usable {
		b := &pagefmt.Batch{}
		*b = proto
		rates := make([]float64, len(sizes))
		drates := make([]float64, len(sizes))
		// Registering the rig's memory is set-up, outside the budget.
		rig := newDecodeRig(be, sizes[len(sizes)-1], pageSize)
		deadline := time.Now().Add(CalibrationBudget)
		measured := 0
		for i, n := range sizes {
			bytes := float64(n * pageSize)
			// Four runs of each direction at least, at the last rates.
			if i > 0 && time.Now().Add(time.Duration(4*(bytes/rates[i-1]+bytes/drates[i-1]))).After(deadline) {
				rates[i], drates[i] = rates[i-1], drates[i-1]
				continue
			}
			if have := len(pages) / pageSize; have < n {
				pages = append(pages, corpus.Pages(corpus.Pointers, n-have, pageSize, uint64(42+have))...)
			}
			b.Pages = pages[:n*pageSize]
			t, err := fastest(ctx, func() error { return be.Compress(ctx, b, &out) }, deadline)
			if err != nil {
				rig.free()
				return nil, fmt.Errorf("%s: %w", be.Name(), err)
			}
			rates[i] = bytes / t.Seconds() / 1e9
			if drates[i], err = rig.rate(ctx, be, b, &out, n, pageSize, deadline); err != nil {
				rig.free()
				return nil, fmt.Errorf("%s: %w", be.Name(), err)
			}
			measured = i + 1
		}
		rig.free()
		c.Rate[be.Name()], c.DecRate[be.Name()] = rates, drates
		c.Measured[be.Name()] = measured
	}
	c.Order, c.DecOrder = rankBy(usable, c.Rate, len(sizes)), rankBy(usable, c.DecRate, len(sizes))
	return c, nil
}

// fastest runs fn once to warm up, then at least once more and, until
// the deadline, at least 3 times and for at least 20 ms; it returns the
// best time. It stops when ctx ends (a daemon told to stop while it
// calibrates: a slow engine can take most of a minute).
func fastest(ctx context.Context, fn func() error, deadline time.Time) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := fn(); err != nil {
		return 0, err
	}
	best := time.Duration(1 << 62)
	var spent time.Duration
	for run := 0; run == 0 || ((run < 3 || (spent < 20*time.Millisecond && run < 50)) && time.Now().Before(deadline)); run++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		t0 := time.Now()
		if err := fn(); err != nil {
			return 0, err
		}
		el := time.Since(t0)
		spent += el
		best = min(best, el)
	}
	return best, nil
}

// rankBy orders the backends by rate, fastest first, for every size. The
// devices of one engine (GPUs) rank by their sum: each is timed alone, one
// batch at a time, but the router spreads batches over all of them, so two
// GPUs that each lose to the CPU may together beat it (on two H100s, 4096
// pages: 6.2 GB/s each, cpu 7.7).
func rankBy(usable []backends.Backend, rate map[string][]float64, sizes int) [][]string {
	sum := map[string][]float64{} // per engine
	for _, be := range usable {
		e := engineOf(be)
		if sum[e] == nil {
			sum[e] = make([]float64, sizes)
		}
		for i := range sizes {
			if i < len(rate[be.Name()]) {
				sum[e][i] += rate[be.Name()][i]
			}
		}
	}
	eng := map[string]string{}
	for _, be := range usable {
		eng[be.Name()] = engineOf(be)
	}
	var order [][]string
	for i := range sizes {
		var names []string
		for _, be := range usable {
			names = append(names, be.Name())
		}
		sort.SliceStable(names, func(a, b int) bool {
			ra, rb := sum[eng[names[a]]][i], sum[eng[names[b]]][i]
			if ra == rb { // peers: the faster device first
				return rate[names[a]][i] > rate[names[b]][i]
			}
			return ra > rb
		})
		order = append(order, names)
	}
	return order
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
func (c *Calibration) CoalesceBelow() int {
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
			if m, ok := c.Measured[name]; ok && i >= m {
				fmt.Fprintf(&b, " %d=~", s) // not timed: the budget ran out
				continue
			}
			fmt.Fprintf(&b, " %d=%.2f/%.2fGB/s", s, r[i], c.DecRate[name][i])
		}
		b.WriteString("; ")
	}
	return "compress/decompress " + strings.TrimSuffix(b.String(), "; ")
}

// Rate is one figure of the start-up calibration.
type Rate struct {
	Backend   string
	Direction string // compress or decompress
	Pages     int    // batch size
	BytesPerS float64
}

// Rates lists what calibration measured, or nothing when there was no
// choice to make (one usable backend) or it failed.
func (r *Router) Rates() []Rate {
	cal := r.Calibration()
	if cal == nil {
		return nil
	}
	var out []Rate
	for dir, rates := range map[string]map[string][]float64{"compress": cal.Rate, "decompress": cal.DecRate} {
		for be, perSize := range rates {
			for i, gbps := range perSize {
				if i < len(cal.Sizes) {
					out = append(out, Rate{Backend: be, Direction: dir, Pages: cal.Sizes[i], BytesPerS: gbps * 1e9})
				}
			}
		}
	}
	return out
}
