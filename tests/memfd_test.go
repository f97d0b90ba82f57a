package tests

import (
	"bytes"
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/client"
	"github.com/s4d-project/s4d/ipc"
)

func TestPutFromMemfd(t *testing.T) {
	d := start(t)
	c := d.client()
	const ps, n = 4096, 256
	buf, err := client.NewPageBuffer(2 * n * ps)
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
	back, err := client.NewPageBuffer((n + 1) * ps)
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

// A memfd the daemon keeps mapped between requests: pages written into it
// later are seen, a file that grew is mapped again, and a descriptor that
// comes right behind a request without one is matched to its own frame.
func TestMemfdKeptMapped(t *testing.T) {
	d := start(t)
	c := d.client()
	const ps = 4096
	fd, err := unix.MemfdCreate("grows", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "grows")
	defer f.Close()
	unix.Ftruncate(fd, 4*ps)
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK); err != nil {
		t.Fatal(err)
	}
	pages := corpus.Pages(corpus.Text, 8, ps, 9)
	r := dialRaw(t, d)
	putFD := func(id uint64, key uint64, page int) {
		t.Helper()
		unix.Pwrite(fd, pages[page*ps:(page+1)*ps], int64(page*ps))
		body := ipc.AppendPutFD(nil, &ipc.PutFDRequest{Pool: "kept", PageSize: ps, Keys: []uint64{key}, Offset: uint64(page * ps)})
		if _, _, err := r.c.(*net.UnixConn).WriteMsgUnix(req(ipc.OpPutFD, id, body), unix.UnixRights(fd), nil); err != nil {
			t.Fatal(err)
		}
	}
	putFD(1, 0, 0)
	r.expect(1, ipc.OK)
	putFD(2, 1, 1) // the same file again: its mapping is reused
	r.expect(2, ipc.OK)
	unix.Ftruncate(fd, 8*ps)
	putFD(3, 7, 7) // past the old end: mapped again
	r.expect(3, ipc.OK)
	// A PUT without a descriptor, then a PUT_FD, then STATS, back to back:
	// the daemon may well receive them in one call.
	r.send(req(ipc.OpPut, 4, putBody("kept", ps, []uint64{2}, pages[2*ps:3*ps])))
	putFD(5, 3, 3)
	r.send(req(ipc.OpStats, 6, ipc.EncodeString("")))
	r.expect(4, ipc.OK)
	r.expect(5, ipc.OK)
	r.expect(6, ipc.OK)
	got, codes, err := c.Get(ctx(t), "kept", []uint64{0, 1, 7, 2, 3})
	if err != nil || ipc.PageError([]uint64{0, 1, 7, 2, 3}, codes) != nil {
		t.Fatalf("get: %v %v", err, codes)
	}
	for i, page := range []int{0, 1, 7, 2, 3} {
		if !bytes.Equal(got[i*ps:(i+1)*ps], pages[page*ps:(page+1)*ps]) {
			t.Fatalf("page %d came back wrong", page)
		}
	}
	// Past the end of the grown file: refused, the connection goes on.
	body := ipc.AppendPutFD(nil, &ipc.PutFDRequest{Pool: "kept", PageSize: ps, Keys: []uint64{9}, Offset: 8 * ps})
	if _, _, err := r.c.(*net.UnixConn).WriteMsgUnix(req(ipc.OpPutFD, 7, body), unix.UnixRights(fd), nil); err != nil {
		t.Fatal(err)
	}
	r.expect(7, ipc.CodeMalformed)
	r.send(req(ipc.OpStats, 8, ipc.EncodeString("")))
	r.expect(8, ipc.OK)
}
