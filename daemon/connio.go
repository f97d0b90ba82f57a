package daemon

import (
	"math/bits"
	"net"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/ipc"
)

// A connection reads its requests with an ipc.FrameReader; a body too
// large for its buffer comes from the request budget and d.bufs.
const (
	frameHead = 4 + ipc.HeaderSize // the length word and the header
	outKeep   = 64 << 10           // response buffers up to this size stay with the connection
)

// large is the FrameReader's buffer for a body too large for its own: its
// size is taken from the request budget before any of it is read (the
// client's sends wait meanwhile), and it is a mapping of its own, so only
// the bytes that arrive become resident. done gives it back.
func (c *conn) large(n int, deadline time.Time) ([]byte, error) {
	if err := c.reserve(int64(n), deadline); err != nil {
		return nil, err
	}
	c.body = c.d.bufs.Get(n)
	return c.body, nil
}

// send writes a whole frame. Most responses fit in the socket buffer and
// go out in one non-blocking call; the rest wait for the client to read,
// within the frame timeout (the write deadline), even while the daemon
// stops.
func (c *conn) send(frame []byte) error {
	n, err := c.sock.Send(frame)
	if err == nil && n == len(frame) {
		return nil
	}
	if err != nil && err != unix.EAGAIN {
		return err
	}
	return c.sock.SendAll(time.Now().Add(c.d.cfg.FrameTimeout), nil, frame[n:])
}

// A spinner decides whether a connection polls for its next request before
// sleeping. Waking a sleeping thread costs tens of microseconds on a busy
// or virtual machine, more than a small request takes to serve; a client
// that sends its next request as soon as it has the answer gets served
// without that wait when the daemon polls for a short while. Polling
// burns a core, so it happens only while it pays: after a request that
// was quick to serve (a client busy with large batches takes its time
// between them), at most one connection per two cores at a time, none
// while batches are being compressed (the cores are busy), and while at
// least half of the last 16 waits would have been caught (a wait that
// slept counts when its request came within the window); otherwise it
// tries again every 16th wait.
type spinner struct {
	d      *Daemon
	misses uint16 // the last 16 waits, newest in bit 0: 1 = not caught
	idle   int    // waits since the last poll
	served time.Duration
}

// spinning counts connections polling now, daemon-wide.
var spinning atomic.Int32

// Begin is ipc.Poller's: whether to poll, and for how long.
func (s *spinner) Begin() (time.Duration, bool) {
	d := s.d
	if d.cfg.PollWait <= 0 || s.served >= d.cfg.PollWait {
		return 0, false
	}
	if bits.OnesCount16(s.misses) > 8 && s.idle < 16 {
		s.idle++
		return 0, false
	}
	if d.router.Busy() {
		return 0, false
	}
	if spinning.Add(1) > int32(max(1, runtime.GOMAXPROCS(0)/2)) {
		spinning.Add(-1)
		return 0, false
	}
	s.idle = 0
	return d.cfg.PollWait, true
}

// End records a poll: whether it caught the request.
func (s *spinner) End(found bool) {
	spinning.Add(-1)
	s.record(!found)
}

func (s *spinner) record(miss bool) {
	s.misses <<= 1
	if miss {
		s.misses |= 1
	}
}

// Slept records a wait that slept: had the request come within the poll
// window, polling would have caught it.
func (s *spinner) Slept(waited time.Duration) { s.record(waited >= s.d.cfg.PollWait) }

// initIO takes the connection's socket out of the runtime's poller (see
// ipc.Socket) and makes its buffers.
func (c *conn) initIO(nc *net.UnixConn) error {
	sock, err := ipc.NewSocket(nc, c.d.wake)
	if err != nil {
		return err
	}
	c.sock = sock
	sock.KeepWritesOnInterrupt()
	c.spin.d = c.d
	c.rd = ipc.NewFrameReader(sock, ipc.ReaderOptions{MaxFrame: c.d.cfg.MaxFrame, IdleTimeout: c.d.cfg.IdleTimeout,
		FrameTimeout: c.d.cfg.FrameTimeout, Large: c.large, Poller: &c.spin})
	return nil
}
