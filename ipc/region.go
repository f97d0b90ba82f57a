package ipc

import (
	"encoding/binary"
	"fmt"
)

// Region operations (PROTOCOL.md, "Regions"): memory of a client whose
// cold pages the daemon keeps compressed, served through a userfaultfd.
const (
	OpRegister   Op = 11 // a memfd and a userfaultfd come with the frame
	OpSetBudget  Op = 12
	OpUnregister Op = 13
	OpRegions    Op = 14 // JSON list of the caller's regions
)

func init() {
	opNames[OpRegister], opNames[OpSetBudget] = "REGISTER", "SET_BUDGET"
	opNames[OpUnregister], opNames[OpRegions] = "UNREGISTER", "REGIONS"
}

// IsRegionOp says whether op is one of the region operations.
func IsRegionOp(op Op) bool { return op >= OpRegister && op <= OpRegions }

// UnregisterRestore asks UNREGISTER to place every evicted page back into
// the client's memory before letting the region go.
const UnregisterRestore = 1

// RegisterRequest is REGISTER's body; the memfd and the userfaultfd, in
// that order, travel with the frame.
type RegisterRequest struct {
	Addr   uint64 // where the client maps the memfd (from offset 0)
	Length uint64 // bytes, the memfd's size
	Budget uint64 // bytes that may stay resident
}

// Encode returns the body.
func (r *RegisterRequest) Encode() []byte {
	b := binary.LittleEndian.AppendUint64(nil, r.Addr)
	b = binary.LittleEndian.AppendUint64(b, r.Length)
	return binary.LittleEndian.AppendUint64(b, r.Budget)
}

// DecodeRegisterRequest parses REGISTER's body.
func DecodeRegisterRequest(b []byte) (RegisterRequest, error) {
	if len(b) != 24 {
		return RegisterRequest{}, fmt.Errorf("REGISTER body of %d bytes, want 24", len(b))
	}
	le := binary.LittleEndian
	return RegisterRequest{Addr: le.Uint64(b), Length: le.Uint64(b[8:]), Budget: le.Uint64(b[16:])}, nil
}

// EncodeRegionID is REGISTER's response body, and the start of the others'
// requests.
func EncodeRegionID(id uint64) []byte { return binary.LittleEndian.AppendUint64(nil, id) }

// DecodeRegionID parses a body that is a region id followed by want more bytes.
func DecodeRegionID(b []byte, want int) (uint64, []byte, error) {
	if len(b) != 8+want {
		return 0, nil, fmt.Errorf("body of %d bytes, want %d", len(b), 8+want)
	}
	return binary.LittleEndian.Uint64(b), b[8:], nil
}

// EncodeSetBudget is SET_BUDGET's body.
func EncodeSetBudget(id, budget uint64) []byte {
	return binary.LittleEndian.AppendUint64(EncodeRegionID(id), budget)
}

// EncodeUnregister is UNREGISTER's body.
func EncodeUnregister(id uint64, flags uint8) []byte { return append(EncodeRegionID(id), flags) }

// RegionStats describes one region, in STATS and REGIONS.
type RegionStats struct {
	ID        uint64  `json:"id"`
	UID       uint32  `json:"uid"`
	PID       int32   `json:"pid"`
	Addr      uint64  `json:"addr"`
	Size      uint64  `json:"size"`     // bytes
	Budget    uint64  `json:"budget"`   // bytes that may stay resident
	Resident  uint64  `json:"resident"` // bytes in the client's memory
	Evicted   uint64  `json:"evicted"`  // bytes kept compressed by the daemon
	Stored    uint64  `json:"compressed"`
	Ratio     float64 `json:"ratio"` // evicted / compressed
	Faults    uint64  `json:"faults"`
	WPFaults  uint64  `json:"wp_faults"`  // writes that met a page being evicted
	ZeroFills uint64  `json:"zero_fills"` // first touches
	Evictions uint64  `json:"evictions"`
	Cancelled uint64  `json:"evictions_cancelled"` // undone by a write during the eviction
	Refused   uint64  `json:"evictions_refused"`   // refused by the quota or the memory limit
	Throttled uint64  `json:"faults_throttled"`    // held while the region ran well over its budget
	FaultP50  float64 `json:"fault_p50_us"`        // time the daemon took to serve a fault
	FaultP99  float64 `json:"fault_p99_us"`
	Error     string  `json:"error,omitempty"` // why the region stopped serving
}

// RegionTotals sums every region's counters since the daemon started,
// those of regions gone included, so that they only grow; in root's STATS
// (region_totals) and /metrics.
type RegionTotals struct {
	Regions       int        `json:"regions"` // registered now
	Faults        uint64     `json:"faults"`  // zero fills included
	ZeroFills     uint64     `json:"zero_fills"`
	EvictedBytes  uint64     `json:"evicted_bytes"`  // bytes moved out to the store
	RestoredBytes uint64     `json:"restored_bytes"` // bytes placed back: faults, their read-ahead, releases
	FaultLatency  *Histogram `json:"fault_latency"`  // time to serve a fault
}

// RegionReleased is the frame the daemon writes on a region's lifeline when
// it hands the region back whole (UNREGISTER with UnregisterRestore, or its
// own shutdown): every page is in place and the range unregistered. The
// client then closes its userfaultfd and keeps the memory.
func RegionReleased(id uint64) []byte {
	return Frame(Header{Version: Version, Op: OpUnregister, Flags: FlagResponse}, EncodeRegionID(id))
}
