// Package remote is the foundation of the remote cold tier (issue 32): a
// small RESP2/RESP3 client for a Valkey (or Redis 7) cluster, and a block
// store on top of it that seals every block with AES-GCM. It is not wired
// into the daemon yet.
package remote

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Value is one decoded RESP2 or RESP3 reply.
type Value struct {
	Kind  byte    // the RESP type byte: '+', '-', ':', '$', '*', '_', '%', ...
	Null  bool    // RESP2 $-1 / *-1, RESP3 '_'
	Str   []byte  // simple and bulk strings, error text, verbatim, double, big number
	Int   int64   // integers; booleans as 0 or 1
	Elems []Value // arrays, sets, pushes; maps flattened as key, value, ...
}

// ServerError is an error reply ("-ERR ..." or RESP3 "!").
type ServerError string

func (e ServerError) Error() string { return "server: " + string(e) }

// Code is the error's first word (MOVED, ASK, WRONGPASS, ...).
func (e ServerError) Code() string {
	s := string(e)
	if i := strings.IndexByte(s, ' '); i >= 0 {
		return s[:i]
	}
	return s
}

// Err returns the reply as an error when it is an error reply.
func (v Value) Err() error {
	if v.Kind == '-' || v.Kind == '!' {
		return ServerError(v.Str)
	}
	return nil
}

// Limits bound what one reply may make us hold, so a broken or hostile
// server cannot exhaust memory: a claimed length is checked before anything
// is allocated, and aggregates grow as their elements arrive, not at the
// count they claim.
type Limits struct {
	MaxBulk  int // largest bulk string
	MaxElems int // most elements in one aggregate
	MaxDepth int // deepest nesting
	MaxReply int // bytes charged to one reply in all (strings + 16 per element)
}

// DefaultLimits fit blocks of up to 16 MiB and cluster topology replies.
var DefaultLimits = Limits{MaxBulk: 16<<20 + 4096, MaxElems: 1 << 16, MaxDepth: 8, MaxReply: 64 << 20}

// ErrProtocol marks a malformed or over-limit reply; the connection it came
// from is closed, since its framing can no longer be trusted.
var ErrProtocol = errors.New("remote: protocol error")

func protoErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, a...))
}

type reader struct {
	br     *bufio.Reader
	lim    Limits
	budget int
}

// readBufSize is also the longest header or simple-string line accepted.
const readBufSize = 64 << 10

func newReader(r io.Reader, lim Limits) *reader {
	return &reader{br: bufio.NewReaderSize(r, readBufSize), lim: lim}
}

// next reads one reply, skipping RESP3 out-of-band pushes (we subscribe to
// nothing, so any push is not a reply to our commands).
func (r *reader) next() (Value, error) {
	for {
		r.budget = r.lim.MaxReply
		v, err := r.read(0)
		if err != nil || v.Kind != '>' {
			return v, err
		}
	}
}

func (r *reader) charge(n int) error {
	if n < 0 || n > r.budget {
		return protoErr("reply larger than %d bytes", r.lim.MaxReply)
	}
	r.budget -= n
	return nil
}

func (r *reader) line() ([]byte, error) {
	b, err := r.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		return nil, protoErr("line longer than %d bytes", readBufSize)
	}
	if err != nil {
		return nil, err
	}
	if len(b) < 3 || b[len(b)-2] != '\r' {
		return nil, protoErr("bad line %q", trunc(b))
	}
	return b[:len(b)-2], nil
}

func trunc(b []byte) []byte {
	if len(b) > 32 {
		return b[:32]
	}
	return b
}

// parseInt is strict: an optional '-', then 1 to 18 digits.
func parseInt(b []byte) (int64, error) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 {
		return 0, protoErr("bad integer %q", trunc(b))
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, protoErr("bad integer %q", trunc(b))
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, nil
}

func (r *reader) read(depth int) (Value, error) {
	l, err := r.line()
	if err != nil {
		return Value{}, err
	}
	v := Value{Kind: l[0]}
	rest := l[1:]
	switch v.Kind {
	case '+', '-', ',', '(':
		if len(rest) > r.lim.MaxBulk { // a line is a string too: the same bound
			return v, protoErr("line of %d bytes (limit %d)", len(rest), r.lim.MaxBulk)
		}
		if err := r.charge(len(rest)); err != nil {
			return v, err
		}
		v.Str = bytes.Clone(rest)
	case ':':
		v.Int, err = parseInt(rest)
	case '_':
		v.Null = true
	case '#':
		switch string(rest) {
		case "t":
			v.Int = 1
		case "f":
		default:
			err = protoErr("bad boolean %q", trunc(rest))
		}
	case '$', '!', '=':
		var n int64
		if n, err = parseInt(rest); err != nil {
			return v, err
		}
		if n == -1 && v.Kind == '$' {
			v.Null = true
			return v, nil
		}
		if n < 0 || n > int64(r.lim.MaxBulk) {
			return v, protoErr("bulk of %d bytes (limit %d)", n, r.lim.MaxBulk)
		}
		if err := r.charge(int(n)); err != nil {
			return v, err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r.br, buf); err != nil {
			return v, err
		}
		if buf[n] != '\r' || buf[n+1] != '\n' {
			return v, protoErr("bulk not followed by CRLF")
		}
		v.Str = buf[:n:n]
		if v.Kind == '=' { // verbatim: "txt:" then the text
			if n < 4 || buf[3] != ':' {
				return v, protoErr("bad verbatim string")
			}
			v.Str = v.Str[4:]
		}
	case '*', '~', '>', '%', '|':
		var n int64
		if n, err = parseInt(rest); err != nil {
			return v, err
		}
		if n == -1 && v.Kind == '*' {
			v.Null = true
			return v, nil
		}
		if v.Kind == '%' || v.Kind == '|' {
			n *= 2
		}
		if n < 0 || n > int64(r.lim.MaxElems) {
			return v, protoErr("aggregate of %d elements (limit %d)", n, r.lim.MaxElems)
		}
		if depth+1 > r.lim.MaxDepth {
			return v, protoErr("nesting deeper than %d", r.lim.MaxDepth)
		}
		if err := r.charge(16 * int(n)); err != nil {
			return v, err
		}
		v.Elems = make([]Value, 0, min(n, 64))
		for range n {
			e, err := r.read(depth + 1)
			if err != nil {
				return v, err
			}
			v.Elems = append(v.Elems, e)
		}
		if v.Kind == '|' { // an attribute annotates the reply that follows it
			return r.read(depth)
		}
	default:
		err = protoErr("unknown type byte %q", v.Kind)
	}
	return v, err
}

// appendCmd encodes one command as a RESP array of bulk strings.
func appendCmd(dst []byte, args [][]byte) []byte {
	dst = append(dst, '*')
	dst = strconv.AppendInt(dst, int64(len(args)), 10)
	dst = append(dst, '\r', '\n')
	for _, a := range args {
		dst = append(dst, '$')
		dst = strconv.AppendInt(dst, int64(len(a)), 10)
		dst = append(dst, '\r', '\n')
		dst = append(dst, a...)
		dst = append(dst, '\r', '\n')
	}
	return dst
}

// writeCmd writes one command; large arguments go straight to w, not
// through a copy.
func writeCmd(w *bufio.Writer, scratch []byte, args [][]byte) ([]byte, error) {
	scratch = append(scratch[:0], '*')
	scratch = strconv.AppendInt(scratch, int64(len(args)), 10)
	scratch = append(scratch, '\r', '\n')
	for _, a := range args {
		scratch = append(scratch, '$')
		scratch = strconv.AppendInt(scratch, int64(len(a)), 10)
		scratch = append(scratch, '\r', '\n')
		if len(a) > 4096 {
			if _, err := w.Write(scratch); err != nil {
				return scratch, err
			}
			if _, err := w.Write(a); err != nil {
				return scratch, err
			}
			scratch = scratch[:0]
		} else {
			scratch = append(scratch, a...)
		}
		scratch = append(scratch, '\r', '\n')
	}
	_, err := w.Write(scratch)
	return scratch, err
}

func args(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i, a := range s {
		out[i] = []byte(a)
	}
	return out
}
