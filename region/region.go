// Package region keeps the memory of another process compressed: a range
// of that process's address space, backed by a memfd and registered with a
// userfaultfd, whose cold pages are compressed into a Store and punched
// out of the memfd, and brought back when the process touches them.
//
// The process runs nothing of ours. The kernel stops a thread that touches
// an evicted page and queues a message on the userfaultfd; the region
// decompresses the page and places it with UFFDIO_COPY, which wakes the
// thread. An eviction write-protects a page before reading it, so a write
// that races it stops on the protection and cancels it: a page is punched
// out only if nobody wrote to it since it was read.
//
// Data flows one way: the region calls its Store, never the reverse.
package region

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Store keeps a region's evicted pages (compressed, in the owner's pool).
type Store interface {
	// Save keeps pages, len(keys) pages back to back, under keys. size[i]
	// is set to page i's stored size, or -1 when it was not kept (quota
	// or memory limit): such a page stays resident.
	Save(keys []uint64, pages []byte, size []int32) error
	// Load decodes the pages of keys into dst, page i at i*PageSize; an
	// error means the pages cannot be given back as they were.
	Load(keys []uint64, dst []byte) error
	// Drop forgets keys.
	Drop(keys []uint64)
}

// Spec is what a client hands over.
type Spec struct {
	Uffd, Memfd int    // the region's userfaultfd and memfd; the region owns them
	Lifeline    int    // closed by the client's exit (a socket), or -1; owned too
	Addr        uint64 // where the memfd is mapped in the client, from offset 0
	Length      uint64
	Budget      uint64 // bytes resident at most; 0 evicts every page it can
	PID         int32  // the client, to check its mapping; 0 skips the check
}

// Page states, in the low bits of a page's byte; the flags above them.
const (
	never    = 0 // not touched yet: no page in the memfd
	resident = 1
	evicting = 2 // resident, write-protected, being stored
	evicted  = 3 // punched out; its bytes are in the Store

	stateMask = 3
	refBit    = 1 << 2 // touched since the clock hand last passed
	cancelBit = 1 << 3 // written during its eviction: not to be punched
)

// Region is one registered range.
type Region struct {
	spec  Spec
	ps    uint64
	pages int
	store Store
	log   *slog.Logger
	u     uffd

	mu       sync.Mutex
	state    []uint8
	size     []uint16 // stored size of an evicted page (at most a page)
	hand     int      // the clock's hand
	resident int
	evicted  int
	stored   uint64 // bytes the evicted pages take in the store
	budget   atomic.Uint64

	stop     int // eventfd: wakes the fault loop to stop
	kick     chan struct{}
	progress chan struct{} // the evictor finished a batch (for throttle)
	quit     chan struct{}
	wg       sync.WaitGroup
	closing  sync.Once
	onLost   func(*Region)
	dead     atomic.Pointer[error] // why the region stopped serving
	finished atomic.Bool           // closed: its counters move no more

	faultBuf []byte    // maxRun pages, for UFFDIO_COPY (under mu)
	last     int       // the page the last fault brought in, and read-ahead after it
	ahead    int       // pages to read ahead: doubles while faults are sequential
	backoff  time.Time // no eviction before this (evictor only): the store refused
	ctr      counters
	lat      latency
}

type counters struct {
	missing, wp, zeroFills, evictions, cancelled, refused, throttled atomic.Uint64
	restored                                                         atomic.Uint64 // pages placed back (faults, read-ahead, release)
}

// New checks what the client handed over and starts serving it: faults at
// once, eviction whenever the resident pages exceed the budget. onLost is
// called (on its own goroutine) when the lifeline closes or serving fails.
// On error the descriptors are closed.
func New(spec Spec, store Store, log *slog.Logger, onLost func(*Region)) (*Region, error) {
	r, err := newRegion(spec, store, log, onLost)
	if err != nil {
		unix.Close(spec.Uffd)
		unix.Close(spec.Memfd)
		if spec.Lifeline >= 0 {
			unix.Close(spec.Lifeline)
		}
		return nil, err
	}
	r.wg.Add(2)
	go r.serve()
	go r.evictLoop()
	return r, nil
}

func newRegion(spec Spec, store Store, log *slog.Logger, onLost func(*Region)) (*Region, error) {
	ps := uint64(os.Getpagesize())
	if log == nil {
		log = slog.Default()
	}
	if spec.Length == 0 || spec.Length%ps != 0 || spec.Addr%ps != 0 {
		return nil, fmt.Errorf("region of %d bytes at %#x: want a non-empty multiple of %d bytes at an aligned address", spec.Length, spec.Addr, ps)
	}
	if err := checkMemfd(spec.Memfd, spec.Length); err != nil {
		return nil, err
	}
	if !isUffd(spec.Uffd) {
		return nil, errors.New("the second descriptor is not a userfaultfd")
	}
	if spec.PID > 0 {
		if err := checkMapping(spec.PID, spec.Memfd, spec.Addr, spec.Length); err != nil {
			return nil, err
		}
	}
	u := uffd(spec.Uffd)
	if err := u.handshake(); err != nil {
		return nil, err
	}
	if err := u.register(spec.Addr, spec.Length); err != nil {
		return nil, err
	}
	// The client never reads the userfaultfd; the fault loop reads it
	// without blocking and sleeps in poll.
	if err := unix.SetNonblock(spec.Uffd, true); err != nil {
		return nil, fmt.Errorf("userfaultfd: %v", err)
	}
	stop, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %v", err)
	}
	n := int(spec.Length / ps)
	r := &Region{spec: spec, ps: ps, pages: n, store: store, log: log, u: u,
		state: make([]uint8, n), size: make([]uint16, n), stop: stop,
		kick: make(chan struct{}, 1), progress: make(chan struct{}, 1), quit: make(chan struct{}), onLost: onLost,
		faultBuf: alignedPages(maxRun * int(ps)), last: -2}
	r.budget.Store(spec.Budget)
	// Pages already in the memfd (written before registering) are resident.
	r.scanResident()
	return r, nil
}

// checkMemfd makes sure fd is shared memory (only shmem files take seals)
// of exactly the region's size.
func checkMemfd(fd int, length uint64) error {
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0); err != nil {
		return errors.New("the first descriptor is not a memfd")
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("memfd: %v", err)
	}
	if uint64(st.Size) != length {
		return fmt.Errorf("the memfd holds %d bytes; the region is %d", st.Size, length)
	}
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err != nil || fl&unix.O_ACCMODE != unix.O_RDWR {
		return errors.New("the memfd must be open for reading and writing")
	}
	return nil
}

// checkMapping makes sure the client maps the memfd shared, from offset 0,
// over the whole range: else the faults the region serves and the pages it
// punches would belong to different memory.
func checkMapping(pid int32, memfd int, addr, length uint64) error {
	var st unix.Stat_t
	if err := unix.Fstat(memfd, &st); err != nil {
		return err
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission) {
		// A daemon that may not see other processes (systemd's
		// ProtectProc=invisible, another user's process) cannot check:
		// a client that hands over a memfd it does not map there harms
		// only its own memory, and UFFDIO_REGISTER still refuses a range
		// it does not map at all.
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the client's mappings: %v", err)
	}
	covered := addr
	for _, line := range splitLines(b) {
		var lo, hi, off, ino uint64
		var perms, dev string
		if n, _ := fmt.Sscanf(line, "%x-%x %s %x %s %d", &lo, &hi, &perms, &off, &dev, &ino); n < 6 {
			continue
		}
		if hi <= covered || lo > covered || covered >= addr+length {
			continue
		}
		if ino != st.Ino || len(perms) < 4 || perms[3] != 's' || off+addr != lo {
			return fmt.Errorf("%#x in the client is not the memfd mapped shared at offset %d", covered, covered-addr)
		}
		covered = hi
	}
	if covered < addr+length {
		return fmt.Errorf("the client does not map the memfd over %#x-%#x", addr, addr+length)
	}
	return nil
}

func splitLines(b []byte) []string {
	var out []string
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != '\n' {
			i++
		}
		out = append(out, string(b[:i]))
		if i < len(b) {
			i++
		}
		b = b[i:]
	}
	return out
}

// alignedPages returns page-aligned memory outside the Go heap, the
// source of UFFDIO_COPY.
func alignedPages(n int) []byte {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return make([]byte, n)
	}
	return b
}

// scanResident marks the pages the memfd already holds as resident.
func (r *Region) scanResident() {
	fd := r.spec.Memfd
	for off := int64(0); off < int64(r.spec.Length); {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if err != nil {
			return // ENXIO: no data after off
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			hole = int64(r.spec.Length)
		}
		for p := data / int64(r.ps); p < hole/int64(r.ps) && p < int64(r.pages); p++ {
			r.state[p] = resident
			r.resident++
		}
		off = hole
	}
}

// SetBudget changes how many bytes may stay resident.
func (r *Region) SetBudget(bytes uint64) {
	r.budget.Store(bytes)
	r.wakeEvictor()
}

func (r *Region) wakeEvictor() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// fail stops serving: the threads waiting stay stopped (they are never
// handed zeros) until the client goes away or unregisters.
func (r *Region) fail(err error) {
	if r.dead.CompareAndSwap(nil, &err) {
		r.log.Warn("region stopped serving", "addr", fmt.Sprintf("%#x", r.spec.Addr), "err", err)
		if r.onLost != nil {
			go r.onLost(r)
		}
	}
}

// Err says why the region stopped serving, or nil.
func (r *Region) Err() error {
	if p := r.dead.Load(); p != nil {
		return *p
	}
	return nil
}

// Close stops the region and frees what it holds: its pages in the store,
// its descriptors. The client must not touch the range again (its threads
// would wait for ever: the userfaultfd stays registered while the client
// holds it).
func (r *Region) Close() { r.close(false, nil) }

// Release is Close that first places every evicted page back and
// unregisters the range, so that the client keeps its memory whole as an
// ordinary shared mapping; farewell is then written to the lifeline, for
// the client to tell this from the daemon's death. On error the region is
// closed all the same, as Close does.
func (r *Region) Release(farewell []byte) error { return r.close(true, farewell) }

func (r *Region) close(restore bool, farewell []byte) error {
	var err error
	r.closing.Do(func() {
		close(r.quit)
		one := [8]byte{1}
		unix.Write(r.stop, one[:])
		r.wg.Wait()
		r.mu.Lock()
		defer r.mu.Unlock()
		if restore && r.Err() == nil {
			err = r.restoreAll()
			if err == nil {
				err = r.u.unregister(r.spec.Addr, r.spec.Length)
			}
			if err == nil && r.spec.Lifeline >= 0 && len(farewell) > 0 {
				// A few bytes on a socket the client never writes to and
				// reads at once: they fit in its buffer.
				unix.Write(r.spec.Lifeline, farewell)
			}
		} else if restore {
			err = fmt.Errorf("cannot restore: %w", r.Err())
		}
		var keys []uint64
		for i, s := range r.state {
			if s&stateMask == evicted {
				keys = append(keys, uint64(i))
			}
		}
		if len(keys) > 0 {
			r.store.Drop(keys)
		}
		if !(restore && err == nil) && r.spec.Lifeline >= 0 {
			// Ended without the pages handed back: the client must learn it
			// now (its threads may be waiting on a fault that will never be
			// served), not when its connection idles out.
			unix.Shutdown(r.spec.Lifeline, unix.SHUT_RDWR)
		}
		unix.Close(r.stop)
		unix.Close(r.spec.Uffd)
		unix.Close(r.spec.Memfd)
		if r.spec.Lifeline >= 0 {
			unix.Close(r.spec.Lifeline)
		}
		unix.Munmap(r.faultBuf) // fails harmlessly on Go memory
		r.finished.Store(true)
	})
	return err
}

// restoreAll places every evicted page back (under r.mu, serving stopped).
func (r *Region) restoreAll() error {
	for i := 0; i < r.pages; i++ {
		if r.state[i]&stateMask != evicted {
			continue
		}
		n := r.evictedRun(i, maxRun)
		if err := r.fill(i, n); err != nil {
			return fmt.Errorf("restoring pages %d-%d: %w", i, i+n-1, err)
		}
		i += n - 1
	}
	return nil
}

// maxRun is the most pages brought back at once: a sequential reader's
// read-ahead, or a restore.
const maxRun = 64

// evictedRun counts the evicted pages from i on, up to n.
func (r *Region) evictedRun(i, n int) int {
	j := i
	for j < r.pages && j < i+n && r.state[j]&stateMask == evicted {
		j++
	}
	return j - i
}

// fill decompresses the n evicted pages from i on into place, in one
// UFFDIO_COPY that wakes the threads waiting on them (under r.mu). Page i
// is the one touched; the others are read ahead and not marked referenced,
// so that a scan does not push the working set out.
func (r *Region) fill(i, n int) error {
	keys := make([]uint64, n)
	for k := range keys {
		keys[k] = uint64(i + k)
	}
	buf := r.faultBuf[:n*int(r.ps)]
	if err := r.store.Load(keys, buf); err != nil {
		return err
	}
	copied, err := r.u.copyIn(r.addrOf(i), buf, false)
	if err == unix.ENOENT && n > 1 {
		// The run crosses into another VMA: the page touched alone.
		copied, err = r.u.copyIn(r.addrOf(i), buf[:r.ps], false)
	}
	if err == unix.EEXIST && copied > 0 {
		err = nil // a page after the first was placed by other means
	}
	if err != nil {
		return fmt.Errorf("UFFDIO_COPY: %w", err)
	}
	done := int(copied / int64(r.ps))
	for k := 0; k < done; k++ {
		r.state[i+k] = resident
		r.stored -= uint64(r.size[i+k])
	}
	r.state[i] |= refBit
	r.resident += done
	r.evicted -= done
	r.ctr.restored.Add(uint64(done))
	r.store.Drop(keys[:done])
	return nil
}

// Stats describes the region now.
type Stats struct {
	Addr, Size         uint64
	Budget             uint64
	Resident, Evicted  uint64 // bytes
	Stored             uint64 // bytes the evicted pages take compressed
	Faults, WPFaults   uint64
	ZeroFills          uint64
	Evictions          uint64
	Cancelled, Refused uint64 // evictions undone by a write, or refused by the store
	Throttled          uint64 // faults held until the evictor caught up
	FaultP50, FaultP99 time.Duration
	Err                string
}

// Stats returns the region's figures.
func (r *Region) Stats() Stats {
	r.mu.Lock()
	s := Stats{Addr: r.spec.Addr, Size: r.spec.Length, Budget: r.budget.Load(),
		Resident: uint64(r.resident) * r.ps, Evicted: uint64(r.evicted) * r.ps, Stored: r.stored}
	r.mu.Unlock()
	s.Faults, s.WPFaults, s.ZeroFills = r.ctr.missing.Load(), r.ctr.wp.Load(), r.ctr.zeroFills.Load()
	s.Evictions, s.Cancelled, s.Refused = r.ctr.evictions.Load(), r.ctr.cancelled.Load(), r.ctr.refused.Load()
	s.Throttled = r.ctr.throttled.Load()
	s.FaultP50, s.FaultP99 = r.lat.quantile(0.5), r.lat.quantile(0.99)
	if err := r.Err(); err != nil {
		s.Err = err.Error()
	}
	return s
}
