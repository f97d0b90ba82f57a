package ipc

import (
	"errors"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Socket is a connected Unix stream socket worked with non-blocking
// calls and kept out of the Go runtime's poller while it is busy. A
// socket in the poller's epoll set wakes the runtime's idle poller thread
// whenever bytes arrive, even when a goroutine is already polling the
// socket itself: on a virtual machine that wake-up (an inter-processor
// interrupt, paid by the sender) doubled the round trip of a small request.
// A wait therefore sleeps in poll(2) first, and only a long one (an idle
// connection) is handed to the runtime's poller, which needs no thread.
// The client and the daemon both use it.
type Socket struct {
	fd   int
	wake int  // eventfd: readable while waits are interrupted
	own  bool // wake is ours to close
	hot  time.Duration

	mu          sync.Mutex
	parked      net.Conn // the runtime's poller's view of fd during a long wait
	parkedWrite bool
	intr        atomic.Bool
	keepWrites  bool // Interrupt ends waits to read only
}

// ErrInterrupted is returned by a wait that Interrupt ended.
var ErrInterrupted = errors.New("wait interrupted")

// hotWait is how long a wait sleeps in poll(2) before it moves to the
// runtime's poller: long enough for a client between requests, short
// enough that idle connections do not each hold a thread.
const hotWait = 2 * time.Millisecond

// NewSocket takes over c: its descriptor is duplicated out of the runtime's
// poller and c is closed. wake is an eventfd that interrupts waits when
// written to (it may be shared by many sockets); -1 makes one for this
// socket alone.
func NewSocket(c *net.UnixConn, wake int) (*Socket, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var derr error
	if err := raw.Control(func(f uintptr) { fd, derr = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, derr
	}
	c.Close() // takes the original out of the poller
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	s := &Socket{fd: fd, wake: wake, hot: hotWait}
	if wake < 0 {
		if s.wake, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
			unix.Close(fd)
			return nil, err
		}
		s.own = true
	}
	return s, nil
}

// KeepWritesOnInterrupt makes Interrupt end only waits to read: a frame
// being written is finished (within its deadline). The daemon uses it so
// that shutdown completes every reply it started. Call it before any wait.
func (s *Socket) KeepWritesOnInterrupt() { s.keepWrites = true }

// Fd is the socket's descriptor.
func (s *Socket) Fd() int { return s.fd }

// Close closes the socket (and its own eventfd).
func (s *Socket) Close() error {
	if s.own {
		unix.Close(s.wake)
	}
	return unix.Close(s.fd)
}

// Shutdown shuts the socket down for both directions, so that a
// goroutine reading it, here or in the daemon, sees the end.
func (s *Socket) Shutdown() error { return unix.Shutdown(s.fd, unix.SHUT_RDWR) }

// Interrupt makes waits in progress and later ones return ErrInterrupted
// until Resume.
func (s *Socket) Interrupt() {
	s.intr.Store(true)
	one := uint64(1)
	unix.Write(s.wake, (*[8]byte)(unsafe.Pointer(&one))[:])
	s.mu.Lock()
	if s.parked != nil && !(s.parkedWrite && s.keepWrites) {
		s.parked.SetDeadline(time.Unix(1, 0))
	}
	s.mu.Unlock()
}

// Resume undoes Interrupt (for a socket with its own eventfd). Call it
// only after Interrupt has returned: its last step cuts short a wait
// parked in the runtime's poller, which could otherwise be the next one.
func (s *Socket) Resume() {
	var b [8]byte
	unix.Read(s.wake, b[:])
	s.intr.Store(false)
}

// Recvmsg receives without waiting: unix.EAGAIN when nothing is there.
// It asks for no address (unix.Recvmsg would allocate one each call).
func (s *Socket) Recvmsg(p, oob []byte) (n, oobn int, err error) {
	var iov unix.Iovec
	if len(p) > 0 {
		iov.Base = &p[0]
		iov.SetLen(len(p))
	}
	var msg unix.Msghdr
	msg.Iov, msg.Iovlen = &iov, 1
	if len(oob) > 0 {
		msg.Control = &oob[0]
		msg.SetControllen(len(oob))
	}
	r, _, e := unix.Syscall(unix.SYS_RECVMSG, uintptr(s.fd), uintptr(unsafe.Pointer(&msg)),
		unix.MSG_DONTWAIT|unix.MSG_CMSG_CLOEXEC)
	if e != 0 {
		return 0, 0, e
	}
	return int(r), int(msg.Controllen), nil
}

// Spin is Recvmsg retried until something comes or d has passed.
func (s *Socket) Spin(p, oob []byte, d time.Duration) (n, oobn int, err error) {
	until := time.Now().Add(d)
	for {
		n, oobn, err = s.Recvmsg(p, oob)
		if err != unix.EAGAIN || !time.Now().Before(until) {
			return n, oobn, err
		}
		// Goroutines made ready meanwhile run first: polling must not
		// hold up the queue of this core.
		runtime.Gosched()
	}
}

// Send sends without waiting and without SIGPIPE; it may send part.
func (s *Socket) Send(p []byte) (int, error) {
	r, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(s.fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)),
		unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// SendAll sends the buffers in order, waiting for room until deadline
// (zero: none). With fds, they go with the first byte.
func (s *Socket) SendAll(deadline time.Time, fds []int, bufs ...[]byte) error {
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	for len(bufs) > 0 {
		var n int
		var err error
		if len(bufs) == 1 && oob == nil {
			n, err = s.Send(bufs[0])
		} else {
			n, err = unix.SendmsgBuffers(s.fd, bufs, oob, nil, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
		}
		if err == unix.EAGAIN {
			if err := s.Wait(true, deadline); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		oob = nil
		for n > 0 && len(bufs) > 0 {
			k := min(n, len(bufs[0]))
			bufs[0] = bufs[0][k:]
			n -= k
			if len(bufs[0]) == 0 {
				bufs = bufs[1:]
			}
		}
		for len(bufs) > 0 && len(bufs[0]) == 0 {
			bufs = bufs[1:]
		}
	}
	return nil
}

// Wait sleeps until the socket is readable (or writable), the deadline
// passes (os.ErrDeadlineExceeded; zero: none) or Interrupt is called.
func (s *Socket) Wait(write bool, deadline time.Time) error {
	ev := int16(unix.POLLIN)
	if write {
		ev = unix.POLLOUT
	}
	interruptible := !write || !s.keepWrites
	start := time.Now()
	for {
		if interruptible && s.intr.Load() {
			return ErrInterrupted
		}
		now := time.Now()
		left := s.hot - now.Sub(start)
		if !deadline.IsZero() {
			if !now.Before(deadline) {
				return os.ErrDeadlineExceeded
			}
			left = min(left, deadline.Sub(now))
		}
		if left <= 0 {
			break
		}
		fds := [2]unix.PollFd{{Fd: int32(s.fd), Events: ev}, {Fd: int32(s.wake), Events: unix.POLLIN}}
		if !interruptible {
			fds[1].Fd = -1 // poll(2) skips it
		}
		ts := unix.NsecToTimespec(int64(left))
		n, err := unix.Ppoll(fds[:], &ts, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if fds[1].Revents != 0 {
			return ErrInterrupted
		}
		if n > 0 {
			return nil
		}
	}
	return s.waitParked(ev, deadline)
}

// waitParked waits in the runtime's poller, through a duplicate of the
// descriptor registered for the occasion and closed after.
func (s *Socket) waitParked(ev int16, deadline time.Time) error {
	dup, err := unix.FcntlInt(uintptr(s.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(dup), "s4d-socket")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return err
	}
	defer c.Close()
	raw, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		return err
	}
	c.SetDeadline(deadline)
	interruptible := ev != unix.POLLOUT || !s.keepWrites
	s.mu.Lock()
	s.parked, s.parkedWrite = c, ev == unix.POLLOUT
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.parked = nil
		s.mu.Unlock()
	}()
	if interruptible && s.intr.Load() { // before parked was set: Interrupt could not reach it
		return ErrInterrupted
	}
	// Ready now, or wait: the poller forgets a readiness it saw before
	// this wait began, so it must be asked of the socket itself.
	ready := func(fd uintptr) bool {
		fds := [1]unix.PollFd{{Fd: int32(fd), Events: ev}}
		n, err := unix.Poll(fds[:], 0)
		return n > 0 || (err != nil && err != unix.EINTR)
	}
	if ev == unix.POLLOUT {
		err = raw.Write(ready)
	} else {
		err = raw.Read(ready)
	}
	if interruptible && s.intr.Load() {
		return ErrInterrupted
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return os.ErrDeadlineExceeded
	}
	return err
}
