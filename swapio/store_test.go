package swapio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func newTestStore(t *testing.T, size uint64, o Options) *Store {
	t.Helper()
	if err := Available(); err != nil {
		t.Skip(err)
	}
	st, err := NewStore(size, o)
	if err != nil {
		t.Skip("store not made here:", err) // mlock refused: no memlock allowance
	}
	t.Cleanup(st.Close)
	return st
}

// textPage is a page like a heap's: compressible, not same-filled.
func textPage(seed uint64) []byte {
	p := make([]byte, PageSize)
	r := rand.New(rand.NewPCG(seed, 1))
	for i := 0; i < PageSize; i += 8 {
		binary.LittleEndian.PutUint64(p[i:], r.Uint64()%64)
	}
	return p
}

func randomPage(seed uint64) []byte {
	p := make([]byte, PageSize)
	r := rand.New(rand.NewPCG(seed, 2))
	for i := 0; i < PageSize; i += 8 {
		binary.LittleEndian.PutUint64(p[i:], r.Uint64())
	}
	return p
}

// Every kind of page comes back as written; overwrites and discards free
// what the block held, and the counters say so.
func TestStoreRoundTrip(t *testing.T) {
	st := newTestStore(t, 1<<20, Options{})
	scratch := make([]byte, PageSize)
	same := bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7, 8}, PageSize/8)
	pages := map[uint64][]byte{0: make([]byte, PageSize), 1: same, 2: textPage(2), 3: randomPage(3), 255: textPage(255)}
	for b, p := range pages {
		if err := st.write(b, p, scratch); err != nil {
			t.Fatalf("write %d: %v", b, err)
		}
	}
	s := st.Stats()
	if s.Pages != 5 || s.Zero != 1 || s.Same != 1 || s.LZ4 != 2 || s.Raw != 1 {
		t.Fatalf("after writes: %+v", s)
	}
	if s.ComprBytes <= PageSize || s.ComprBytes >= 2*PageSize { // the raw page, and two small ones
		t.Fatalf("compressed bytes %d", s.ComprBytes)
	}
	// Slabs for two classes came from the ring: its low mark says so (the
	// refill may have topped it up since, not the mark).
	if s.RingLow == 0 || s.RingLow > s.Reserve-SlabSize {
		t.Fatalf("reserve low mark %d of a %d reserve after slabs were taken", s.RingLow, s.Reserve)
	}
	got := make([]byte, PageSize)
	for b, p := range pages {
		clear(got)
		got[0] = 0xff
		if err := st.read(b, got); err != nil || !bytes.Equal(got, p) {
			t.Fatalf("read %d: %v, equal %v", b, err, bytes.Equal(got, p))
		}
	}
	// Never written: zeros, as zram reads.
	if err := st.read(7, got); err != nil || !bytes.Equal(got, make([]byte, PageSize)) {
		t.Fatalf("unwritten block: %v", err)
	}
	if err := st.write(2, pages[3], scratch); err != nil { // overwrite: raw in place of lz4
		t.Fatal(err)
	}
	st.discard(3, 1)
	st.discard(250, 10) // past the end: ignored
	if err := st.read(2, got); err != nil || !bytes.Equal(got, pages[3]) {
		t.Fatalf("overwritten block: %v", err)
	}
	if err := st.read(3, got); err != nil || !bytes.Equal(got, make([]byte, PageSize)) {
		t.Fatalf("discarded block: %v", err)
	}
	s = st.Stats()
	if s.Pages != 3 || s.LZ4 != 0 || s.Raw != 1 || s.ComprBytes != PageSize {
		t.Fatalf("after overwrite and discards: %+v", s)
	}
	if err := st.write(256, pages[2], scratch); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("write past the end: %v", err)
	}
}

// A write that finds no free slab fails at once with ENOMEM, wakes the
// refill, leaves the block as it was, and the reserve grows; once the
// refill has run, writes succeed again.
func TestStoreFullFailsWrite(t *testing.T) {
	st := newTestStore(t, 64<<20, Options{Reserve: SlabSize, MaxReserve: 4 * SlabSize})
	resume := st.PauseRefill() // only the one slab in the ring
	scratch := make([]byte, PageSize)
	raw := randomPage(9)
	cap := (SlabSize - 64) / PageSize // raw pages a slab holds
	for b := range cap {
		if err := st.write(uint64(b), randomPage(uint64(b)), scratch); err != nil {
			resume()
			t.Fatalf("write %d of %d: %v", b, cap, err)
		}
	}
	if err := st.write(100, raw, scratch); !errors.Is(err, unix.ENOMEM) {
		resume()
		t.Fatalf("write with no slab left: %v, want ENOMEM", err)
	}
	// Same-filled pages need no slab.
	if err := st.write(101, make([]byte, PageSize), scratch); err != nil {
		resume()
		t.Fatalf("zero page with no slab left: %v", err)
	}
	resume()
	s := st.Stats()
	if s.NoMem != 1 || s.Wakes == 0 {
		t.Fatalf("stats %+v: want one failed write and a wake", s)
	}
	got := make([]byte, PageSize)
	if err := st.read(100, got); err != nil || !bytes.Equal(got, make([]byte, PageSize)) {
		t.Fatalf("the failed write changed its block: %v", err)
	}
	// The refill wakes on the eventfd: wait for it by retrying the write
	// (no timing: each try either fails with ENOMEM or succeeds).
	for {
		err := st.write(100, raw, scratch)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.ENOMEM) {
			t.Fatal(err)
		}
		runtime.Gosched()
	}
	if err := st.read(100, got); err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("after the refill: %v", err)
	}
	if r := st.Stats().Reserve; r <= SlabSize {
		t.Fatalf("reserve %d did not grow after a write found it empty", r)
	}
}

// A stored page that comes back different fails its read (EIO), never
// hands wrong bytes to the kernel; a lost block (after a crash) fails
// until written or discarded.
func TestStoreChecksumAndLost(t *testing.T) {
	st := newTestStore(t, 1<<20, Options{})
	scratch := make([]byte, PageSize)
	for b, p := range [][]byte{textPage(1), randomPage(2)} {
		if err := st.write(uint64(b), p, scratch); err != nil {
			t.Fatal(err)
		}
		if !st.corrupt(uint64(b)) {
			t.Fatalf("block %d holds no object", b)
		}
		if err := st.read(uint64(b), make([]byte, PageSize)); !errors.Is(err, unix.EIO) {
			t.Fatalf("damaged block %d read: %v, want EIO", b, err)
		}
	}
	if st.Stats().BadHash != 2 {
		t.Fatalf("bad hashes %d, want 2", st.Stats().BadHash)
	}
	st.discard(0, 2)
	if err := st.write(5, textPage(5), scratch); err != nil {
		t.Fatal(err)
	}
	st.MarkLost()
	got := make([]byte, PageSize)
	if err := st.read(6, got); !errors.Is(err, unix.EIO) {
		t.Fatalf("lost block read: %v, want EIO", err)
	}
	if err := st.read(5, got); err != nil || !bytes.Equal(got, textPage(5)) {
		t.Fatalf("block held across MarkLost: %v", err)
	}
	st.discard(6, 1)
	if err := st.write(7, textPage(7), scratch); err != nil {
		t.Fatal(err)
	}
	for _, b := range []uint64{6, 7} {
		if err := st.read(b, got); err != nil {
			t.Fatalf("block %d after discard/write: %v", b, err)
		}
	}
}

// Many writers on one store: every page right, and the store empties to
// nothing but its kept slabs; Close gives every mapping back.
func TestStoreConcurrent(t *testing.T) {
	st := newTestStore(t, 8<<20, Options{Reserve: 8 << 20})
	const writers, per = 4, 512
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			scratch, got := make([]byte, PageSize), make([]byte, PageSize)
			for i := range per {
				b := uint64(w*per + i)
				p := textPage(b)
				if i%3 == 0 {
					p = randomPage(b)
				}
				for {
					err := st.write(b, p, scratch)
					if err == nil {
						break
					}
					if !errors.Is(err, unix.ENOMEM) {
						errs <- err
						return
					}
					runtime.Gosched()
				}
				if err := st.read(b, got); err != nil || !bytes.Equal(got, p) {
					errs <- errors.Join(err, errors.New("page differs"))
					return
				}
			}
			errs <- nil
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if s := st.Stats(); s.Pages != writers*per || s.BadHash != 0 {
		t.Fatalf("%+v", s)
	}
	st.discard(0, writers*per)
	if s := st.Stats(); s.Pages != 0 || s.ComprBytes != 0 {
		t.Fatalf("after discarding everything: %+v", s)
	}
}

// Close gives every byte back: the slabs' regions are unmapped (a part of
// a mapping unix.Munmap does not free).
func TestStoreCloseUnmaps(t *testing.T) {
	st := newTestStore(t, 8<<20, Options{Reserve: 2 << 20})
	scratch := make([]byte, PageSize)
	for b := range 64 {
		if err := st.write(uint64(b), randomPage(uint64(b)), scratch); err != nil {
			t.Fatal(err)
		}
	}
	addr := uintptr(st.r.regions.addr) // the first region (memory Go does not manage)
	st.Close()
	// mincore fails with ENOMEM on an address that is not mapped.
	vec := make([]byte, 1)
	_, _, e := unix.Syscall(unix.SYS_MINCORE, addr, PageSize, uintptr(unsafe.Pointer(&vec[0])))
	if e != unix.ENOMEM {
		t.Fatalf("a slab region still mapped after Close: mincore %v", e)
	}
}

// The refill runs real-time where the process may (root, or RLIMIT_RTPRIO
// of 1 as the swap drop-in gives): its allocations may then go below the
// min watermark, which is what ends a shortage (refill.c).
func TestRefillRealTime(t *testing.T) {
	st := newTestStore(t, 1<<20, Options{})
	var lim unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_RTPRIO, &lim)
	err := st.RefillRT()
	if unix.Geteuid() == 0 || lim.Cur >= 1 {
		if err != nil {
			t.Fatalf("allowed real-time priority (euid %d, RLIMIT_RTPRIO %d), yet: %v", unix.Geteuid(), lim.Cur, err)
		}
		return
	}
	if err == nil {
		t.Fatal("real-time without root or RLIMIT_RTPRIO")
	}
	t.Logf("not allowed here, as expected: %v", err)
}
