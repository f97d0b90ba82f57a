package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/s4d-project/s4d/ipc"
)

// The cold tier's series: what recompression has done since the start.
var (
	recompressRuns    = desc("recompress_runs_total", "Recompression jobs run (on demand or periodic).")
	recompressTried   = desc("recompress_tried_pages_total", "Pages read and compressed again by recompression.")
	recompressKept    = desc("recompressed_pages_total", "Pages replaced by their recompressed form.")
	recompressChanged = desc("recompress_changed_pages_total", "Pages written or deleted while being recompressed; the newer write was kept.")
	recompressSaved   = desc("recompress_saved_bytes_total", "Stored bytes recompression saved.")
	recompressSeconds = desc("recompress_seconds_total", "Time recompression jobs took.")

	coldDescs = []*prometheus.Desc{recompressRuns, recompressTried, recompressKept, recompressChanged, recompressSaved, recompressSeconds}
)

func collectCold(st *ipc.Stats, ch chan<- prometheus.Metric) {
	r := st.Recompress
	if r == nil {
		return
	}
	for d, v := range map[*prometheus.Desc]float64{recompressRuns: float64(r.Runs), recompressTried: float64(r.PagesTried),
		recompressKept: float64(r.PagesKept), recompressChanged: float64(r.PagesChanged),
		recompressSaved: float64(r.BytesSaved), recompressSeconds: r.Seconds} {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
}
