package ublk

import (
	"encoding/binary"
	"unsafe"
)

// Go copies of include/uapi/linux/ublk_cmd.h (the parts we use). Their
// sizes are checked by uapi_test.go.

// Control commands (the number; the opcode sent is its ioctl encoding).
const (
	cmdGetQueueAffinity = 0x01
	cmdGetDevInfo       = 0x02
	cmdAddDev           = 0x04
	cmdDelDev           = 0x05
	cmdStartDev         = 0x06
	cmdStopDev          = 0x07
	cmdSetParams        = 0x08
	cmdGetParams        = 0x09
	// User recovery (Linux 6.0+): a device created with flagUserRecovery
	// outlives its server, quiesced, until a new one takes it over.
	cmdStartUserRecovery = 0x10
	cmdEndUserRecovery   = 0x11
)

// I/O commands, issued on /dev/ublkcN.
const (
	ioFetchReq          = 0x20
	ioCommitAndFetchReq = 0x21
)

// I/O operations in a descriptor's op_flags (low 8 bits).
const (
	OpRead        = 0
	OpWrite       = 1
	OpFlush       = 2
	OpDiscard     = 3
	OpWriteSame   = 4
	OpWriteZeroes = 5
)

// Device flags (dev_info.flags).
const (
	flagUserRecovery        = 1 << 3
	flagUserRecoveryReissue = 1 << 4 // requests in flight at the server's death go to the next one
	flagCmdIoctlEncode      = 1 << 6
)

// Parameter types and attributes.
const (
	paramBasic   = 1 << 0
	paramDiscard = 1 << 1

	attrVolatileCache = 1 << 2
)

const (
	maxQueueDepth = 4096 // UBLK_MAX_QUEUE_DEPTH: the stride of the descriptor areas
	sectorShift   = 9

	resAbort = -int32(19) // UBLK_IO_RES_ABORT (-ENODEV): the device is going away
)

// ctrlCmd is struct ublksrv_ctrl_cmd (32 bytes).
type ctrlCmd struct {
	DevID      uint32
	QueueID    uint16
	Len        uint16
	Addr       uint64
	Data       uint64
	DevPathLen uint16
	Pad        uint16
	Reserved   uint32
}

// DevInfo is struct ublksrv_ctrl_dev_info (64 bytes).
type DevInfo struct {
	NrHwQueues    uint16
	QueueDepth    uint16
	State         uint16
	Pad0          uint16
	MaxIOBufBytes uint32
	DevID         uint32
	ServerPID     int32
	Pad1          uint32
	Flags         uint64
	ServerFlags   uint64
	OwnerUID      uint32
	OwnerGID      uint32
	Reserved1     uint64
	Reserved2     uint64
}

// Device states (DevInfo.State).
const (
	StateDead     = 0
	StateLive     = 1
	StateQuiesced = 2
)

// ioDesc is struct ublksrv_io_desc (24 bytes), in the mmapped array.
type ioDesc struct {
	OpFlags     uint32
	NrSectors   uint32
	StartSector uint64
	Addr        uint64
}

// ioCmd is struct ublksrv_io_cmd (16 bytes).
type ioCmd struct {
	QID    uint16
	Tag    uint16
	Result int32
	Addr   uint64
}

// paramBasicT is struct ublk_param_basic (32 bytes).
type paramBasicT struct {
	Attrs            uint32
	LogicalBSShift   uint8
	PhysicalBSShift  uint8
	IOOptShift       uint8
	IOMinShift       uint8
	MaxSectors       uint32
	ChunkSectors     uint32
	DevSectors       uint64
	VirtBoundaryMask uint64
}

// paramDiscardT is struct ublk_param_discard (20 bytes).
type paramDiscardT struct {
	DiscardAlignment      uint32
	DiscardGranularity    uint32
	MaxDiscardSectors     uint32
	MaxWriteZeroesSectors uint32
	MaxDiscardSegments    uint16
	Reserved0             uint16
}

// params is the head of struct ublk_params with the two parts we set; the
// kernel reads Len bytes of it.
type params struct {
	Len     uint32
	Types   uint32
	Basic   paramBasicT
	Discard paramDiscardT
}

// paramsLen is what we send: the kernel's struct is padded after the
// discard part, which ours is not (Go would pad it to 8 as well).
const paramsLen = 8 + 32 + 20

// iowr is _IOWR('u', nr, size): the ioctl-style opcodes every kernel with
// UBLK_F_CMD_IOCTL_ENCODE takes, and the only ones a kernel built without
// the legacy opcodes takes.
func iowr(nr, size uint32) uint32 { return 3<<30 | size<<16 | uint32('u')<<8 | nr }

func ctrlOp(nr uint32) uint32 { return iowr(nr, uint32(unsafe.Sizeof(ctrlCmd{}))) }
func ioOp(nr uint32) uint32   { return iowr(nr, uint32(unsafe.Sizeof(ioCmd{}))) }

// bytes encodes a ctrlCmd as the SQE's command area.
func (c *ctrlCmd) bytes() []byte {
	b := make([]byte, 32)
	binary.NativeEndian.PutUint32(b[0:], c.DevID)
	binary.NativeEndian.PutUint16(b[4:], c.QueueID)
	binary.NativeEndian.PutUint16(b[6:], c.Len)
	binary.NativeEndian.PutUint64(b[8:], c.Addr)
	binary.NativeEndian.PutUint64(b[16:], c.Data)
	binary.NativeEndian.PutUint16(b[24:], c.DevPathLen)
	return b
}

// put encodes an ioCmd into the SQE's command area.
func (c *ioCmd) put(b []byte) {
	binary.NativeEndian.PutUint16(b[0:], c.QID)
	binary.NativeEndian.PutUint16(b[2:], c.Tag)
	binary.NativeEndian.PutUint32(b[4:], uint32(c.Result))
	binary.NativeEndian.PutUint64(b[8:], c.Addr)
}

// descOffset is where queue q's descriptors are mapped on /dev/ublkcN
// (UBLKSRV_CMD_BUF_OFFSET + q * UBLK_MAX_QUEUE_DEPTH descriptors, page-aligned).
func descOffset(q int, pageSize int) int64 {
	per := maxQueueDepth * int(unsafe.Sizeof(ioDesc{}))
	per = (per + pageSize - 1) &^ (pageSize - 1)
	return int64(q * per)
}
