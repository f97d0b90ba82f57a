// Package ipc is s4d's wire protocol (see PROTOCOL.md): frames, messages,
// status codes, and the socket both ends use. The Go client is package
// client. It imports nothing else of s4d so that clients stay small.
package ipc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// DefaultSocketPath is where the daemon listens unless told otherwise.
const DefaultSocketPath = "/run/s4d/s4d.sock"

// Version is the protocol version this package speaks.
const Version = 1

// HeaderSize is the fixed frame header after the length word.
const HeaderSize = 16

// Default limits; the daemon announces its own in HELLO.
const (
	DefaultMaxFrame      = 80 << 20
	DefaultMaxBatchPages = 16384
	MaxPoolName          = 128
	MaxPageSize          = 65536 // the largest page size a daemon may use
)

// Op is a request kind.
type Op uint8

const (
	OpHello   Op = 1
	OpPut     Op = 2
	OpGet     Op = 3
	OpDel     Op = 4
	OpInspect Op = 5
	OpStats   Op = 6
	OpPools   Op = 7
	OpCompact Op = 8
	OpPutFD   Op = 9  // PUT with the pages in a memfd passed alongside
	OpGetFD   Op = 10 // GET with the pages written into a memfd passed alongside
)

var opNames = map[Op]string{OpHello: "HELLO", OpPut: "PUT", OpGet: "GET", OpDel: "DEL",
	OpInspect: "INSPECT", OpStats: "STATS", OpPools: "POOLS", OpCompact: "COMPACT", OpPutFD: "PUT_FD", OpGetFD: "GET_FD"}

func (o Op) String() string {
	if s, ok := opNames[o]; ok {
		return s
	}
	return fmt.Sprintf("OP(%d)", uint8(o))
}

// FlagResponse marks a frame sent by the daemon.
const FlagResponse uint32 = 1

// Header is the fixed part of every frame.
type Header struct {
	Version uint8
	Op      Op
	Status  Code   // 0 in requests
	Flags   uint32 // FlagResponse; other bits reserved, zero
	ID      uint64 // chosen by the client, echoed in the response
}

// ErrFrameTooLarge is returned by ReadFrame for a length over the limit.
var ErrFrameTooLarge = errors.New("frame too large")

// ErrShortFrame is returned for a length below the header size.
var ErrShortFrame = errors.New("frame shorter than its header")

// ReadFrame reads one frame. buf is reused when large enough. On
// ErrFrameTooLarge the header has still been read and is returned, so the
// daemon can answer it before closing.
func ReadFrame(r io.Reader, limit int, buf []byte) (Header, []byte, error) {
	var pre [4 + HeaderSize]byte
	if _, err := io.ReadFull(r, pre[:4]); err != nil {
		return Header{}, nil, err
	}
	n := binary.LittleEndian.Uint32(pre[:4])
	if n < HeaderSize {
		return Header{}, nil, ErrShortFrame
	}
	if _, err := io.ReadFull(r, pre[4:]); err != nil {
		return Header{}, nil, unexpected(err)
	}
	h := DecodeHeader(pre[4:])
	if int64(n) > int64(limit) {
		return h, nil, ErrFrameTooLarge
	}
	want := int(n) - HeaderSize
	if cap(buf) >= want {
		body := buf[:want]
		if _, err := io.ReadFull(r, body); err != nil {
			return h, nil, unexpected(err)
		}
		return h, body, nil
	}
	// The length is only a claim: the buffer grows with the bytes that
	// arrive, so a peer that announces 80 MiB and sends three bytes costs
	// no more than those.
	body := buf[:0]
	for len(body) < want {
		if len(body) == cap(body) {
			body = slices.Grow(body, min(want-len(body), max(len(body), growStep)))
		}
		k, err := r.Read(body[len(body):min(want, cap(body))])
		body = body[:len(body)+k]
		if err != nil && len(body) < want {
			return h, nil, unexpected(err)
		}
	}
	return h, body, nil
}

// growStep is the first allocation for a body larger than the caller's
// buffer; it then doubles with the bytes received.
const growStep = 64 << 10

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// DecodeHeader parses the HeaderSize bytes after a frame's length word.
func DecodeHeader(b []byte) Header {
	return Header{
		Version: b[0],
		Op:      Op(b[1]),
		Status:  Code(binary.LittleEndian.Uint16(b[2:])),
		Flags:   binary.LittleEndian.Uint32(b[4:]),
		ID:      binary.LittleEndian.Uint64(b[8:]),
	}
}

// AppendHeader appends the length word and header for a body of bodyLen bytes.
func AppendHeader(dst []byte, h Header, bodyLen int) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(HeaderSize+bodyLen))
	dst = append(dst, h.Version, byte(h.Op))
	dst = binary.LittleEndian.AppendUint16(dst, uint16(h.Status))
	dst = binary.LittleEndian.AppendUint32(dst, h.Flags)
	return binary.LittleEndian.AppendUint64(dst, h.ID)
}

// Frame builds a complete frame.
func Frame(h Header, body []byte) []byte {
	return append(AppendHeader(make([]byte, 0, 4+HeaderSize+len(body)), h, len(body)), body...)
}
