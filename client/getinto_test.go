package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/s4d-project/s4d/ipc"
)

// checkInto checks dst against what the fake holds under keys in pool:
// found pages in place, missing ones zeroed.
func checkInto(pool string, keys []uint64, dst []byte, codes []ipc.Code) error {
	for j, key := range keys {
		want := pageOf(key)
		if fakeCode(pool, key) != ipc.OK {
			want = make([]byte, testPage)
		}
		if codes[j] != fakeCode(pool, key) || !bytes.Equal(dst[j*testPage:(j+1)*testPage], want) {
			return fmt.Errorf("pool %s key %d (page %d) came back wrong (code %v)", pool, key, j, codes[j])
		}
	}
	return nil
}

// GetInto beside Get on one pipelined connection, answers out of order,
// small replies and large ones, with pages missing among them: every
// caller's pages land in its own memory, in place.
func TestGetIntoPipelined(t *testing.T) {
	c := &Client{Socket: fakeServer(t)}
	defer c.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dst := make([]byte, 61*testPage)
			for i := range 40 {
				n := 1 + (g+i)%4*20 // 1 to 61 pages
				pool := []string{"p", "holes"}[(g+i)%2]
				keys := make([]uint64, n)
				for j := range keys {
					keys[j] = uint64(g*100000 + i*100 + j)
				}
				var codes []ipc.Code
				var err error
				into := dst[:n*testPage]
				for k := range into {
					into[k] = 0xEE // stale bytes must not show through
				}
				if g%3 == 0 {
					var pages []byte
					pages, codes, err = c.Get(ctx, pool, keys)
					copy(into, pages)
				} else {
					codes, err = c.GetInto(ctx, pool, keys, into)
				}
				if err == nil {
					err = checkInto(pool, keys, into, codes)
				}
				if err != nil {
					errs <- fmt.Errorf("goroutine %d request %d: %w", g, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// replayServer answers HELLO as the fake does and every GET with reply,
// its id patched in, allocating nothing per request: in the same process
// as the client, it leaves the client's allocations to be counted.
func replayServer(t *testing.T, reply []byte) string {
	sock := filepath.Join(t.TempDir(), "replay.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r, buf := bufio.NewReader(c), make([]byte, 64<<10)
		for {
			h, body, err := ipc.ReadFrame(r, 1<<20, buf)
			if err != nil {
				return
			}
			if h.Op != ipc.OpGet {
				c.Write(answer(h, body))
				continue
			}
			binary.LittleEndian.PutUint64(reply[12:], h.ID)
			c.Write(reply)
		}
	}()
	return sock
}

// A lone caller's large reply is received straight into its memory: the
// client allocates a small fraction of the bytes it receives, where Get
// allocates them all. So is a reply small enough to be read in place with
// pages missing ("holes": a third of the keys), which `s4d ctl get` over
// a range of absent keys loops on (issue 26).
func TestGetIntoAllocatesNoReplyBuffer(t *testing.T) {
	t.Run("large", func(t *testing.T) { getIntoAllocates(t, "p", 64) })
	t.Run("small with holes", func(t *testing.T) { getIntoAllocates(t, "holes", 12) })
}

func getIntoAllocates(t *testing.T, pool string, n int) {
	keys := make([]uint64, n)
	for i := range keys {
		keys[i] = uint64(i)
	}
	reply := answer(ipc.Header{Op: ipc.OpGet, ID: 1}, ipc.AppendKeys(nil, ipc.OpGet, &ipc.KeysRequest{Pool: pool, Keys: keys}))
	c := &Client{Socket: replayServer(t, reply)}
	defer c.Close()
	ctx := context.Background()
	dst := make([]byte, len(keys)*testPage)
	const rounds = 20
	measure := func(get func() ([]ipc.Code, error)) uint64 {
		get() // dials
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for range rounds {
			codes, err := get()
			if err == nil {
				err = checkInto(pool, keys, dst, codes)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&m1)
		return m1.TotalAlloc - m0.TotalAlloc
	}
	received := uint64(rounds * len(dst))
	into := measure(func() ([]ipc.Code, error) { return c.GetInto(ctx, pool, keys, dst) })
	whole := measure(func() ([]ipc.Code, error) {
		pages, codes, err := c.Get(ctx, pool, keys)
		copy(dst, pages)
		return codes, err
	})
	if into > received/16 || whole < received {
		t.Fatalf("receiving %d bytes, GetInto allocated %d and Get %d", received, into, whole)
	}
}

// A caller giving up while its reply is half received gets its memory
// back: the rest of the reply does not land in it.
func TestGetIntoCancelledMidReply(t *testing.T) {
	c := &Client{Socket: fakeServer(t)}
	defer c.Close()
	keys := make([]uint64, 40)
	for i := range keys {
		keys[i] = 997 + uint64(i)
	}
	dst := make([]byte, len(keys)*testPage)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Millisecond)
	_, err := c.GetInto(ctx, "p", keys, dst)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the deadline", err)
	}
	for i := range dst {
		dst[i] = 0x5A
	}
	// The next request reads the rest of the withdrawn reply, then its own.
	other := []uint64{5, 6, 7}
	into := make([]byte, len(other)*testPage)
	codes, err := c.GetInto(context.Background(), "p", other, into)
	if err == nil {
		err = checkInto("p", other, into, codes)
	}
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range dst {
		if b != 0x5A {
			t.Fatalf("byte %d of the withdrawn request's memory was written after it gave up", i)
		}
	}
}

// Wrong sizes are refused before anything is sent.
func TestGetIntoBadSize(t *testing.T) {
	c := &Client{Socket: fakeServer(t)}
	defer c.Close()
	if _, err := c.GetInto(context.Background(), "p", []uint64{1, 2}, make([]byte, 4097)); err == nil {
		t.Fatal("4097 bytes for 2 pages accepted")
	}
	if _, err := c.GetInto(context.Background(), "p", []uint64{1}, make([]byte, 8192)); err == nil {
		t.Fatal("pages of 8192 bytes accepted from a daemon of 4096")
	}
}
