package daemon

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/pagecache"
)

func TestStoreErrUnwraps(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code ipc.Code
	}{
		{pagecache.ErrNoPool, ipc.CodeNotFound},
		{fmt.Errorf("pool p: %w", pagecache.ErrNoPool), ipc.CodeNotFound},
		{fmt.Errorf("pool p: %w", pagecache.ErrPermission), ipc.CodePermission},
		{fmt.Errorf("creating: %w", pagecache.ErrPoolLimit), ipc.CodeLimit},
		{fmt.Errorf("disk on fire"), ipc.CodeInternal},
	} {
		if got := ipc.CodeOf(storeErr(tc.err, "p")); got != tc.code {
			t.Errorf("%v: answered %v, want %v", tc.err, got, tc.code)
		}
	}
}

func TestErrorCountsByKind(t *testing.T) {
	var e errorCounts
	e.add(ipc.CodeBusy)
	e.add(ipc.CodeNotFound)
	e.add(ipc.CodeNotFound)
	if e.invalid() != 0 {
		t.Fatalf("BUSY and NOT_FOUND counted as invalid: %d", e.invalid())
	}
	e.add(ipc.CodeMalformed)
	e.add(ipc.CodeBadPool)
	e.add(ipc.Code(999)) // unknown to this daemon: ignored, not a panic
	if e.invalid() != 2 || e.of(ipc.CodeBusy) != 1 {
		t.Fatalf("invalid %d, busy %d", e.invalid(), e.of(ipc.CodeBusy))
	}
	got := e.byName()
	want := map[string]uint64{"busy": 1, "not found": 2, "malformed request": 1, "bad pool name": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("by name %v, want %v", got, want)
	}
}

// Through a daemon: a GET of a pool that does not exist is an answer to a
// good request, a bad pool name an invalid one.
func TestStatsCountErrorKinds(t *testing.T) {
	c, _ := startDaemon(t, nil)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, _, err := c.Get(ctx, "nosuchpool", []uint64{1}); ipc.CodeOf(err) != ipc.CodeNotFound {
		t.Fatalf("get of a missing pool: %v", err)
	}
	if _, err := c.Put(ctx, "bad pool", []uint64{1}, make([]byte, 4096)); ipc.CodeOf(err) != ipc.CodeBadPool {
		t.Fatalf("put to a bad pool name: %v", err)
	}
	st, err := c.Stats(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if st.IO.InvalidIO != 1 || st.IO.Busy != 0 || st.IO.Answers["not found"] != 1 || st.IO.Answers["bad pool name"] != 1 {
		t.Fatalf("invalid %d, busy %d, answers %v", st.IO.InvalidIO, st.IO.Busy, st.IO.Answers)
	}
}

func TestAcceptBackoff(t *testing.T) {
	var b backoff
	want := []time.Duration{5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000}
	for i, w := range want {
		if got := b.next(); got != w*time.Millisecond {
			t.Fatalf("failure %d: wait %v, want %v", i+1, got, w*time.Millisecond)
		}
	}
	b.reset()
	if got := b.next(); got != backoffFirst {
		t.Fatalf("after a success: %v", got)
	}
}
