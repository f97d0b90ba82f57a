package daemon

import (
	"encoding/binary"
	"io"
	"runtime"
	"sync/atomic"
	"syscall"
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
	c.rp = p
	c.rn, c.roobn, c.rerr = 0, 0, unix.EAGAIN
	if start && c.spin.begin(c.d) {
		t0 := time.Now()
		c.spinUntil = t0.Add(c.d.cfg.PollWait)
		c.raw.Control(c.spinFn)
		c.spin.end(c.rerr != unix.EAGAIN)
	}
	if c.rerr == unix.EAGAIN {
		var t0 time.Time
		if start {
			t0 = time.Now()
			c.nc.SetReadDeadline(t0.Add(c.d.cfg.IdleTimeout))
		} else {
			if c.frameDeadline.IsZero() {
				c.frameDeadline = time.Now().Add(c.d.cfg.FrameTimeout)
			}
			c.nc.SetReadDeadline(c.frameDeadline)
		}
		if c.d.closing.Load() {
			// Shutdown may have set its deadline before ours replaced it.
			return 0, io.EOF
		}
		if err := c.raw.Read(c.readFn); err != nil {
			return 0, err
		}
		if start {
			c.spin.slept(time.Since(t0), c.d.cfg.PollWait)
		}
	}
	if c.rerr != nil {
		return 0, c.rerr
	}
	if c.roobn > 0 {
		if fds := parseRights(c.oob[:c.roobn]); len(fds) > 0 {
			c.tags = append(c.tags, fdTag{at: c.recvd + int64(c.rn) - 1, fds: fds})
		}
	}
	if c.rn == 0 {
		return 0, io.EOF
	}
	c.recvd += int64(c.rn)
	return c.rn, nil
}

// readFn and spinFn run with the socket's descriptor; they are method
// values made once, so a request does not allocate a closure.
func (c *conn) readOnce(fd uintptr) bool {
	c.rn, c.roobn, c.rerr = recvmsg(int(fd), c.rp, c.oob)
	return c.rerr != unix.EAGAIN
}

func (c *conn) spinRecv(fd uintptr) {
	for {
		c.rn, c.roobn, c.rerr = recvmsg(int(fd), c.rp, c.oob)
		if c.rerr != unix.EAGAIN || !time.Now().Before(c.spinUntil) {
			return
		}
	}
}

// recvmsg is a non-blocking recvmsg that asks for no address (the unix
// package's would allocate one for every call).
func recvmsg(fd int, p, oob []byte) (n, oobn int, err error) {
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
	r, _, e := unix.Syscall(unix.SYS_RECVMSG, uintptr(fd), uintptr(unsafe.Pointer(&msg)),
		unix.MSG_DONTWAIT|unix.MSG_CMSG_CLOEXEC)
	if e != 0 {
		return 0, 0, e
	}
	return int(r), int(msg.Controllen), nil
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
		body = c.d.bufs.get(total - frameHead)
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
// go out in one non-blocking call with no deadline to arm; the rest wait
// for the client to read, within the frame timeout.
func (c *conn) send(frame []byte) error {
	c.wp = frame
	c.wn, c.werr = 0, nil
	if err := c.raw.Control(c.writeFn); err != nil {
		return err
	}
	if c.werr == nil && c.wn == len(frame) {
		return nil
	}
	if c.werr != nil && c.werr != unix.EAGAIN {
		return c.werr
	}
	c.nc.SetWriteDeadline(time.Now().Add(c.d.cfg.FrameTimeout))
	_, err := c.nc.Write(frame[c.wn:])
	return err
}

func (c *conn) writeOnce(fd uintptr) {
	r, _, e := unix.Syscall6(unix.SYS_SENDTO, fd, uintptr(unsafe.Pointer(&c.wp[0])), uintptr(len(c.wp)),
		unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL, 0, 0)
	if e != 0 {
		c.werr = e
		return
	}
	c.wn = int(r)
}

// A spinner decides whether a connection polls for its next request before
// sleeping. Waking a sleeping thread costs tens of microseconds on a busy
// or virtual machine, more than a small request takes to serve; a client
// that sends its next request as soon as it has the answer gets served
// without that wait when the daemon polls for a short while. Polling
// burns a core, so it happens only while it pays: at most one connection
// per two cores polls at a time, none while batches are being compressed
// (the cores are busy), and after a poll that found nothing the connection
// sleeps straight away for 1, 2, 4, ... up to 256 waits before trying
// again, unless a wait shows the request came within the poll window.
type spinner struct {
	skip, backoff int
}

// spinning counts connections polling now, daemon-wide.
var spinning atomic.Int32

func (s *spinner) begin(d *Daemon) bool {
	if d.cfg.PollWait <= 0 {
		return false
	}
	if s.skip > 0 {
		s.skip--
		return false
	}
	if d.disp.inFlight.Load() > 0 {
		return false
	}
	if spinning.Add(1) > int32(max(1, runtime.GOMAXPROCS(0)/2)) {
		spinning.Add(-1)
		return false
	}
	return true
}

func (s *spinner) end(found bool) {
	spinning.Add(-1)
	if found {
		s.backoff = 0
		return
	}
	s.backoff = min(max(1, 2*s.backoff), 256)
	s.skip = s.backoff
}

// slept records a wait that slept: if the request came within the poll
// window, polling would have caught it.
func (s *spinner) slept(waited, window time.Duration) {
	if waited < window {
		s.skip, s.backoff = 0, 0
	}
}

// initIO prepares the connection's buffers and the callbacks its reads and
// writes run.
func (c *conn) initIO() error {
	raw, err := c.nc.SyscallConn()
	if err != nil {
		return err
	}
	c.raw = raw
	c.rbuf = make([]byte, rbufSize)
	c.oob = make([]byte, unix.CmsgSpace(maxFDs*4))
	c.readFn = c.readOnce
	c.spinFn = c.spinRecv
	c.writeFn = c.writeOnce
	return nil
}

var _ syscall.RawConn // the callbacks above run under syscall.RawConn
