package tests

import (
	"bytes"
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/ipc"
)

func TestPutFromMemfd(t *testing.T) {
	d := start(t)
	c := d.client()
	const ps, n = 4096, 256
	buf, err := ipc.NewPageBuffer(2 * n * ps)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	pages := corpus.Pages(corpus.Mixed, n, ps, 4)
	copy(buf.Bytes()[n*ps:], pages)
	codes, err := c.PutBuffer(ctx(t), "zc", keys(0, n), buf, n*ps, ps)
	if err != nil {
		t.Fatal(err)
	}
	allOK(t, "put from memfd", keys(0, n), codes)
	got, codes, err := c.Get(ctx(t), "zc", keys(0, n))
	if err != nil || ipc.PageError(keys(0, n), codes) != nil || !bytes.Equal(got, pages) {
		t.Fatalf("pages put through a memfd come back wrong: %v", err)
	}

	// And back into another memfd, with a missing key left untouched.
	back, err := ipc.NewPageBuffer((n + 1) * ps)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	for i := range back.Bytes() {
		back.Bytes()[i] = 0xEE
	}
	codes, err = c.GetBuffer(ctx(t), "zc", append(keys(0, n), 999999), back, 0, ps)
	if err != nil {
		t.Fatal(err)
	}
	if ipc.PageError(keys(0, n), codes[:n]) != nil || codes[n] != ipc.CodeNotFound {
		t.Fatalf("get into memfd: %v", codes[n-2:])
	}
	if !bytes.Equal(back.Bytes()[:n*ps], pages) || back.Bytes()[n*ps] != 0xEE || back.Bytes()[len(back.Bytes())-1] != 0xEE {
		t.Fatal("pages fetched into a memfd come back wrong")
	}
	codes, err = c.GetBuffer(ctx(t), "zc", keys(0, n), back, ps, ps)
	if err != nil || ipc.PageError(keys(0, n), codes) != nil || !bytes.Equal(back.Bytes()[ps:], pages) {
		t.Fatalf("get into memfd at an offset: %v", err)
	}

	// Out of bounds or misaligned: refused with a reason, the connection goes on.
	if _, err := c.PutBuffer(ctx(t), "zc", keys(0, 1), buf, 100, ps); err == nil {
		t.Fatal("misaligned offset accepted")
	}
	// An unsealed memfd could shrink under the daemon's mapping: refused.
	fd, _ := unix.MemfdCreate("unsealed", unix.MFD_CLOEXEC)
	f := os.NewFile(uintptr(fd), "unsealed")
	defer f.Close()
	unix.Ftruncate(fd, ps)
	r := dialRaw(t, d)
	body := ipc.AppendPutFD(nil, &ipc.PutFDRequest{Pool: "zc", PageSize: ps, Keys: []uint64{9}})
	frame := req(ipc.OpPutFD, 1, body)
	if _, _, err := r.c.(*net.UnixConn).WriteMsgUnix(frame, unix.UnixRights(fd), nil); err != nil {
		t.Fatal(err)
	}
	r.expect(1, ipc.CodeMalformed)
	// PUT_FD without a descriptor, and a descriptor on another operation.
	r.send(req(ipc.OpPutFD, 2, body))
	r.expect(2, ipc.CodeMalformed)
	if _, _, err := r.c.(*net.UnixConn).WriteMsgUnix(req(ipc.OpStats, 3, ipc.EncodeString("")), unix.UnixRights(fd), nil); err != nil {
		t.Fatal(err)
	}
	r.expect(3, ipc.CodeMalformed)
	if _, err := c.Stats(ctx(t), ""); err != nil {
		t.Fatal(err)
	}
}
