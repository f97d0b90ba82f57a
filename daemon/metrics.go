package daemon

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/s4d-project/s4d/ipc"
)

// What the metrics endpoint reads beyond STATS: how long requests take to
// answer and what the calibration measured. The daemon keeps plain
// counters; the metrics package turns them into Prometheus series, so
// this package imports nothing of Prometheus.

// LatencyBounds are the upper bounds, in seconds, of the request latency
// buckets: a one-page request is answered in 10-50 us, a 64 MiB batch in
// tens of milliseconds, a stalled one in seconds.
var LatencyBounds = []float64{10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6,
	1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1, 2.5, 10}

// opLatency counts one operation's requests by bucket; lock-free, since
// every request of every connection passes here.
type opLatency struct {
	buckets [19]atomic.Uint64 // len(LatencyBounds)+1: the last is +Inf
	sumNs   atomic.Uint64
}

// latencies holds the histograms of one daemon, per operation code.
type latencies struct {
	ops [256]opLatency
}

// byDaemon keeps each daemon's histograms beside it (a test process runs
// several daemons; production runs one).
var byDaemon sync.Map // *Daemon -> *latencies

func (d *Daemon) latencies() *latencies {
	if l, ok := byDaemon.Load(d); ok {
		return l.(*latencies)
	}
	l, _ := byDaemon.LoadOrStore(d, new(latencies))
	return l.(*latencies)
}

// observe records a request of op that took el to answer. Called where
// conn.loop times each request already (c.spin.served), so counting costs
// no clock read of its own.
func (d *Daemon) observe(op ipc.Op, el time.Duration) {
	s := el.Seconds()
	i := 0
	for i < len(LatencyBounds) && s > LatencyBounds[i] {
		i++
	}
	o := &d.latencies().ops[op]
	o.buckets[i].Add(1)
	o.sumNs.Add(uint64(el.Nanoseconds()))
}

// OpLatency is one operation's histogram: Counts[i] requests took at most
// LatencyBounds[i] and more than the bound before (the last: more than all).
type OpLatency struct {
	Op     string
	Counts []uint64
	Sum    time.Duration
}

// RequestLatency returns the histogram of every operation seen so far.
func (d *Daemon) RequestLatency() []OpLatency {
	var out []OpLatency
	l := d.latencies()
	for op := range l.ops {
		o := &l.ops[op]
		counts := make([]uint64, len(o.buckets))
		var n uint64
		for i := range counts {
			counts[i] = o.buckets[i].Load()
			n += counts[i]
		}
		if n == 0 {
			continue
		}
		out = append(out, OpLatency{Op: strings.ToLower(ipc.Op(op).String()), Counts: counts, Sum: time.Duration(o.sumNs.Load())})
	}
	return out
}

// CalibratedRate is one figure of the start-up calibration.
type CalibratedRate struct {
	Backend   string
	Direction string // compress or decompress
	Pages     int    // batch size
	BytesPerS float64
}

// CalibratedRates returns what calibration measured, or nothing when
// there was no choice to make (one usable backend) or it failed.
func (d *Daemon) CalibratedRates() []CalibratedRate {
	cal := d.disp.Calibration()
	if cal == nil {
		return nil
	}
	var out []CalibratedRate
	for dir, rates := range map[string]map[string][]float64{"compress": cal.Rate, "decompress": cal.DecRate} {
		for be, perSize := range rates {
			for i, gbps := range perSize {
				if i < len(cal.Sizes) {
					out = append(out, CalibratedRate{Backend: be, Direction: dir, Pages: cal.Sizes[i], BytesPerS: gbps * 1e9})
				}
			}
		}
	}
	return out
}
