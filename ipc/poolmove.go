package ipc

import "fmt"

// OpPoolMove hands a pool to another daemon through the remote tier's
// cluster (PROTOCOL.md, "40 POOL_MOVE"): export writes every page of the
// caller's pool there, import reads them into the caller's pool.
const OpPoolMove Op = 40

func init() { opNames[OpPoolMove] = "POOL_MOVE" }

// POOL_MOVE directions.
const (
	PoolExport = "export"
	PoolImport = "import"
)

// PoolMoveResult is POOL_MOVE's answer, sent as JSON.
type PoolMoveResult struct {
	Direction string `json:"direction"`
	Pool      string `json:"pool"`
	User      string `json:"user"`   // the name the pool travels under
	Pages     uint64 `json:"pages"`  // pages exported or imported
	Blocks    uint64 `json:"blocks"` // blocks written or read
	Bytes     uint64 `json:"bytes"`  // their bytes, before sealing
}

// EncodePoolMove is POOL_MOVE's body: the direction, then the pool.
func EncodePoolMove(direction, pool string) []byte {
	return appendStr(appendStr(nil, direction), pool)
}

// DecodePoolMove parses POOL_MOVE's body.
func DecodePoolMove(body []byte) (direction, pool string, err error) {
	r := reader{b: body}
	direction, pool = r.str(), r.str()
	if err = r.done(); err != nil {
		return "", "", err
	}
	if direction != PoolExport && direction != PoolImport {
		return "", "", fmt.Errorf("direction %q: want export or import", direction)
	}
	if pool == "" || len(pool) > MaxPoolName {
		return "", "", fmt.Errorf("pool name of %d bytes: want 1 to %d", len(pool), MaxPoolName)
	}
	return direction, pool, nil
}

// RemoteStats describes the remote tier, in STATS under "remote" (absent
// without one).
type RemoteStats struct {
	URL           string `json:"url"`
	Host          string `json:"host"`
	Up            bool   `json:"up"` // the cluster answered the last call
	LastError     string `json:"last_error,omitempty"`
	Quota         uint64 `json:"quota"`      // 0 = none
	UsedBytes     uint64 `json:"used_bytes"` // this host's bytes in the cluster, sealed
	BlocksWritten uint64 `json:"blocks_written"`
	BytesWritten  uint64 `json:"bytes_written"`
	BlocksRead    uint64 `json:"blocks_read"`
	BytesRead     uint64 `json:"bytes_read"`
	WriteErrors   uint64 `json:"write_errors"`
	ReadErrors    uint64 `json:"read_errors"` // of which:
	Corrupt       uint64 `json:"corrupt"`     // failed authentication
	Missing       uint64 `json:"missing"`     // not there (evicted, lost)
	Stale         uint64 `json:"stale"`       // another generation
	Deleted       uint64 `json:"deleted"`
	Swept         uint64 `json:"swept"`      // deleted by the sweep: no index named them
	QuotaFull     uint64 `json:"quota_full"` // writes refused by the quota
	Redirects     uint64 `json:"redirects"`  // MOVED and ASK followed
	Retries       uint64 `json:"retries"`
	// As the level below the backing file: pages there now, their
	// blocks, rounds that moved pages from the file and the pages moved,
	// rounds that failed (their pages stayed on the file), and whether a
	// recent failure pauses new rounds.
	Pages         uint64 `json:"pages"`
	Blocks        uint64 `json:"blocks"`
	Spills        uint64 `json:"spills"`
	PagesSpilled  uint64 `json:"pages_spilled"`
	SpillFailures uint64 `json:"spill_failures"`
	PageReadFails uint64 `json:"page_read_failures"`
	Paused        bool   `json:"paused"`
	// Batch latencies, for /metrics.
	ReadLatency  *Histogram `json:"read_latency,omitempty"`
	WriteLatency *Histogram `json:"write_latency,omitempty"`
	// The nodes of the cluster's slot map, masters first (issue 43).
	Nodes []RemoteNode `json:"nodes,omitempty"`
}

// RemoteNode is one node of the remote tier's cluster. While it is down,
// the pages in blocks on its slots answer FAILED at once.
type RemoteNode struct {
	Addr      string `json:"addr"`
	Role      string `json:"role"` // "master" or "replica"
	Slots     int    `json:"slots"`
	Down      bool   `json:"down"`
	DownSince string `json:"down_since,omitempty"` // RFC 3339, UTC, while down
	Cause     string `json:"cause,omitempty"`      // why it was marked down, while down
	Downs     uint64 `json:"downs"`                // times marked down since the daemon started
	FastFails uint64 `json:"fast_fails"`           // commands failed at once while it was down
}
