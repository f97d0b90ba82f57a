package swapio

import (
	"bytes"
	"errors"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A store's pages go through Export into a new store with Import, lost
// blocks stay lost, and the fenced store refuses writes but keeps serving.
func TestExportImport(t *testing.T) {
	const size = 16 << 20
	src := newTestStore(t, size, Options{})
	scratch := make([]byte, PageSize)
	want := map[uint64][]byte{}
	same := bytes.Repeat([]byte{9, 8, 7, 6, 5, 4, 3, 2}, PageSize/8)
	for b := uint64(0); b < 3000; b += 3 {
		p := textPage(b)
		switch b % 4 {
		case 1:
			p = randomPage(b)
		case 2:
			p = same
		}
		if err := src.write(b, p, scratch); err != nil {
			t.Fatal(err)
		}
		want[b] = p
	}
	if err := src.write(1, make([]byte, PageSize), scratch); err != nil { // zero: left out, reads as zeros
		t.Fatal(err)
	}
	src.MarkLost()
	src.Lose(3) // held a page: now lost
	delete(want, 3)
	src.Fence()
	if err := src.write(5, textPage(5), scratch); err == nil {
		t.Fatal("a write after Fence succeeded")
	}
	dst := newTestStore(t, size, Options{})
	var got, lost int
	err := src.Export(0, size/PageSize, func(keys []uint64, pages []byte, lostKeys []uint64) error {
		for i, k := range keys {
			if err := dst.Import(k, pages[i*PageSize:(i+1)*PageSize], scratch); err != nil {
				return err
			}
		}
		for _, k := range lostKeys {
			dst.Lose(k)
		}
		got += len(keys)
		lost += len(lostKeys)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got != len(want) {
		t.Fatalf("exported %d pages, want %d", got, len(want))
	}
	// Every block not written is lost (MarkLost), the zero one excepted.
	if wantLost := int(size/PageSize) - len(want) - 1; lost != wantLost {
		t.Fatalf("exported %d lost blocks, want %d", lost, wantLost)
	}
	if s := src.Stats(); s.Pages != uint64(len(want))+1 { // still served: nothing dropped
		t.Fatalf("source after export: %+v", s)
	}
	page := make([]byte, PageSize)
	for b, p := range want {
		if err := dst.read(b, page); err != nil || !bytes.Equal(page, p) {
			t.Fatalf("block %d after import: %v", b, err)
		}
	}
	if err := dst.read(1, page); err != nil || !bytes.Equal(page, make([]byte, PageSize)) {
		t.Fatalf("zero block after import: %v", err)
	}
	if err := dst.read(3, page); err == nil || !dst.Lost(3) {
		t.Fatalf("block 3 should stay lost, read err %v", err)
	}
	if !dst.Empty(dst.Writes(), true) {
		t.Fatal("not emptied")
	}
	if err := dst.read(3, page); err != nil || !bytes.Equal(page, make([]byte, PageSize)) {
		t.Fatalf("block 3 after Empty: %v", err)
	}
	// A failing consumer stops the export with its error.
	boom := errors.New("boom")
	if err := dst.Export(0, 1<<62, func([]uint64, []byte, []uint64) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("export error %v, want boom", err)
	}
}

// Empty drops every page but the header, and nothing when a write came
// after the count it was given; a lost header goes too.
func TestEmpty(t *testing.T) {
	st := newTestStore(t, 1<<20, Options{})
	scratch := make([]byte, PageSize)
	for b := uint64(0); b < 100; b++ {
		if err := st.write(b, textPage(b), scratch); err != nil {
			t.Fatal(err)
		}
	}
	seen := st.Writes()
	if err := st.write(100, textPage(100), scratch); err != nil {
		t.Fatal(err)
	}
	if st.Empty(seen, true) || st.Stats().Pages != 101 {
		t.Fatalf("emptied after a later write: %+v", st.Stats())
	}
	if !st.Empty(st.Writes(), true) {
		t.Fatal("not emptied")
	}
	if s := st.Stats(); s.Pages != 1 || s.ComprBytes == 0 {
		t.Fatalf("after Empty: %+v, want the header alone", s)
	}
	page := make([]byte, PageSize)
	if err := st.read(0, page); err != nil || !bytes.Equal(page, textPage(0)) {
		t.Fatalf("header after Empty: %v", err)
	}
	st.Lose(0)
	if !st.Empty(st.Writes(), true) || st.Lost(0) {
		t.Fatal("a lost header should be emptied")
	}
	if err := st.write(5, textPage(5), scratch); err != nil {
		t.Fatal("write after Empty:", err)
	}
}

// A reserve a burst of writes made grow goes back to the one asked for
// once writes stop finding the ring empty, and the ring's surplus slabs
// with it.
func TestReserveShrinks(t *testing.T) {
	old := shrinkAfter.Load()
	shrinkAfter.Store(int64(time.Hour))
	t.Cleanup(func() { shrinkAfter.Store(old) })
	st := newTestStore(t, 64<<20, Options{Reserve: SlabSize, MaxReserve: 8 * SlabSize})
	scratch := make([]byte, PageSize)
	for b := uint64(0); st.Stats().NoMem == 0; b++ {
		if err := st.write(b, randomPage(b), scratch); err != nil && !errors.Is(err, unix.ENOMEM) {
			t.Fatal(err)
		}
	}
	waitFor := func(what string, ok func(Stats) bool) {
		deadline := time.Now().Add(10 * time.Second)
		for !ok(st.Stats()) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %+v", what, st.Stats())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("the reserve did not grow", func(s Stats) bool { return s.Reserve > SlabSize && s.Ready > SlabSize })
	atomic.StoreInt64((*int64)(unsafe.Pointer(&st.r.shrink_after_ns)), int64(20*time.Millisecond))
	waitFor("the reserve did not shrink back to one slab", func(s Stats) bool { return s.Reserve == SlabSize && s.Ready <= SlabSize })
}
