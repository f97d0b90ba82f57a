// Package latency keeps histograms of how long requests take to answer,
// one per operation. The daemon records; the metrics package reads them
// for Prometheus, so the daemon imports nothing of Prometheus.
package latency

import (
	"strings"
	"sync/atomic"
	"time"

	"github.com/s4d-project/s4d/ipc"
)

// Bounds are the upper bounds, in seconds, of the buckets: a one-page
// request is answered in 10-50 us, a 64 MiB batch in tens of
// milliseconds, a stalled one in seconds.
var Bounds = []float64{10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6,
	1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1, 2.5, 10}

// opHist counts one operation's requests by bucket; lock-free, since
// every request of every connection passes here.
type opHist struct {
	buckets [19]atomic.Uint64 // len(Bounds)+1: the last is +Inf
	sumNs   atomic.Uint64
}

// Recorder holds the histograms of every operation code. The zero value
// is ready.
type Recorder struct {
	ops [256]opHist
}

// Observe records a request of op that took el to answer.
func (r *Recorder) Observe(op ipc.Op, el time.Duration) {
	s := el.Seconds()
	i := 0
	for i < len(Bounds) && s > Bounds[i] {
		i++
	}
	o := &r.ops[op]
	o.buckets[i].Add(1)
	o.sumNs.Add(uint64(el.Nanoseconds()))
}

// Op is one operation's histogram: Counts[i] requests took at most
// Bounds[i] and more than the bound before (the last: more than all).
type Op struct {
	Op     string
	Counts []uint64
	Sum    time.Duration
}

// Histograms returns the histogram of every operation seen so far.
func (r *Recorder) Histograms() []Op {
	var out []Op
	for op := range r.ops {
		o := &r.ops[op]
		counts := make([]uint64, len(o.buckets))
		var n uint64
		for i := range counts {
			counts[i] = o.buckets[i].Load()
			n += counts[i]
		}
		if n == 0 {
			continue
		}
		out = append(out, Op{Op: strings.ToLower(ipc.Op(op).String()), Counts: counts, Sum: time.Duration(o.sumNs.Load())})
	}
	return out
}
