package ipc

import (
	"encoding/binary"
	"fmt"
	"time"
)

// Cold-tier operations (PROTOCOL.md, "Idle pages and recompression").
const (
	OpIdle       Op = 20 // count, list or mark idle pages
	OpRecompress Op = 21 // recompress idle or huge pages now
)

func init() { opNames[OpIdle], opNames[OpRecompress] = "IDLE", "RECOMPRESS" }

// IDLE flags.
const (
	IdleMark = 1 // mark every chosen page idle first (zram's `echo all > idle`)
)

// RECOMPRESS flags: which pages.
const (
	RecompressIdle = 1 // pages idle for at least the age given
	RecompressHuge = 2 // pages stored raw (huge), whatever their age
)

// IdleRequest is IDLE's body.
type IdleRequest struct {
	Pool   string        // "": every pool of the caller (all for root)
	Flags  uint8         // IdleMark
	MinAge time.Duration // pages untouched for at least this long count as idle
	List   uint32        // list up to this many idle pages, the oldest first
}

// Encode returns the body.
func (r *IdleRequest) Encode() []byte {
	b := appendStr(nil, r.Pool)
	b = append(b, r.Flags)
	b = binary.LittleEndian.AppendUint64(b, uint64(r.MinAge.Milliseconds()))
	return binary.LittleEndian.AppendUint32(b, r.List)
}

// DecodeIdleRequest parses IDLE's body.
func DecodeIdleRequest(body []byte) (IdleRequest, error) {
	rd := reader{b: body}
	r := IdleRequest{Pool: rd.str(), Flags: rd.u8()}
	r.MinAge, r.List = millis(rd.u64()), rd.u32()
	if err := rd.done(); err != nil {
		return r, err
	}
	if r.Flags&^IdleMark != 0 {
		return r, fmt.Errorf("IDLE flags %#x: only bit 0 (mark) is defined", r.Flags)
	}
	return r, nil
}

// IdleResult is IDLE's answer, sent as JSON.
type IdleResult struct {
	EpochSeconds float64    `json:"epoch_seconds"`  // how coarse ages are
	MinAgeEpochs int        `json:"min_age_epochs"` // the age asked for, in epochs
	Marked       uint64     `json:"marked"`         // pages marked idle
	Pools        []IdlePool `json:"pools"`
	Pages        []IdlePage `json:"pages,omitempty"` // with List: the oldest idle pages
}

// IdlePool counts one pool's idle pages.
type IdlePool struct {
	Name      string `json:"name"`
	UID       uint32 `json:"uid"`
	Pages     uint64 `json:"pages"`
	IdlePages uint64 `json:"idle_pages"`
	IdleBytes uint64 `json:"idle_bytes"` // their stored bytes
}

// IdlePage is one idle page; age_epochs 63 means that long or more, or marked.
type IdlePage struct {
	Pool      string `json:"pool"`
	Key       uint64 `json:"key"`
	AgeEpochs int    `json:"age_epochs"`
	Class     string `json:"class"`
	Size      int    `json:"size"`
}

// RecompressRequest is RECOMPRESS's body.
type RecompressRequest struct {
	Pool   string // "": every pool of the caller (all for root)
	Flags  uint8  // RecompressIdle, RecompressHuge, or both
	MinAge time.Duration
}

// Encode returns the body.
func (r *RecompressRequest) Encode() []byte {
	b := appendStr(nil, r.Pool)
	b = append(b, r.Flags)
	return binary.LittleEndian.AppendUint64(b, uint64(r.MinAge.Milliseconds()))
}

// DecodeRecompressRequest parses RECOMPRESS's body.
func DecodeRecompressRequest(body []byte) (RecompressRequest, error) {
	rd := reader{b: body}
	r := RecompressRequest{Pool: rd.str(), Flags: rd.u8()}
	r.MinAge = millis(rd.u64())
	if err := rd.done(); err != nil {
		return r, err
	}
	if r.Flags == 0 || r.Flags&^(RecompressIdle|RecompressHuge) != 0 {
		return r, fmt.Errorf("RECOMPRESS flags %#x: want bit 0 (idle), bit 1 (huge) or both", r.Flags)
	}
	return r, nil
}

// RecompressResult is RECOMPRESS's answer, sent as JSON, and the totals
// in STATS (recompress).
type RecompressResult struct {
	Runs         uint64  `json:"runs,omitempty"`     // STATS only: jobs run
	PagesTried   uint64  `json:"pages_tried"`        // read and compressed again
	PagesKept    uint64  `json:"pages_recompressed"` // replaced by their smaller form
	PagesChanged uint64  `json:"pages_changed"`      // written or deleted meanwhile: the newer write kept
	BytesBefore  uint64  `json:"bytes_before"`       // stored bytes of the pages recompressed, before
	BytesSaved   uint64  `json:"bytes_saved"`        // stored bytes those pages no longer take
	BytesIn      uint64  `json:"bytes_in"`           // bytes of pages compressed again
	Seconds      float64 `json:"seconds"`            // time spent
	Backend      string  `json:"backend,omitempty"`  // the engine of the last batch
}

// RecompressStats is STATS's view of the cold tier's recompression.
type RecompressStats = RecompressResult

func millis(ms uint64) time.Duration {
	return time.Duration(min(ms, uint64(1<<63-1)/uint64(time.Millisecond))) * time.Millisecond
}
