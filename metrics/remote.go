package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/s4d-project/s4d/ipc"
)

// The remote tier's series (a Valkey cluster, remote/); absent without one.
var (
	rmUp       = desc("remote_up", "1 while the remote tier's cluster answers and none of its masters is down, 0 otherwise (the pages on a down master's slots answer FAILED, spills avoid it; local pages are served; remote_node_up says which).")
	rmUsed     = desc("remote_used_bytes", "Bytes this host keeps in the cluster, sealed.")
	rmQuota    = desc("remote_quota_bytes", "Bytes this host may keep in the cluster; 0 = no limit.")
	rmBlocksW  = desc("remote_written_blocks_total", "Blocks written to the cluster and acknowledged by a replica.")
	rmBytesW   = desc("remote_written_bytes_total", "Bytes of those blocks, before sealing.")
	rmBlocksR  = desc("remote_read_blocks_total", "Blocks read back from the cluster.")
	rmBytesR   = desc("remote_read_bytes_total", "Bytes of those blocks.")
	rmErrors   = desc("remote_errors_total", "Remote tier failures, by kind: write, read (cluster errors), corrupt (failed authentication), missing, stale, quota (writes the quota refused).", "kind")
	rmDeleted  = desc("remote_deleted_blocks_total", "Blocks deleted, by the index (deleted) or by the sweep (swept).", "by")
	rmPages    = desc("remote_pages", "Pages kept in the cluster, below the backing file.")
	rmSpilled  = desc("remote_spilled_pages_total", "Pages moved from the backing file to the cluster.")
	rmSpillErr = desc("remote_spill_failures_total", "Rounds of moving pages to the cluster that failed; their pages stayed on the file.")
	rmReadTime = desc("remote_read_duration_seconds", "Time of a batched read from the cluster.")
	rmWrTime   = desc("remote_write_duration_seconds", "Time of a batched write to the cluster, replica acknowledgement included.")
	// Per node of the cluster's slot map (issue 43; docs/admin/remote-tier.md).
	rmNodeUp    = desc("remote_node_up", "1 while a node of the cluster's slot map answers, 0 while it is marked down (the pages in blocks on its slots answer FAILED at once).", "node", "role")
	rmNodeSince = desc("remote_node_down_since_timestamp_seconds", "When a node now down was marked down (Unix time); absent while it is up.", "node")
	rmNodeSlots = desc("remote_node_slots", "Hash slots a master serves.", "node")
	rmNodeDowns = desc("remote_node_downs_total", "Times a node was marked down since the daemon started.", "node")
	rmNodeFast  = desc("remote_node_fast_failures_total", "Commands failed at once, without a network call, because their node was down.", "node")
)

func init() {
	all = append(all, rmUp, rmUsed, rmQuota, rmBlocksW, rmBytesW, rmBlocksR, rmBytesR, rmErrors, rmDeleted, rmReadTime, rmWrTime, rmPages, rmSpilled, rmSpillErr,
		rmNodeUp, rmNodeSince, rmNodeSlots, rmNodeDowns, rmNodeFast)
}

func collectRemote(r *ipc.RemoteStats, gauge func(*prometheus.Desc, float64, ...string), counter func(*prometheus.Desc, uint64, ...string),
	hist func(*prometheus.Desc, *ipc.Histogram)) {
	if r == nil {
		return
	}
	up := 0.0
	if r.Up {
		up = 1
	}
	gauge(rmUp, up)
	gauge(rmUsed, float64(r.UsedBytes))
	gauge(rmQuota, float64(r.Quota))
	counter(rmBlocksW, r.BlocksWritten)
	counter(rmBytesW, r.BytesWritten)
	counter(rmBlocksR, r.BlocksRead)
	counter(rmBytesR, r.BytesRead)
	counter(rmErrors, r.WriteErrors, "write")
	counter(rmErrors, r.ReadErrors-min(r.ReadErrors, r.Corrupt+r.Missing+r.Stale), "read")
	counter(rmErrors, r.Corrupt, "corrupt")
	counter(rmErrors, r.Missing, "missing")
	counter(rmErrors, r.Stale, "stale")
	counter(rmErrors, r.QuotaFull, "quota")
	counter(rmDeleted, r.Deleted, "deleted")
	counter(rmDeleted, r.Swept, "swept")
	gauge(rmPages, float64(r.Pages))
	counter(rmSpilled, r.PagesSpilled)
	counter(rmSpillErr, r.SpillFailures)
	hist(rmReadTime, r.ReadLatency)
	hist(rmWrTime, r.WriteLatency)
	for _, n := range r.Nodes {
		up := 1.0
		if n.Down {
			up = 0
			if t, err := time.Parse(time.RFC3339, n.DownSince); err == nil {
				gauge(rmNodeSince, float64(t.Unix()), n.Addr)
			}
		}
		gauge(rmNodeUp, up, n.Addr, n.Role)
		if n.Role == "master" {
			gauge(rmNodeSlots, float64(n.Slots), n.Addr)
		}
		counter(rmNodeDowns, n.Downs, n.Addr)
		counter(rmNodeFast, n.FastFails, n.Addr)
	}
}
