package ipc

import (
	"encoding/binary"
	"io"
	"time"

	"golang.org/x/sys/unix"
)

// The client's reading side: frames received into the connection's buffer
// (or memory of their own when large), and the refusal of a connection the
// daemon did not admit.

// readFrame reads the next response. A body that fits the read buffer is
// returned in place (owned false: valid until the next read); a larger one
// is received straight into memory of its own.
func (cn *conn) readFrame() (Header, []byte, bool, error) {
	if cn.big == nil {
		for cn.rend-cn.rpos < 4+HeaderSize {
			if err := cn.fill(); err != nil {
				return Header{}, nil, false, err
			}
		}
		length := binary.LittleEndian.Uint32(cn.rbuf[cn.rpos:])
		if length < HeaderSize {
			return Header{}, nil, false, ErrShortFrame
		}
		h := DecodeHeader(cn.rbuf[cn.rpos+4:])
		total := 4 + int(length)
		if total <= len(cn.rbuf) {
			if cn.rpos+total > len(cn.rbuf) {
				cn.shift()
			}
			for cn.rend-cn.rpos < total {
				if err := cn.fill(); err != nil {
					return Header{}, nil, false, err
				}
			}
			body := cn.rbuf[cn.rpos+4+HeaderSize : cn.rpos+total : cn.rpos+total]
			cn.rpos += total
			return h, body, false, nil
		}
		cn.big, cn.bigHdr = make([]byte, int(length)-HeaderSize), h
		cn.bigGot = copy(cn.big, cn.rbuf[cn.rpos+4+HeaderSize:cn.rend])
		cn.rpos, cn.rend = 0, 0
	}
	for cn.bigGot < len(cn.big) {
		n, err := cn.recv(cn.big[cn.bigGot:])
		if err != nil {
			return Header{}, nil, false, err
		}
		cn.bigGot += n
	}
	h, body := cn.bigHdr, cn.big
	cn.big = nil
	return h, body, true, nil
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
func refused(h Header, body []byte) error {
	if h.Op != 0 || h.ID != 0 || h.Status == OK {
		return nil
	}
	msg, _ := DecodeString(body)
	return &Error{Code: h.Status, Msg: msg}
}

// refusal looks for a refusal the daemon sent before closing, after a
// send to it failed: the frame may still wait in the socket.
func (cn *conn) refusal() error {
	buf := make([]byte, 4+HeaderSize+2+1024)
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
		if got >= 4+HeaderSize && got >= 4+int(binary.LittleEndian.Uint32(buf)) {
			break
		}
	}
	if got < 4+HeaderSize {
		return nil
	}
	length := int(binary.LittleEndian.Uint32(buf))
	if length < HeaderSize || 4+length > got {
		return nil
	}
	return refused(DecodeHeader(buf[4:]), buf[4+HeaderSize:4+length])
}
