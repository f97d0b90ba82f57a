package remote

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A master killed while blocks are written and read: the client rides
// out the failover, every write it acknowledged (WAIT: on a replica too)
// comes back byte for byte from the promoted replica, and no read ever
// answers other bytes. Then the old master restarts and rejoins as a
// replica. Runs last: it changes the cluster's shape.
func TestFailover(t *testing.T) {
	tc := getCluster(t)
	s := newTestStore(t, tc, testKey, func(o *Options) {
		o.RetryFor = 20 * time.Second
		o.IOTimeout = 2 * time.Second
	})
	ns := Namespace{"host-f", "pool"}
	base := randBlocks(200, 8192, 1)
	mustPut(t, s, ns, base)
	victim, _ := s.c.route(s.Key(ns, 0))
	vi := tc.index(victim)

	var (
		mu         sync.Mutex
		acked      []Block
		putFailed  int
		wrongData  atomic.Int64
		rounds     atomic.Int64
		killed     atomic.Bool
		okAfterKil atomic.Int64
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		next := uint64(1000)
		for ctx.Err() == nil {
			afterKill := killed.Load()
			bs := randBlocks(50, 4096, 2)
			for i := range bs {
				bs[i].ID = next
				next++
			}
			allOK := true
			errs := s.Put(ctx, ns, bs)
			mu.Lock()
			for i, err := range errs {
				if err == nil {
					acked = append(acked, bs[i])
				} else {
					putFailed++
					allOK = false
				}
			}
			mu.Unlock()
			data, gerrs := s.Get(ctx, ns, refs(base))
			for i := range base {
				if gerrs[i] == nil && !bytes.Equal(data[i], base[i].Data) {
					wrongData.Add(1)
				}
				allOK = allOK && gerrs[i] == nil
			}
			rounds.Add(1)
			if afterKill && allOK {
				okAfterKil.Add(1)
			}
		}
	}()
	if err := waitFor(10*time.Second, func() error {
		if rounds.Load() < 3 {
			return errString("writer not started")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	tc.kill(vi)
	killed.Store(true)
	err := waitFor(30*time.Second, func() error {
		if okAfterKil.Load() < 2 {
			return errString("no full round after the kill yet")
		}
		return nil
	})
	cancel()
	<-done
	if err != nil {
		t.Fatalf("client did not resume: %v (log of the victim: %s)", err, tc.log(vi))
	}
	t.Logf("resumed %v after the kill; %d blocks acknowledged, %d writes refused, %d rounds; stats %+v",
		time.Since(start).Round(time.Millisecond), len(acked), putFailed, rounds.Load(), s.c.Stats())
	if wrongData.Load() != 0 {
		t.Fatalf("%d reads answered other bytes", wrongData.Load())
	}
	for _, m := range s.c.Masters() {
		if m == victim {
			t.Fatalf("the killed master %s is still in the slot map", victim)
		}
	}
	checkGet(t, s, ns, base)
	checkGet(t, s, ns, acked)

	if err := tc.start(vi); err != nil {
		t.Fatal(err)
	}
	if err := tc.waitHealthy(30 * time.Second); err != nil {
		t.Fatalf("old master did not rejoin: %v", err)
	}
	if r := tc.info(vi, "replication", "role"); r != "slave" {
		t.Fatalf("old master rejoined as %q", r)
	}
}

type errString string

func (e errString) Error() string { return string(e) }
