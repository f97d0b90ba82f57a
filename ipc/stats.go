package ipc

// Stats is the STATS answer, sent as JSON. Field names follow zram's
// mm_stat and io_stat where they mean the same thing.
type Stats struct {
	Server   string         `json:"server"`
	PageSize int            `json:"page_size"`
	Codec    string         `json:"codec"`
	Uptime   float64        `json:"uptime_seconds"`
	Mem      MemStats       `json:"mm_stat"`
	IO       IOStats        `json:"io_stat"`
	Backends []BackendStats `json:"backends"`
	Pools    []PoolStats    `json:"pools"`             // only the caller's pools (all for root)
	Regions  []RegionStats  `json:"regions,omitempty"` // the caller's regions (all for root)
	// Every region's counters, gone ones included; root only (region.go).
	RegionTotals *RegionTotals `json:"region_totals,omitempty"`
	// The cold tier (cold.go): how long an idle epoch is, and what
	// recompression has done since the start.
	IdleEpoch  float64          `json:"idle_epoch_seconds,omitempty"`
	Recompress *RecompressStats `json:"recompress,omitempty"`
	Backing    *BackingStats    `json:"bd_stat,omitempty"` // the backing file, if any (writeback.go)
	Remote     *RemoteStats     `json:"remote,omitempty"`  // the remote tier, if any (poolmove.go)
}

// MemStats describes the compressed store as a whole.
type MemStats struct {
	OrigDataSize   uint64 `json:"orig_data_size"`  // bytes of pages stored, uncompressed
	ComprDataSize  uint64 `json:"compr_data_size"` // bytes of compressed data
	MemUsedTotal   uint64 `json:"mem_used_total"`  // arena memory held, metadata included
	MemLimit       uint64 `json:"mem_limit"`       // 0 = none
	MemUsedMax     uint64 `json:"mem_used_max"`
	Pages          uint64 `json:"pages"`
	ZeroPages      uint64 `json:"zero_pages"`
	SamePages      uint64 `json:"same_pages"`
	HugePages      uint64 `json:"huge_pages"` // stored raw
	PagesCompacted uint64 `json:"pages_compacted"`
	MetadataBytes  uint64 `json:"metadata_bytes"` // index memory
}

// IOStats counts failures, as zram's io_stat does.
type IOStats struct {
	FailedReads  uint64 `json:"failed_reads"`
	FailedWrites uint64 `json:"failed_writes"`
	InvalidIO    uint64 `json:"invalid_io"` // malformed or refused requests
	NoSpace      uint64 `json:"no_space"`   // pages refused by the memory limit
	Fallbacks    uint64 `json:"fallbacks"`  // batches redone on another backend
	// Pages whose stored bytes failed their checksum; never returned.
	ChecksumErrors uint64 `json:"checksum_errors"`
	// Connections refused at a connection limit, and requests answered
	// BUSY because the request memory budget was taken.
	RefusedConnections uint64 `json:"refused_connections"`
	Busy               uint64 `json:"busy"`
	// Requests answered with an error, by the code's name ("not found",
	// "busy", ...): each kind counted apart; InvalidIO sums the kinds that
	// mean the request itself was wrong.
	Answers map[string]uint64 `json:"error_answers,omitempty"`
	// Request memory reserved now, the most ever at once, and the budget.
	RequestBytes    int64 `json:"request_bytes"`
	RequestBytesMax int64 `json:"request_bytes_max"`
	RequestBudget   int64 `json:"request_budget"`
}

// BackendStats reports one backend and what it has done.
type BackendStats struct {
	Name     string          `json:"name"`
	State    string          `json:"state"` // ok, unavailable, failed
	Reason   string          `json:"reason,omitempty"`
	Describe string          `json:"describe,omitempty"`
	InUse    bool            `json:"in_use"`
	Counters []CodecCounters `json:"counters,omitempty"`
	// One device of an engine with several (a GPU of the host): the
	// engine's name and the device's number; batches in flight on it now.
	Engine   string `json:"engine,omitempty"`
	Device   string `json:"device,omitempty"`
	InFlight int64  `json:"in_flight,omitempty"`
}

// CodecCounters counts one backend's work with one codec in one direction.
type CodecCounters struct {
	Codec     string `json:"codec"`
	Direction string `json:"direction"` // compress or decompress
	Batches   uint64 `json:"batches"`
	Pages     uint64 `json:"pages"`
	BytesIn   uint64 `json:"bytes_in"`
	BytesOut  uint64 `json:"bytes_out"`
	Errors    uint64 `json:"errors"`
}

// PoolStats describes one pool.
type PoolStats struct {
	Name        string `json:"name"`
	UID         uint32 `json:"uid"`
	Pages       uint64 `json:"pages"`
	OrigBytes   uint64 `json:"orig_bytes"`
	StoredBytes uint64 `json:"stored_bytes"`
	ZeroPages   uint64 `json:"zero_pages"`
	SamePages   uint64 `json:"same_pages"`
	HugePages   uint64 `json:"huge_pages"`
	Codec       string `json:"codec,omitempty"` // the pool's own codec, if it chose one (POOL_CODEC)
}

// CompactResult is the COMPACT answer, sent as JSON.
type CompactResult struct {
	PagesMoved uint64 `json:"pages_moved"`
	BytesFreed uint64 `json:"bytes_freed"`
}
