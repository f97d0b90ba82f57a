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
		var pageSize int
		var err error
		if s.done {
			codes, err = spreadSunk(s, ps, len(keys))
			return err
		}
		var pages []byte
		if pageSize, pages, codes, err = ipc.DecodeGet(body, len(keys)); err != nil {
			return err
		}
		if pageSize != ps {
			return fmt.Errorf("%w: the daemon returned pages of %d bytes, not %d", ipc.ErrMalformed, pageSize, ps)
		}
		copy(dst, pages)
		return nil
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
