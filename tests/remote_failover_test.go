package tests

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/remote"
	"github.com/s4d-project/s4d/remote/valkeytest"
)

// A master killed during a read and write loop, through the daemon (issue
// 43): three masters with a replica each, the tier's timeout 2 s. No page
// ever comes back wrong; the pages in the dead master's blocks fail until
// its replica is promoted, and are then served again by the same daemon
// (no restart). The log gives the seconds from the kill to the first
// round that served every page (the first served page of that master's
// slots, to within one round).
func TestRemoteFailoverThroughDaemon(t *testing.T) {
	vc := valkeyCluster(t)
	key := bytes.Repeat([]byte{0x44}, remote.KeySize)
	args := append([]string{"--mem-limit", "4M", "--backing-file", backingFile(t, 8<<20), "--remote-timeout", "2s"},
		remoteArgs(t, vc, key, "failover-host")...)
	d := start(t, args...)
	base := corpus.Pages(corpus.Random, (16<<20)/4096, 4096, 45)
	n := len(base) / 4096
	putParallel(t, d, "base", base, 2)
	st := statsOf(t, d)
	if st.Remote == nil || st.Remote.Blocks < 6 {
		t.Fatalf("remote after the put: %+v", st.Remote)
	}
	// The victim: the master holding most blocks (nodes 0-2 start as the
	// masters), so that some pages surely fail.
	victim, most := 0, int64(-1)
	for i := range 3 {
		k, err := dbsize(vc, i)
		if err == nil && k > most {
			victim, most = i, k
		}
	}

	var (
		wrong, rounds   atomic.Int64
		killedAt        atomic.Int64 // unix nanoseconds, 0 before the kill
		failedAfterKill atomic.Int64 // rounds after the kill with a page failed
		servedAt        atomic.Int64 // end of the first round after the kill that served every page
		mu              sync.Mutex
		written         []byte // pool "loop": pages stored OK, keys 0..
		putRefused      int
		firstRefusal    error
		stop            = make(chan struct{})
		done            = make(chan struct{})
	)
	go func() {
		defer close(done)
		c := d.client()
		for {
			select {
			case <-stop:
				return
			default:
			}
			kill := killedAt.Load()
			// A write: 64 fresh pages under the next keys.
			mu.Lock()
			next := len(written) / 4096
			mu.Unlock()
			fresh := corpus.Pages(corpus.Random, 64, 4096, uint64(1000+next))
			codes, err := c.Put(ctx(t), "loop", keys(uint64(next), 64), fresh)
			if err == nil {
				err = ipc.PageError(keys(uint64(next), 64), codes)
			}
			mu.Lock()
			if err == nil {
				written = append(written, fresh...)
			} else if putRefused++; firstRefusal == nil {
				firstRefusal = err
			}
			mu.Unlock()
			// A read of the whole pool.
			failed := 0
			for lo := 0; lo < n; lo += 1024 {
				ks := keys(uint64(lo), min(1024, n-lo))
				data, codes, err := c.Get(ctx(t), "base", ks)
				if err != nil {
					failed += len(ks)
					continue
				}
				for i, code := range codes {
					p := (lo + i) * 4096
					if code != ipc.OK {
						failed++
					} else if !bytes.Equal(data[i*4096:(i+1)*4096], base[p:p+4096]) {
						wrong.Add(1)
					}
				}
			}
			rounds.Add(1)
			if kill != 0 {
				if failed > 0 {
					failedAfterKill.Add(1)
				} else if servedAt.Load() == 0 {
					servedAt.Store(time.Now().UnixNano())
				}
			}
		}
	}()
	if err := valkeytest.WaitFor(20*time.Second, func() error {
		if rounds.Load() < 2 {
			return errors.New("loop not started")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	vc.Kill(victim)
	killedAt.Store(time.Now().UnixNano())
	err := valkeytest.WaitFor(60*time.Second, func() error {
		if servedAt.Load() == 0 {
			return errors.New("not every page served since the kill")
		}
		return nil
	})
	close(stop)
	<-done
	if err != nil {
		t.Fatalf("after the kill of master %s: %v\n%s", vc.Addr(victim), err, vc.Log((victim+3)%6))
	}
	if wrong.Load() != 0 {
		t.Fatalf("%d pages answered OK with other bytes", wrong.Load())
	}
	checkPages(t, d, "base", base)
	mu.Lock()
	checkPages(t, d, "loop", written)
	t.Logf("master %s (%d keys) killed: %d rounds, %d after the kill with pages failed; every page served %.2f s after the kill; %d pages written in the loop, %d writes refused (the first: %v)",
		vc.Addr(victim), most, rounds.Load(), failedAfterKill.Load(),
		float64(servedAt.Load()-killedAt.Load())/1e9, len(written)/4096, putRefused, firstRefusal)
	mu.Unlock()
	st = statsOf(t, d)
	if !st.Remote.Up {
		t.Fatalf("after the failover: %+v", st.Remote)
	}
	t.Logf("spill rounds failed %d; last error: %s", st.Remote.SpillFailures, st.Remote.LastError)
}
