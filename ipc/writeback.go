package ipc

import (
	"encoding/binary"
	"errors"
	"time"
)

// OpWriteback moves pages to the backing file now (PROTOCOL.md, "22
// WRITEBACK"); 20 and 21 are the idle tracker's (cold.go).
const OpWriteback Op = 22

func init() { opNames[OpWriteback] = "WRITEBACK" }

// Writeback modes: which pages a WRITEBACK moves, or "compact" to pack the
// file's sparse blocks together instead.
const (
	WritebackAll     = "all"
	WritebackIdle    = "idle"
	WritebackHuge    = "huge"
	WritebackCompact = "compact"
)

// WritebackResult is the WRITEBACK answer, sent as JSON.
type WritebackResult struct {
	Mode  string `json:"mode"`
	Pages uint64 `json:"pages"` // pages moved
	Bytes uint64 `json:"bytes"` // their stored bytes
}

// BackingStats describes the backing file, in the manner of zram's
// bd_stat, in STATS under "bd_stat" (absent without a backing file).
type BackingStats struct {
	Path         string `json:"path"`
	Persist      bool   `json:"persist"`
	Size         uint64 `json:"size"`
	FreeBytes    uint64 `json:"free_bytes"`
	Pages        uint64 `json:"pages"`        // pages on the file now (bd_count)
	StoredBytes  uint64 `json:"stored_bytes"` // their bytes, checksums included
	Reads        uint64 `json:"reads"`        // read I/Os (bd_reads counts pages: PagesRead)
	PagesRead    uint64 `json:"pages_read"`
	BytesRead    uint64 `json:"bytes_read"`
	Writes       uint64 `json:"writes"` // write I/Os
	PagesWritten uint64 `json:"pages_written"`
	BytesWritten uint64 `json:"bytes_written"`
	// Read latency per I/O: the mean, and the 99th percentile rounded up
	// to a power of two microseconds.
	ReadMeanUS float64 `json:"read_mean_us"`
	ReadP99US  uint64  `json:"read_p99_us"`
	// The same reads by latency: /metrics' histogram.
	ReadLatency    *Histogram `json:"read_latency,omitempty"`
	WriteSeconds   float64    `json:"write_seconds"`
	PressureRounds uint64     `json:"pressure_rounds"` // writebacks the memory limit asked for
	AheadRounds    uint64     `json:"ahead_rounds"`    // of which run in the background, before a PUT needed room
	Forced         uint64     `json:"forced_pages"`    // pages moved by WRITEBACK or a planned stop
	Compacted      uint64     `json:"compacted_pages"` // pages moved within the file
	Failures       uint64     `json:"failures"`        // rounds failed by an I/O error; their pages stayed in RAM
	FullRounds     uint64     `json:"full_rounds"`     // rounds that found the file full
	ReadErrors     uint64     `json:"read_errors"`     // read I/Os that failed
	DroppedWrites  uint64     `json:"dropped_writes"`  // writes that read back different (backing_verify)
	Checkpoints    uint64     `json:"checkpoints"`
	LastError      string     `json:"last_error,omitempty"`
	// What this start found lost by a crash of the daemon before it:
	// pages in RAM at its last checkpoint or of pools changed since, and
	// those pools (their pages written since are lost too, uncounted).
	LostAtStart         uint64   `json:"lost_at_start"`
	ChangedPoolsAtStart []string `json:"changed_pools_at_start,omitempty"`
}

// WritebackRequest is WRITEBACK's body: the mode, and for idle the age
// that makes a page idle (0: pages marked idle, or of the greatest age).
type WritebackRequest struct {
	Mode   string
	MinAge time.Duration
}

// Encode returns the body: the mode as a string, then the age in
// milliseconds (u64).
func (r *WritebackRequest) Encode() []byte {
	return binary.LittleEndian.AppendUint64(EncodeString(r.Mode), uint64(r.MinAge/time.Millisecond))
}

// Decode parses the body.
func (r *WritebackRequest) Decode(b []byte) error {
	if len(b) < 2+8 || int(binary.LittleEndian.Uint16(b))+2+8 != len(b) {
		return errors.New("WRITEBACK body: want a mode and an age")
	}
	n := int(binary.LittleEndian.Uint16(b))
	r.Mode = string(b[2 : 2+n])
	ms := binary.LittleEndian.Uint64(b[2+n:])
	if ms > uint64(1<<62)/uint64(time.Millisecond) {
		return errors.New("WRITEBACK body: age out of range")
	}
	r.MinAge = time.Duration(ms) * time.Millisecond
	return nil
}
