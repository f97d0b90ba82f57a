package ipc

// OpSwap manages the daemon's swap devices (PROTOCOL.md, "30 SWAP"):
// block devices served through the kernel's ublk driver whose blocks are
// pages of a pool. Root only.
const OpSwap Op = 30

func init() { opNames[OpSwap] = "SWAP" }

// Swap actions.
const (
	SwapAdd  = "add"
	SwapDel  = "del"
	SwapList = "list"
)

// SwapRequest is SWAP's body, sent as JSON.
type SwapRequest struct {
	Action string `json:"action"`
	// add: the device's size in bytes, its queues (0: one per CPU) and
	// requests in flight per queue (0: the daemon's default).
	Size   uint64 `json:"size,omitempty"`
	Queues int    `json:"queues,omitempty"`
	Depth  int    `json:"depth,omitempty"`
	// add: memory kept ready for its compressed pages, in bytes (0: 16
	// MiB; it doubles, up to 128 MiB, while writes find none).
	Reserve uint64 `json:"reserve,omitempty"`
	// add: compressed bytes kept in RAM (0: all); past it the coldest
	// pages go to Writeback, a directory (an unnamed file is made there;
	// "": the daemon's state directory) or a block device used whole.
	MemLimit  uint64 `json:"mem_limit,omitempty"`
	Writeback string `json:"writeback,omitempty"`
	// del: the device (/dev/ublkbN or ublkbN); "" for every device.
	Device string `json:"device,omitempty"`
}

// SwapDevice describes one device, in the manner of zramctl's columns. The
// answer to every action is a JSON list of them: the device added, the
// devices deleted, or all of them.
type SwapDevice struct {
	Name     string `json:"name"`     // /dev/ublkbN
	DiskSize uint64 `json:"disksize"` // bytes
	Pool     string `json:"pool"`     // where its pages are kept
	Pages    uint64 `json:"pages"`    // pages stored
	Data     uint64 `json:"data"`     // their bytes uncompressed
	Compr    uint64 `json:"compr"`    // their stored bytes
	Total    uint64 `json:"total"`    // memory held: slabs, reserve, slot table, I/O buffers
	Streams  int    `json:"streams"`  // queues, each served by its own thread
	Depth    int    `json:"depth"`    // requests in flight per queue
	Zero     uint64 `json:"zero"`     // pages stored as zero or same-filled
	Huge     uint64 `json:"huge"`     // pages stored raw
	ReadIOs  uint64 `json:"read_ios"` // read requests
	ReadPgs  uint64 `json:"read_pages"`
	WriteIOs uint64 `json:"write_ios"` // write requests
	WritePgs uint64 `json:"write_pages"`
	Discard  uint64 `json:"discarded_pages"`
	Errors   uint64 `json:"errors"` // requests that failed (EIO, or ENOMEM: see held_failed)
	// Lost: reads failed (EIO) because the daemon crashed since the page
	// was written and cannot vouch for the copy it has, if any.
	Lost uint64 `json:"lost_reads,omitempty"`
	// Reserve: the slabs' bytes kept ready for writes now (it grows while
	// writes find none, then shrinks back); NoMem: writes refused for want
	// of one. Held: write requests that found none and waited for the
	// refill; HeldFailed: of those, failed after waiting a second (the
	// kernel kept the page and tried again later).
	Reserve    uint64 `json:"reserve"`
	NoMem      uint64 `json:"nomem"`
	Held       uint64 `json:"held"`
	HeldFailed uint64 `json:"held_failed"`
	Low        uint64 `json:"reserve_low"` // the fewest bytes of the reserve left after a write took from it
	// Writeback, as zram's bd_stat: MemLimit the compressed bytes kept in
	// RAM (0: no writeback); BdCount the pages on Writeback now, BdReads
	// those read back from it, BdWrites those written to it; BdError why
	// the last write there failed.
	MemLimit  uint64 `json:"mem_limit"`
	BdCount   uint64 `json:"bd_count"`
	BdReads   uint64 `json:"bd_reads"`
	BdWrites  uint64 `json:"bd_writes"`
	Writeback string `json:"writeback,omitempty"`
	BdError   string `json:"bd_error,omitempty"`
	Pinned    int    `json:"pinned_queues"`     // queue threads running on their queue's CPUs only
	Requests  uint64 `json:"requests"`          // kernel requests served
	Waits     uint64 `json:"waits"`             // ring waits that returned requests
	Flusher   string `json:"flusher,omitempty"` // why the queue threads are not I/O flushers
	Error     string `json:"error,omitempty"`   // why a queue stopped serving
	// Fresh: created empty by this daemon, not reattached with pages
	// in use (only a fresh device may get mkswap: `s4d swap on`).
	Fresh bool `json:"fresh"`
	// Kept: the daemon leaves the device in place across its own stops
	// (persist on), swap included, and its next start takes it over.
	Kept bool `json:"kept"`
	// Priority for swapon, from the [[swap]] table; -1 the kernel's.
	Priority int `json:"priority"`
}
