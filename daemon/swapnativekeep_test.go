package daemon

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/s4d-project/s4d/swapio"
)

func nativeTestStore(t testing.TB, size uint64) *swapio.Store {
	t.Helper()
	if err := swapio.Available(); err != nil {
		t.Skip(err)
	}
	st, err := swapio.NewStore(size, swapio.Options{})
	if err != nil {
		t.Skip("native store not made here:", err)
	}
	t.Cleanup(st.Close)
	return st
}

// nativePage is block b's page: compressible, unique to b.
func nativePage(b uint64) []byte {
	p := bytes.Repeat([]byte("native swap page "), 4096/17+1)[:4096]
	binary.LittleEndian.PutUint64(p[64:], b*0x9e3779b97f4a7c15)
	binary.LittleEndian.PutUint64(p[2048:], b)
	return p
}

// A persisted stop's pages go from a native store through the daemon's
// store into the next daemon's native store: every page as written, zero
// blocks as zeros, blocks lost with an earlier crash still lost.
func TestNativeExportImport(t *testing.T) {
	const size = 64 << 20
	d := serveTestDaemon(t)
	src := nativeTestStore(t, size)
	scratch := make([]byte, 4096)
	n := uint64(size / 4096)
	var wrote int
	for b := uint64(0); b < n; b += 2 {
		if err := src.Import(b, nativePage(b), scratch); err != nil {
			t.Fatal(err)
		}
		wrote++
	}
	src.MarkLost() // a crash's takeover: every block not written is lost
	for b := uint64(1); b < n; b += 4 {
		if err := src.Import(b, make([]byte, 4096), scratch); err != nil { // written since: zeros
			t.Fatal(err)
		}
	}
	sd := &swapDev{n: 7, nat: src, rec: swapRecord{ID: 9, N: 7, Size: size}}
	t0 := time.Now()
	if err := d.exportNative(sd); err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	dst := nativeTestStore(t, size)
	held, err := d.importNative(dst, newPoolPages(d, swapPool(7)), n)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d pages: export %v, import %v", wrote, t1.Sub(t0), time.Since(t1))
	if held != uint64(wrote) {
		t.Fatalf("imported %d pages, want %d", held, wrote)
	}
	page := make([]byte, 4096)
	for b := uint64(0); b < n; b++ {
		err := dst.Read(b, page)
		switch {
		case b%2 == 0:
			if err != nil || !bytes.Equal(page, nativePage(b)) {
				t.Fatalf("block %d: %v or wrong page", b, err)
			}
		case b%4 == 1:
			if err != nil || !bytes.Equal(page, make([]byte, 4096)) {
				t.Fatalf("zero block %d: %v", b, err)
			}
		default:
			if err == nil || !dst.Lost(b) {
				t.Fatalf("block %d lost with the crash was served", b)
			}
		}
	}
}

// serveTestDaemon serves a cpu daemon in this process until the test ends.
func serveTestDaemon(t *testing.T) *Daemon {
	d, _ := serveDaemon(t, nil)
	return d
}
