package daemon

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/pagecache"
	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/routing"
	"github.com/s4d-project/s4d/settings"
)

// deadEngines is a compressor whose every engine has failed.
type deadEngines struct{ calls int }

func (e *deadEngines) Compress(context.Context, *pagefmt.Batch, *pagefmt.Compressed, routing.Deliver) (string, error) {
	e.calls++
	return "", errors.New("device lost")
}

func (e *deadEngines) Decompress(context.Context, *pagefmt.Decompression) error {
	return errors.New("device lost")
}

// notFound is a store that has no pool at all.
type notFound struct{ pageStore }

func (notFound) PoolCodec(uint32, string) (pagefmt.Codec, error) { return 0, pagecache.ErrNoPool }
func (notFound) Inspect(uint32, string, []uint64, bool) ([]pagecache.PageInfo, error) {
	return nil, pagecache.ErrNoPool
}

// Request handling through the two interfaces a connection holds, each
// replaced by a test's own: no socket, no engine, no store needed.
func TestHandlersThroughPorts(t *testing.T) {
	cfg := settings.Defaults()
	cfg.Backend = "cpu"
	cfg.Log = slog.New(slog.DiscardHandler)
	d, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.set.Close()
	c := d.newConn(1000, 0)
	defer c.maps.Close()
	eng := &deadEngines{}
	c.engines = eng
	c.req = request{ctx: d.ctx}
	page := make([]byte, cfg.PageSize)
	page[9] = 1
	_, err = c.handle(ipc.OpPut, ipc.AppendPut(nil, &ipc.PutRequest{Pool: "p", PageSize: uint32(cfg.PageSize), Keys: []uint64{1}, Pages: page}))
	if ipc.CodeOf(err) != ipc.CodeFailed || eng.calls != 1 {
		t.Fatalf("PUT with every engine failed: %v (%d calls)", err, eng.calls)
	}
	if st := d.Stats(0); st.IO.FailedWrites != 1 || st.Mem.Pages != 0 {
		t.Fatalf("failed writes %d, pages stored %d", st.IO.FailedWrites, st.Mem.Pages)
	}
	c.done()

	c.pages = notFound{}
	c.req = request{ctx: d.ctx}
	_, err = c.handle(ipc.OpInspect, ipc.AppendKeys(nil, ipc.OpInspect, &ipc.KeysRequest{Pool: "q", Keys: []uint64{1}}))
	if ipc.CodeOf(err) != ipc.CodeNotFound {
		t.Fatalf("INSPECT of a pool the store does not have: %v", err)
	}
	c.done()
}
