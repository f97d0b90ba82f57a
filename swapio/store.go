package swapio

/*
#cgo CFLAGS: -O2 -Wall -std=gnu11
#cgo LDFLAGS: -ldl
#include "store.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
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
	regionLen = 16 * SlabSize // what one refill maps at a time: 1 MiB
	ringCap   = 4096          // slabs the ring holds: 256 MiB of reserve at most
)

// Options size a store's reserve: slabs kept ready in the ring for
// writes, refilled from a thread of the control plane.
type Options struct {
	// Reserve is the memory kept ready, in bytes; 0: DefaultReserve. It
	// doubles, up to MaxReserve, each time writes find it empty.
	Reserve, MaxReserve uint64
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
// the C side (store.c) writes, reads and discards blocks; Go maps its
// memory, refills its slabs and reads its counters.
type Store struct {
	s      *C.struct_s4d_store
	mem    [][]byte // the store's struct, slot table and ring: locked
	blocks uint64
	efd    int

	mu        sync.Mutex
	regions   [][]byte         // arena memory mapped so far, given back by Close
	idle      []unsafe.Pointer // slabs given back to the system, still mapped (reused first)
	reserve   atomic.Uint64
	max       uint64
	lastNoMem uint64
	base      uint64    // the reserve asked for: it shrinks back to it
	lastGrow  time.Time // when writes last found the ring empty, or it last shrank
	quit      chan struct{}
	done      chan struct{}
	closed    bool
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
	st := &Store{blocks: blocks, max: min(o.MaxReserve, ringCap*SlabSize), quit: make(chan struct{}), done: make(chan struct{})}
	st.reserve.Store(min(o.Reserve, st.max))
	st.base, st.lastGrow = st.reserve.Load(), time.Now()
	for _, n := range []int{int(unsafe.Sizeof(C.struct_s4d_store{})), int(blocks) * int(unsafe.Sizeof(C.struct_s4d_slot{})), ringCap * 8} {
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
	if err := st.fill(); err != nil {
		st.unmap()
		return nil, err
	}
	go st.refill()
	return st, nil
}

// Blocks is the number of blocks the store serves.
func (st *Store) Blocks() uint64 { return st.blocks }

// ptr is the store for the C queue threads (queue.go).
func (st *Store) ptr() *C.struct_s4d_store { return st.s }

// fill maps and hands in slabs until the ring holds the reserve, and
// gives back emptied slabs beyond twice the reserve. It runs on the
// refill's thread, or at NewStore.
func (st *Store) fill() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	want := st.reserve.Load() / SlabSize
	// Woken once writes have taken an eighth: the ring stays nearly full,
	// so a burst finds most of the reserve there while the refill waits
	// for memory (at half, a 8 MiB reserve ran dry in the guest).
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&st.s.low)), want-max(want/8, 1))
	for uint64(C.s4d_store_ring_free(st.s)) < want {
		if len(st.idle) == 0 {
			r, err := st.mapRegion() // address space only: nothing is present yet
			if err != nil {
				return err
			}
			for i := len(r) - SlabSize; i >= 0; i -= SlabSize {
				st.idle = append(st.idle, unsafe.Pointer(&r[i]))
			}
		}
		p := st.idle[len(st.idle)-1]
		// Locking faults the slab in: this is where the refill may wait
		// for memory, while reclaim swaps out to the device and its
		// writes take from what the ring has left. A slab at a time, each
		// handed in at once: every slab that reaches the ring stores the
		// swap-outs that free the memory the next one needs (a 1 MiB
		// region locked whole handed in nothing until all 256 pages were
		// found, and the guest stalled with the ring empty).
		if err := unix.Mlock(unsafe.Slice((*byte)(p), SlabSize)); err != nil {
			return fmt.Errorf("mlock a slab: %w", err)
		}
		if C.s4d_store_push(st.s, p) != 0 {
			break
		}
		st.idle = st.idle[:len(st.idle)-1]
	}
	// A reserve that shrank: the ring's surplus goes back.
	for uint64(C.s4d_store_ring_free(st.s)) > want {
		p := C.s4d_store_ring_take(st.s)
		if p == nil {
			break
		}
		st.release(p)
	}
	// Slabs emptied by discards and overwrites (the C side reuses them
	// first): kept while the ring and they hold at most twice the
	// reserve, else given back to the system (still mapped, reused first).
	for uint64(C.s4d_store_ring_free(st.s))+uint64(st.s.nempty) > 2*want {
		p := C.s4d_store_take_empty(st.s)
		if p == nil {
			break
		}
		st.release(p)
	}
	return nil
}

// release gives a slab's memory back to the system; it stays mapped.
// Only a slab the C side no longer holds (not in the ring) is released.
func (st *Store) release(p unsafe.Pointer) {
	b := unsafe.Slice((*byte)(p), SlabSize)
	unix.Munlock(b)
	unix.Madvise(b, unix.MADV_DONTNEED)
	st.idle = append(st.idle, p)
}

// mapRegion maps regionLen bytes aligned to a slab (a slab's header is
// found from an object's address).
func (st *Store) mapRegion() ([]byte, error) {
	raw, err := unix.Mmap(-1, 0, regionLen+SlabSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("mapping swap slabs: %w", err)
	}
	base := uintptr(unsafe.Pointer(&raw[0]))
	off := int((SlabSize - base%SlabSize) % SlabSize)
	// The unaligned head and tail go back at once. By munmap itself:
	// unix.Munmap frees only a slice unix.Mmap returned, whole.
	if off > 0 {
		munmap(raw[:off])
	}
	if tail := raw[off+regionLen:]; len(tail) > 0 {
		munmap(tail)
	}
	r := raw[off : off+regionLen : off+regionLen]
	st.regions = append(st.regions, r)
	return r, nil
}

// refill runs until Close on a thread of its own, an I/O flusher: its
// reclaim does no I/O. As a plain thread, with the ring empty and every
// swap-out failing, its reclaim waited in swap_writepage for a bio from
// the kernel's mempool, which the failing swap-outs of everyone else
// kept taking, while 48 MiB were free (guest, 4 vCPUs, 3 processes of
// 2x RAM): nothing refilled the ring for good. Writes that found the
// ring empty double the reserve.
func (st *Store) refill() {
	defer close(st.done)
	runtime.LockOSThread()
	unix.Prctl(unix.PR_SET_IO_FLUSHER, 1, 0, 0, 0)
	name := []byte("s4d-refill\x00")
	unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0, 0, 0)
	var buf [8]byte
	fds := []unix.PollFd{{Fd: int32(st.efd), Events: unix.POLLIN}}
	for {
		select {
		case <-st.quit:
			return
		default:
		}
		unix.Poll(fds, 100)
		unix.Read(st.efd, buf[:])
		atomic.StoreInt32((*int32)(unsafe.Pointer(&st.s.wake_pending)), 0)
		if n := uint64(st.s.st.nomem); n != st.lastNoMem {
			st.lastNoMem, st.lastGrow = n, time.Now()
			if r := st.reserve.Load(); r < st.max {
				st.reserve.Store(min(2*r, st.max))
			}
		} else if r := st.reserve.Load(); r > st.base && time.Since(st.lastGrow) > time.Duration(shrinkAfter.Load()) {
			// Swapping has calmed down: the memory a burst made the
			// reserve grow to goes back, half at a time (fill).
			st.reserve.Store(max(st.base, r/2))
			st.lastGrow = time.Now()
		}
		if err := st.fill(); err != nil {
			time.Sleep(10 * time.Millisecond) // memory is short: the next try
		}
	}
}

// PauseRefill keeps the refill from handing in slabs until resume is
// called, as a refill waiting for memory would: for tests of what writes
// do when the ring runs dry.
func (st *Store) PauseRefill() (resume func()) {
	st.mu.Lock()
	return st.mu.Unlock
}

// Close stops the refill and gives every byte back. The queues serving
// the store must have stopped.
func (st *Store) Close() {
	st.mu.Lock()
	if st.closed {
		st.mu.Unlock()
		return
	}
	st.closed = true
	st.mu.Unlock()
	close(st.quit)
	<-st.done
	st.unmap()
}

func (st *Store) unmap() {
	for _, r := range st.regions {
		munmap(r)
	}
	for _, b := range st.mem {
		unix.Munmap(b)
	}
	if st.efd > 0 {
		unix.Close(st.efd)
	}
	st.regions, st.idle, st.mem, st.s = nil, nil, nil, nil
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
}

// Stats returns a snapshot.
func (st *Store) Stats() Stats {
	ld := func(p *C.uint64_t) uint64 { return atomic.LoadUint64((*uint64)(unsafe.Pointer(p))) }
	c := &st.s.st
	s := Stats{Pages: ld(&c.pages), Zero: ld(&c.zero), Same: ld(&c.same), Raw: ld(&c.raw), LZ4: ld(&c.lz4),
		ComprBytes: ld(&c.compr_bytes), SlabBytes: ld(&c.slab_bytes), Writes: ld(&c.writes), Reads: ld(&c.reads),
		Discards: ld(&c.discards), NoMem: ld(&c.nomem), BadHash: ld(&c.bad_hash), LostReads: ld(&c.lost_reads), Wakes: ld(&c.wakes)}
	if l := ld(&c.ring_low); l > 0 {
		s.RingLow = (l - 1) * SlabSize
	}
	s.Reserve = st.reserve.Load()
	s.Ready = uint64(C.s4d_store_ring_free(st.s)) * SlabSize
	st.mu.Lock()
	s.Mapped = uint64(len(st.regions)) * regionLen
	for _, b := range st.mem {
		s.TableBytes += uint64(len(b))
	}
	st.mu.Unlock()
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
	return errno(C.s4d_store_read(st.s, C.uint64_t(block), unsafe.Pointer(&page[0])))
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
