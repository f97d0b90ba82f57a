package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/s4d-project/s4d/ipc"
)

// The backing file's series appear with it, follow the conventions, and
// are absent without it (so its alerts stay quiet).
func TestBackingSeries(t *testing.T) {
	f := sample()
	if n := testutil.CollectAndCount(NewCollector(f, "", ""), "s4d_backing_pages"); n != 0 {
		t.Fatalf("%d backing series without a backing file", n)
	}
	f.st.Backing = &ipc.BackingStats{Size: 1 << 30, FreeBytes: 1 << 29, Pages: 7, Reads: 3, PagesRead: 9,
		ReadMeanUS: 250, ReadP99US: 1024, Failures: 2, DroppedWrites: 1, LostAtStart: 5, ChangedPoolsAtStart: []string{"a", "b"},
		ReadLatency: &ipc.Histogram{Bounds: []float64{8e-6, 16e-6}, Counts: []uint64{2, 1, 1}, Sum: 0.001}}
	c := NewCollector(f, "", "")
	want := `
# HELP s4d_backing_changed_pools_at_start Pools dropped at start because they were written after the last checkpoint before a crash.
# TYPE s4d_backing_changed_pools_at_start gauge
s4d_backing_changed_pools_at_start 2
# HELP s4d_backing_lost_at_start_pages Pages the last crash lost (in RAM, or in a pool written after the last checkpoint), counted at start.
# TYPE s4d_backing_lost_at_start_pages gauge
s4d_backing_lost_at_start_pages 5
# HELP s4d_backing_pages Pages on the backing file.
# TYPE s4d_backing_pages gauge
s4d_backing_pages 7
# HELP s4d_backing_read_duration_seconds Time of a read I/O on the backing file.
# TYPE s4d_backing_read_duration_seconds histogram
s4d_backing_read_duration_seconds_bucket{le="8e-06"} 2
s4d_backing_read_duration_seconds_bucket{le="1.6e-05"} 3
s4d_backing_read_duration_seconds_bucket{le="+Inf"} 4
s4d_backing_read_duration_seconds_sum 0.001
s4d_backing_read_duration_seconds_count 4
`
	// The read time is a histogram (cumulative buckets), which hosts can
	// be summed by; a mean and a p99 could not.
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "s4d_backing_pages", "s4d_backing_read_duration_seconds",
		"s4d_backing_lost_at_start_pages", "s4d_backing_changed_pools_at_start"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(c, "s4d_backing_failures_total"); n != 4 {
		t.Fatalf("%d failure series, want one per reason", n)
	}
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	// A histogram whose counts do not match its bounds is left out, not
	// a failed scrape.
	f.st.Backing.ReadLatency = &ipc.Histogram{Bounds: []float64{1}, Counts: []uint64{1}}
	if n := testutil.CollectAndCount(NewCollector(f, "", ""), "s4d_backing_read_duration_seconds"); n != 0 {
		t.Fatalf("%d read time series from a malformed histogram", n)
	}
}
