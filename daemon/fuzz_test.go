package daemon

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	_ "github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/settings"
)

// FuzzHandle runs arbitrary bodies through every operation's handler, as a
// client of uid 1000 would send them: never a panic, always a known code.
func FuzzHandle(f *testing.F) {
	cfg := settings.Defaults()
	cfg.Backend = "cpu"
	cfg.MemLimit = 64 << 20
	cfg.Log = slog.New(slog.DiscardHandler)
	d, err := New(context.Background(), cfg)
	if err != nil {
		f.Fatal(err)
	}
	c := d.newConn(1000, 0)
	defer c.maps.Close()
	page := make([]byte, 4096)
	page[7] = 1
	f.Add(uint8(ipc.OpPut), ipc.AppendPut(nil, &ipc.PutRequest{Pool: "f", PageSize: 4096, Keys: []uint64{1}, Pages: page}))
	f.Add(uint8(ipc.OpGet), ipc.AppendKeys(nil, ipc.OpGet, &ipc.KeysRequest{Pool: "f", Keys: []uint64{1, 2}}))
	f.Add(uint8(ipc.OpInspect), ipc.AppendKeys(nil, ipc.OpInspect, &ipc.KeysRequest{Pool: "f", Keys: []uint64{1}, WithData: true}))
	f.Add(uint8(ipc.OpDel), ipc.AppendKeys(nil, ipc.OpDel, &ipc.KeysRequest{Pool: "f", Keys: []uint64{1}}))
	f.Add(uint8(ipc.OpHello), ipc.EncodeHelloRequest("fuzz"))
	f.Add(uint8(ipc.OpStats), ipc.EncodeString("f"))
	f.Add(uint8(ipc.OpPools), []byte{})
	f.Fuzz(func(t *testing.T, op uint8, body []byte) {
		if ipc.Op(op) == ipc.OpCompact && len(body) == 0 {
			return // valid but slow under the store lock; covered by unit tests
		}
		c.req = request{ctx: d.ctx}
		defer c.done()
		var resp []byte
		var err error
		if ipc.Op(op) == ipc.OpGet { // served outside handle, which streams large replies
			var req *ipc.KeysRequest
			if req, err = c.keys(ipc.OpGet, body); err == nil {
				resp, err = c.getWhole(req)
			}
		} else {
			resp, err = c.handle(ipc.Op(op), body)
		}
		if err == nil && len(resp) < frameHead {
			t.Fatalf("%v: OK without a body", ipc.Op(op))
		}
		// Every error a handler returns carries its code and a message.
		var e *ipc.Error
		if err != nil && (!errors.As(err, &e) || e.Msg == "" || e.Code == ipc.OK) {
			t.Fatalf("%v: error %v without a code or message", ipc.Op(op), err)
		}
	})
}
