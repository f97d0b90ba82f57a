package ctl

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/s4d-project/s4d/ipc"
)

const testPS = 4096

// numberedPages returns n pages, each filled with its index+1.
func numberedPages(n int) []byte {
	b := make([]byte, n*testPS)
	for i := range n {
		for j := range testPS {
			b[i*testPS+j] = byte(i + 1)
		}
	}
	return b
}

// The pages of a reply go to their keys' places; missing ones are holes
// that read as zeros and take no space, at the end too.
func TestPageFileLeavesHoles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out")
	os.WriteFile(path, bytes.Repeat([]byte{0xee}, 64*testPS), 0o644) // truncated, not overwritten
	w, err := openPageFile(path)
	if err != nil {
		t.Fatal(err)
	}
	nf := ipc.CodeNotFound
	// Two replies: keys 0-3 (1 and 2 missing), keys 4-7 (4 and 7 missing),
	// then 256 keys of which none is there.
	if err := w.write(0, numberedPages(4), []ipc.Code{ipc.OK, nf, nf, ipc.OK}, testPS); err != nil {
		t.Fatal(err)
	}
	if err := w.write(4, numberedPages(4), []ipc.Code{nf, ipc.OK, ipc.OK, nf}, testPS); err != nil {
		t.Fatal(err)
	}
	if err := w.write(8, make([]byte, 256*testPS), slices.Repeat([]ipc.Code{nf}, 256), testPS); err != nil {
		t.Fatal(err)
	}
	if err := w.finish(264 * testPS); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	want := make([]byte, 264*testPS)
	src := numberedPages(4)
	for _, p := range [][2]int{{0, 0}, {3, 3}, {5, 1}, {6, 2}} { // key, page of its reply
		copy(want[p[0]*testPS:], src[p[1]*testPS:(p[1]+1)*testPS])
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the file does not hold the pages at their keys with zeros between")
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks*512 > 64*testPS { // 4 pages written of 264; filesystems allocate some more
		t.Errorf("the file takes %d bytes for 4 pages written: the holes were written", st.Blocks*512)
	}
}

// Sequential output (stdout, a pipe) gets zeros in place of missing pages.
func TestPageFileSequential(t *testing.T) {
	r, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	w := &pageFile{f: wr}
	done := make(chan []byte)
	go func() {
		var b bytes.Buffer
		b.ReadFrom(r)
		done <- b.Bytes()
	}()
	nf := ipc.CodeNotFound
	w.write(0, numberedPages(3), []ipc.Code{nf, ipc.OK, nf}, testPS)
	if err := w.finish(3 * testPS); err != nil {
		t.Fatal(err)
	}
	wr.Close()
	want := make([]byte, 3*testPS)
	copy(want[testPS:], numberedPages(2)[testPS:])
	if got := <-done; !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes, not page 2 between zeros", len(got))
	}
}

// A tally says how many keys were missing and how many failed, and a
// failure other than a missing key decides the exit status.
func TestTally(t *testing.T) {
	var tl tally
	tl.add([]uint64{10, 11, 12}, []ipc.Code{ipc.OK, ipc.CodeNotFound, ipc.OK})
	tl.add([]uint64{13, 14}, []ipc.Code{ipc.CodeNotFound, ipc.OK})
	err := tl.err("get", "p")
	if !errors.Is(err, ipc.ErrNotFound) || !strings.Contains(err.Error(), "2 of 5 keys in pool p, first key 11") || tl.ok != 3 {
		t.Fatalf("%v (ok %d)", err, tl.ok)
	}
	tl.add([]uint64{15}, []ipc.Code{ipc.CodeCorrupt})
	err = tl.err("get", "p")
	var ie *ipc.Error
	if !errors.As(err, &ie) || ie.Code != ipc.CodeCorrupt || !strings.Contains(err.Error(), "1 of 6 pages, first key 15") ||
		!strings.Contains(err.Error(), "not found: 2 of 6 keys") {
		t.Fatalf("%v", err)
	}
	var ok tally
	ok.add([]uint64{1}, []ipc.Code{ipc.OK})
	if err := ok.err("del", "p"); err != nil {
		t.Fatal(err)
	}
}
