package client

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
	"unsafe"

	"github.com/s4d-project/s4d/ipc"
	"golang.org/x/sys/unix"
)

// RegionMemory is memory set up to become a region: a memfd mapped shared,
// and a userfaultfd registered over the mapping for missing and
// write-protect faults. NewRegionMemory makes one; Client.Map hands it to
// the daemon.
type RegionMemory struct {
	Memfd, Uffd int
	Mem         []byte
}

// userfaultfd ABI numbers (include/uapi/linux/userfaultfd.h; golang.org/x/sys
// has none of them).
const (
	uffdIocNew        = 0xAA00              // USERFAULTFD_IOC_NEW on /dev/userfaultfd
	uffdioAPI         = 0xc018aa3f          // _IOWR(0xAA, 0x3F, struct uffdio_api)
	uffdioRegister    = 0xc020aa00          // _IOWR(0xAA, 0x00, struct uffdio_register)
	uffdFeatures      = 1<<0 | 1<<5 | 1<<12 // PAGEFAULT_FLAG_WP, MISSING_SHMEM, WP_HUGETLBFS_SHMEM
	uffdModeMissingWP = 1<<0 | 1<<1
)

// NewRegionMemory makes size bytes (a multiple of the page size) of shared
// memory registered with a new userfaultfd. The mapping is kept out of
// fork children (MADV_DONTFORK): a child would see the daemon's evicted
// pages as holes, so it gets no mapping at all rather than zeros. The
// memory must not be touched before the daemon serves it: a fault would
// wait for ever.
func NewRegionMemory(size int) (*RegionMemory, error) {
	if size <= 0 || size%os.Getpagesize() != 0 {
		return nil, fmt.Errorf("region size %d: want a positive multiple of %d", size, os.Getpagesize())
	}
	fd, err := unix.MemfdCreate("s4d-region", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	rm := &RegionMemory{Memfd: fd, Uffd: -1}
	fail := func(what string, err error) (*RegionMemory, error) {
		rm.Close()
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return fail("memfd size", err)
	}
	// A memfd cut short under the daemon's reads would only short them,
	// but under the client's own mapping it would raise SIGBUS.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		return fail("memfd seals", err)
	}
	if rm.Mem, err = unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return fail("mmap", err)
	}
	// Huge pages would be split by every 4 KiB eviction.
	unix.Madvise(rm.Mem, unix.MADV_NOHUGEPAGE)
	if err := unix.Madvise(rm.Mem, unix.MADV_DONTFORK); err != nil {
		return fail("madvise(MADV_DONTFORK)", err)
	}
	if rm.Uffd, err = newUffd(); err != nil {
		return fail("userfaultfd", err)
	}
	api := [3]uint64{0xAA, uffdFeatures, 0}
	if err := uffdIoctl(rm.Uffd, uffdioAPI, unsafe.Pointer(&api)); err != nil {
		return fail("UFFDIO_API (this kernel must offer write-protection of shared memory)", err)
	}
	reg := [4]uint64{uint64(uintptr(unsafe.Pointer(&rm.Mem[0]))), uint64(size), uffdModeMissingWP, 0}
	if err := uffdIoctl(rm.Uffd, uffdioRegister, unsafe.Pointer(&reg)); err != nil {
		return fail("UFFDIO_REGISTER", err)
	}
	return rm, nil
}

// newUffd opens a userfaultfd that also serves faults taken inside the
// kernel (a read(2) into the memory): through /dev/userfaultfd, whose
// permissions decide who may, else the system call (root, or
// vm.unprivileged_userfaultfd=1).
func newUffd() (int, error) {
	flags := uintptr(unix.O_CLOEXEC | unix.O_NONBLOCK)
	if dev, err := unix.Open("/dev/userfaultfd", unix.O_RDWR|unix.O_CLOEXEC, 0); err == nil {
		fd, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(dev), uffdIocNew, flags)
		unix.Close(dev)
		if e == 0 {
			return int(fd), nil
		}
	}
	fd, _, e := unix.Syscall(unix.SYS_USERFAULTFD, flags, 0, 0)
	if e != 0 {
		return -1, fmt.Errorf("%v (open /dev/userfaultfd to this user, or set vm.unprivileged_userfaultfd=1)", e)
	}
	return int(fd), nil
}

func uffdIoctl(fd int, req uintptr, arg unsafe.Pointer) error {
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(arg)); e != 0 {
		return e
	}
	return nil
}

// Close unmaps the memory and closes both descriptors.
func (rm *RegionMemory) Close() error {
	if rm.Mem != nil {
		unix.Munmap(rm.Mem)
		rm.Mem = nil
	}
	if rm.Uffd >= 0 {
		unix.Close(rm.Uffd)
		rm.Uffd = -1
	}
	if rm.Memfd >= 0 {
		unix.Close(rm.Memfd)
		rm.Memfd = -1
	}
	return nil
}

// Mapping is memory backed by a region of the daemon: plain loads and
// stores, whose cold pages the daemon keeps compressed.
type Mapping struct {
	c    *Client
	rm   *RegionMemory
	id   uint64
	life *net.UnixConn // the registering connection, held as a lifeline

	onLost func(addr uintptr, size int)

	mu       sync.Mutex
	closed   bool
	released bool // handed back whole: no region in the daemon any more
}

// MapOptions tunes MapWith.
type MapOptions struct {
	// OnLost is called when the daemon holding the region goes away while
	// it is mapped. Threads touching an evicted page wait meanwhile (they
	// are never handed zeros). nil prints a message and exits the program
	// with ExitRegionLost.
	OnLost func(addr uintptr, size int)
}

// ExitRegionLost is the status a program exits with when the daemon that
// held its evicted pages goes away (unless MapOptions.OnLost says
// otherwise).
const ExitRegionLost = 70

// Map returns size bytes of memory (rounded up to pages) of which at most
// budget stay resident: the daemon compresses the rest into the caller's
// pools and brings pages back when touched. Writes are never lost, and if
// the daemon dies the program is stopped (see MapOptions) rather than
// handed zeros. The memory must not be used after Close.
func (c *Client) Map(ctx context.Context, size, budget int) (*Mapping, error) {
	return c.MapWith(ctx, size, budget, MapOptions{})
}

// MapWith is Map with options.
func (c *Client) MapWith(ctx context.Context, size, budget int, opt MapOptions) (*Mapping, error) {
	ps := os.Getpagesize()
	size = (size + ps - 1) / ps * ps
	rm, err := NewRegionMemory(size)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", c.socket())
	if err != nil {
		rm.Close()
		return nil, dialError(c.socket(), err)
	}
	life := nc.(*net.UnixConn)
	req := ipc.RegisterRequest{Addr: uint64(uintptr(unsafe.Pointer(&rm.Mem[0]))), Length: uint64(size), Budget: uint64(max(budget, 0))}
	body, err := exchange(ctx, life, ipc.OpRegister, req.Encode(), []int{rm.Memfd, rm.Uffd})
	if err != nil {
		life.Close()
		rm.Close()
		return nil, err
	}
	id, _, err := ipc.DecodeRegionID(body, 0)
	if err != nil {
		life.Close()
		rm.Close()
		return nil, err
	}
	m := &Mapping{c: c, rm: rm, id: id, life: life, onLost: opt.OnLost}
	go m.watch()
	return m, nil
}

// exchange sends one request on a connection of its own (descriptors on
// its first byte) and reads the answer.
func exchange(ctx context.Context, nc *net.UnixConn, op ipc.Op, body []byte, fds []int) ([]byte, error) {
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
		defer nc.SetDeadline(time.Time{})
	}
	frame := ipc.Frame(ipc.Header{Version: ipc.Version, Op: op, ID: 1}, body)
	if _, _, err := nc.WriteMsgUnix(frame, unix.UnixRights(fds...), nil); err != nil {
		return nil, fmt.Errorf("%v: %w", op, err)
	}
	var lw [4 + ipc.HeaderSize]byte
	if _, err := io.ReadFull(nc, lw[:]); err != nil {
		return nil, fmt.Errorf("%v: %w: %v", op, ErrConnLost, err)
	}
	n := int(binary.LittleEndian.Uint32(lw[:]))
	if n < ipc.HeaderSize || n > 1<<20 {
		return nil, fmt.Errorf("%v: response frame of %d bytes", op, n)
	}
	h := ipc.DecodeHeader(lw[4:])
	resp := make([]byte, n-ipc.HeaderSize)
	if _, err := io.ReadFull(nc, resp); err != nil {
		return nil, fmt.Errorf("%v: %w: %v", op, ErrConnLost, err)
	}
	if h.Status != ipc.OK {
		msg, _ := ipc.DecodeString(resp)
		return nil, &ipc.Error{Code: h.Status, Msg: msg}
	}
	return resp, nil
}

// watch waits on the lifeline: the daemon writes to it again only to hand
// the region back whole (RegionReleased); otherwise it ends only when the
// daemon goes away or Close closes it.
func (m *Mapping) watch() {
	want := ipc.RegionReleased(m.id)
	got := make([]byte, 0, len(want))
	var b [64]byte
	for {
		n, err := m.life.Read(b[:])
		got = append(got, b[:n]...)
		if len(got) >= len(want) {
			break
		}
		if err != nil {
			break
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	if len(got) >= len(want) && string(got[:len(want)]) == string(want) {
		// Every page is back and the range unregistered: the memory is
		// ordinary shared memory from now on.
		m.released = true
		unix.Close(m.rm.Uffd)
		m.rm.Uffd = -1
		return
	}
	addr, size := uintptr(unsafe.Pointer(&m.rm.Mem[0])), len(m.rm.Mem)
	if f := m.onLost; f != nil {
		m.mu.Unlock()
		f(addr, size)
		m.mu.Lock()
		return
	}
	fmt.Fprintf(os.Stderr, "s4d: the daemon holding the evicted pages of %d bytes of this program's memory at %#x went away; the pages are lost, stopping\n", size, addr)
	os.Exit(ExitRegionLost)
}

// Released says whether the daemon handed the region back whole (it
// stopped, or was asked to): the memory stays, no longer compressed.
func (m *Mapping) Released() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.released
}

// Bytes is the memory.
func (m *Mapping) Bytes() []byte { return m.rm.Mem }

// ID is the region's id in the daemon.
func (m *Mapping) ID() uint64 { return m.id }

// SetBudget changes how many bytes may stay resident.
func (m *Mapping) SetBudget(ctx context.Context, budget int) error {
	_, err := m.c.call(ctx, ipc.OpSetBudget, ipc.EncodeSetBudget(m.id, uint64(max(budget, 0))))
	return err
}

// Detach has the daemon place every evicted page back and let the region
// go: the memory stays, as ordinary shared memory, until Close. It needs
// the memory for every page.
func (m *Mapping) Detach(ctx context.Context) error {
	if _, err := m.c.call(ctx, ipc.OpUnregister, ipc.EncodeUnregister(m.id, ipc.UnregisterRestore)); err != nil {
		return err
	}
	// The daemon wrote the release frame on the lifeline before answering:
	// the watcher is reading it.
	for !m.Released() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

// Close unmaps the memory and has the daemon free everything the region
// holds. The memory must not be touched afterwards.
func (m *Mapping) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	released := m.released
	m.mu.Unlock()
	// Unmapped first: no thread can fault on it while the daemon lets go.
	unix.Munmap(m.rm.Mem)
	var err error
	if !released {
		_, err = m.c.call(context.Background(), ipc.OpUnregister, ipc.EncodeUnregister(m.id, 0))
		if errors.Is(err, ipc.ErrNotFound) {
			err = nil // already gone with the lifeline
		}
	}
	m.life.Close()
	m.rm.Mem = nil
	m.rm.Close()
	return err
}
