package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/client"
	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/settings"
)

// goroutines returns the stacks of the live goroutines, by id.
func goroutines() map[int64]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[int64]string{}
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		head, _, _ := bytes.Cut(g, []byte(" ["))
		id, err := strconv.ParseInt(string(bytes.TrimPrefix(head, []byte("goroutine "))), 10, 64)
		if err == nil {
			out[id] = string(g)
		}
	}
	return out
}

// lastGoroutine is the highest id alive now: goroutines started later have
// higher ones.
func lastGoroutine() int64 {
	var top int64
	for id := range goroutines() {
		top = max(top, id)
	}
	return top
}

// daemonGoroutines lists the goroutines started after floor that run the
// daemon's code (its packages below the client), not a test's.
func daemonGoroutines(floor int64) []string {
	var out []string
	for id, g := range goroutines() {
		body, _, _ := strings.Cut(g, "\ncreated by ")
		if id <= floor || strings.Contains(body, "_test.go:") || !strings.Contains(body, "github.com/s4d-project/s4d/") {
			continue
		}
		if strings.Contains(body, "github.com/s4d-project/s4d/client.") && !strings.Contains(body, "s4d/daemon.") {
			continue // a client the test left open is the test's
		}
		out = append(out, g)
	}
	return out
}

// checkNoLeaks fails t if goroutines the daemon started after floor are
// still running once it has stopped. Stop joins them all, so none may be
// left; a short grace covers a goroutine between its last line and its exit.
func checkNoLeaks(t testing.TB, floor int64) {
	t.Helper()
	var left []string
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if left = daemonGoroutines(floor); len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("%d goroutines of the daemon outlived its stop:\n%s", len(left), strings.Join(left, "\n\n"))
	}
}

// TestStopJoinsGoroutines runs a daemon through the requests that start
// goroutines (streamed GETs, coalescing, the cold tier's clock and jobs)
// and checks that none outlives Serve.
func TestStopJoinsGoroutines(t *testing.T) {
	floor := lastGoroutine()
	cfg := settings.Defaults()
	cfg.Socket = filepath.Join(t.TempDir(), "s.sock")
	cfg.Backend = "auto"
	cfg.IdleEpoch = time.Second
	cfg.RecompressEvery = 500 * time.Millisecond
	cfg.Log = slog.New(slog.DiscardHandler)
	// With a backing file, the file's checkpoints and writeback run too.
	if path := directFile(t, 64<<20); path != "" {
		cfg.BackingFile, cfg.Persist, cfg.MemLimit = path, true, 8<<20
		cfg.CheckpointEvery = 200 * time.Millisecond
	}
	d, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx) }()
	c := &client.Client{Socket: cfg.Socket}
	rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
	defer rcancel()
	const n = 4096 // 16 MiB: the GET reply goes out in pieces
	pages := corpus.Pages(corpus.Mixed, n, cfg.PageSize, 3)
	keys := make([]uint64, n)
	for i := range keys {
		keys[i] = uint64(i)
	}
	for lo := 0; lo < n; lo += 1024 {
		if _, err := c.Put(rctx, "leak", keys[lo:lo+1024], pages[lo*cfg.PageSize:(lo+1024)*cfg.PageSize]); err != nil {
			t.Fatal(err)
		}
	}
	got, codes, err := c.Get(rctx, "leak", keys)
	if err != nil || !bytes.Equal(got, pages) || ipc.PageError(keys, codes) != nil {
		t.Fatalf("get: %v %v", err, ipc.PageError(keys, codes))
	}
	time.Sleep(1500 * time.Millisecond) // an epoch, recompression rounds, checkpoints
	if _, err := c.Stats(rctx, ""); err != nil {
		t.Fatal(err)
	}
	c.Close()
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	checkNoLeaks(t, floor)
}

// directFile makes a file of size bytes that takes O_DIRECT, or returns ""
// where the test directory's filesystem does not.
func directFile(t *testing.T, size int64) string {
	p := filepath.Join(t.TempDir(), "backing")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, size); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR|syscall.O_DIRECT, 0)
	if err != nil {
		t.Logf("no backing file: %v", err)
		return ""
	}
	f.Close()
	return p
}
