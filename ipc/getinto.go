package ipc

import (
	"context"
	"fmt"
)

// GetInto is Get into memory of the caller's: page i of keys lands at
// dst[i*pageSize:], where pageSize is len(dst)/len(keys), and a page whose
// code is not OK is zeroed. A large reply is received straight into dst,
// with no buffer allocated and no copy made; a caller reading into the
// same memory again and again (a cache, a swap-in path) pays only for the
// bytes crossing the socket. On an error, dst holds undefined bytes.
func (c *Client) GetInto(ctx context.Context, pool string, keys []uint64, dst []byte) ([]Code, error) {
	if len(keys) == 0 || len(dst)%len(keys) != 0 {
		return nil, fmt.Errorf("get: %d bytes do not split into %d pages", len(dst), len(keys))
	}
	ps := len(dst) / len(keys)
	cn, err := c.conn(ctx)
	if err != nil {
		return nil, err
	}
	s := &sink{head: make([]byte, getHeadSize(len(keys))), dst: dst}
	var codes []Code
	err = cn.roundTripInto(ctx, len(keys) <= quickPages, s, func(id uint64) error {
		head := AppendHeader(cn.wbuf[:0], Header{Version: Version, Op: OpGet, ID: id}, 2+len(pool)+4+8*len(keys))
		head = AppendKeys(head, OpGet, &KeysRequest{Pool: pool, Keys: keys})
		return cn.writeFrame(head, nil)
	}, func(_ Header, body []byte, _ bool) error {
		var pageSize int
		var err error
		if s.done {
			codes, err = spreadSunk(s, ps, len(keys))
			return err
		}
		var pages []byte
		if pageSize, pages, codes, err = DecodeGet(body, len(keys)); err != nil {
			return err
		}
		if pageSize != ps {
			return fmt.Errorf("%w: the daemon returned pages of %d bytes, not %d", errMalformed, pageSize, ps)
		}
		copy(dst, pages)
		return nil
	})
	return codes, err
}

// spreadSunk checks a reply received into s and moves its pages, which
// came back to back, to their keys' places, zeroing the places of pages
// that did not come.
func spreadSunk(s *sink, ps, n int) ([]Code, error) {
	r := reader{b: s.head}
	pageSize, codes, ok, err := decodeGetHead(&r, n, s.got)
	if err != nil {
		return nil, err
	}
	if pageSize != ps {
		return nil, fmt.Errorf("%w: the daemon returned pages of %d bytes, not %d", errMalformed, pageSize, ps)
	}
	// Backwards: page j moves to i >= j, so no page is overwritten before
	// it has moved.
	dst, j := s.dst, ok
	for i := n - 1; i >= 0 && j < i+1; i-- {
		if codes[i] == OK {
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
