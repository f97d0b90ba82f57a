package ipc

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
)

// DefaultSocketPath is where the daemon listens unless told otherwise.
const DefaultSocketPath = "/run/s4d/s4d.sock"

// DefaultSocket returns $S4D_SOCKET, or DefaultSocketPath.
func DefaultSocket() string {
	if s := os.Getenv("S4D_SOCKET"); s != "" {
		return s
	}
	return DefaultSocketPath
}

// DialError says the daemon could not be reached, and how to start it.
type DialError struct {
	Socket string
	Err    error
}

func (e *DialError) Error() string {
	return fmt.Sprintf("s4d is not reachable at %s (%v); start it with 'systemctl start s4d' or 's4d daemon --socket %s'",
		e.Socket, e.Err, e.Socket)
}

func (e *DialError) Unwrap() error { return e.Err }

// ErrConnLost is returned for requests in flight when the connection breaks.
var ErrConnLost = errors.New("connection to s4d lost")

// Client talks to the daemon over one connection, dialled on first use and
// again after it breaks. The zero value uses DefaultSocket. A Client is safe
// for concurrent use; requests from many goroutines are pipelined.
type Client struct {
	Socket string // "" = DefaultSocket()
	Name   string // sent in HELLO; "" = "s4d-go"

	mu sync.Mutex
	cn *conn
}

type result struct {
	h    Header
	body []byte
	err  error
}

type conn struct {
	nc    net.Conn
	hello *Hello
	wmu   sync.Mutex

	mu      sync.Mutex
	pending map[uint64]chan result
	next    uint64
	err     error
}

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
	return cn.nc.Close()
}

func (c *Client) conn(ctx context.Context) (*conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cn != nil {
		c.cn.mu.Lock()
		broken := c.cn.err != nil
		c.cn.mu.Unlock()
		if !broken {
			return c.cn, nil
		}
		c.cn.nc.Close()
		c.cn = nil
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", c.socket())
	if err != nil {
		return nil, &DialError{Socket: c.socket(), Err: unwrapOp(err)}
	}
	cn := &conn{nc: nc, pending: map[uint64]chan result{}}
	go cn.readLoop()
	name := c.Name
	if name == "" {
		name = "s4d-go"
	}
	h, body, err := cn.roundTrip(ctx, OpHello, EncodeHelloRequest(name))
	if err == nil {
		cn.hello, err = DecodeHello(body)
		if err == nil && h.Status != OK {
			err = &Error{Code: h.Status}
		}
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("hello: %w", err)
	}
	c.cn = cn
	return cn, nil
}

// unwrapOp drops net.OpError's repetition of the socket path.
func unwrapOp(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}

func (cn *conn) readLoop() {
	// Buffered: a response usually arrives in one read, not three.
	r := bufio.NewReaderSize(cn.nc, 64<<10)
	for {
		h, body, err := ReadFrame(r, 1<<31-1, nil)
		if err != nil {
			cn.fail(err)
			return
		}
		cn.mu.Lock()
		ch := cn.pending[h.ID]
		delete(cn.pending, h.ID)
		cn.mu.Unlock()
		if ch != nil {
			ch <- result{h: h, body: body}
		}
	}
}

func (cn *conn) fail(err error) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.err == nil {
		cn.err = fmt.Errorf("%w: %v", ErrConnLost, err)
	}
	for id, ch := range cn.pending {
		ch <- result{err: cn.err}
		delete(cn.pending, id)
	}
	cn.nc.Close()
}

// roundTrip sends one request (body given in parts, written without
// copying) and waits for its response.
func (cn *conn) roundTrip(ctx context.Context, op Op, parts ...[]byte) (Header, []byte, error) {
	return cn.send(ctx, op, func(id uint64) error {
		n := 0
		for _, p := range parts {
			n += len(p)
		}
		hdr := AppendHeader(nil, Header{Version: Version, Op: op, ID: id}, n)
		bufs := append(net.Buffers{hdr}, parts...)
		_, err := bufs.WriteTo(cn.nc)
		return err
	})
}

// send registers a request id, writes the request with write (under the
// write lock) and waits for the response.
func (cn *conn) send(ctx context.Context, op Op, write func(id uint64) error) (Header, []byte, error) {
	ch := make(chan result, 1)
	cn.mu.Lock()
	if cn.err != nil {
		cn.mu.Unlock()
		return Header{}, nil, cn.err
	}
	cn.next++
	id := cn.next
	cn.pending[id] = ch
	cn.mu.Unlock()

	cn.wmu.Lock()
	err := write(id)
	cn.wmu.Unlock()
	if err != nil {
		cn.fail(err)
		return Header{}, nil, (<-ch).err
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return Header{}, nil, r.err
		}
		if r.h.Status != OK {
			msg, _ := DecodeString(r.body)
			return r.h, nil, &Error{Code: r.h.Status, Msg: msg}
		}
		return r.h, r.body, nil
	case <-ctx.Done():
		cn.mu.Lock()
		delete(cn.pending, id)
		cn.mu.Unlock()
		return Header{}, nil, ctx.Err()
	}
}

func (c *Client) call(ctx context.Context, op Op, parts ...[]byte) ([]byte, error) {
	cn, err := c.conn(ctx)
	if err != nil {
		return nil, err
	}
	_, body, err := cn.roundTrip(ctx, op, parts...)
	return body, err
}

// Hello returns what the daemon announced when the connection opened.
func (c *Client) Hello(ctx context.Context) (*Hello, error) {
	cn, err := c.conn(ctx)
	if err != nil {
		return nil, err
	}
	return cn.hello, nil
}

// Put stores pages (len(keys) pages of equal size, back to back) under keys
// in pool, creating the pool on first use. It returns one code per page:
// OK, or e.g. CodeNoSpace for pages the memory limit refused.
func (c *Client) Put(ctx context.Context, pool string, keys []uint64, pages []byte) ([]Code, error) {
	if len(keys) == 0 || len(pages)%len(keys) != 0 {
		return nil, fmt.Errorf("put: %d bytes do not split into %d pages", len(pages), len(keys))
	}
	head := appendStr(nil, pool)
	head = binary.LittleEndian.AppendUint32(head, uint32(len(pages)/len(keys)))
	head = appendKeys(head, keys)
	body, err := c.call(ctx, OpPut, head, pages)
	if err != nil {
		return nil, err
	}
	return DecodeCodes(body, len(keys))
}

// Get returns the pages stored under keys, back to back; a page whose code
// is not OK is left zero.
func (c *Client) Get(ctx context.Context, pool string, keys []uint64) ([]byte, []Code, error) {
	body, err := c.call(ctx, OpGet, AppendKeys(nil, OpGet, &KeysRequest{Pool: pool, Keys: keys}))
	if err != nil {
		return nil, nil, err
	}
	_, pages, codes, err := DecodeGet(body, len(keys))
	return pages, codes, err
}

// Del removes keys; missing keys get CodeNotFound.
func (c *Client) Del(ctx context.Context, pool string, keys []uint64) ([]Code, error) {
	body, err := c.call(ctx, OpDel, AppendKeys(nil, OpDel, &KeysRequest{Pool: pool, Keys: keys}))
	if err != nil {
		return nil, err
	}
	return DecodeCodes(body, len(keys))
}

// Inspect describes how each key is stored, with the stored bytes if withData.
func (c *Client) Inspect(ctx context.Context, pool string, keys []uint64, withData bool) ([]PageInfo, error) {
	body, err := c.call(ctx, OpInspect, AppendKeys(nil, OpInspect, &KeysRequest{Pool: pool, Keys: keys, WithData: withData}))
	if err != nil {
		return nil, err
	}
	return DecodeInspect(body, keys, withData)
}

// Stats returns the daemon's counters; pool "" means all pools the caller may see.
func (c *Client) Stats(ctx context.Context, pool string) (*Stats, error) {
	var s Stats
	return &s, c.callJSON(ctx, OpStats, EncodeString(pool), &s)
}

// Pools lists the pools the caller may see.
func (c *Client) Pools(ctx context.Context) ([]PoolStats, error) {
	var p []PoolStats
	return p, c.callJSON(ctx, OpPools, nil, &p)
}

// Compact moves pages out of sparse arenas and returns the memory.
func (c *Client) Compact(ctx context.Context) (*CompactResult, error) {
	var r CompactResult
	return &r, c.callJSON(ctx, OpCompact, nil, &r)
}

func (c *Client) callJSON(ctx context.Context, op Op, body []byte, v any) error {
	out, err := c.call(ctx, op, body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("%v response: %w", op, err)
	}
	return nil
}
