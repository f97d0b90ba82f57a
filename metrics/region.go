package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/s4d-project/s4d/ipc"
)

// The regions' series (s4d run, Client.Map): totals over every region
// since the start, those gone included, so the counters never go down
// when a program exits. Per region they would be a series per process.
var (
	regionsNow      = desc("regions", "Regions registered now.")
	regionFaults    = desc("region_faults_total", "Page faults the daemon served in regions: evicted pages brought back and first touches.")
	regionZeroFills = desc("region_zero_fills_total", "Of those, first touches of pages never written (filled with zeros).")
	regionEvicted   = desc("region_evicted_bytes_total", "Bytes evicted from regions into the store.")
	regionRestored  = desc("region_restored_bytes_total", "Bytes placed back into regions: by faults, their read-ahead, and regions handed back whole.")
	regionFaultTime = desc("region_fault_duration_seconds", "Time the daemon took to serve a page fault in a region, from reading it to placing the page.")
)

func init() {
	all = append(all, regionsNow, regionFaults, regionZeroFills, regionEvicted, regionRestored, regionFaultTime)
}

func collectRegions(r *ipc.RegionTotals, gauge func(*prometheus.Desc, float64, ...string),
	counter func(*prometheus.Desc, uint64, ...string), hist func(*prometheus.Desc, *ipc.Histogram, ...string)) {
	if r == nil {
		return
	}
	gauge(regionsNow, float64(r.Regions))
	counter(regionFaults, r.Faults)
	counter(regionZeroFills, r.ZeroFills)
	counter(regionEvicted, r.EvictedBytes)
	counter(regionRestored, r.RestoredBytes)
	hist(regionFaultTime, r.FaultLatency)
}
