package ublk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A minimal io_uring: one submitter (the thread that owns the ring),
// 128-byte SQEs (URING_CMD carries ublk's 32-byte control command in the
// SQE itself), completions read from the shared CQ ring. Only what a ublk
// server needs: NOP and URING_CMD.

const (
	setupSQE128 = 1 << 10 // IORING_SETUP_SQE128
	// A queue's ring has one submitter, its locked thread, so the kernel
	// may run the ring's task work (ublk's commands complete as task
	// work) only when that thread waits, instead of interrupting it with
	// a signal-like IPI for each completion (what the liburing docs and
	// the kernel's ublk selftest server use for the same reason).
	featSingleMmap = 1 << 0 // IORING_FEAT_SINGLE_MMAP

	offSQRing = 0          // IORING_OFF_SQ_RING
	offCQRing = 0x8000000  // IORING_OFF_CQ_RING
	offSQEs   = 0x10000000 // IORING_OFF_SQES

	enterGetEvents = 1 << 0 // IORING_ENTER_GETEVENTS

	opNop      = 0  // IORING_OP_NOP
	opUringCmd = 46 // IORING_OP_URING_CMD

	sqeSize = 128
	cqeSize = 16
)

// sqringOffsets and cqringOffsets are struct io_sqring_offsets and
// io_cqring_offsets; uringParams is struct io_uring_params (120 bytes).
type sqringOffsets struct {
	Head, Tail, RingMask, RingEntries, Flags, Dropped, Array, Resv1 uint32
	UserAddr                                                        uint64
}

type cqringOffsets struct {
	Head, Tail, RingMask, RingEntries, Overflow, Cqes, Flags, Resv1 uint32
	UserAddr                                                        uint64
}

type uringParams struct {
	SqEntries, CqEntries, Flags, SqThreadCPU, SqThreadIdle, Features, WqFd uint32
	Resv                                                                   [3]uint32
	SqOff                                                                  sqringOffsets
	CqOff                                                                  cqringOffsets
}

// cqe is one completion.
type cqe struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

// ring is an io_uring used by one goroutine at a time (the control device
// under its mutex).
type ring struct {
	fd             int
	sqMem, cqMem   []byte
	sqeMem         []byte
	sqHead, sqTail *uint32
	sqMask         uint32
	sqArray        unsafe.Pointer
	cqHead, cqTail *uint32
	cqMask         uint32
	cqes           unsafe.Pointer
	entries        uint32
	tail           uint32 // our copy of the SQ tail, published by flush
}

// ErrNoUring says the kernel refused io_uring (too old, or disabled by
// kernel.io_uring_disabled or a seccomp filter).
var ErrNoUring = errors.New("io_uring is not available")

// newRing sets up a ring any thread may submit to (one at a time).
func newRing(entries uint32) (*ring, error) { return newRingFlags(entries, 0) }

// plainQueueRings turns the queue rings' setup flags off
// (S4D_UBLK_PLAIN_RING=1; the C queue threads set their rings up):
// the same daemon, with and without them, in one guest boot.
var plainQueueRings = os.Getenv("S4D_UBLK_PLAIN_RING") == "1"

func newRingFlags(entries, flags uint32) (*ring, error) {
	var p uringParams
	p.Flags = setupSQE128 | flags
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		if errno == unix.ENOSYS || errno == unix.EPERM {
			return nil, fmt.Errorf("%w: io_uring_setup: %v", ErrNoUring, errno)
		}
		return nil, fmt.Errorf("io_uring_setup(%d): %w", entries, errno)
	}
	r := &ring{fd: int(fd), entries: p.SqEntries}
	if err := r.mapRings(&p); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *ring) mapRings(p *uringParams) error {
	sqLen := int(p.SqOff.Array + p.SqEntries*4)
	cqLen := int(p.CqOff.Cqes + p.CqEntries*cqeSize)
	if p.Features&featSingleMmap != 0 {
		sqLen = max(sqLen, cqLen)
	}
	var err error
	if r.sqMem, err = unix.Mmap(r.fd, offSQRing, sqLen, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fmt.Errorf("mmap SQ ring: %w", err)
	}
	r.cqMem = r.sqMem
	if p.Features&featSingleMmap == 0 {
		if r.cqMem, err = unix.Mmap(r.fd, offCQRing, cqLen, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
			r.cqMem = nil
			return fmt.Errorf("mmap CQ ring: %w", err)
		}
	}
	if r.sqeMem, err = unix.Mmap(r.fd, offSQEs, int(p.SqEntries)*sqeSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fmt.Errorf("mmap SQEs: %w", err)
	}
	sq, cq := unsafe.Pointer(&r.sqMem[0]), unsafe.Pointer(&r.cqMem[0])
	r.sqHead = (*uint32)(unsafe.Add(sq, p.SqOff.Head))
	r.sqTail = (*uint32)(unsafe.Add(sq, p.SqOff.Tail))
	r.sqMask = *(*uint32)(unsafe.Add(sq, p.SqOff.RingMask))
	r.sqArray = unsafe.Add(sq, p.SqOff.Array)
	r.cqHead = (*uint32)(unsafe.Add(cq, p.CqOff.Head))
	r.cqTail = (*uint32)(unsafe.Add(cq, p.CqOff.Tail))
	r.cqMask = *(*uint32)(unsafe.Add(cq, p.CqOff.RingMask))
	r.cqes = unsafe.Add(cq, p.CqOff.Cqes)
	r.tail = atomic.LoadUint32(r.sqTail)
	return nil
}

func (r *ring) close() {
	if r.sqeMem != nil {
		unix.Munmap(r.sqeMem)
	}
	if r.cqMem != nil && &r.cqMem[0] != &r.sqMem[0] {
		unix.Munmap(r.cqMem)
	}
	if r.sqMem != nil {
		unix.Munmap(r.sqMem)
	}
	unix.Close(r.fd)
	r.sqMem, r.cqMem, r.sqeMem = nil, nil, nil
}

// free is how many SQEs can be queued before a submit.
func (r *ring) free() uint32 { return r.entries - (r.tail - atomic.LoadUint32(r.sqHead)) }

// next returns a zeroed SQE to fill, or nil when the SQ ring is full.
func (r *ring) next() []byte {
	if r.free() == 0 {
		return nil
	}
	i := r.tail & r.sqMask
	sqe := r.sqeMem[int(i)*sqeSize : int(i+1)*sqeSize]
	clear(sqe)
	*(*uint32)(unsafe.Add(r.sqArray, 4*i)) = i
	r.tail++
	return sqe
}

// submit publishes the queued SQEs and waits for at least wait
// completions. Interrupted waits are retried: the SQEs the kernel already
// consumed are not counted again.
func (r *ring) submit(wait uint32) error {
	atomic.StoreUint32(r.sqTail, r.tail)
	for {
		pending := r.tail - atomic.LoadUint32(r.sqHead)
		flags := uintptr(0)
		if wait > 0 {
			flags = enterGetEvents
		}
		_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(pending), uintptr(wait), flags, 0, 0)
		switch errno {
		case 0:
			if wait > 0 && r.ready() == 0 {
				continue // woken with nothing to read (task work ran); wait again
			}
			return nil
		case unix.EINTR, unix.EAGAIN, unix.EBUSY:
			// EAGAIN/EBUSY: completions must be reaped first; the caller
			// reads those we have, so return when there are some.
			if errno != unix.EINTR && r.ready() > 0 {
				return nil
			}
			continue
		default:
			return fmt.Errorf("io_uring_enter: %w", errno)
		}
	}
}

// ready is the number of completions waiting.
func (r *ring) ready() uint32 { return atomic.LoadUint32(r.cqTail) - atomic.LoadUint32(r.cqHead) }

// reap calls fn for every completion waiting and frees their slots.
func (r *ring) reap(fn func(cqe)) int {
	head := atomic.LoadUint32(r.cqHead)
	tail := atomic.LoadUint32(r.cqTail)
	n := 0
	for ; head != tail; head++ {
		c := *(*cqe)(unsafe.Add(r.cqes, uintptr(head&r.cqMask)*cqeSize))
		fn(c)
		n++
	}
	atomic.StoreUint32(r.cqHead, head)
	return n
}

// prepNop queues a NOP (used by the tests on kernels without ublk).
func prepNop(sqe []byte, userData uint64) {
	sqe[0] = opNop
	putU64(sqe[32:], userData)
}

// prepCmd queues a URING_CMD on fd with cmdOp and the command's bytes
// (at most 80, the SQE128 command area at offset 48).
func prepCmd(sqe []byte, fd int, cmdOp uint32, cmd []byte, userData uint64) {
	sqe[0] = opUringCmd
	putU32(sqe[4:], uint32(int32(fd)))
	putU32(sqe[8:], cmdOp)
	putU64(sqe[32:], userData)
	copy(sqe[48:], cmd)
}

// The kernel reads these in the machine's byte order.
func putU16(b []byte, v uint16) { binary.NativeEndian.PutUint16(b, v) }
func putU32(b []byte, v uint32) { binary.NativeEndian.PutUint32(b, v) }
func putU64(b []byte, v uint64) { binary.NativeEndian.PutUint64(b, v) }
