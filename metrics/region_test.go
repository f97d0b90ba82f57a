package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/s4d-project/s4d/ipc"
)

// The regions' totals become counters and a histogram of fault times, and
// are absent when STATS has none (a daemon that has no registry for them).
func TestRegionSeries(t *testing.T) {
	f := sample()
	if n := testutil.CollectAndCount(NewCollector(f, "", ""), "s4d_region_faults_total"); n != 0 {
		t.Fatalf("%d region series without region totals", n)
	}
	f.st.RegionTotals = &ipc.RegionTotals{Regions: 2, Faults: 40, ZeroFills: 10, EvictedBytes: 1 << 20, RestoredBytes: 1 << 19,
		FaultLatency: &ipc.Histogram{Bounds: []float64{1.024e-6, 2.048e-6}, Counts: []uint64{5, 30, 15}, Sum: 0.25}}
	c := NewCollector(f, "", "")
	want := `
# HELP s4d_region_evicted_bytes_total Bytes evicted from regions into the store.
# TYPE s4d_region_evicted_bytes_total counter
s4d_region_evicted_bytes_total 1.048576e+06
# HELP s4d_region_fault_duration_seconds Time the daemon took to serve a page fault in a region, from reading it to placing the page.
# TYPE s4d_region_fault_duration_seconds histogram
s4d_region_fault_duration_seconds_bucket{le="1.024e-06"} 5
s4d_region_fault_duration_seconds_bucket{le="2.048e-06"} 35
s4d_region_fault_duration_seconds_bucket{le="+Inf"} 50
s4d_region_fault_duration_seconds_sum 0.25
s4d_region_fault_duration_seconds_count 50
# HELP s4d_region_faults_total Page faults the daemon served in regions: evicted pages brought back and first touches.
# TYPE s4d_region_faults_total counter
s4d_region_faults_total 40
# HELP s4d_region_restored_bytes_total Bytes placed back into regions: by faults, their read-ahead, and regions handed back whole.
# TYPE s4d_region_restored_bytes_total counter
s4d_region_restored_bytes_total 524288
# HELP s4d_regions Regions registered now.
# TYPE s4d_regions gauge
s4d_regions 2
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "s4d_regions", "s4d_region_faults_total",
		"s4d_region_evicted_bytes_total", "s4d_region_restored_bytes_total", "s4d_region_fault_duration_seconds"); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}
