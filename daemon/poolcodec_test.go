package daemon

import (
	"context"
	"errors"
	"testing"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/ipc"
)

// A pool that chose zstd stores its new pages as zstd in an lz4 daemon.
func TestPoolCodec(t *testing.T) {
	c := serveInProcess(t, "cpu")
	ctx := context.Background()
	pages := corpus.Pages(corpus.Text, 16, 4096, 1)
	if err := c.SetPoolCodec(ctx, "z", "zstd"); err != nil {
		t.Fatal(err)
	}
	class := func() string {
		if _, err := c.Put(ctx, "z", seqKeys(0, 16), pages); err != nil {
			t.Fatal(err)
		}
		info, err := c.Inspect(ctx, "z", seqKeys(0, 1), false)
		if err != nil {
			t.Fatal(err)
		}
		return info[0].Class
	}
	if got := class(); got != "zstd" {
		t.Fatalf("a zstd pool stored %s", got)
	}
	pools, _ := c.Pools(ctx)
	if len(pools) != 1 || pools[0].Codec != "zstd" {
		t.Fatalf("pools: %+v", pools)
	}
	back, _, err := c.Get(ctx, "z", seqKeys(0, 16))
	if err != nil || string(back) != string(pages) {
		t.Fatalf("get: %v", err)
	}
	if err := c.SetPoolCodec(ctx, "z", ""); err != nil {
		t.Fatal(err)
	}
	if got := class(); got != "lz4" {
		t.Fatalf("back to the daemon's codec: %s", got)
	}
	var e *ipc.Error
	if err := c.SetPoolCodec(ctx, "z", "brotli"); !errors.As(err, &e) || e.Code != ipc.CodeMalformed {
		t.Fatalf("unknown codec: %v", err)
	}
	if err := c.SetPoolCodec(ctx, "", "zstd"); !errors.As(err, &e) || e.Code != ipc.CodeBadPool {
		t.Fatalf("no pool name: %v", err)
	}
}
