package daemon

import (
	"bytes"
	"context"
	"testing"

	"github.com/s4d-project/s4d/backends/backendtest"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/ipc"
)

func init() { backendtest.RegisterParted() }

// Through the daemon: pages compressed in parts come back whole.
func TestDaemonStoresParts(t *testing.T) {
	c := serveInProcess(t, "parted")

	const n = 200
	pages := corpus.Pages(corpus.Mixed, n, 4096, 5)
	keys := seqKeys(1000, n)
	codes, err := c.Put(context.Background(), "p", keys, pages)
	if err != nil || ipc.PageError(keys, codes) != nil {
		t.Fatalf("put: %v %v", err, codes)
	}
	back, codes, err := c.Get(context.Background(), "p", keys)
	if err != nil || ipc.PageError(keys, codes) != nil || !bytes.Equal(back, pages) {
		t.Fatalf("get: %v %v, same %v", err, codes, bytes.Equal(back, pages))
	}
	st, err := c.Stats(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range st.Backends {
		for _, ct := range b.Counters {
			if b.Name == "parted" && ct.Direction == "compress" && ct.Pages != n {
				t.Fatalf("parted compressed %d pages", ct.Pages)
			}
		}
	}
	if st.Mem.Pages != n {
		t.Fatalf("%d pages stored", st.Mem.Pages)
	}
}
