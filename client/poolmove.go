package client

import (
	"context"

	"github.com/s4d-project/s4d/ipc"
)

// PoolMove exports the caller's pool to the daemon's remote tier, or
// imports it from there (direction ipc.PoolExport or ipc.PoolImport).
func (c *Client) PoolMove(ctx context.Context, direction, pool string) (*ipc.PoolMoveResult, error) {
	var r ipc.PoolMoveResult
	return &r, c.callJSON(ctx, ipc.OpPoolMove, ipc.EncodePoolMove(direction, pool), &r)
}
