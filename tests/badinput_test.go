package tests

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/ipc"
)

// raw is a client that writes whatever bytes it is given.
type raw struct {
	t *testing.T
	c net.Conn
}

func dialRaw(t *testing.T, d *daemon) *raw {
	c, err := net.Dial("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &raw{t, c}
}

func (r *raw) send(b []byte) {
	r.t.Helper()
	if _, err := r.c.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

// reply reads one response within 10 seconds.
func (r *raw) reply() (ipc.Header, []byte) {
	r.t.Helper()
	r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	h, body, err := ipc.ReadFrame(r.c, 1<<30, nil)
	if err != nil {
		r.t.Fatalf("no reply: %v", err)
	}
	return h, body
}

func (r *raw) expect(id uint64, code ipc.Code) {
	r.t.Helper()
	h, body := r.reply()
	msg, _ := ipc.DecodeString(body)
	if h.ID != id || h.Status != code || h.Flags != ipc.FlagResponse {
		r.t.Fatalf("reply id %d status %v (%s), want id %d status %v", h.ID, h.Status, msg, id, code)
	}
	if code != ipc.OK && msg == "" {
		r.t.Fatalf("error %v without a message", code)
	}
}

// closed checks the daemon hung up.
func (r *raw) closed() {
	r.t.Helper()
	r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		r.t.Fatalf("connection still open: %v", err)
	}
}

func req(op ipc.Op, id uint64, body []byte) []byte {
	return ipc.Frame(ipc.Header{Version: ipc.Version, Op: op, ID: id}, body)
}

func putBody(pool string, ps int, ks []uint64, pages []byte) []byte {
	return ipc.AppendPut(nil, &ipc.PutRequest{Pool: pool, PageSize: uint32(ps), Keys: ks, Pages: pages})
}

func getBody(pool string, ks ...uint64) []byte {
	return ipc.AppendKeys(nil, ipc.OpGet, &ipc.KeysRequest{Pool: pool, Keys: ks})
}

func TestBadInput(t *testing.T) {
	d := start(t, "--log-level", "info")
	// A well-behaved client that must keep being served throughout.
	good := d.client()
	page := corpus.Pages(corpus.Text, 1, 4096, 1)
	check := func() {
		t.Helper()
		codes, err := good.Put(ctx(t), "good", []uint64{1}, page)
		if err != nil || codes[0] != ipc.OK {
			t.Fatalf("good client refused: %v %v", err, codes)
		}
		got, codes, err := good.Get(ctx(t), "good", []uint64{1})
		if err != nil || codes[0] != ipc.OK || !bytes.Equal(got, page) {
			t.Fatalf("good client get: %v %v", err, codes)
		}
	}
	check()

	// Request-level errors: answered, connection stays usable.
	r := dialRaw(t, d)
	r.send(req(99, 1, nil))
	r.expect(1, ipc.CodeUnknownOp)
	r.send(req(ipc.OpPut, 2, putBody("p", 8192, []uint64{1}, make([]byte, 8192))))
	r.expect(2, ipc.CodePageSize)
	r.send(req(ipc.OpPut, 3, putBody("p", 4096, nil, nil)))
	r.expect(3, ipc.CodeEmptyBatch)
	r.send(req(ipc.OpPut, 4, putBody("p", 4096, []uint64{5, 5}, make([]byte, 8192))))
	r.expect(4, ipc.CodeDuplicateKey)
	r.send(req(ipc.OpPut, 5, putBody("p", 4096, []uint64{5}, make([]byte, 100))))
	r.expect(5, ipc.CodeMalformed)
	r.send(req(ipc.OpPut, 6, putBody("bad pool", 4096, []uint64{5}, make([]byte, 4096))))
	r.expect(6, ipc.CodeBadPool)
	r.send(req(ipc.OpGet, 7, getBody("nosuchpool", 1)))
	r.expect(7, ipc.CodeNotFound)
	r.send(req(ipc.OpGet, 8, append(getBody("good", 1), 0xEE)))
	r.expect(8, ipc.CodeMalformed)
	// Keys missing on GET: a per-page status, not an error.
	r.send(req(ipc.OpGet, 9, getBody("good", 1, 2)))
	h, body := r.reply()
	if h.ID != 9 || h.Status != ipc.OK {
		t.Fatalf("get with a missing key: %+v", h)
	}
	if _, pages, codes, err := ipc.DecodeGet(body, 2); err != nil || codes[0] != ipc.OK || codes[1] != ipc.CodeNotFound || !bytes.Equal(pages[:4096], page) {
		t.Fatalf("get with a missing key: %v %v", err, codes)
	}
	// A count claiming more keys than the body holds.
	lie := binary.LittleEndian.AppendUint16(nil, 4)
	lie = append(lie, "good"...)
	lie = binary.LittleEndian.AppendUint32(lie, 1<<30)
	r.send(req(ipc.OpDel, 10, lie))
	r.expect(10, ipc.CodeMalformed)
	// Pipelined: three requests in one write, answered in order.
	r.send(append(append(req(ipc.OpStats, 11, ipc.EncodeString("")), req(ipc.OpPools, 12, nil)...), req(ipc.OpGet, 13, getBody("good", 1))...))
	r.expect(11, ipc.OK)
	r.expect(12, ipc.OK)
	r.expect(13, ipc.OK)
	check()

	// Stream-level errors: answered where possible, then disconnected.
	for _, tc := range []struct {
		name  string
		frame []byte
		code  ipc.Code
	}{
		{"oversized", binary.LittleEndian.AppendUint32(nil, 1<<31), ipc.CodeTooLarge},
		{"short length", []byte{4, 0, 0, 0, 1, 2, 3, 4}, ipc.CodeMalformed},
		{"bad version", ipc.Frame(ipc.Header{Version: 9, Op: ipc.OpStats, ID: 77}, nil), ipc.CodeVersion},
		{"flags set", ipc.Frame(ipc.Header{Version: 1, Op: ipc.OpStats, Flags: 4, ID: 77}, nil), ipc.CodeMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRaw(t, d)
			frame := tc.frame
			if tc.name == "oversized" {
				frame = append(frame, make([]byte, ipc.HeaderSize)...)
				frame[5] = byte(ipc.OpPut)
				frame[4] = 1
			}
			r.send(frame)
			h, body := r.reply()
			msg, _ := ipc.DecodeString(body)
			if h.Status != tc.code || msg == "" {
				t.Fatalf("status %v %q, want %v", h.Status, msg, tc.code)
			}
			r.closed()
			check()
		})
	}

	// Garbage and half frames, then hang-ups: nothing answered wrong, the
	// daemon carries on.
	for _, junk := range [][]byte{[]byte("GET / HTTP/1.1\r\n\r\n"), {1, 0}, req(ipc.OpPut, 1, putBody("p", 4096, []uint64{1}, make([]byte, 4096)))[:100]} {
		r := dialRaw(t, d)
		r.send(junk)
		r.c.Close()
	}
	check()
	st, err := good.Stats(ctx(t), "")
	if err != nil || st.IO.InvalidIO < 10 {
		t.Fatalf("invalid requests not counted: %v %+v", err, st.IO)
	}
}

// A client that sends a frame a byte at a time is cut off; others are not held up.
func TestSlowClient(t *testing.T) {
	d := start(t, "--frame-timeout", "1s", "--idle-timeout", "2s")
	slow := dialRaw(t, d)
	idle := dialRaw(t, d)
	frame := req(ipc.OpStats, 1, ipc.EncodeString(""))
	began := time.Now()
	slow.send(frame[:3])
	good := d.client()
	if _, err := good.Stats(ctx(t), ""); err != nil {
		t.Fatalf("good client held up by a slow one: %v", err)
	}
	slow.closed()
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("slow client cut off only after %v", took)
	}
	idle.closed()
}
