package ublk

import (
	"bytes"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// memStore is a Store in a map, counting its calls.
type memStore struct {
	pages            map[uint64][]byte
	puts, gets, dels int
	maxDel           int
	fail             error
	bad              map[uint64]bool // pages Get reports failed, one by one
}

func newMemStore() *memStore { return &memStore{pages: map[uint64][]byte{}} }

func (m *memStore) Put(keys []uint64, pages []byte) error {
	m.puts++
	if m.fail != nil {
		return m.fail
	}
	if len(pages) != len(keys)*4096 {
		return errors.New("pages and keys differ in length")
	}
	for i, k := range keys {
		m.pages[k] = bytes.Clone(pages[i*4096 : (i+1)*4096])
	}
	return nil
}

func (m *memStore) Get(keys []uint64, dst []byte, missing, failed []bool) error {
	m.gets++
	if m.fail != nil {
		return m.fail
	}
	for i, k := range keys {
		p, ok := m.pages[k]
		missing[i] = !ok
		failed[i] = m.bad[k]
		if ok {
			copy(dst[i*4096:], p)
		} else {
			// Garbage where the page is missing: the server must zero it.
			for j := i * 4096; j < (i+1)*4096; j++ {
				dst[j] = 0xee
			}
		}
	}
	return nil
}

func (m *memStore) Delete(keys []uint64) error {
	m.dels++
	m.maxDel = max(m.maxDel, len(keys))
	for _, k := range keys {
		delete(m.pages, k)
	}
	return nil
}

func filled(n int, v byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = v + byte(i/4096)
	}
	return b
}

func TestGatherOneStoreCallPerKind(t *testing.T) {
	st := newMemStore()
	var stats Stats
	g := newGatherer(st, 4096, 8, 16384, &stats)
	reqs := []Request{
		{Tag: 0, Op: OpWrite, Sector: 0, Count: 16, Buf: filled(16384, 1)},   // blocks 0-1
		{Tag: 1, Op: OpWrite, Sector: 80, Count: 8, Buf: filled(16384, 50)},  // block 10
		{Tag: 2, Op: OpWrite, Sector: 800, Count: 32, Buf: filled(16384, 9)}, // blocks 100-103
		{Tag: 3, Op: OpFlush},
	}
	res := make([]int32, len(reqs))
	g.serve(reqs, res)
	want := []int32{8192, 4096, 16384, 0}
	for i := range res {
		if res[i] != want[i] {
			t.Errorf("request %d: result %d, want %d", i, res[i], want[i])
		}
	}
	if st.puts != 1 || len(st.pages) != 7 {
		t.Fatalf("%d Put calls holding %d pages, want 1 and 7", st.puts, len(st.pages))
	}
	if !bytes.Equal(st.pages[101], filled(8192, 9)[4096:]) {
		t.Error("block 101 holds the wrong page")
	}

	// Reads: written blocks come back, a block never written is zeros.
	reads := []Request{
		{Tag: 4, Op: OpRead, Sector: 8, Count: 16, Buf: make([]byte, 16384)},  // blocks 1-2 (2 never written)
		{Tag: 5, Op: OpRead, Sector: 800, Count: 8, Buf: make([]byte, 16384)}, // block 100
	}
	res = res[:2]
	g.serve(reads, res)
	if res[0] != 8192 || res[1] != 4096 {
		t.Fatalf("read results %v", res)
	}
	if st.gets != 1 {
		t.Fatalf("%d Get calls, want 1", st.gets)
	}
	if !bytes.Equal(reads[0].Buf[:4096], filled(8192, 1)[4096:]) {
		t.Error("block 1 read back wrong")
	}
	if !bytes.Equal(reads[0].Buf[4096:8192], make([]byte, 4096)) {
		t.Error("block 2, never written, did not read as zeros")
	}
	if !bytes.Equal(reads[1].Buf[:4096], filled(4096, 9)) {
		t.Error("block 100 read back wrong")
	}
	if got := stats.Writes.Pages.Load(); got != 7 {
		t.Errorf("stats: %d pages written, want 7", got)
	}
	if got := stats.BatchPages[2].Load(); got != 1 { // the write of 7 pages
		t.Errorf("stats: %d batches of 4-7 pages, want 1", got)
	}
}

func TestGatherDiscardAndZeroes(t *testing.T) {
	st := newMemStore()
	g := newGatherer(st, 4096, 2, 4096, new(Stats))
	for k := uint64(0); k < 10000; k++ {
		st.pages[k] = filled(4096, 7)
	}
	res := make([]int32, 2)
	// A discard of 9000 blocks goes in bounded chunks; WRITE_ZEROES forgets too.
	g.serve([]Request{{Op: OpDiscard, Sector: 0, Count: 9000 * 8}, {Op: OpWriteZeroes, Sector: 9500 * 8, Count: 8}}, res)
	if res[0] != 0 || res[1] != 0 {
		t.Fatalf("results %v", res)
	}
	if len(st.pages) != 999 {
		t.Fatalf("%d pages left, want 999", len(st.pages))
	}
	if st.maxDel > deleteChunk {
		t.Errorf("a Delete of %d keys; the bound is %d", st.maxDel, deleteChunk)
	}
	buf := filled(4096, 3)
	g.serve([]Request{{Op: OpRead, Sector: 9500 * 8, Count: 8, Buf: buf}}, res[:1])
	if res[0] != 4096 || !bytes.Equal(buf, make([]byte, 4096)) {
		t.Fatal("a zeroed block did not read as zeros")
	}
}

func TestGatherErrors(t *testing.T) {
	st := newMemStore()
	g := newGatherer(st, 4096, 4, 8192, new(Stats))
	res := make([]int32, 4)
	g.serve([]Request{
		{Op: OpWrite, Sector: 1, Count: 8, Buf: make([]byte, 8192)},  // not on a block boundary
		{Op: OpRead, Sector: 0, Count: 4, Buf: make([]byte, 8192)},   // half a block
		{Op: OpWrite, Sector: 0, Count: 24, Buf: make([]byte, 8192)}, // larger than its buffer
		{Op: 99},
	}, res)
	einval, eop := -int32(unix.EINVAL), -int32(unix.EOPNOTSUPP)
	if res[0] != einval || res[1] != einval || res[2] != einval || res[3] != eop {
		t.Fatalf("results %v, want EINVAL x3 and EOPNOTSUPP", res)
	}
	if st.puts != 0 || st.gets != 0 {
		t.Fatal("a refused request reached the store")
	}
	st.fail = errors.New("no space")
	g.serve([]Request{{Op: OpWrite, Sector: 0, Count: 8, Buf: make([]byte, 8192)},
		{Op: OpRead, Sector: 0, Count: 8, Buf: make([]byte, 8192)}}, res[:2])
	if res[0] != -int32(unix.EIO) || res[1] != -int32(unix.EIO) {
		t.Fatalf("store failures gave %v, want EIO", res[:2])
	}
}

// The I/O path allocates nothing once the gatherer is made.
func TestGatherAllocatesNothing(t *testing.T) {
	st := newMemStore()
	g := newGatherer(st, 4096, 4, 8192, new(Stats))
	reqs := []Request{{Op: OpRead, Sector: 0, Count: 16, Buf: make([]byte, 8192)}, {Op: OpDiscard, Sector: 64, Count: 8}}
	res := make([]int32, 2)
	if n := testing.AllocsPerRun(100, func() { g.serve(reqs, res) }); n != 0 {
		t.Fatalf("%v allocations per batch", n)
	}
}

// A swap-in is one READ of 8 pages (the kernel's readahead) per wait:
// what the gatherer adds to the store's own time for it.
func BenchmarkGatherOneRead8(b *testing.B) {
	st := newMemStore()
	g := newGatherer(st, 4096, 4, 32768, new(Stats))
	if err := st.Put([]uint64{0, 1, 2, 3, 4, 5, 6, 7}, filled(8*4096, 1)); err != nil {
		b.Fatal(err)
	}
	reqs := []Request{{Op: OpRead, Sector: 0, Count: 64, Buf: make([]byte, 32768)}}
	res := make([]int32, 1)
	b.SetBytes(32768)
	for b.Loop() {
		g.serve(reqs, res)
	}
}

// One READ alone in a batch is filled by the store in place: its pages
// come back right, a missing one as zeros (the store leaves garbage
// there), a failed one fails the request.
func TestGatherOneReadFillsItsBuffer(t *testing.T) {
	st := newMemStore()
	g := newGatherer(st, 4096, 4, 16384, new(Stats))
	if err := st.Put([]uint64{0, 2}, filled(2*4096, 7)); err != nil {
		t.Fatal(err)
	}
	buf := filled(16384, 0x55)
	res := make([]int32, 1)
	g.serve([]Request{{Op: OpRead, Sector: 0, Count: 24, Buf: buf}}, res)
	if res[0] != 3*4096 {
		t.Fatalf("result %d, want %d", res[0], 3*4096)
	}
	if !bytes.Equal(buf[:4096], filled(4096, 7)) || !bytes.Equal(buf[2*4096:3*4096], filled(4096, 8)) {
		t.Fatal("a stored page came back wrong")
	}
	if !bytes.Equal(buf[4096:2*4096], make([]byte, 4096)) {
		t.Fatal("a block never written did not read as zeros")
	}
	if !bytes.Equal(buf[3*4096:], filled(16384, 0x55)[3*4096:]) {
		t.Fatal("the buffer past the request was written")
	}
	st.bad = map[uint64]bool{2: true}
	g.serve([]Request{{Op: OpRead, Sector: 0, Count: 24, Buf: buf}}, res)
	if res[0] != -int32(unix.EIO) {
		t.Fatalf("a failed page gave %d, want EIO", res[0])
	}
}
