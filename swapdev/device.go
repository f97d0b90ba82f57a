package swapdev

import "fmt"

// What the set takes and gives, in its own types: the daemon converts
// them to and from the wire's (ipc.SwapRequest, ipc.SwapDevice, its
// status codes), so this package knows nothing of ipc.

// Request is a device to add.
type Request struct {
	// Size in bytes, its queues (0: one per CPU) and requests in flight
	// per queue (0: ublk's default).
	Size   uint64
	Queues int
	Depth  int
	// Reserve: memory kept ready for its compressed pages, in bytes
	// (0: swapio's default).
	Reserve uint64
	// MemLimit: compressed bytes kept in RAM, the coldest pages past it
	// written back to Writeback (a directory, "": Config.Writeback, or a
	// block device); 0: every page in RAM.
	MemLimit  uint64
	Writeback string
}

// Device describes one device, in the manner of zramctl's columns. Its
// fields are ipc.SwapDevice's, in the same order and of the same types,
// so that the daemon converts one into the other whole and a field added
// to one side alone does not compile (ipc/swap.go says what each means).
type Device struct {
	Name       string // /dev/ublkbN
	DiskSize   uint64
	Pool       string
	Pages      uint64
	Data       uint64
	Compr      uint64
	Total      uint64 // memory held: slabs, reserve, slot table, I/O buffers
	Streams    int
	Depth      int
	Zero       uint64
	Huge       uint64
	ReadIOs    uint64
	ReadPgs    uint64
	WriteIOs   uint64
	WritePgs   uint64
	Discard    uint64
	Errors     uint64
	Lost       uint64
	Reserve    uint64
	NoMem      uint64
	Held       uint64
	HeldFailed uint64
	Low        uint64
	MemLimit   uint64
	BdCount    uint64
	BdReads    uint64
	BdWrites   uint64
	Writeback  string
	BdError    string
	Pinned     int
	Requests   uint64
	Waits      uint64
	Flusher    string
	Error      string
	Fresh      bool
	Kept       bool
	Priority   int
}

// describe is a device's description now.
func (s *Set) describe(sd *device) Device {
	out := Device{Name: sd.dev.BlockPath(), DiskSize: sd.dev.Size(), Streams: sd.dev.Queues(), Depth: sd.dev.Depth(),
		Fresh: sd.fresh, Priority: sd.prio, Kept: s.cfg.Persist && s.cfg.Takeover}
	describeNative(sd, &out)
	if err := sd.dev.Flusher(); err != nil {
		out.Flusher = err.Error()
	}
	if err := sd.dev.Err(); err != nil {
		out.Error = err.Error()
	}
	return out
}

// Kind says what a refusal of Add or Del means to whoever asked; the
// daemon answers each with a status code of its own.
type Kind int

const (
	Failed    Kind = iota // the request was good, the device could not be made or removed
	Malformed             // the request cannot succeed as sent
	NotFound              // no such device
)

// String is the name of the wire's status of the same meaning, so that an
// error logged here reads as it did when the daemon made it.
func (k Kind) String() string {
	switch k {
	case Malformed:
		return "malformed request"
	case NotFound:
		return "not found"
	}
	return "failed"
}

// Error is a refusal of Add or Del: Msg is what the asker is told.
type Error struct {
	Kind Kind
	Msg  string
}

func (e *Error) Error() string { return e.Kind.String() + ": " + e.Msg }

func errorf(k Kind, format string, args ...any) error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...)}
}
