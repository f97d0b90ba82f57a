package daemon

import (
	"encoding/binary"
	"io"
	"math/bits"
	"net"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/ipc"
)

// A connection reads its requests through one buffer with recvmsg: a
// request (and any descriptor passed with it) usually arrives in one call,
// and requests a client pipelined are parsed from the same buffer. Bodies
// larger than the buffer are received straight into a buffer of their own.
const (
	rbufSize  = 64 << 10
	frameHead = 4 + ipc.HeaderSize // the length word and the header
	outKeep   = 64 << 10           // response buffers up to this size stay with the connection
	maxFDs    = 8                  // descriptors received with one recvmsg; the kernel closes the rest
)

// fdTag is a set of descriptors and the stream offset of the last byte
// received with them. A client sends a PUT_FD frame in one sendmsg with the
// descriptor on its first byte, and the kernel never returns bytes past
// such a message in the same call, so that last byte lies in the frame the
// descriptors came with.
type fdTag struct {
	at  int64
	fds []int
}

// recv receives into p. The first wait for a new request may poll before
// sleeping (see spinner); the rest sleep until bytes arrive or the
// deadline: the idle timeout between requests, the frame timeout within one.
func (c *conn) recv(p []byte, start bool) (int, error) {
	n, oobn, err := 0, 0, error(unix.EAGAIN)
	if start && c.spin.begin(c.d) {
		n, oobn, err = c.sock.Spin(p, c.oob, c.d.cfg.PollWait)
		c.spin.end(err != unix.EAGAIN)
	}
	var t0, deadline time.Time
	for err == unix.EAGAIN {
		if n, oobn, err = c.sock.Recvmsg(p, c.oob); err != unix.EAGAIN {
			break
		}
		if deadline.IsZero() {
			t0 = time.Now()
			if start {
				deadline = t0.Add(c.d.cfg.IdleTimeout)
			} else {
				if c.frameDeadline.IsZero() {
					c.frameDeadline = t0.Add(c.d.cfg.FrameTimeout)
				}
				deadline = c.frameDeadline
			}
		}
		if werr := c.sock.Wait(false, deadline); werr != nil {
			return 0, werr
		}
	}
	if start && !t0.IsZero() {
		c.spin.slept(time.Since(t0), c.d.cfg.PollWait)
	}
	if err != nil {
		return 0, err
	}
	if oobn > 0 {
		if fds := parseRights(c.oob[:oobn]); len(fds) > 0 {
			c.tags = append(c.tags, fdTag{at: c.recvd + int64(n) - 1, fds: fds})
		}
	}
	if n == 0 {
		return 0, io.EOF
	}
	c.recvd += int64(n)
	return n, nil
}

// parseRights returns the descriptors in SCM_RIGHTS messages of oob.
func parseRights(oob []byte) []int {
	var fds []int
	for len(oob) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		if h.Len < unix.SizeofCmsghdr || uint64(h.Len) > uint64(len(oob)) {
			break
		}
		if h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_RIGHTS {
			data := oob[unix.CmsgLen(0):h.Len]
			for ; len(data) >= 4; data = data[4:] {
				fds = append(fds, int(int32(binary.NativeEndian.Uint32(data))))
			}
		}
		next := unix.CmsgSpace(int(h.Len) - unix.CmsgLen(0))
		if next > len(oob) {
			break
		}
		oob = oob[next:]
	}
	return fds
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// fill receives more bytes into the read buffer.
func (c *conn) fill(start bool) error {
	if c.rend == len(c.rbuf) {
		c.shiftBuf()
	}
	n, err := c.recv(c.rbuf[c.rend:], start)
	c.rend += n
	return err
}

// shiftBuf moves the unread bytes to the front of the read buffer.
func (c *conn) shiftBuf() {
	c.rend = copy(c.rbuf, c.rbuf[c.rpos:c.rend])
	c.rpos = 0
}

// readFrame reads one frame and the descriptors sent with it. The body
// stays valid until the next call (it may lie in the read buffer, or in
// c.body, which loop gives back once the request is answered).
func (c *conn) readFrame() (ipc.Header, []byte, []int, error) {
	c.frameDeadline = time.Time{}
	for c.rend-c.rpos < frameHead {
		if err := c.fill(c.rend == c.rpos); err != nil {
			if c.rend > c.rpos && err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return ipc.Header{}, nil, nil, err
		}
		// A length too short for a header is refused without waiting for more.
		if c.rend-c.rpos >= 4 && binary.LittleEndian.Uint32(c.rbuf[c.rpos:]) < ipc.HeaderSize {
			return ipc.Header{}, nil, c.claim(c.recvd), ipc.ErrShortFrame
		}
	}
	length := binary.LittleEndian.Uint32(c.rbuf[c.rpos:])
	if length < ipc.HeaderSize {
		return ipc.Header{}, nil, c.claim(c.recvd), ipc.ErrShortFrame
	}
	h := ipc.DecodeHeader(c.rbuf[c.rpos+4 : c.rpos+frameHead])
	if int64(length) > int64(c.d.cfg.MaxFrame) {
		return h, nil, c.claim(c.recvd), ipc.ErrFrameTooLarge
	}
	total := 4 + int(length)
	var body []byte
	if total <= len(c.rbuf) {
		if c.rpos+total > len(c.rbuf) {
			c.shiftBuf()
		}
		for c.rend-c.rpos < total {
			if err := c.fill(false); err != nil {
				return h, nil, c.claim(c.recvd), unexpected(err)
			}
		}
		body = c.rbuf[c.rpos+frameHead : c.rpos+total : c.rpos+total]
		c.rpos += total
	} else {
		// A body larger than the read buffer takes its size from the
		// request budget before any of it is read: the client's sends wait
		// meanwhile. The buffer is a mapping of its own, so only the bytes
		// that arrive become resident.
		if c.frameDeadline.IsZero() {
			c.frameDeadline = time.Now().Add(c.d.cfg.FrameTimeout)
		}
		if err := c.reserve(int64(total-frameHead), c.frameDeadline); err != nil {
			return h, nil, c.claim(c.recvd), err
		}
		body = c.d.bufs.Get(total - frameHead)
		c.body = body
		got := copy(body, c.rbuf[c.rpos+frameHead:c.rend])
		c.rpos, c.rend = 0, 0
		for got < len(body) {
			n, err := c.recv(body[got:], false)
			if err != nil {
				return h, nil, c.claim(c.recvd), unexpected(err)
			}
			got += n
		}
	}
	return h, body, c.claim(c.recvd - int64(c.rend-c.rpos)), nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// claim takes the descriptors that came with bytes before stream offset end.
func (c *conn) claim(end int64) []int {
	fds := c.fds[:0]
	i := 0
	for ; i < len(c.tags) && c.tags[i].at < end; i++ {
		fds = append(fds, c.tags[i].fds...)
	}
	c.tags = append(c.tags[:0], c.tags[i:]...)
	c.fds = fds
	return fds
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
	misses uint16 // the last 16 waits, newest in bit 0: 1 = not caught
	idle   int    // waits since the last poll
	served time.Duration
}

// spinning counts connections polling now, daemon-wide.
var spinning atomic.Int32

func (s *spinner) begin(d *Daemon) bool {
	if d.cfg.PollWait <= 0 || s.served >= d.cfg.PollWait {
		return false
	}
	if bits.OnesCount16(s.misses) > 8 && s.idle < 16 {
		s.idle++
		return false
	}
	if d.disp.Busy() {
		return false
	}
	if spinning.Add(1) > int32(max(1, runtime.GOMAXPROCS(0)/2)) {
		spinning.Add(-1)
		return false
	}
	s.idle = 0
	return true
}

func (s *spinner) end(found bool) {
	spinning.Add(-1)
	s.record(!found)
}

func (s *spinner) record(miss bool) {
	s.misses <<= 1
	if miss {
		s.misses |= 1
	}
}

// slept records a wait that slept: had the request come within the poll
// window, polling would have caught it.
func (s *spinner) slept(waited, window time.Duration) { s.record(waited >= window) }

// initIO takes the connection's socket out of the runtime's poller (see
// ipc.Socket) and makes its buffers.
func (c *conn) initIO(nc *net.UnixConn) error {
	sock, err := ipc.NewSocket(nc, c.d.wake)
	if err != nil {
		return err
	}
	c.sock = sock
	sock.KeepWritesOnInterrupt()
	c.rbuf = make([]byte, rbufSize)
	c.oob = make([]byte, unix.CmsgSpace(maxFDs*4))
	return nil
}

// frameBuffered tells whether a whole frame has been received and not
// yet read.
func (c *conn) frameBuffered() bool {
	if c.rend-c.rpos < frameHead {
		return false
	}
	return c.rend-c.rpos >= 4+int(binary.LittleEndian.Uint32(c.rbuf[c.rpos:]))
}
