package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/s4d-project/s4d/ipc"
)

const testPage = 4096

// pageOf is the page a fake server holds under key.
func pageOf(key uint64) []byte {
	p := make([]byte, testPage)
	for i := 0; i < testPage; i += 8 {
		binary.LittleEndian.PutUint64(p[i:], key*1000003+uint64(i))
	}
	return p
}

// fakeServer answers HELLO and GET on one connection, holding back the
// answers to whatever arrived together and sending them in a random
// order, so that a client's requests are answered out of order and its
// goroutines hand responses to each other. Key 999 is never answered;
// key 998 is answered after 100ms; a request starting with key 997 gets
// half its answer at once and the rest 100ms later. In pool "holes",
// keys k with k%3 == 1 are not found.
func fakeServer(t *testing.T) string {
	sock := filepath.Join(t.TempDir(), "fake.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveFake(c)
		}
	}()
	return sock
}

func serveFake(c net.Conn) {
	defer c.Close()
	frames := make(chan []byte, 64)
	go func() {
		defer close(frames)
		r := bufio.NewReader(c)
		for {
			h, body, err := ipc.ReadFrame(r, 1<<30, nil)
			if err != nil {
				return
			}
			frames <- answer(h, body)
		}
	}()
	var mu sync.Mutex
	for f := range frames {
		batch := [][]byte{f}
	more:
		for {
			select {
			case g, ok := <-frames:
				if !ok {
					break more
				}
				batch = append(batch, g)
			case <-time.After(200 * time.Microsecond):
				break more
			}
		}
		rand.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
		for _, b := range batch {
			switch {
			case b == nil:
			case bytes.HasPrefix(b, []byte("slow")):
				mu.Lock()
				c.Write(b[4 : 4+len(b[4:])/2])
				time.Sleep(100 * time.Millisecond)
				c.Write(b[4+len(b[4:])/2:])
				mu.Unlock()
			case bytes.HasPrefix(b, []byte("late")):
				go func(b []byte) {
					time.Sleep(100 * time.Millisecond)
					mu.Lock()
					c.Write(b[4:])
					mu.Unlock()
				}(b)
			default:
				mu.Lock()
				c.Write(b)
				mu.Unlock()
			}
		}
	}
}

// answer builds the response frame to a request (nil: none).
func answer(h ipc.Header, body []byte) []byte {
	rh := ipc.Header{Version: ipc.Version, Op: h.Op, Flags: ipc.FlagResponse, ID: h.ID}
	switch h.Op {
	case ipc.OpHello:
		return ipc.Frame(rh, (&ipc.Hello{Version: ipc.Version, PageSize: testPage, MaxFrame: ipc.DefaultMaxFrame,
			MaxBatchPages: ipc.DefaultMaxBatchPages, Server: "fake", Codec: "lz4"}).Encode())
	case ipc.OpGet:
		k, err := ipc.DecodeKeys(ipc.OpGet, body)
		if err != nil {
			rh.Status = ipc.CodeMalformed
			return ipc.Frame(rh, ipc.EncodeString(err.Error()))
		}
		out := binary.LittleEndian.AppendUint32(nil, testPage)
		out = binary.LittleEndian.AppendUint32(out, uint32(len(k.Keys)))
		for _, key := range k.Keys {
			out = append(out, uint8(fakeCode(k.Pool, key)))
		}
		for _, key := range k.Keys {
			if fakeCode(k.Pool, key) == ipc.OK {
				out = append(out, pageOf(key)...)
			}
		}
		switch k.Keys[0] {
		case 999:
			return nil
		case 998:
			return append([]byte("late"), ipc.Frame(rh, out)...)
		case 997:
			return append([]byte("slow"), ipc.Frame(rh, out)...)
		}
		return ipc.Frame(rh, out)
	}
	rh.Status = ipc.CodeUnknownOp
	return ipc.Frame(rh, ipc.EncodeString("not in the fake"))
}

func fakeCode(pool string, key uint64) ipc.Code {
	if pool == "holes" && key%3 == 1 {
		return ipc.CodeNotFound
	}
	return ipc.OK
}

// Many goroutines share one connection: responses come back out of order,
// small ones are read in place and large ones into their own memory, and
// each caller gets its own, whoever read it from the socket.
func TestClientPipelinedOutOfOrder(t *testing.T) {
	c := &Client{Socket: fakeServer(t)}
	defer c.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				n := 1 + (g+i)%3*20 // 1, 21 or 41 pages: 4 KiB to 164 KiB responses
				keys := make([]uint64, n)
				for j := range keys {
					keys[j] = uint64(g*100000 + i*100 + j)
				}
				pages, codes, err := c.Get(ctx, "p", keys)
				if err != nil {
					errs <- err
					return
				}
				for j, key := range keys {
					if codes[j] != ipc.OK || !bytes.Equal(pages[j*testPage:(j+1)*testPage], pageOf(key)) {
						errs <- fmt.Errorf("goroutine %d request %d: key %d came back wrong", g, i, key)
						return
					}
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

// A request given up on (its context ends) does not disturb the others,
// whether its answer never comes, comes late, or it was reading the
// socket for everyone when it gave up.
func TestClientCancelled(t *testing.T) {
	c := &Client{Socket: fakeServer(t)}
	defer c.Close()
	for _, key := range []uint64{999, 998} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_, _, err := c.Get(ctx, "p", []uint64{key})
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("key %d: %v, want the deadline", key, err)
		}
	}
	// Concurrent: one gives up while others keep asking; the late answer
	// to 998 arrives in the middle and is dropped.
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(300 * time.Millisecond)
			for i := 0; time.Now().Before(deadline); i++ {
				key := uint64(g*1000000 + i)
				if g == 0 && i%10 == 0 {
					ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
					c.Get(ctx, "p", []uint64{999})
					cancel()
					continue
				}
				pages, _, err := c.Get(context.Background(), "p", []uint64{key})
				if err != nil {
					t.Errorf("key %d: %v", key, err)
					return
				}
				if !bytes.Equal(pages, pageOf(key)) {
					t.Errorf("key %d came back wrong", key)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// An error status comes back as an *Error with the daemon's message.
func TestClientErrorStatus(t *testing.T) {
	c := &Client{Socket: fakeServer(t)}
	defer c.Close()
	_, err := c.Stats(context.Background(), "")
	if ipc.CodeOf(err) != ipc.CodeUnknownOp || err.Error() == "" {
		t.Fatalf("stats against the fake: %v", err)
	}
	// The connection is still good.
	if p, _, err := c.Get(context.Background(), "p", []uint64{7}); err != nil || !bytes.Equal(p, pageOf(7)) {
		t.Fatalf("after an error: %v", err)
	}
}

// The daemon closing an idle connection does not fail the next request:
// the client notices and dials again.
func TestClientRedialsAfterIdleClose(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "idle.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
			go serveFake(c)
		}
	}()
	c := &Client{Socket: sock}
	defer c.Close()
	if _, _, err := c.Get(context.Background(), "p", []uint64{1}); err != nil {
		t.Fatal(err)
	}
	(<-accepted).Close() // as the daemon's idle timeout would
	time.Sleep(150 * time.Millisecond)
	if p, _, err := c.Get(context.Background(), "p", []uint64{2}); err != nil || !bytes.Equal(p, pageOf(2)) {
		t.Fatalf("after the daemon closed the idle connection: %v", err)
	}
}

func TestDialErrorSaysHowToStart(t *testing.T) {
	de := &DialError{Socket: "/x", Err: errors.New("refused")}
	if !strings.Contains(de.Error(), "systemctl start s4d") || !strings.Contains(de.Error(), "s4d daemon --socket /x") {
		t.Fatalf("dial error does not say how to start: %v", de)
	}
}

// TestImportsOnlyTheWireFormat keeps programs that embed the client small:
// of s4d it needs the wire format alone.
func TestImportsOnlyTheWireFormat(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch dep {
		case "github.com/s4d-project/s4d/client", "github.com/s4d-project/s4d/ipc", "golang.org/x/sys/unix":
		default:
			t.Errorf("client depends on %s", dep)
		}
	}
}
