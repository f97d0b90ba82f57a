package ipc

import (
	"encoding/binary"
	"errors"
	"io"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A FrameReader reads requests, and the descriptors passed with them, off
// one Socket through one buffer with recvmsg: a request (and any
// descriptor passed with it) usually arrives in one call, and requests a
// client pipelined are parsed from the same buffer. Bodies larger than the
// buffer are received straight into a buffer of their own.
type FrameReader struct {
	sock *Socket
	opt  ReaderOptions

	rbuf          []byte // received bytes; rbuf[rpos:rend] not parsed yet
	rpos, rend    int
	recvd         int64 // bytes received on the stream so far
	oob           []byte
	tags          []fdTag // descriptors received, not yet claimed by a frame
	fds           []int
	frameDeadline time.Time // set once a frame has to be waited for
}

// ReaderOptions are a FrameReader's limits and the hooks of its owner.
type ReaderOptions struct {
	MaxFrame     int           // longer frames are refused (ErrFrameTooLarge)
	IdleTimeout  time.Duration // the wait for a new frame
	FrameTimeout time.Duration // the wait for the rest of a frame begun
	// Large returns a buffer of n bytes for a body too large for the read
	// buffer, taking it from its owner's budget within deadline. The
	// owner gives it back once the request is answered.
	Large func(n int, deadline time.Time) ([]byte, error)
	// Poller, if set, may make the first wait for a new frame poll
	// before sleeping.
	Poller Poller
}

// A Poller decides whether the wait for a new frame polls the socket for
// a while before sleeping, and learns whether that would have paid.
type Poller interface {
	Begin() (window time.Duration, ok bool) // ok: poll for window
	End(found bool)                         // after a poll Begin allowed
	Slept(waited time.Duration)             // after a wait that slept
}

const (
	ReadBufSize = 64 << 10       // a FrameReader's buffer: larger bodies come from ReaderOptions.Large
	frameHead   = 4 + HeaderSize // the length word and the header
	maxFDs      = 8              // descriptors received with one recvmsg; the kernel closes the rest
	// maxHeldFDs bounds the descriptors received and not yet claimed. A
	// frame is received whole before the next is asked for, and one
	// recvmsg returns at most one message with descriptors, so an honest
	// client never has more than its frame's (two at most) and one more
	// message's waiting; a client that sends its frame a byte at a time,
	// each with descriptors, would otherwise pin the daemon's descriptors.
	maxHeldFDs = 2 * maxFDs
)

// ErrTooManyFDs is returned when a client passes more descriptors than any
// frame takes before its frame is whole; they are closed.
var ErrTooManyFDs = errors.New("too many descriptors passed with one frame")

// fdTag is a set of descriptors and the stream offset of the last byte
// received with them. A client sends a PUT_FD frame in one sendmsg with the
// descriptor on its first byte, and the kernel never returns bytes past
// such a message in the same call, so that last byte lies in the frame the
// descriptors came with.
type fdTag struct {
	at  int64
	fds []int
}

// NewFrameReader reads from sock.
func NewFrameReader(sock *Socket, opt ReaderOptions) *FrameReader {
	return &FrameReader{sock: sock, opt: opt, rbuf: make([]byte, ReadBufSize), oob: make([]byte, unix.CmsgSpace(maxFDs*4))}
}

// recv receives into p. The first wait for a new frame may poll before
// sleeping; the rest sleep until bytes arrive or the deadline: the idle
// timeout between frames, the frame timeout within one.
func (r *FrameReader) recv(p []byte, start bool) (int, error) {
	n, oobn, err := 0, 0, error(unix.EAGAIN)
	var window time.Duration
	if start && r.opt.Poller != nil {
		var ok bool
		if window, ok = r.opt.Poller.Begin(); ok {
			n, oobn, err = r.sock.Spin(p, r.oob, window)
			r.opt.Poller.End(err != unix.EAGAIN)
		}
	}
	var t0, deadline time.Time
	for err == unix.EAGAIN {
		if n, oobn, err = r.sock.Recvmsg(p, r.oob); err != unix.EAGAIN {
			break
		}
		if deadline.IsZero() {
			t0 = time.Now()
			if start {
				deadline = t0.Add(r.opt.IdleTimeout)
			} else {
				if r.frameDeadline.IsZero() {
					r.frameDeadline = t0.Add(r.opt.FrameTimeout)
				}
				deadline = r.frameDeadline
			}
		}
		if werr := r.sock.Wait(false, deadline); werr != nil {
			return 0, werr
		}
	}
	if start && !t0.IsZero() && r.opt.Poller != nil {
		r.opt.Poller.Slept(time.Since(t0))
	}
	if err != nil {
		return 0, err
	}
	if oobn > 0 {
		if fds := parseRights(r.oob[:oobn]); len(fds) > 0 {
			r.tags = append(r.tags, fdTag{at: r.recvd + int64(n) - 1, fds: fds})
			if r.pending() > maxHeldFDs {
				r.Close()
				return 0, ErrTooManyFDs
			}
		}
	}
	if n == 0 {
		return 0, io.EOF
	}
	r.recvd += int64(n)
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

// CloseAll closes descriptors.
func CloseAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// fill receives more bytes into the read buffer.
func (r *FrameReader) fill(start bool) error {
	if r.rend == len(r.rbuf) {
		r.shift()
	}
	n, err := r.recv(r.rbuf[r.rend:], start)
	r.rend += n
	return err
}

// shift moves the unread bytes to the front of the read buffer.
func (r *FrameReader) shift() {
	r.rend = copy(r.rbuf, r.rbuf[r.rpos:r.rend])
	r.rpos = 0
}

// Read reads one frame and the descriptors sent with it, which the caller
// closes. The body stays valid until the next call (it lies in the read
// buffer, or in a buffer from Large). On an error the header is what was
// read of the frame, if anything.
func (r *FrameReader) Read() (Header, []byte, []int, error) {
	r.frameDeadline = time.Time{}
	for r.rend-r.rpos < frameHead {
		if err := r.fill(r.rend == r.rpos); err != nil {
			if r.rend > r.rpos && err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return Header{}, nil, nil, err
		}
		// A length too short for a header is refused without waiting for more.
		if r.rend-r.rpos >= 4 && binary.LittleEndian.Uint32(r.rbuf[r.rpos:]) < HeaderSize {
			return Header{}, nil, r.claim(r.recvd), ErrShortFrame
		}
	}
	length := binary.LittleEndian.Uint32(r.rbuf[r.rpos:])
	if length < HeaderSize {
		return Header{}, nil, r.claim(r.recvd), ErrShortFrame
	}
	h := DecodeHeader(r.rbuf[r.rpos+4 : r.rpos+frameHead])
	if int64(length) > int64(r.opt.MaxFrame) {
		return h, nil, r.claim(r.recvd), ErrFrameTooLarge
	}
	total := 4 + int(length)
	if total <= len(r.rbuf) {
		if r.rpos+total > len(r.rbuf) {
			r.shift()
		}
		for r.rend-r.rpos < total {
			if err := r.fill(false); err != nil {
				return h, nil, r.claim(r.recvd), unexpected(err)
			}
		}
		body := r.rbuf[r.rpos+frameHead : r.rpos+total : r.rpos+total]
		r.rpos += total
		return h, body, r.claim(r.recvd - int64(r.rend-r.rpos)), nil
	}
	// A body larger than the read buffer is taken from the owner's budget
	// before any of it is read: the client's sends wait meanwhile.
	if r.frameDeadline.IsZero() {
		r.frameDeadline = time.Now().Add(r.opt.FrameTimeout)
	}
	body, err := r.opt.Large(total-frameHead, r.frameDeadline)
	if err != nil {
		return h, nil, r.claim(r.recvd), err
	}
	got := copy(body, r.rbuf[r.rpos+frameHead:r.rend])
	r.rpos, r.rend = 0, 0
	for got < len(body) {
		n, err := r.recv(body[got:], false)
		if err != nil {
			return h, nil, r.claim(r.recvd), unexpected(err)
		}
		got += n
	}
	return h, body, r.claim(r.recvd), nil
}

// claim takes the descriptors that came with bytes before stream offset end.
func (r *FrameReader) claim(end int64) []int {
	fds := r.fds[:0]
	i := 0
	for ; i < len(r.tags) && r.tags[i].at < end; i++ {
		fds = append(fds, r.tags[i].fds...)
	}
	r.tags = append(r.tags[:0], r.tags[i:]...)
	r.fds = fds
	return fds
}

// Buffered tells whether a whole frame has been received and not yet read.
func (r *FrameReader) Buffered() bool {
	if r.rend-r.rpos < frameHead {
		return false
	}
	return r.rend-r.rpos >= 4+int(binary.LittleEndian.Uint32(r.rbuf[r.rpos:]))
}

// pending counts the descriptors received and not claimed by a frame.
func (r *FrameReader) pending() int {
	n := 0
	for _, t := range r.tags {
		n += len(t.fds)
	}
	return n
}

// Close closes the descriptors received and not claimed by a frame.
func (r *FrameReader) Close() {
	for _, t := range r.tags {
		CloseAll(t.fds)
	}
	r.tags = nil
}
