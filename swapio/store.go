package swapio

/*
#cgo CFLAGS: -O2 -Wall -std=gnu11
#cgo LDFLAGS: -ldl
#include "store.h"
#include "refill.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Sizes the Go side shares with the C side.
const (
	PageSize  = C.S4D_PAGE
	SlabSize  = C.S4D_SLAB
	regionLen = C.S4D_REGION_SLABS * SlabSize // what one refill maps at a time: 1 MiB
	ringCap   = 4096                          // slabs the ring holds: 256 MiB of reserve at most
)

// Options size a store's reserve: slabs kept ready in the ring for
// writes, refilled from a thread of the control plane.
type Options struct {
	// Reserve is the memory kept ready, in bytes; 0: DefaultReserve. It
	// doubles, up to MaxReserve, each time writes find it empty.
	Reserve, MaxReserve uint64
	// MemLimit, with Writeback: compressed bytes kept in RAM; past it
	// the coldest pages go to Writeback, a directory (an unnamed file is
	// made there) or a block device (writeback.go). 0: every page stays
	// in RAM.
	MemLimit  uint64
	Writeback string
}

// shrinkAfter: a reserve grown by a burst of writes halves after this long
// without a write finding the ring empty, down to the one asked for.
var shrinkAfter atomic.Int64 // ns

func init() { shrinkAfter.Store(int64(10 * time.Second)) }

// Defaults: a small reserve, as zram's (it has none: zsmalloc allocates
// in the write, with GFP flags that may not wait); ours grows when writes
// find it empty (Stats.NoMem). At 8 MiB, refilled from half, a 512 MiB
// guest with 3 processes of twice its RAM stalled with the ring empty and
// the refill in reclaim; 12 MiB, refilled from seven eighths, is within
// issue 40's 16 MiB + 0.5% + buffers at 1 GiB.
const (
	DefaultReserve    = 12 << 20
	DefaultMaxReserve = 128 << 20
)

// Store is the swap store of one device, in memory outside the Go heap:
// the C side writes, reads and discards blocks (store.c) and keeps the
// ring of slabs at the reserve (refill.c, a thread of its own); Go maps
// their memory, starts and stops the refill and reads the counters.
type Store struct {
	s      *C.struct_s4d_store
	r      *C.struct_s4d_refill
	mem    [][]byte // the store's struct, slot table, ring, the refill's struct, region table and stack: locked
	blocks uint64
	efd    int

	mu      sync.Mutex
	started bool // the refill's thread runs
	closed  bool

	wb   *writeback // nil: every page stays in RAM
	wbMu sync.Mutex // Go's reads of the writeback file (readFile)
}

// Available says why the native path cannot run here (nil: it can).
func Available() error {
	if msg := C.s4d_lz4_load(); msg != nil {
		return errors.New(C.GoString(msg))
	}
	return nil
}

// lockedMap maps n bytes of anonymous memory and locks them, so the I/O
// path never faults on them.
func lockedMap(n int) ([]byte, error) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	if err := unix.Mlock(b); err != nil {
		unix.Munmap(b)
		return nil, fmt.Errorf("mlock %d bytes (needs CAP_IPC_LOCK or a memlock limit): %w", n, err)
	}
	return b, nil
}

// NewStore makes a store for size bytes of blocks and starts its refill.
func NewStore(size uint64, o Options) (*Store, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if o.Reserve == 0 {
		o.Reserve = DefaultReserve
	}
	if o.MaxReserve < o.Reserve {
		o.MaxReserve = max(o.Reserve, DefaultMaxReserve)
	}
	blocks := size / PageSize
	maxReserve := min(o.MaxReserve, ringCap*SlabSize)
	// The arena's bound: every block raw, twice the largest reserve
	// (kept emptied slabs), and a region per size class of slack.
	regions := (blocks*PageSize+2*maxReserve)/regionLen + C.S4D_NCLASS + 1
	st := &Store{blocks: blocks}
	for _, n := range []int{int(unsafe.Sizeof(C.struct_s4d_store{})), int(blocks) * int(unsafe.Sizeof(C.struct_s4d_slot{})), ringCap * 8,
		int(unsafe.Sizeof(C.struct_s4d_refill{})), int(regions) * int(unsafe.Sizeof(C.struct_s4d_region{})), refillStack} {
		b, err := lockedMap(n)
		if err != nil {
			st.unmap()
			return nil, err
		}
		st.mem = append(st.mem, b)
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		st.unmap()
		return nil, err
	}
	st.efd = efd
	st.s = (*C.struct_s4d_store)(unsafe.Pointer(&st.mem[0][0]))
	C.s4d_store_init(st.s, (*C.struct_s4d_slot)(unsafe.Pointer(&st.mem[1][0])), C.uint64_t(blocks),
		(*C.uint64_t)(unsafe.Pointer(&st.mem[2][0])), ringCap, C.int(efd))
	r := (*C.struct_s4d_refill)(unsafe.Pointer(&st.mem[3][0]))
	r.s = st.s
	r.regions = (*C.struct_s4d_region)(unsafe.Pointer(&st.mem[4][0]))
	r.cap = C.uint32_t(regions)
	r.base = C.uint64_t(min(o.Reserve, maxReserve) / SlabSize)
	r.max = C.uint64_t(maxReserve / SlabSize)
	r.want = r.base
	r.shrink_after_ns = C.int64_t(shrinkAfter.Load())
	r.stack, r.stack_len = unsafe.Pointer(&st.mem[5][0]), refillStack
	st.r = r
	if e := C.s4d_refill_fill(r); e != 0 {
		st.unmap()
		return nil, fmt.Errorf("locking the swap reserve: %w", unix.Errno(-e))
	}
	if e := C.s4d_refill_start(r); e != 0 {
		st.unmap()
		return nil, fmt.Errorf("starting the swap refill: %w", unix.Errno(-e))
	}
	st.started = true
	if o.MemLimit > 0 {
		if o.Writeback == "" {
			st.Close()
			return nil, errors.New("a memory limit needs somewhere to write pages back")
		}
		if err := st.startWriteback(o.Writeback, o.MemLimit); err != nil {
			st.Close()
			return nil, err
		}
	}
	return st, nil
}

// refillStack is the refill thread's stack, locked.
const refillStack = 64 << 10

// Blocks is the number of blocks the store serves.
func (st *Store) Blocks() uint64 { return st.blocks }

// ptr is the store for the C queue threads (queue.go).
func (st *Store) ptr() *C.struct_s4d_store { return st.s }

// PauseRefill keeps the refill from handing in slabs until resume is
// called, as a refill waiting for memory would: for tests of what writes
// do when the ring runs dry.
func (st *Store) PauseRefill() (resume func()) {
	C.s4d_refill_pause(st.r, 1)
	return func() { C.s4d_refill_pause(st.r, 0) }
}

// RefillRT says whether the refill runs real-time (nil), or why not: it
// then competes for memory with the tasks whose swap-outs wait for it.
func (st *Store) RefillRT() error {
	if e := int(st.r.rt); e != 1 {
		return fmt.Errorf("SCHED_FIFO for the swap refill (needs CAP_SYS_NICE): %w", unix.Errno(e))
	}
	return nil
}

// Close stops the refill and gives every byte back. The queues serving
// the store must have stopped.
func (st *Store) Close() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return
	}
	st.closed = true
	if st.wb != nil {
		st.wb.stop()
	}
	if st.started {
		C.s4d_refill_stop(st.r)
	}
	st.unmap()
	if st.wb != nil {
		st.wb.close()
	}
}

func (st *Store) unmap() {
	if st.r != nil {
		C.s4d_refill_unmap(st.r)
	}
	for _, b := range st.mem {
		unix.Munmap(b)
	}
	if st.efd > 0 {
		unix.Close(st.efd)
	}
	st.mem, st.s, st.r = nil, nil, nil
}

// MarkLost makes every block not written since read as an I/O error: a
// device taken over after a crash, whose pages died with the process.
func (st *Store) MarkLost() { C.s4d_store_mark_lost(st.s) }

// Stats are the store's counters, in the manner of zram's mm_stat.
type Stats struct {
	Pages, Zero, Same, Raw, LZ4 uint64 // blocks held, by kind
	ComprBytes                  uint64 // compressed bytes of LZ4 and raw blocks
	SlabBytes                   uint64 // slabs in use by objects or emptied and kept
	Reserve, Ready              uint64 // the reserve's target and what the ring holds now, bytes
	Mapped                      uint64 // arena memory mapped (resident or not)
	TableBytes                  uint64 // the slot table and the store's own struct and ring
	Writes, Reads, Discards     uint64
	NoMem                       uint64 // writes failed for want of a slab
	RingLow                     uint64 // fewest bytes of slabs the ring held after a write took one (the reserve's margin)
	BadHash, LostReads          uint64 // reads failed: a page that came back different, a block lost with a crash
	Wakes                       uint64 // refills woken by the I/O path
	// Writeback: pages in the file now, read back from it, written to it;
	// MemLimit the compressed bytes kept in RAM (0: no writeback).
	FilePages, FileReads, FileWrites, MemLimit uint64
}

// Stats returns a snapshot.
func (st *Store) Stats() Stats {
	ld := func(p *C.uint64_t) uint64 { return atomic.LoadUint64((*uint64)(unsafe.Pointer(p))) }
	c := &st.s.st
	s := Stats{Pages: ld(&c.pages), Zero: ld(&c.zero), Same: ld(&c.same), Raw: ld(&c.raw), LZ4: ld(&c.lz4),
		ComprBytes: ld(&c.compr_bytes), SlabBytes: ld(&c.slab_bytes), Writes: ld(&c.writes), Reads: ld(&c.reads),
		Discards: ld(&c.discards), NoMem: ld(&c.nomem), BadHash: ld(&c.bad_hash), LostReads: ld(&c.lost_reads), Wakes: ld(&c.wakes)}
	s.FilePages, s.FileReads, s.FileWrites = ld(&c.file_pages), ld(&c.file_reads), ld(&c.file_writes)
	if st.wb != nil {
		s.MemLimit = atomic.LoadUint64((*uint64)(unsafe.Pointer(&st.wb.w.limit)))
	}
	if l := ld(&c.ring_low); l > 0 {
		s.RingLow = (l - 1) * SlabSize
	}
	s.Reserve = atomic.LoadUint64((*uint64)(unsafe.Pointer(&st.r.want))) * SlabSize
	s.Ready = uint64(C.s4d_store_ring_free(st.s)) * SlabSize
	s.Mapped = uint64(atomic.LoadUint32((*uint32)(unsafe.Pointer(&st.r.nregions)))) * regionLen
	for _, b := range st.mem {
		s.TableBytes += uint64(len(b))
	}
	return s
}

// errno turns the C side's result into an error (nil for 0).
func errno(r C.int) error {
	if r == 0 {
		return nil
	}
	return unix.Errno(-r)
}

// write, read and discard run the I/O path's store calls from Go, for the
// tests (the queue threads call them from C). scratch: PageSize bytes.
func (st *Store) write(block uint64, page, scratch []byte) error {
	return errno(C.s4d_store_write(st.s, C.uint64_t(block), unsafe.Pointer(&page[0]), unsafe.Pointer(&scratch[0])))
}

func (st *Store) read(block uint64, page []byte) error {
	r := C.s4d_store_read(st.s, C.uint64_t(block), unsafe.Pointer(&page[0]))
	if r == C.S4D_IN_FILE {
		return st.readFile(block, page)
	}
	return errno(r)
}

func (st *Store) discard(block, n uint64) {
	C.s4d_store_discard(st.s, C.uint64_t(block), C.uint64_t(n))
}

// corrupt flips a byte of block's stored object (tests: the hash check).
func (st *Store) corrupt(block uint64) bool {
	p := (*byte)(C.s4d_store_object(st.s, C.uint64_t(block)))
	if p == nil {
		return false
	}
	*p ^= 0x40
	return true
}

// munmap unmaps part of a mapping (unix.Munmap refuses anything but a
// whole one, and said nothing: `swap del` left the slabs mapped).
func munmap(b []byte) error {
	if _, _, e := unix.Syscall(unix.SYS_MUNMAP, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0); e != 0 {
		return e
	}
	return nil
}
