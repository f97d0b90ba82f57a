// Package client is s4d's Go client: requests pipelined over one Unix socket
// connection, replies received into the caller's memory, page buffers shared
// with the daemon as sealed memfds, and regions. The wire format is package ipc.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"net"
	"os"
	"sync"
	"time"

	"github.com/s4d-project/s4d/ipc"
	"golang.org/x/sys/unix"
)

// DefaultSocket returns $S4D_SOCKET, or ipc.DefaultSocketPath.
func DefaultSocket() string {
	if s := os.Getenv("S4D_SOCKET"); s != "" {
		return s
	}
	return ipc.DefaultSocketPath
}

// DefaultPollWait is how long a lone request polls for its response
// before sleeping, unless Client.PollWait says otherwise.
const DefaultPollWait = 50 * time.Microsecond

// ErrConnLost is returned for requests in flight when the connection breaks.
var ErrConnLost = errors.New("connection to s4d lost")

// Client talks to the daemon over one connection, dialled on first use and
// again after it breaks. The zero value uses DefaultSocket. A Client is safe
// for concurrent use; requests from many goroutines are pipelined.
type Client struct {
	Socket string // "" = DefaultSocket()
	Name   string // sent in HELLO; "" = "s4d-go"
	// PollWait is how long a request that is alone in flight polls the
	// socket for its response before the goroutine sleeps: waking a
	// sleeping thread can cost more than the daemon takes to answer a
	// small request. It polls only while recent answers came within that
	// time. 0 means DefaultPollWait; negative, never.
	PollWait time.Duration

	mu sync.Mutex
	cn *conn
}

// conn is one connection. There is no reader goroutine: a goroutine that
// waits for a response reads the socket itself while it holds rtok, and
// hands the responses of others to them; when its own arrives it passes
// the reading on. A lone request is thus answered without any hand-off
// between goroutines.
type conn struct {
	sock  *ipc.Socket
	hello *ipc.Hello
	poll  time.Duration

	wmu    sync.Mutex
	wbuf   []byte // a request's header and head, built under wmu
	closed bool   // the socket is closed: no more writes (under wmu)

	mu      sync.Mutex
	pending map[uint64]*call
	next    uint64
	err     error

	rtok chan struct{} // full while a goroutine reads the socket
	// Reading, by the holder of rtok only.
	rbuf       []byte
	rpos, rend int
	big        []byte // a body too large for rbuf, being received
	bigGot     int
	bigSize    int
	bigHdr     ipc.Header
	bigSink    *sink // the body goes to the reader's own GetInto destination instead
	want       *call // the reader's own request, and its id
	wantID     uint64
	// Polling pays only for small requests, and only while answers come
	// within the window: when more than half of the last 16 polls found
	// nothing, lone requests sleep straight away, but for every 16th.
	spinArmed bool
	misses    uint16 // the last 16 polls, newest in bit 0: 1 = found nothing
	idle      int    // lone quick requests since the last poll
}

// call is one request waiting for its response.
type call struct {
	ch   chan result // a response read by another goroutine, or a failure
	sink *sink       // GetInto's destination, filled by the caller's own read
}

type result struct {
	h    ipc.Header
	body []byte
	err  error
}

var calls = sync.Pool{New: func() any { return &call{ch: make(chan result, 1)} }}

func putCall(cl *call) {
	cl.sink = nil
	calls.Put(cl)
}

const (
	clientRbuf = 64 << 10 // responses up to this size are read in place
	inlinePage = 16 << 10 // pages up to this size are copied into the request's one write
	quickPages = 8        // requests of up to this many pages may poll for their answer
)

func (c *Client) socket() string {
	if c.Socket != "" {
		return c.Socket
	}
	return DefaultSocket()
}

// Close closes the connection; a later call dials again.
func (c *Client) Close() error {
	c.mu.Lock()
	cn := c.cn
	c.cn = nil
	c.mu.Unlock()
	if cn == nil {
		return nil
	}
	cn.fail(errors.New("closed"))
	return nil
}

func (c *Client) conn(ctx context.Context) (*conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cn != nil {
		if c.cn.usable() {
			return c.cn, nil
		}
		c.cn.fail(errors.New("closed by the daemon"))
		c.cn = nil
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", c.socket())
	if err != nil {
		return nil, dialError(c.socket(), err)
	}
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		nc.Close()
		return nil, fmt.Errorf("%s is not a Unix socket", c.socket())
	}
	cn, err := newConn(uc, c.PollWait)
	if err != nil {
		return nil, err
	}
	name := c.Name
	if name == "" {
		name = "s4d-go"
	}
	body, err := cn.call(ctx, ipc.OpHello, ipc.EncodeHelloRequest(name))
	if err == nil {
		cn.hello, err = ipc.DecodeHello(body)
	}
	if err != nil {
		cn.fail(err)
		return nil, fmt.Errorf("hello: %w", err)
	}
	c.cn = cn
	return cn, nil
}

func newConn(nc *net.UnixConn, poll time.Duration) (*conn, error) {
	sock, err := ipc.NewSocket(nc, -1)
	if err != nil {
		nc.Close()
		return nil, err
	}
	if poll == 0 {
		poll = DefaultPollWait
	}
	return &conn{sock: sock, poll: poll, pending: map[uint64]*call{},
		rtok: make(chan struct{}, 1), rbuf: make([]byte, clientRbuf)}, nil
}

// usable says whether the connection can take a request. With no reader
// goroutine, nobody notices at once that the daemon closed an idle
// connection (or restarted), so a connection with nothing in flight is
// checked first, with a peek that never waits, and the request goes out
// on a fresh one instead of failing. Checked every time, not only after
// some idle time: a restart can come within milliseconds of an answer.
func (cn *conn) usable() bool {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.err != nil {
		return false
	}
	if len(cn.pending) > 0 {
		return true
	}
	var b [1]byte
	n, _, perr := unix.Recvfrom(cn.sock.Fd(), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	if n == 0 && perr == nil {
		cn.err = fmt.Errorf("%w: closed by the daemon", ErrConnLost)
		return false
	}
	return true
}

// unwrapOp drops net.OpError's repetition of the socket path.
func unwrapOp(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}

// fail breaks the connection: every request waiting gets err.
func (cn *conn) fail(err error) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	first := cn.err == nil
	if first && cn.hello == nil && (errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNRESET)) {
		// The daemon closed the connection before the hello went out:
		// it may have said why first. Nothing else reads the socket yet.
		if r := cn.refusal(); r != nil {
			err = r
		}
	}
	if first {
		cn.err = fmt.Errorf("%w: %w", ErrConnLost, err)
	}
	for id, cl := range cn.pending {
		cl.ch <- result{err: cn.err}
		delete(cn.pending, id)
	}
	if first {
		cn.sock.Shutdown() // a goroutine reading it sees the end
		go cn.closeWhenIdle()
	}
}

// closeWhenIdle closes the broken connection's socket once nobody reads
// or writes it: a descriptor closed under a call in progress could be
// reused by another file meanwhile. It keeps the reading token, so no one
// reads again.
func (cn *conn) closeWhenIdle() {
	cn.rtok <- struct{}{}
	cn.wmu.Lock()
	cn.closed = true
	cn.sock.Close()
	cn.wmu.Unlock()
}

// roundTrip sends one request with write (under the write lock; it gets
// the request id) and waits for the response, which it hands to decode.
// The body given to decode may lie in the connection's read buffer: it is
// valid during the call only, unless owned. quick says the daemon should
// answer within microseconds (a few pages), so polling for it may pay.
func (cn *conn) roundTrip(ctx context.Context, quick bool, write func(id uint64) error, decode func(h ipc.Header, body []byte, owned bool) error) error {
	return cn.roundTripInto(ctx, quick, nil, write, decode)
}

// roundTripInto is roundTrip with a GET reply received straight into
// s.dst when the caller reads it itself.
func (cn *conn) roundTripInto(ctx context.Context, quick bool, s *sink, write func(id uint64) error, decode func(h ipc.Header, body []byte, owned bool) error) error {
	cl := calls.Get().(*call)
	cl.sink = s
	cn.mu.Lock()
	if cn.err != nil {
		err := cn.err
		cn.mu.Unlock()
		putCall(cl)
		return err
	}
	cn.next++
	id := cn.next
	cn.pending[id] = cl
	alone := len(cn.pending) == 1
	cn.mu.Unlock()

	cn.wmu.Lock()
	err := write(id)
	cn.wmu.Unlock()
	if err != nil {
		cn.fail(err)
		return (<-cl.ch).err
	}
	for {
		select {
		case r := <-cl.ch:
			putCall(cl)
			if r.err != nil {
				return r.err
			}
			return respond(r.h, r.body, true, decode)
		case cn.rtok <- struct{}{}:
			select {
			case r := <-cl.ch: // answered before we took over the reading
				<-cn.rtok
				putCall(cl)
				if r.err != nil {
					return r.err
				}
				return respond(r.h, r.body, true, decode)
			default:
			}
			h, body, owned, err := cn.readFor(ctx, id, cl, alone && quick)
			if err == nil {
				err = respond(h, body, owned, decode) // before the buffer can be read into again
			}
			<-cn.rtok
			if err == errCancelled {
				return ctx.Err()
			}
			putCall(cl)
			return err
		case <-ctx.Done():
			cn.mu.Lock()
			mine := cn.pending[id] == cl
			delete(cn.pending, id)
			cn.mu.Unlock()
			if mine {
				putCall(cl)
				return ctx.Err()
			}
			// Taken by a reader just now: its answer is on the way.
			r := <-cl.ch
			if r.err != nil {
				return r.err
			}
			return respond(r.h, r.body, true, decode)
		}
	}
}

func respond(h ipc.Header, body []byte, owned bool, decode func(ipc.Header, []byte, bool) error) error {
	if h.Status != ipc.OK {
		msg, _ := ipc.DecodeString(body)
		return &ipc.Error{Code: h.Status, Msg: msg}
	}
	return decode(h, body, owned)
}

var errCancelled = errors.New("cancelled")

// readFor reads responses, as the holder of rtok, until the one for id;
// those of other requests go to their callers. It returns early when ctx
// ends (errCancelled, with the request withdrawn) or the connection
// breaks (the error every waiter got). A lone quick request may poll first.
func (cn *conn) readFor(ctx context.Context, id uint64, cl *call, poll bool) (ipc.Header, []byte, bool, error) {
	cn.want, cn.wantID = cl, id
	defer func() { cn.want = nil }()
	cn.spinArmed = false
	if poll && cn.poll > 0 {
		if bits.OnesCount16(cn.misses) > 8 && cn.idle < 16 {
			cn.idle++
		} else {
			cn.idle = 0
			cn.spinArmed = true
		}
	}
	var stop func() bool
	var stopped chan struct{}
	if ctx.Done() != nil {
		// Wakes the read below when ctx ends; the frame being read is
		// kept for the next reader.
		stopped = make(chan struct{})
		stop = context.AfterFunc(ctx, func() {
			cn.sock.Interrupt()
			close(stopped)
		})
	}
	defer func() {
		if stop != nil && !stop() {
			<-stopped
			cn.sock.Resume()
		}
	}()
	for {
		h, body, owned, err := cn.readFrame()
		if err != nil {
			if ctx.Err() != nil && errors.Is(err, ipc.ErrInterrupted) {
				cn.mu.Lock()
				mine := cn.pending[id] == cl
				delete(cn.pending, id)
				cn.mu.Unlock()
				if mine {
					cn.dropSink()
					return ipc.Header{}, nil, false, errCancelled
				}
				r := <-cl.ch // failed meanwhile
				return ipc.Header{}, nil, false, r.err
			}
			cn.fail(err)
			return ipc.Header{}, nil, false, (<-cl.ch).err
		}
		if err := refused(h, body); err != nil {
			cn.fail(err)
			return ipc.Header{}, nil, false, (<-cl.ch).err
		}
		cn.mu.Lock()
		x := cn.pending[h.ID]
		delete(cn.pending, h.ID)
		cn.mu.Unlock()
		if x == cl {
			return h, body, owned, nil
		}
		if x != nil {
			if !owned {
				body = append([]byte(nil), body...)
			}
			x.ch <- result{h: h, body: body}
		}
		// else the answer to a request given up on: dropped.
	}
}

// writeFrame writes a request: head (length word, header and the body's
// first part) and then tail. Small tails are copied behind head so that
// the request goes out in one write. It runs under wmu.
func (cn *conn) writeFrame(head, tail []byte) error {
	if len(tail) <= inlinePage {
		head = append(head, tail...)
		tail = nil
	}
	cn.wbuf = head[:0]
	if cn.closed {
		return ErrConnLost
	}
	if len(tail) == 0 {
		return cn.sock.SendAll(time.Time{}, nil, head)
	}
	return cn.sock.SendAll(time.Time{}, nil, head, tail)
}

// call sends a request whose body is parts and returns the response body.
func (cn *conn) call(ctx context.Context, op ipc.Op, parts ...[]byte) ([]byte, error) {
	var out []byte
	err := cn.roundTrip(ctx, true, func(id uint64) error {
		n := 0
		for _, p := range parts {
			n += len(p)
		}
		head := ipc.AppendHeader(cn.wbuf[:0], ipc.Header{Version: ipc.Version, Op: op, ID: id}, n)
		for _, p := range parts[:max(len(parts)-1, 0)] {
			head = append(head, p...)
		}
		var tail []byte
		if len(parts) > 0 {
			tail = parts[len(parts)-1]
		}
		return cn.writeFrame(head, tail)
	}, func(_ ipc.Header, body []byte, owned bool) error {
		if !owned {
			body = append([]byte(nil), body...)
		}
		out = body
		return nil
	})
	return out, err
}

func (c *Client) call(ctx context.Context, op ipc.Op, parts ...[]byte) ([]byte, error) {
	cn, err := c.conn(ctx)
	if err != nil {
		return nil, err
	}
	return cn.call(ctx, op, parts...)
}

// Hello returns what the daemon announced when the connection opened.
func (c *Client) Hello(ctx context.Context) (*ipc.Hello, error) {
	cn, err := c.conn(ctx)
	if err != nil {
		return nil, err
	}
	return cn.hello, nil
}

// Put stores pages (len(keys) pages of equal size, back to back) under keys
// in pool, creating the pool on first use. It returns one code per page:
// OK, or e.g. CodeNoSpace for pages the memory limit refused.
func (c *Client) Put(ctx context.Context, pool string, keys []uint64, pages []byte) ([]ipc.Code, error) {
	if len(keys) == 0 || len(pages)%len(keys) != 0 {
		return nil, fmt.Errorf("put: %d bytes do not split into %d pages", len(pages), len(keys))
	}
	cn, err := c.conn(ctx)
	if err != nil {
		return nil, err
	}
	var codes []ipc.Code
	err = cn.roundTrip(ctx, len(keys) <= quickPages, func(id uint64) error {
		n := ipc.PutBodySize(pool, len(keys), len(pages)/len(keys))
		head := ipc.AppendHeader(cn.wbuf[:0], ipc.Header{Version: ipc.Version, Op: ipc.OpPut, ID: id}, n)
		head = ipc.AppendPut(head, &ipc.PutRequest{Pool: pool, PageSize: uint32(len(pages) / len(keys)), Keys: keys})
		return cn.writeFrame(head, pages)
	}, func(_ ipc.Header, body []byte, _ bool) (err error) {
		codes, err = ipc.DecodeCodes(body, len(keys))
		return err
	})
	return codes, err
}

// Get returns the pages stored under keys, back to back; a page whose code
// is not OK is left zero.
func (c *Client) Get(ctx context.Context, pool string, keys []uint64) ([]byte, []ipc.Code, error) {
	cn, err := c.conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	var pages []byte
	var codes []ipc.Code
	err = cn.roundTrip(ctx, len(keys) <= quickPages, func(id uint64) error {
		head := ipc.AppendHeader(cn.wbuf[:0], ipc.Header{Version: ipc.Version, Op: ipc.OpGet, ID: id}, 2+len(pool)+4+8*len(keys))
		head = ipc.AppendKeys(head, ipc.OpGet, &ipc.KeysRequest{Pool: pool, Keys: keys})
		return cn.writeFrame(head, nil)
	}, func(_ ipc.Header, body []byte, owned bool) (err error) {
		_, pages, codes, err = ipc.DecodeGet(body, len(keys))
		if err == nil && !owned && len(pages) > 0 && len(pages) <= len(body) && &pages[0] == &body[len(body)-len(pages)] {
			pages = append([]byte(nil), pages...)
		}
		return err
	})
	return pages, codes, err
}

// Del removes keys; missing keys get CodeNotFound.
func (c *Client) Del(ctx context.Context, pool string, keys []uint64) ([]ipc.Code, error) {
	body, err := c.call(ctx, ipc.OpDel, ipc.AppendKeys(nil, ipc.OpDel, &ipc.KeysRequest{Pool: pool, Keys: keys}))
	if err != nil {
		return nil, err
	}
	return ipc.DecodeCodes(body, len(keys))
}

// Inspect describes how each key is stored, with the stored bytes if withData.
func (c *Client) Inspect(ctx context.Context, pool string, keys []uint64, withData bool) ([]ipc.PageInfo, error) {
	body, err := c.call(ctx, ipc.OpInspect, ipc.AppendKeys(nil, ipc.OpInspect, &ipc.KeysRequest{Pool: pool, Keys: keys, WithData: withData}))
	if err != nil {
		return nil, err
	}
	return ipc.DecodeInspect(body, keys, withData)
}

// Stats returns the daemon's counters; pool "" means all pools the caller may see.
func (c *Client) Stats(ctx context.Context, pool string) (*ipc.Stats, error) {
	var s ipc.Stats
	return &s, c.callJSON(ctx, ipc.OpStats, ipc.EncodeString(pool), &s)
}

// Pools lists the pools the caller may see.
func (c *Client) Pools(ctx context.Context) ([]ipc.PoolStats, error) {
	var p []ipc.PoolStats
	return p, c.callJSON(ctx, ipc.OpPools, nil, &p)
}

// Compact moves pages out of sparse arenas and returns the memory.
func (c *Client) Compact(ctx context.Context) (*ipc.CompactResult, error) {
	var r ipc.CompactResult
	return &r, c.callJSON(ctx, ipc.OpCompact, nil, &r)
}

func (c *Client) callJSON(ctx context.Context, op ipc.Op, body []byte, v any) error {
	out, err := c.call(ctx, op, body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("%v response: %w", op, err)
	}
	return nil
}
