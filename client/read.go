package client

import (
	"encoding/binary"
	"io"
	"time"

	"github.com/s4d-project/s4d/ipc"
	"golang.org/x/sys/unix"
)

// The client's reading side: frames received into the connection's buffer
// (or memory of their own when large), and the refusal of a connection the
// daemon did not admit.

// readFrame reads the next response. A body that fits the read buffer is
// returned in place (owned false: valid until the next read); a larger one
// is received straight into memory of its own.
func (cn *conn) readFrame() (ipc.Header, []byte, bool, error) {
	if cn.big == nil {
		for cn.rend-cn.rpos < 4+ipc.HeaderSize {
			if err := cn.fill(); err != nil {
				return ipc.Header{}, nil, false, err
			}
		}
		length := binary.LittleEndian.Uint32(cn.rbuf[cn.rpos:])
		if length < ipc.HeaderSize {
			return ipc.Header{}, nil, false, ipc.ErrShortFrame
		}
		h := ipc.DecodeHeader(cn.rbuf[cn.rpos+4:])
		total := 4 + int(length)
		if total <= len(cn.rbuf) {
			if cn.rpos+total > len(cn.rbuf) {
				cn.shift()
			}
			for cn.rend-cn.rpos < total {
				if err := cn.fill(); err != nil {
					return ipc.Header{}, nil, false, err
				}
			}
			body := cn.rbuf[cn.rpos+4+ipc.HeaderSize : cn.rpos+total : cn.rpos+total]
			cn.rpos += total
			return h, body, false, nil
		}
		size := int(length) - ipc.HeaderSize
		cn.bigHdr, cn.bigSize, cn.bigGot, cn.bigSink = h, size, 0, cn.sinkFor(h, size)
		if cn.bigSink == nil {
			cn.big = make([]byte, size)
		} else {
			cn.big = cn.bigSink.head
		}
		cn.rpos += 4 + ipc.HeaderSize
		for cn.rpos < cn.rend && cn.bigGot < size {
			n := copy(cn.bodyPart(), cn.rbuf[cn.rpos:cn.rend])
			cn.rpos += n
			cn.bigGot += n
		}
		cn.rpos, cn.rend = 0, 0
	}
	for {
		p := cn.bodyPart()
		if len(p) == 0 {
			break
		}
		n, err := cn.recv(p)
		if err != nil {
			return ipc.Header{}, nil, false, err
		}
		cn.bigGot += n
	}
	h, body := cn.bigHdr, cn.big
	if s := cn.bigSink; s != nil {
		s.got, s.done = cn.bigGot-len(s.head), true
	}
	cn.big, cn.bigSink = nil, nil
	return h, body, true, nil
}

// sink is where GetInto wants its reply: the page size and codes in head,
// the pages received straight into dst, back to back.
type sink struct {
	head []byte // 4 + one byte a key
	dst  []byte
	got  int  // bytes received into dst
	done bool // the reply came this way
}

// sinkFor returns the reader's own GetInto destination when the reply h,
// of size bytes, can go there: a successful GET whose pages fit.
func (cn *conn) sinkFor(h ipc.Header, size int) *sink {
	if cn.want == nil || cn.want.sink == nil || h.ID != cn.wantID || h.Op != ipc.OpGet || h.Status != ipc.OK {
		return nil
	}
	s := cn.want.sink
	if size < len(s.head) || size-len(s.head) > len(s.dst) {
		return nil
	}
	return s
}

// dropSink sends the rest of a body being sunk into a buffer of its own:
// its request was withdrawn, and dst is its caller's again.
func (cn *conn) dropSink() {
	if cn.bigSink != nil {
		cn.big, cn.bigSink = make([]byte, cn.bigSize), nil
	}
}

// bodyPart is the memory the rest of the big body is received into: the
// body itself, or, sunk, what is left of the head and then of dst.
func (cn *conn) bodyPart() []byte {
	size := cn.bigSize
	if cn.bigSink == nil {
		return cn.big[cn.bigGot:size]
	}
	h := len(cn.bigSink.head)
	if cn.bigGot < h {
		return cn.bigSink.head[cn.bigGot:]
	}
	return cn.bigSink.dst[cn.bigGot-h : size-h]
}

func (cn *conn) shift() {
	cn.rend = copy(cn.rbuf, cn.rbuf[cn.rpos:cn.rend])
	cn.rpos = 0
}

func (cn *conn) fill() error {
	if cn.rend == len(cn.rbuf) {
		cn.shift()
	}
	n, err := cn.recv(cn.rbuf[cn.rend:])
	cn.rend += n
	return err
}

// recv receives into p, polling first for up to the poll window when
// readFor armed it.
func (cn *conn) recv(p []byte) (int, error) {
	n, err := 0, error(unix.EAGAIN)
	if cn.spinArmed {
		cn.spinArmed = false
		n, _, err = cn.sock.Spin(p, nil, cn.poll)
		cn.misses <<= 1
		if err == unix.EAGAIN {
			cn.misses |= 1
		}
	}
	for err == unix.EAGAIN {
		if n, _, err = cn.sock.Recvmsg(p, nil); err != unix.EAGAIN {
			break
		}
		if werr := cn.sock.Wait(false, time.Time{}); werr != nil {
			return 0, werr
		}
	}
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// refused turns the frame a daemon sends a connection it does not admit
// (op 0, id 0, an error status) into its error.
func refused(h ipc.Header, body []byte) error {
	if h.Op != 0 || h.ID != 0 || h.Status == ipc.OK {
		return nil
	}
	msg, _ := ipc.DecodeString(body)
	return &ipc.Error{Code: h.Status, Msg: msg}
}

// refusal looks for a refusal the daemon sent before closing, after a
// send to it failed: the frame may still wait in the socket.
func (cn *conn) refusal() error {
	buf := make([]byte, 4+ipc.HeaderSize+2+1024)
	got := 0
	deadline := time.Now().Add(50 * time.Millisecond)
	for got < len(buf) {
		n, _, err := cn.sock.Recvmsg(buf[got:], nil)
		if err == unix.EAGAIN {
			if cn.sock.Wait(false, deadline) != nil {
				break
			}
			continue
		}
		if err != nil || n == 0 {
			break
		}
		got += n
		if got >= 4+ipc.HeaderSize && got >= 4+int(binary.LittleEndian.Uint32(buf)) {
			break
		}
	}
	if got < 4+ipc.HeaderSize {
		return nil
	}
	length := int(binary.LittleEndian.Uint32(buf))
	if length < ipc.HeaderSize || 4+length > got {
		return nil
	}
	return refused(ipc.DecodeHeader(buf[4:]), buf[4+ipc.HeaderSize:4+length])
}
