package swapio

/*
#include "queue.h"
void s4d_code_range(uintptr_t *lo, uintptr_t *hi);
int s4d_pin_addrs(uintptr_t *out, int max);
*/
import "C"

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// stackLen is a queue thread's stack: LZ4's compressor takes 16 KiB of it.
const stackLen = 256 << 10

// QueueSpec is what a queue thread needs of its device (package ublk).
type QueueSpec struct {
	CDev, ID, Depth, MaxIO int
	Descs                  []byte // the kernel's descriptors for the queue (mmap of CDev)
	PlainRing              bool   // no COOP/DEFER_TASKRUN ring flags
	CPUs                   []int  // the CPUs whose requests the queue takes: the thread runs there
}

// Server is a store in C that queue threads serve from: a Store, or a
// measuring tool's (tests/guest/nullublk).
type Server interface{ Ops() Ops }

// Ops are a C store's functions, as struct s4d_ops has them (queue.h),
// and the pointer they take. The functions must neither block on Go nor
// allocate: they run on the queue threads.
// Room may be nil: the store's writes never wait for memory.
// File may be nil: the store keeps every page in memory.
type Ops struct{ Store, Read, Write, Discard, Room, File unsafe.Pointer }

// HoldWrites is how long a queue holds a write its store refused for want
// of memory (Ops.Room says when to try again) before failing it: long
// next to a refill's wait for one page, short next to the block layer's
// request timeout (queue.c's retry_held says why writes are held).
const HoldWrites = time.Second

const tick = 2 * time.Millisecond // queue.c's TICK_NS

// Ops gives the queue threads this store.
func (st *Store) Ops() Ops {
	var o C.struct_s4d_ops
	C.s4d_store_ops(&o)
	ops := Ops{Store: unsafe.Pointer(st.ptr()), Read: unsafe.Pointer(o.read), Write: unsafe.Pointer(o.write), Discard: unsafe.Pointer(o.discard), Room: unsafe.Pointer(o.room)}
	if st.wb != nil {
		ops.File = unsafe.Pointer(o.file)
	}
	return ops
}

// Queue is one ublk queue served by a C thread from a Server.
type Queue struct {
	q    *C.struct_s4d_queue
	mem  [][]byte
	done chan struct{}
	err  error
}

// StartQueue starts the thread for one queue and returns once it has
// fetched every tag (or failed to).
func StartQueue(srv Server, spec QueueSpec) (*Queue, error) {
	q := &Queue{done: make(chan struct{})}
	qlen := int(unsafe.Sizeof(C.struct_s4d_queue{})) + spec.Depth*int(unsafe.Sizeof(C.struct_s4d_held{}))
	o := srv.Ops()
	sizes := []int{qlen, spec.Depth * spec.MaxIO, PageSize, stackLen}
	if o.File != nil {
		if spec.MaxIO > C.S4D_IO_PAGES*PageSize {
			return nil, fmt.Errorf("queue %d: requests of %d bytes: a store with writeback takes at most %d", spec.ID, spec.MaxIO, C.S4D_IO_PAGES*PageSize)
		}
		sizes = append(sizes, spec.Depth*int(unsafe.Sizeof(C.struct_s4d_fread{})))
	}
	for _, n := range sizes {
		b, err := lockedMap(n)
		if err != nil {
			q.unmap()
			return nil, err
		}
		q.mem = append(q.mem, b)
	}
	c := (*C.struct_s4d_queue)(unsafe.Pointer(&q.mem[0][0]))
	c.store = o.Store
	c.ops.read = (*[0]byte)(o.Read)
	c.ops.write = (*[0]byte)(o.Write)
	c.ops.discard = (*[0]byte)(o.Discard)
	c.ops.room = (*[0]byte)(o.Room)
	if o.File != nil {
		c.ops.file = (*[0]byte)(o.File)
		c.fr = (*C.struct_s4d_fread)(unsafe.Pointer(&q.mem[4][0]))
	}
	if o.Room != nil {
		c.hold_ticks = C.uint32_t(HoldWrites / tick)
	}
	for _, cpu := range spec.CPUs {
		if cpu >= 0 && cpu < len(c.cpus)*64 {
			c.cpus[cpu/64] |= 1 << (cpu % 64)
		}
	}
	c.cdev = C.int(spec.CDev)
	c.qid, c.depth, c.max_io = C.uint16_t(spec.ID), C.uint16_t(spec.Depth), C.uint32_t(spec.MaxIO)
	c.descs = unsafe.Pointer(&spec.Descs[0])
	c.bufs = (*C.char)(unsafe.Pointer(&q.mem[1][0]))
	c.scratch = (*C.char)(unsafe.Pointer(&q.mem[2][0]))
	c.stack, c.stack_len = unsafe.Pointer(&q.mem[3][0]), stackLen
	if spec.PlainRing {
		c.plain_ring = 1
	}
	q.q = c
	if e := C.s4d_queue_start(c); e != 0 {
		q.unmap()
		return nil, fmt.Errorf("queue %d: pthread_create: %w", spec.ID, unix.Errno(-e))
	}
	go func() {
		C.s4d_queue_join(c) // this goroutine's thread waits in C for the queue's life
		if c.err != 0 {
			q.err = fmt.Errorf("queue %d: %w", spec.ID, unix.Errno(-c.err))
		}
		close(q.done)
	}()
	for {
		r := atomic.LoadInt32((*int32)(unsafe.Pointer(&c.ready)))
		if r == 1 {
			return q, nil
		}
		if r < 0 {
			<-q.done
			q.unmap()
			return nil, fmt.Errorf("queue %d: setting up: %w", spec.ID, unix.Errno(-r))
		}
		time.Sleep(time.Millisecond) // starting only: the thread sets up its ring
	}
}

// Wait returns once the queue's thread has ended (the kernel aborted every
// tag at STOP_DEV, or its ring failed), and says why it failed, if it did.
func (q *Queue) Wait() error { <-q.done; return q.err }

// Done is closed when the thread has ended.
func (q *Queue) Done() <-chan struct{} { return q.done }

// Detach makes the thread answer nothing more, once the requests it is
// serving are answered: the device is left to the next daemon.
func (q *Queue) Detach() {
	atomic.StoreInt32((*int32)(unsafe.Pointer(&q.q.detach)), 1)
	for atomic.LoadInt32((*int32)(unsafe.Pointer(&q.q.busy))) != 0 {
		time.Sleep(time.Millisecond)
	}
}

// Close gives the queue's memory back; the thread must have ended.
func (q *Queue) Close() {
	<-q.done
	q.unmap()
}

func (q *Queue) unmap() {
	for _, b := range q.mem {
		unix.Munmap(b)
	}
	q.mem, q.q = nil, nil
}

// FlusherErr says why the thread is not an I/O flusher (nil: it is; it
// needs CAP_SYS_RESOURCE).
func (q *Queue) FlusherErr() error {
	if e := q.q.flusher_err; e != 0 {
		return fmt.Errorf("PR_SET_IO_FLUSHER: %w", unix.Errno(e))
	}
	return nil
}

// Pinned says whether the thread runs on its queue's CPUs only.
func (q *Queue) Pinned() bool {
	for _, w := range q.q.cpus {
		if w != 0 {
			return true
		}
	}
	return false
}

// BufferBytes is the I/O memory the queue holds: its tags' buffers.
func (q *Queue) BufferBytes() uint64 { return uint64(len(q.mem[1])) }

// QueueStats are a queue's counters.
type QueueStats struct {
	Requests, Waits, Reads, ReadPages, Writes, WritePages, Discards, Errors, NoMem uint64
	Held, HeldFailed                                                               uint64 // writes held for want of memory; of those, failed after HoldWrites
	RingFlags                                                                      uint32
}

// Stats returns a snapshot.
func (q *Queue) Stats() QueueStats {
	ld := func(p *C.uint64_t) uint64 { return atomic.LoadUint64((*uint64)(unsafe.Pointer(p))) }
	s := &q.q.st
	return QueueStats{Requests: ld(&s.requests), Waits: ld(&s.waits), Reads: ld(&s.reads), ReadPages: ld(&s.read_pages),
		Writes: ld(&s.writes), WritePages: ld(&s.write_pages), Discards: ld(&s.discards), Errors: ld(&s.errors), NoMem: ld(&s.nomem),
		Held: ld(&s.held), HeldFailed: ld(&s.held_failed), RingFlags: uint32(q.q.ring_flags)}
}

// LockCode locks in memory the code the queue threads run and nothing
// else of the program: the pages of store.c and queue.c, the pages of the
// program's data they read (their statics, the GOT its calls into the C
// library go through), and the C library, liblz4 and the loader whole. Where the
// program lies on tmpfs (an initramfs) a page of it could otherwise be on
// swap, on the very device the fault would wait for. It returns the
// bytes locked.
func LockCode() (uint64, error) {
	codeMu.Lock()
	defer codeMu.Unlock()
	if len(codeLocked) > 0 {
		return 0, nil // locked already
	}
	var lo, hi C.uintptr_t
	C.s4d_code_range(&lo, &hi)
	ps := uintptr(os.Getpagesize())
	from, to := uintptr(lo)&^(ps-1), (uintptr(hi)+ps-1)&^(ps-1)
	var errs []error
	var total uint64
	lock := func(lo, hi uintptr, what string) {
		if _, _, e := unix.Syscall(unix.SYS_MLOCK, lo, hi-lo, 0); e != 0 {
			errs = append(errs, fmt.Errorf("mlock %s: %w", what, e))
			return
		}
		codeLocked = append(codeLocked, [2]uintptr{lo, hi})
		total += uint64(hi - lo)
	}
	lock(from, to, "the swap path's code")
	var pins [32]C.uintptr_t
	n := int(C.s4d_pin_addrs(&pins[0], C.int(len(pins))))
	for i, a := range pins[:n] {
		if a == 0 {
			continue
		}
		lo := uintptr(a) &^ (ps - 1)
		hi := lo + ps
		if i == 2 { // the GOT: .got before the symbol, .got.plt after
			lo, hi = lo-ps, lo+4*ps
		}
		lock(lo, hi, "the swap path's tables and stubs")
	}
	// The program's own writable pages (5.6 MiB of Go data in the guest)
	// are not locked whole: what the path reads of them, its statics and
	// the GOT, was pinned page-wise above.
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return total, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var libEnd uintptr // end of the last library mapping locked: its .bss follows, anonymous
	for sc.Scan() {
		fs := strings.Fields(sc.Text()) // start-end perms offset dev inode [path]
		var lo, hi uintptr
		if len(fs) < 5 {
			continue
		}
		if _, err := fmt.Sscanf(fs[0], "%x-%x", &lo, &hi); err != nil || hi <= lo {
			continue
		}
		if len(fs) < 6 {
			// A library's zero-initialised data (the C library's tunables
			// that memcpy reads among them): found swapped out in the
			// guest, under the queue thread's memcpy.
			if lo == libEnd && strings.HasPrefix(fs[1], "rw") {
				lock(lo, hi, "a library's .bss")
			}
			libEnd = 0
			continue
		}
		libEnd = 0
		if !strings.HasPrefix(fs[5], "/") {
			continue
		}
		base := fs[5][strings.LastIndex(fs[5], "/")+1:]
		switch {
		case strings.HasPrefix(base, "libc.so") || strings.HasPrefix(base, "liblz4.so") || strings.HasPrefix(base, "ld-linux"):
			lock(lo, hi, fs[5])
			libEnd = hi
		}
	}
	return total, errors.Join(append(errs, sc.Err())...)
}

// What LockCode locked, for UnlockCode.
var (
	codeMu     sync.Mutex
	codeLocked [][2]uintptr
)

// UnlockCode undoes LockCode, once the last device is gone: the daemon
// then keeps nothing locked for swap.
func UnlockCode() {
	codeMu.Lock()
	defer codeMu.Unlock()
	for _, r := range codeLocked {
		unix.Syscall(unix.SYS_MUNLOCK, r[0], r[1]-r[0], 0)
	}
	codeLocked = nil
}
