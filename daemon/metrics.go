package daemon

import (
	"github.com/s4d-project/s4d/latency"
	"github.com/s4d-project/s4d/routing"
)

// What the metrics endpoint reads beyond STATS: how long requests take to
// answer (recorded in d.lat where conn.loop times each request already,
// so counting costs no clock read of its own) and what the calibration
// measured.

// RequestLatency returns the histogram of every operation seen so far.
func (d *Daemon) RequestLatency() []latency.Op { return d.lat.Histograms() }

// CalibratedRates returns what calibration measured.
func (d *Daemon) CalibratedRates() []routing.Rate { return d.router.Rates() }
