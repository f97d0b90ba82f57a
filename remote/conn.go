package remote

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// conn is one connection to one node, used by one goroutine at a time.
type conn struct {
	nc      net.Conn
	r       *reader
	w       *bufio.Writer
	addr    string
	o       *Options
	scratch []byte
	broken  bool
}

// ErrAuthFailed is a refused AUTH/HELLO: a wrong user or password, or a
// user that is off. Retrying cannot help.
var ErrAuthFailed = errors.New("remote: authentication failed")

func dial(ctx context.Context, addr string, o *Options) (*conn, error) {
	d := net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if o.TLS != nil {
		cfg := o.TLS.Clone()
		if cfg.ServerName == "" {
			host, _, _ := net.SplitHostPort(addr)
			cfg.ServerName = host
		}
		tc := tls.Client(nc, cfg)
		tc.SetDeadline(time.Now().Add(o.DialTimeout))
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("remote: TLS with %s: %w", addr, err)
		}
		tc.SetDeadline(time.Time{})
		nc = tc
	}
	c := &conn{nc: nc, r: newReader(nc, o.Limits), w: bufio.NewWriterSize(nc, 64<<10), addr: addr, o: o}
	if err := c.hello(ctx); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// hello authenticates and picks the protocol: HELLO 3 with AUTH for RESP3,
// plain AUTH for RESP2.
func (c *conn) hello(ctx context.Context) error {
	var cmd [][]byte
	if !c.o.RESP2 {
		cmd = args("HELLO", "3")
		if c.o.Password != "" {
			cmd = append(cmd, args("AUTH", c.o.user(), c.o.Password)...)
		}
	} else if c.o.Password != "" {
		cmd = args("AUTH", c.o.user(), c.o.Password)
	} else {
		return nil
	}
	vs, err := c.pipeline(ctx, [][][]byte{cmd})
	if err != nil {
		return fmt.Errorf("remote: %s: %w", c.addr, err)
	}
	if e := vs[0].Err(); e != nil {
		var se ServerError
		errors.As(e, &se)
		switch se.Code() {
		case "WRONGPASS", "NOAUTH", "NOPERM":
			return fmt.Errorf("%w at %s as user %q: %v", ErrAuthFailed, c.addr, c.o.user(), e)
		}
		return fmt.Errorf("remote: %s: %w", c.addr, e)
	}
	return nil
}

func (c *conn) close() {
	c.broken = true
	c.nc.Close()
}

// pipeline writes every command, then reads one reply for each. Writing
// runs beside reading so neither side's socket buffer can fill and stall
// the other. Timeouts are idle timeouts (IOTimeout with no progress), so a
// large batch on a slow link is not cut short, and a dead peer is. A
// context that ends closes the deadline at once. Any I/O or protocol error
// leaves the connection broken.
func (c *conn) pipeline(ctx context.Context, cmds [][][]byte) ([]Value, error) {
	stop := context.AfterFunc(ctx, func() { c.nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	idle := c.o.IOTimeout
	dl := func() time.Time {
		t := time.Now().Add(idle)
		if d, ok := ctx.Deadline(); ok && d.Before(t) {
			return d
		}
		return t
	}
	var werr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, cmd := range cmds {
			c.nc.SetWriteDeadline(dl())
			if c.scratch, werr = writeCmd(c.w, c.scratch, cmd); werr != nil {
				c.nc.Close() // the reader would wait for replies that never come
				return
			}
		}
		c.nc.SetWriteDeadline(dl())
		if werr = c.w.Flush(); werr != nil {
			c.nc.Close()
		}
	}()
	out := make([]Value, 0, len(cmds))
	var rerr error
	for range cmds {
		c.nc.SetReadDeadline(dl())
		v, err := c.r.next()
		if err != nil {
			rerr = err
			break
		}
		out = append(out, v)
	}
	if rerr != nil {
		c.nc.Close() // unblocks the writer
	}
	wg.Wait()
	// Whichever side failed first closed the socket under the other: report
	// the cause, not the "use of closed network connection" it led to.
	err := rerr
	if werr != nil && (err == nil || errors.Is(err, net.ErrClosed)) {
		err = werr
	}
	if err != nil {
		c.close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return out, nil
}

// node keeps idle connections to one address.
type node struct {
	addr string
	idle chan *conn
	h    health // health.go
}

// get answers an idle connection (reused) or a new one.
func (n *node) get(ctx context.Context, o *Options) (c *conn, reused bool, err error) {
	select {
	case c := <-n.idle:
		return c, true, nil
	default:
		c, err := dial(ctx, n.addr, o)
		return c, false, err
	}
}

func (n *node) put(c *conn) {
	if c.broken {
		return
	}
	select {
	case n.idle <- c:
	default:
		c.close()
	}
}

func (n *node) closeIdle() {
	for {
		select {
		case c := <-n.idle:
			c.close()
		default:
			return
		}
	}
}
