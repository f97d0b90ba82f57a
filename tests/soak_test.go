package tests

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/client"
	"github.com/s4d-project/s4d/ipc"
)

// TestSoak runs clients doing random PUT/GET/DEL/overwrite against the real
// daemon, checking every byte against a shadow copy. S4D_SOAK sets how
// long (default 5s; `make soak` runs minutes).
func TestSoak(t *testing.T) {
	soak(t, start(t, "--mem-limit", "256M"), nil)
}

// TestSoakCold is TestSoak with the cold tier in the way: a memory limit
// far below what the clients store, a backing file taking the rest, and,
// meanwhile, forced writebacks, recompressions and compactions of the
// file. Every byte is still checked against the shadow copies.
func TestSoakCold(t *testing.T) {
	d := start(t, "--mem-limit", "4M", "--backing-file", backingFile(t, 256<<20), "--idle-epoch", "1s")
	soak(t, d, func(c *client.Client, i int) error {
		var err error
		switch i % 4 {
		case 0:
			_, err = c.Writeback(ctx(t), ipc.WritebackRequest{Mode: "all"})
		case 1:
			_, err = c.Recompress(ctx(t), &ipc.RecompressRequest{Flags: ipc.RecompressIdle | ipc.RecompressHuge})
		case 2:
			_, err = c.Writeback(ctx(t), ipc.WritebackRequest{Mode: "compact"})
		case 3:
			_, err = c.Idle(ctx(t), &ipc.IdleRequest{Flags: ipc.IdleMark})
		}
		return err
	})
}

// soak drives d with random requests for S4D_SOAK (default 5s); churn,
// if set, is called over and over on a connection of its own meanwhile.
func soak(t *testing.T, d *daemon, churn func(c *client.Client, i int) error) {
	dur := 5 * time.Second
	if v := os.Getenv("S4D_SOAK"); v != "" {
		var err error
		if dur, err = time.ParseDuration(v); err != nil {
			t.Fatalf("S4D_SOAK=%q: %v", v, err)
		}
	}
	const ps, clients, keySpace = 4096, 4, 2048
	var ops, mismatches, failures atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(dur)
	for g := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := d.client()
			pool := fmt.Sprintf("soak-%d", g)
			r := rand.New(rand.NewPCG(uint64(g), 99))
			shadow := map[uint64][]byte{}
			for time.Now().Before(deadline) {
				n := 1 + r.IntN(64)
				ks := distinctKeys(r, n, keySpace)
				switch op := r.IntN(10); {
				case op < 4: // put (often an overwrite)
					pages := make([]byte, n*ps)
					for i := range n {
						corpus.Fill(corpus.Kinds[r.IntN(len(corpus.Kinds))], pages[i*ps:(i+1)*ps], r)
					}
					codes, err := c.Put(ctx(t), pool, ks, pages)
					if err != nil {
						failures.Add(1)
						t.Errorf("put: %v", err)
						return
					}
					for i, k := range ks {
						if codes[i] == ipc.OK {
							shadow[k] = pages[i*ps : (i+1)*ps]
						}
					}
				case op < 8: // get
					pages, codes, err := c.Get(ctx(t), pool, ks)
					if errors.Is(err, ipc.ErrNotFound) && len(shadow) == 0 {
						break // the pool does not exist yet
					}
					if err != nil {
						failures.Add(1)
						t.Errorf("get: %v", err)
						return
					}
					for i, k := range ks {
						want, ok := shadow[k]
						switch {
						case ok && (codes[i] != ipc.OK || !bytes.Equal(pages[i*ps:(i+1)*ps], want)):
							mismatches.Add(1)
						case !ok && codes[i] != ipc.CodeNotFound:
							mismatches.Add(1)
						}
					}
				default: // del
					codes, err := c.Del(ctx(t), pool, ks)
					if errors.Is(err, ipc.ErrNotFound) && len(shadow) == 0 {
						break
					}
					if err != nil {
						failures.Add(1)
						t.Errorf("del: %v", err)
						return
					}
					for i, k := range ks {
						if _, ok := shadow[k]; ok != (codes[i] == ipc.OK) {
							mismatches.Add(1)
						}
						delete(shadow, k)
					}
				}
				ops.Add(1)
			}
		}()
	}
	if churn != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := d.client()
			for i := 0; time.Now().Before(deadline); i++ {
				if err := churn(c, i); err != nil {
					failures.Add(1)
					t.Errorf("churn %d: %v", i%4, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	st, err := d.client().Stats(ctx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	peak := vmHWM(t, d.cmd.Process.Pid)
	t.Logf("soak %v: %d ops (%.0f ops/s), %d mismatches, %d pages stored (%d MiB of pages) in %d MiB, daemon peak RSS %d MiB",
		dur, ops.Load(), float64(ops.Load())/dur.Seconds(), mismatches.Load(), st.Mem.Pages,
		st.Mem.OrigDataSize>>20, st.Mem.MemUsedTotal>>20, peak>>20)
	if mismatches.Load() != 0 || failures.Load() != 0 || ops.Load() == 0 {
		t.Fatalf("%d mismatches, %d failures in %d ops", mismatches.Load(), failures.Load(), ops.Load())
	}
}

func distinctKeys(r *rand.Rand, n, space int) []uint64 {
	seen := map[uint64]bool{}
	ks := make([]uint64, 0, n)
	for len(ks) < n {
		k := uint64(r.IntN(space))
		if !seen[k] {
			seen[k] = true
			ks = append(ks, k)
		}
	}
	return ks
}

// vmHWM reads a process's peak resident memory in bytes.
func vmHWM(t *testing.T, pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// After kill -9 under load, clients get clean errors and a new daemon
// takes the same socket at once. Pages live in RAM: they are gone.
func TestKill9(t *testing.T) {
	d := start(t)
	c := d.client()
	pages := corpus.Pages(corpus.Text, 64, 4096, 1)
	stop := make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		defer close(errs)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := c.Put(ctx(t), "k", keys(0, 64), pages); err != nil {
				errs <- err
				return
			}
		}
	}()
	time.Sleep(300 * time.Millisecond)
	d.cmd.Process.Signal(syscall.SIGKILL)
	err := <-errs
	close(stop)
	var de *client.DialError
	if err == nil || !(errors.Is(err, client.ErrConnLost) || errors.As(err, &de)) {
		t.Fatalf("client error after kill -9: %v", err)
	}
	// The process is gone once it is reaped; its socket file stays behind.
	d.done <- <-d.done
	began := time.Now()
	d2 := startOn(t, d.socket)
	t.Logf("client saw %q; new daemon serving after %v", err, time.Since(began).Round(time.Millisecond))
	c2 := d2.client()
	if _, codes, err := c2.Get(ctx(t), "k", keys(0, 1)); !errors.Is(err, ipc.ErrNotFound) {
		t.Fatalf("pages survived a restart? %v %v", codes, err)
	}
	codes, err := c2.Put(ctx(t), "k", keys(0, 64), pages)
	if err != nil || ipc.PageError(keys(0, 64), codes) != nil {
		t.Fatalf("new daemon: %v %v", err, codes)
	}
	// The old client reconnects by itself.
	if _, err := c.Stats(ctx(t), ""); err != nil {
		t.Fatalf("old client after restart: %v", err)
	}
}
