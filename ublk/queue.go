package ublk

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// prSetIOFlusher is PR_SET_IO_FLUSHER: the thread's allocations do not
// recurse into reclaim of filesystems or block I/O (it needs
// CAP_SYS_RESOURCE). Serving swap is exactly such a thread.
const prSetIOFlusher = 57

// queue serves one hardware queue of a device: one goroutine locked to its
// OS thread, because the kernel takes a queue's I/O commands only from the
// task that fetched first, and io_uring delivers their completions as task
// work to that task.
type queue struct {
	id    int
	cdev  int // /dev/ublkcN, shared by the device's queues
	depth int
	maxIO int
	g     *gatherer
	stats *Stats

	ring  *ring
	descs []byte // the kernel's I/O descriptors for this queue (read-only)
	bufs  []byte // depth buffers of maxIO bytes, one per tag

	reqs []Request
	res  []int32

	// hold is held while a batch is served; detached (set under it by
	// Device.Detach) parks the thread before the next one.
	hold     sync.Mutex
	detached bool
	// since is when the batch being served began (Unix ns), 0 between
	// batches: a watchdog reads it to see a queue stuck (Device.StuckFor).
	since atomic.Int64
}

// run sets the queue up, fetches a request for every tag, reports on
// ready, then serves until the kernel aborts every tag (STOP_DEV) or the
// ring fails. It returns why it stopped (nil after an abort).
func (q *queue) run(ready chan<- error, flusher *error) (err error) {
	// Never unlocked: the thread ends with the goroutine, and with it any
	// per-thread state (the flusher mark).
	runtime.LockOSThread()
	if e := unix.Prctl(prSetIOFlusher, 1, 0, 0, 0); e != nil {
		*flusher = e
	}
	if err = q.setup(); err != nil {
		q.teardown()
		ready <- err
		return err
	}
	for tag := 0; tag < q.depth; tag++ {
		q.prep(ioFetchReq, uint16(tag), 0)
	}
	if err = q.ring.submit(0); err != nil {
		q.teardown()
		ready <- fmt.Errorf("queue %d: fetch: %w", q.id, err)
		return err
	}
	ready <- nil
	defer q.teardown()
	live := q.depth
	for live > 0 {
		if err = q.ring.submit(1); err != nil {
			return fmt.Errorf("queue %d: %w", q.id, err)
		}
		q.reqs = q.reqs[:0]
		var failed error
		q.ring.reap(func(c cqe) {
			tag := uint16(c.UserData)
			switch {
			case c.Res == 0:
				q.reqs = append(q.reqs, q.request(tag))
			case c.Res == resAbort:
				live--
			default:
				live--
				failed = fmt.Errorf("queue %d tag %d: %w", q.id, tag, unix.Errno(-c.Res))
			}
		})
		if failed != nil && err == nil {
			err = failed
		}
		if len(q.reqs) == 0 {
			continue
		}
		q.hold.Lock()
		if q.detached {
			// Unanswered: with user recovery the kernel sends these
			// requests again to the next server, once this one is gone.
			q.hold.Unlock()
			select {}
		}
		q.stats.Waits.Add(1)
		q.stats.Requests.Add(uint64(len(q.reqs)))
		res := q.res[:len(q.reqs)]
		t0 := time.Now()
		q.since.Store(t0.UnixNano())
		q.g.serve(q.reqs, res)
		for i, r := range q.reqs {
			q.prep(ioCommitAndFetchReq, r.Tag, res[i])
		}
		e := q.ring.submit(0)
		q.since.Store(0)
		q.hold.Unlock()
		if e != nil {
			return fmt.Errorf("queue %d: commit: %w", q.id, e)
		}
		q.stats.ServeNs.Add(uint64(time.Since(t0)))
	}
	return err
}

func (q *queue) setup() error {
	var err error
	// Room for a command per tag in each direction.
	var flags uint32
	if q.ring, flags, err = newQueueRing(uint32(q.depth)); err != nil {
		return fmt.Errorf("queue %d: %w", q.id, err)
	}
	q.stats.RingFlags.Store(flags)
	psz := os.Getpagesize()
	n := (q.depth*int(unsafe.Sizeof(ioDesc{})) + psz - 1) &^ (psz - 1)
	if q.descs, err = unix.Mmap(q.cdev, descOffset(q.id, psz), n, unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fmt.Errorf("queue %d: mmap descriptors: %w", q.id, err)
	}
	// The I/O buffers are outside the Go heap (the kernel copies into them
	// while Go runs) and populated now, not on the first swap-out.
	if q.bufs, err = unix.Mmap(-1, 0, q.depth*q.maxIO, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE); err != nil {
		return fmt.Errorf("queue %d: I/O buffers: %w", q.id, err)
	}
	Touch(q.bufs)
	q.reqs = make([]Request, 0, q.depth)
	q.res = make([]int32, q.depth)
	return nil
}

// Touch writes every page of b. MAP_POPULATE does nothing in a process
// locked with MCL_ONFAULT (the kernel leaves such mappings to fault), and
// a buffer the kernel must fault in while the machine swaps may wait for
// memory forever: the kernel copies a swap-out into it.
func Touch(b []byte) {
	for i := 0; i < len(b); i += os.Getpagesize() {
		b[i] = 0
	}
}

func (q *queue) teardown() {
	if q.ring != nil {
		q.ring.close()
		q.ring = nil
	}
	if q.descs != nil {
		unix.Munmap(q.descs)
		q.descs = nil
	}
	if q.bufs != nil {
		unix.Munmap(q.bufs)
		q.bufs = nil
	}
}

func (q *queue) buf(tag uint16) []byte {
	return q.bufs[int(tag)*q.maxIO : (int(tag)+1)*q.maxIO]
}

// prep queues a FETCH_REQ or COMMIT_AND_FETCH_REQ for tag. The ring has
// an SQE for every tag, and a tag has one command at a time.
func (q *queue) prep(nr uint32, tag uint16, result int32) {
	sqe := q.ring.next()
	c := ioCmd{QID: uint16(q.id), Tag: tag, Result: result, Addr: uint64(uintptr(unsafe.Pointer(&q.buf(tag)[0])))}
	sqe[0] = opUringCmd
	putU32(sqe[4:], uint32(int32(q.cdev)))
	putU32(sqe[8:], ioOp(nr))
	putU64(sqe[32:], uint64(tag))
	c.put(sqe[48:])
}

// request reads tag's descriptor.
func (q *queue) request(tag uint16) Request {
	d := (*ioDesc)(unsafe.Pointer(&q.descs[int(tag)*int(unsafe.Sizeof(ioDesc{}))]))
	return Request{Tag: tag, Op: uint8(d.OpFlags), Flags: d.OpFlags >> 8, Sector: d.StartSector, Count: d.NrSectors, Buf: q.buf(tag)}
}
