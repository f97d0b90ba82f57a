package swapio

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"
)

// newWritebackStore is a store with writeback to a directory of the test's
// and the thread idle (a limit no store of a test reaches): the tests move
// pages with writebackOnce, one batch at a time.
func newWritebackStore(t *testing.T, size uint64) *Store {
	t.Helper()
	st := newTestStore(t, size, Options{MemLimit: 1 << 40, Writeback: t.TempDir()})
	if st.wb == nil {
		t.Fatal("no writeback made")
	}
	return st
}

// Cold pages go to the file and come back as written, through the same
// read Export uses; a page written again after its writeback, or while it
// was being written back, is the new one; a discard frees its place.
func TestWritebackRoundTrip(t *testing.T) {
	st := newWritebackStore(t, 4<<20)
	scratch := make([]byte, PageSize)
	pages := map[uint64][]byte{}
	for b := uint64(0); b < 200; b++ {
		p := textPage(b)
		if b%7 == 0 {
			p = randomPage(b) // stored raw
		}
		pages[b] = p
		if err := st.write(b, p, scratch); err != nil {
			t.Fatal(err)
		}
	}
	before := st.Stats()
	// The first pass only makes the young old; the pages move after.
	moved := 0
	for i := 0; i < 20 && moved < 200; i++ {
		n, err := st.writebackOnce()
		if err != nil {
			t.Fatal(err)
		}
		moved += n
	}
	s := st.Stats()
	if moved != 200 || s.FilePages != 200 || s.FileWrites != 200 || s.Pages != before.Pages {
		t.Fatalf("moved %d; stats %+v", moved, s)
	}
	if s.ComprBytes != 0 || s.LZ4 != 0 || s.Raw != 0 {
		t.Fatalf("pages written back still counted in RAM: %+v", s)
	}
	got := make([]byte, PageSize)
	for b, p := range pages {
		if err := st.read(b, got); err != nil || !bytes.Equal(got, p) {
			t.Fatalf("block %d from the file: %v, equal %v", b, err, bytes.Equal(got, p))
		}
	}
	// Written again: the new page, in RAM; the file's old copy is not read.
	if err := st.write(5, textPage(5000), scratch); err != nil {
		t.Fatal(err)
	}
	if err := st.read(5, got); err != nil || !bytes.Equal(got, textPage(5000)) {
		t.Fatalf("block 5 after a rewrite: %v", err)
	}
	st.discard(6, 1)
	if err := st.read(6, got); err != nil || !bytes.Equal(got, make([]byte, PageSize)) {
		t.Fatalf("block 6 after a discard: %v", err)
	}
	if s := st.Stats(); s.FilePages != 198 || s.LZ4 != 1 {
		t.Fatalf("after a rewrite and a discard: %+v", s)
	}
	// A page rewritten between its pick and its commit stays the new one:
	// young, so the commit leaves it.
	st.write(9, textPage(9), scratch) // block 9 back in RAM, young
	for i := 0; i < 3; i++ {
		st.writebackOnce() // old, then picked and moved
	}
	if k := st.kind(9); k != kindFile {
		t.Fatalf("block 9 not moved: kind %d", k)
	}
	st.write(9, textPage(9000), scratch)
	var blocks, tokens [1]uint64
	hand := uint64(9)
	if n := st.pick(&hand, blocks[:], tokens[:]); n != 0 {
		t.Fatalf("a young page picked")
	}
	hand = 9
	if n := st.pick(&hand, blocks[:], tokens[:]); n != 1 || blocks[0] != 9 {
		t.Fatalf("an old page not picked: %d", n)
	}
	st.write(9, textPage(9001), scratch) // between the pick and the commit
	if st.commit(9, tokens[0]) {
		t.Fatal("a page written again after its pick was committed to the file")
	}
	if err := st.read(9, got); err != nil || !bytes.Equal(got, textPage(9001)) {
		t.Fatalf("block 9: %v", err)
	}
}

// A page that comes back from the file different fails its read.
func TestWritebackHash(t *testing.T) {
	st := newWritebackStore(t, 1<<20)
	scratch := make([]byte, PageSize)
	if err := st.write(3, textPage(3), scratch); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		st.writebackOnce()
	}
	if st.kind(3) != kindFile {
		t.Fatal("not written back")
	}
	bad := textPage(4)
	if err := st.corruptFile(3, bad); err != nil {
		t.Fatal(err)
	}
	if err := st.read(3, make([]byte, PageSize)); err == nil {
		t.Fatal("a page changed in the file read back without an error")
	}
}

// The thread keeps RAM at the limit: pages past it go to the file.
func TestWritebackLimit(t *testing.T) {
	st := newTestStore(t, 8<<20, Options{MemLimit: 64 << 10, Writeback: t.TempDir()})
	scratch := make([]byte, PageSize)
	for b := uint64(0); b < 2048; b++ {
		if err := st.write(b, textPage(b), scratch); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the store down to its limit", func() bool { return st.Stats().ComprBytes <= 64<<10 })
	got := make([]byte, PageSize)
	for b := uint64(0); b < 2048; b++ {
		if err := st.read(b, got); err != nil || !bytes.Equal(got, textPage(b)) {
			t.Fatalf("block %d: %v", b, err)
		}
	}
	if s := st.Stats(); s.FilePages < 1024 || s.MemLimit != 64<<10 {
		t.Fatalf("stats %+v", s)
	}
}

// A writeback directory on tmpfs is refused: its pages would stay in RAM.
func TestWritebackRefusesTmpfs(t *testing.T) {
	if err := Available(); err != nil {
		t.Skip(err)
	}
	if _, err := NewStore(1<<20, Options{MemLimit: 1 << 20, Writeback: "/dev/shm"}); err == nil {
		t.Fatal("a writeback directory on tmpfs taken")
	}
	if _, err := NewStore(1<<20, Options{MemLimit: 1 << 20}); err == nil {
		t.Fatal("a memory limit without a writeback directory taken")
	}
}

// waitFor polls cond until it holds, failing after a bound far past what
// it needs: the thread works in the background.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 2000; i++ {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: not within 20 s", what)
}

// Writers, readers and discards on their own blocks while the thread moves
// pages to the file: every read is the block's last write.
func TestWritebackConcurrent(t *testing.T) {
	st := newTestStore(t, 8<<20, Options{MemLimit: 32 << 10, Writeback: t.TempDir()})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := uint64(0); g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			scratch, got := make([]byte, PageSize), make([]byte, PageSize)
			last := map[uint64]uint64{}
			for round := uint64(0); round < 30; round++ {
				for i := uint64(0); i < 128; i++ {
					b := g*128 + i
					if (b+round)%5 == 0 {
						st.discard(b, 1)
						delete(last, b)
						continue
					}
					seed := round<<32 | b
					if err := st.write(b, textPage(seed), scratch); err != nil {
						errs <- err
						return
					}
					last[b] = seed
				}
				for b, seed := range last {
					if err := st.read(b, got); err != nil || !bytes.Equal(got, textPage(seed)) {
						errs <- fmt.Errorf("block %d round %d: %v", b, round, err)
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
	if s := st.Stats(); s.FileWrites == 0 {
		t.Fatalf("nothing written back: %+v", s)
	}
}

// Export reads pages written back from the file: a stop with persist
// hands every page on, wherever it is.
func TestWritebackExport(t *testing.T) {
	src := newWritebackStore(t, 4<<20)
	scratch := make([]byte, PageSize)
	for b := uint64(0); b < 300; b++ {
		if err := src.write(b, textPage(b), scratch); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 10; i++ {
		src.writebackOnce()
	}
	if n := src.Stats().FilePages; n != 300 {
		t.Fatalf("%d pages written back, want 300", n)
	}
	src.write(7, textPage(7000), scratch) // one back in RAM
	src.Fence()
	dst := newTestStore(t, 4<<20, Options{})
	err := src.Export(0, src.Blocks(), func(keys []uint64, pages []byte, lost []uint64) error {
		if len(lost) > 0 {
			return fmt.Errorf("blocks lost: %v", lost)
		}
		for i, k := range keys {
			if err := dst.Import(k, pages[i*PageSize:(i+1)*PageSize], scratch); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, PageSize)
	for b := uint64(0); b < 300; b++ {
		want := textPage(b)
		if b == 7 {
			want = textPage(7000)
		}
		if err := dst.Read(b, got); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("block %d after Export and Import: %v", b, err)
		}
	}
}
