package ublk

import (
	"bytes"
	"encoding/binary"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/swapio"
)

// writebackDir is where a store's pages go back: $S4D_TEST_WRITEBACK (a
// block device: the guest's disk, its root being RAM), else a directory
// on the disk of /var/tmp.
func writebackDir(t *testing.T) string {
	t.Helper()
	if dev := os.Getenv("S4D_TEST_WRITEBACK"); dev != "" {
		return dev
	}
	dir, err := os.MkdirTemp("/var/tmp", "s4d-wb-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestDeviceWriteback runs where the kernel has ublk (the guest): pages
// written back to the store's file are read back through the block layer
// by the queue's own io_uring, alone and beside pages still in RAM in one
// request, checked against their hashes, while the thread goes on moving
// pages; a page written again is the new one.
func TestDeviceWriteback(t *testing.T) {
	if err := Available(); err != nil {
		t.Skip(err)
	}
	if err := swapio.Available(); err != nil {
		t.Skip(err)
	}
	// A limit of one byte: every page that is not young goes to the file.
	st, err := swapio.NewStore(16<<20, swapio.Options{MemLimit: 1, Writeback: writebackDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d, err := Create(Options{Size: 16 << 20, Queues: 2, Depth: 16, MaxIO: 32 << 10, Server: st})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	}()
	fd, err := unix.Open(d.BlockPath(), unix.O_RDWR|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	// 4 MiB of pages like a heap's, every fifth a zero page (kept in its slot).
	const n = 1024
	data := alignedBuf(n * 4096)
	for p := 0; p < n; p++ {
		if p%5 == 4 {
			continue
		}
		for i := 0; i < 4096; i += 8 {
			binary.LittleEndian.PutUint64(data[p*4096+i:], uint64(p*131+i%97)%251)
		}
	}
	if _, err := unix.Pwrite(fd, data, 0); err != nil {
		t.Fatal(err)
	}
	got := alignedBuf(n * 4096)
	check := func(what string) {
		t.Helper()
		// 32 KiB requests (the queue's largest) and single pages, so that
		// a request mixes pages from the file with pages in RAM.
		for off := 0; off < len(got); off += 32 << 10 {
			if _, err := unix.Pread(fd, got[off:off+32<<10], int64(off)); err != nil {
				t.Fatalf("%s: read at %d: %v", what, off, err)
			}
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("%s: pages came back different", what)
		}
		for off := 4096; off < len(got); off += 7 * 4096 {
			if _, err := unix.Pread(fd, got[:4096], int64(off)); err != nil || !bytes.Equal(got[:4096], data[off:off+4096]) {
				t.Fatalf("%s: page at %d: %v", what, off, err)
			}
		}
	}
	check("while the writeback moves pages")
	deadline := time.Now().Add(30 * time.Second)
	for st.Stats().FilePages < n*4/5 {
		if time.Now().After(deadline) {
			t.Fatalf("pages not written back: %+v", st.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	reads := st.Stats().FileReads
	check("from the file")
	if s := st.Stats(); s.FileReads-reads < n*4/5 {
		t.Fatalf("%d pages read from the file, want %d: %+v", s.FileReads-reads, n*4/5, s)
	}
	// Half the pages written again: the new ones, wherever they are by now.
	for p := 0; p < n; p += 2 {
		data[p*4096] ^= 0x55
	}
	if _, err := unix.Pwrite(fd, data, 0); err != nil {
		t.Fatal(err)
	}
	check("after a rewrite")
	if s := d.NativeStats(); s.Errors != 0 {
		t.Fatalf("requests failed: %+v", s)
	}
	t.Logf("store: %+v", st.Stats())
}
