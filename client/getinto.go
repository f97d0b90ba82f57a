package client

import (
	"context"
	"fmt"

	"github.com/s4d-project/s4d/ipc"
)

// GetInto is Get into memory of the caller's: page i of keys lands at
// dst[i*pageSize:], where pageSize is len(dst)/len(keys), and a page whose
// code is not OK is zeroed. A large reply is received straight into dst,
// with no buffer allocated and no copy made; a caller reading into the
// same memory again and again (a cache, a swap-in path) pays only for the
// bytes crossing the socket. On an error, dst holds undefined bytes.
func (c *Client) GetInto(ctx context.Context, pool string, keys []uint64, dst []byte) ([]ipc.Code, error) {
	if len(keys) == 0 || len(dst)%len(keys) != 0 {
		return nil, fmt.Errorf("get: %d bytes do not split into %d pages", len(dst), len(keys))
	}
	ps := len(dst) / len(keys)
	cn, err := c.conn(ctx)
	if err != nil {
		return nil, err
	}
	s := &sink{head: make([]byte, ipc.GetHeadSize(len(keys))), dst: dst}
	var codes []ipc.Code
	err = cn.roundTripInto(ctx, len(keys) <= quickPages, s, func(id uint64) error {
		head := ipc.AppendHeader(cn.wbuf[:0], ipc.Header{Version: ipc.Version, Op: ipc.OpGet, ID: id}, 2+len(pool)+4+8*len(keys))
		head = ipc.AppendKeys(head, ipc.OpGet, &ipc.KeysRequest{Pool: pool, Keys: keys})
		return cn.writeFrame(head, nil)
	}, func(_ ipc.Header, body []byte, _ bool) error {
		if !s.done {
			// A reply that arrived in the connection's buffer: its pages
			// go to dst as a sunk reply's do. (DecodeGet would allocate a
			// page array for a reply with a page missing, and a caller
			// looping over absent keys would churn megabytes a call.)
			head := min(len(body), len(s.head))
			if len(body)-head > len(dst) {
				return fmt.Errorf("%w: GET response of %d bytes for %d pages of %d", ipc.ErrMalformed, len(body), len(keys), ps)
			}
			s.head = s.head[:copy(s.head, body[:head])]
			s.got = copy(dst, body[head:])
		}
		var err error
		codes, err = spreadSunk(s, ps, len(keys))
		return err
	})
	return codes, err
}

// spreadSunk checks a reply received into s and moves its pages, which
// came back to back, to their keys' places, zeroing the places of pages
// that did not come.
func spreadSunk(s *sink, ps, n int) ([]ipc.Code, error) {
	pageSize, codes, ok, err := ipc.DecodeGetHead(s.head, n, s.got)
	if err != nil {
		return nil, err
	}
	if pageSize != ps {
		return nil, fmt.Errorf("%w: the daemon returned pages of %d bytes, not %d", ipc.ErrMalformed, pageSize, ps)
	}
	// Backwards: page j moves to i >= j, so no page is overwritten before
	// it has moved.
	dst, j := s.dst, ok
	for i := n - 1; i >= 0 && j < i+1; i-- {
		if codes[i] == ipc.OK {
			j--
			if j != i {
				copy(dst[i*ps:(i+1)*ps], dst[j*ps:(j+1)*ps])
			}
		} else {
			clear(dst[i*ps : (i+1)*ps])
		}
	}
	return codes, nil
}
