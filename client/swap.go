package client

import (
	"context"
	"encoding/json"

	"github.com/s4d-project/s4d/ipc"
)

// Swap adds, deletes or lists the daemon's swap devices (root only).
func (c *Client) Swap(ctx context.Context, req ipc.SwapRequest) ([]ipc.SwapDevice, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var out []ipc.SwapDevice
	return out, c.callJSON(ctx, ipc.OpSwap, body, &out)
}
