package client

import (
	"context"

	"github.com/s4d-project/s4d/ipc"
)

// Idle counts idle pages, lists the oldest, or marks pages idle.
func (c *Client) Idle(ctx context.Context, r *ipc.IdleRequest) (*ipc.IdleResult, error) {
	var out ipc.IdleResult
	return &out, c.callJSON(ctx, ipc.OpIdle, r.Encode(), &out)
}

// Recompress recompresses idle or huge pages now and waits for the result.
func (c *Client) Recompress(ctx context.Context, r *ipc.RecompressRequest) (*ipc.RecompressResult, error) {
	var out ipc.RecompressResult
	return &out, c.callJSON(ctx, ipc.OpRecompress, r.Encode(), &out)
}

// SetPoolCodec makes the pool's later writes compress with codec ("lz4",
// "zstd", or "" for the daemon's), creating the pool if there is none.
func (c *Client) SetPoolCodec(ctx context.Context, pool, codec string) error {
	_, err := c.call(ctx, ipc.OpPoolCodec, ipc.EncodePoolCodec(pool, codec))
	return err
}

// Writeback asks the daemon to move pages to its backing file. Only root may.
func (c *Client) Writeback(ctx context.Context, req ipc.WritebackRequest) (*ipc.WritebackResult, error) {
	var r ipc.WritebackResult
	return &r, c.callJSON(ctx, ipc.OpWriteback, req.Encode(), &r)
}
