package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/s4d-project/s4d/ipc"
)

// The backing file's series, in the manner of zram's bd_stat; absent
// without a backing file.
var (
	bdSize      = desc("backing_size_bytes", "Size of the backing file.")
	bdFree      = desc("backing_free_bytes", "Bytes of the backing file free for new pages.")
	bdPages     = desc("backing_pages", "Pages on the backing file.")
	bdStored    = desc("backing_stored_bytes", "Bytes of the pages on the backing file, checksums included.")
	bdReads     = desc("backing_reads_total", "Read I/Os on the backing file.")
	bdPagesRead = desc("backing_read_pages_total", "Pages read back from the backing file.")
	bdBytesRead = desc("backing_read_bytes_total", "Bytes read from the backing file.")
	bdWrites    = desc("backing_writes_total", "Write I/Os on the backing file.")
	bdPagesWr   = desc("backing_written_pages_total", "Pages written to the backing file.")
	bdBytesWr   = desc("backing_written_bytes_total", "Bytes written to the backing file.")
	// A histogram, not a mean and a percentile: those of two hosts cannot
	// be added, buckets can.
	bdReadTime = desc("backing_read_duration_seconds", "Time of a read I/O on the backing file.")
	bdPressure = desc("backing_pressure_rounds_total", "Writebacks run because the memory limit was reached.")
	bdAhead    = desc("backing_ahead_rounds_total", "Of those, the ones run in the background to keep the headroom, before a PUT needed room.")
	bdFailures = desc("backing_failures_total", "Writeback rounds that failed, by reason: io (the pages stayed in RAM), full (the file had no room), read (read I/Os that failed), dropped (writes the device reported done that read back different).", "reason")
	bdCheckpts = desc("backing_checkpoints_total", "Checkpoints of the backing file's index.")
	// A crash's cost, counted once at start: an alert can fire on it.
	bdLost    = desc("backing_lost_at_start_pages", "Pages the last crash lost (in RAM, or in a pool written after the last checkpoint), counted at start.")
	bdChanged = desc("backing_changed_pools_at_start", "Pools dropped at start because they were written after the last checkpoint before a crash.")
)

func init() {
	all = append(all, bdSize, bdFree, bdPages, bdStored, bdReads, bdPagesRead, bdBytesRead, bdWrites, bdPagesWr,
		bdBytesWr, bdReadTime, bdPressure, bdAhead, bdFailures, bdCheckpts, bdLost, bdChanged)
}

func collectBacking(b *ipc.BackingStats, gauge func(*prometheus.Desc, float64, ...string), counter func(*prometheus.Desc, uint64, ...string),
	hist func(*prometheus.Desc, *ipc.Histogram)) {
	if b == nil {
		return
	}
	gauge(bdSize, float64(b.Size))
	gauge(bdFree, float64(b.FreeBytes))
	gauge(bdPages, float64(b.Pages))
	gauge(bdStored, float64(b.StoredBytes))
	counter(bdReads, b.Reads)
	counter(bdPagesRead, b.PagesRead)
	counter(bdBytesRead, b.BytesRead)
	counter(bdWrites, b.Writes)
	counter(bdPagesWr, b.PagesWritten)
	counter(bdBytesWr, b.BytesWritten)
	hist(bdReadTime, b.ReadLatency)
	counter(bdPressure, b.PressureRounds)
	counter(bdAhead, b.AheadRounds)
	counter(bdFailures, b.Failures, "io")
	counter(bdFailures, b.FullRounds, "full")
	counter(bdFailures, b.ReadErrors, "read")
	counter(bdFailures, b.DroppedWrites, "dropped")
	counter(bdCheckpts, b.Checkpoints)
	gauge(bdLost, float64(b.LostAtStart))
	gauge(bdChanged, float64(len(b.ChangedPoolsAtStart)))
}
