package tests

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/ipc"
)

// Every limit answers with a clear error and the daemon keeps serving.
func TestLimits(t *testing.T) {
	d := start(t, "--max-connections", "4", "--max-batch-pages", "8", "--max-pools-per-user", "2", "--user-quota", "40K")
	c := d.client()
	text := corpus.Pages(corpus.Random, 12, 4096, 1)

	if _, err := c.Put(ctx(t), "a", keys(0, 9), text[:9*4096]); !errors.Is(err, ipc.ErrTooLarge) {
		t.Fatalf("9 keys over a batch limit of 8: %v", err)
	}
	codes, err := c.Put(ctx(t), "a", keys(0, 8), text[:8*4096])
	if err != nil {
		t.Fatal(err)
	}
	// Random pages are stored raw: 10 fit in 40K, so all 8 do.
	allOK(t, "put under quota", keys(0, 8), codes)
	codes, err = c.Put(ctx(t), "b", keys(0, 4), text[8*4096:])
	if err != nil {
		t.Fatal(err)
	}
	if codes[0] != ipc.OK || codes[1] != ipc.OK || codes[2] != ipc.CodeLimit || codes[3] != ipc.CodeLimit {
		t.Fatalf("quota codes %v", codes)
	}
	if _, err := c.Put(ctx(t), "c", keys(0, 1), text[:4096]); ipc.CodeOf(err) != ipc.CodeLimit {
		t.Fatalf("third pool: %v", err)
	}

	// Connections over the limit get LIMIT and are closed; the rest go on.
	var extra []net.Conn
	for range 6 {
		nc, err := net.Dial("unix", d.socket)
		if err != nil {
			t.Fatal(err)
		}
		extra = append(extra, nc)
	}
	refused := 0
	for _, nc := range extra {
		// A refused connection is told so at once, unasked.
		nc.SetReadDeadline(time.Now().Add(time.Second))
		h, body, err := ipc.ReadFrame(nc, 1<<20, nil)
		if err == nil {
			msg, _ := ipc.DecodeString(body)
			if h.Status != ipc.CodeLimit || !strings.Contains(msg, "too many connections") {
				t.Fatalf("refusal %v %q", h.Status, msg)
			}
			refused++
		}
		nc.Close()
	}
	if refused < 3 {
		t.Fatalf("%d of 6 extra connections refused with a limit of 4 (one in use)", refused)
	}
	if _, err := c.Stats(ctx(t), ""); err != nil {
		t.Fatalf("existing client after the connection limit: %v", err)
	}
}
