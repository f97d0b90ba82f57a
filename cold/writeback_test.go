package cold

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backing"
	"github.com/s4d-project/s4d/pagecache"
	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/slab"
)

// backingFile makes a zeroed file of size bytes where O_DIRECT works, or
// skips saying why it cannot.
func backingFile(t testing.TB, size int64) string {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "backing")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Truncate(p, size)
	f, err := os.OpenFile(p, os.O_RDWR|syscall.O_DIRECT, 0)
	if err != nil {
		t.Skipf("%s does not take O_DIRECT (%v): set TMPDIR to a disk filesystem", dir, err)
	}
	f.Close()
	return p
}

// withBacking makes the file at path the store's level below RAM, and
// says how many pages it restored.
func withBacking(t *testing.T, s *pagecache.Store, path string, persist bool) (*fileLevel, int) {
	t.Helper()
	f, idx, err := backing.Open(path, s.PageSize(), persist)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	fl, n, err := attachFile(s, f, idx, persist)
	if err != nil {
		t.Fatal(err)
	}
	return fl, n
}

// Under the memory limit, pages go to the file instead of being refused,
// and all come back.
func TestWritebackUnderPressure(t *testing.T) {
	const ps = 4096
	// A batch's own pages cannot make room for each other: the limit
	// holds a batch in every size class.
	limit := uint64(128 * ps * slab.SlabPages)
	s := pagecache.New(ps, limit)
	fl, _ := withBacking(t, s, backingFile(t, 64<<20), false)
	const n = 6000
	pages := corpus.Pages(corpus.Mixed, n, ps, 5)
	for lo := 0; lo < n; lo += 250 {
		putOK(t, s, 3, "p", keysFrom(uint64(lo), 250), pages[lo*ps:(lo+250)*ps])
		if s.Arena().Used > limit {
			t.Fatalf("arena %d over the limit %d", s.Arena().Used, limit)
		}
	}
	cs := fl.stats()
	if cs.Pages == 0 || cs.PressureRounds == 0 || cs.Writes == 0 {
		t.Fatalf("nothing written back: %+v", cs)
	}
	// Packed: the writes are the objects' bytes, give or take a 16-byte
	// alignment per page and a part block per write.
	if cs.BytesWritten > cs.Bytes+16*cs.PagesWritten+cs.Writes*backing.BlockSize {
		t.Fatalf("%d bytes written for %d pages of %d bytes in %d writes", cs.BytesWritten, cs.PagesWritten, cs.Bytes, cs.Writes)
	}
	checkAll(t, s, 3, "p", keysFrom(0, n), pages)
	if cs := fl.stats(); cs.Reads == 0 || cs.Reads >= cs.PagesRead {
		t.Fatalf("reads not batched: %d I/Os for %d pages", cs.Reads, cs.PagesRead)
	}
	// Overwrites and deletes free the file's space.
	before := fl.stats()
	res := make([]pagecache.Result, n)
	if err := s.Del(3, "p", keysFrom(0, n/2), res); err != nil {
		t.Fatal(err)
	}
	if after := fl.stats(); after.Pages >= before.Pages || after.FreeBytes <= before.FreeBytes {
		t.Fatalf("deleting did not free the file: %d -> %d pages", before.Pages, after.Pages)
	}
	checkAll(t, s, 3, "p", keysFrom(n/2, n/2), pages[n/2*ps:])
	if st := s.Stats(); st.Pages != n/2 {
		t.Fatalf("%d pages counted, want %d", st.Pages, n/2)
	}
	// Inspect reads a page on the file too.
	infos, _ := s.Inspect(3, "p", keysFrom(n/2, n/2), true)
	for _, in := range infos {
		if in.Result != pagecache.OK || in.Class != pagefmt.ClassZero && len(in.Data) != in.Size {
			t.Fatalf("inspect: %+v", in)
		}
	}
}

// PUTs are refused only once the file is full too; what was stored stays.
// KeepRoom writes pages back ahead of PUTs: afterwards the share asked
// for is free, every page still reads back, and the PUTs that follow fit
// without a round of their own.
func TestKeepRoom(t *testing.T) {
	const ps = 4096
	limit := uint64(128 * ps * slab.SlabPages)
	s := pagecache.New(ps, limit)
	fl, _ := withBacking(t, s, backingFile(t, 64<<20), false)
	if err := fl.KeepRoom(25); err != nil { // nothing stored: nothing to do
		t.Fatal(err)
	}
	const n = 4000
	pages := corpus.Pages(corpus.Text, n, ps, 8)
	for lo := 0; lo < n; lo += 250 {
		putOK(t, s, 3, "p", keysFrom(uint64(lo), 250), pages[lo*ps:(lo+250)*ps])
	}
	before := fl.stats()
	if err := fl.KeepRoom(25); err != nil {
		t.Fatal(err)
	}
	after := fl.stats()
	if free := limit - s.Arena().Used; free < limit/4 || after.AheadRounds != before.AheadRounds+1 || after.Pages <= before.Pages {
		t.Fatalf("after KeepRoom(25): %d of %d bytes free, rounds ahead %d -> %d, pages on file %d -> %d",
			free, limit, before.AheadRounds, after.AheadRounds, before.Pages, after.Pages)
	}
	// There is room now: a second call does nothing, and a PUT of less
	// than the room fits without writing back.
	if err := fl.KeepRoom(25); err != nil {
		t.Fatal(err)
	}
	more := corpus.Pages(corpus.Text, 100, ps, 9)
	putOK(t, s, 3, "p", keysFrom(n, 100), more)
	if last := fl.stats(); last.PressureRounds != after.PressureRounds {
		t.Fatalf("rounds %d -> %d with room to spare", after.PressureRounds, last.PressureRounds)
	}
	checkAll(t, s, 3, "p", keysFrom(0, n), pages)
	checkAll(t, s, 3, "p", keysFrom(n, 100), more)
}

func TestWritebackFileFull(t *testing.T) {
	const ps = 4096
	s := pagecache.New(ps, uint64(4*ps*slab.SlabPages))
	fl, _ := withBacking(t, s, backingFile(t, 128*backing.BlockSize), false)
	pages := corpus.Pages(corpus.Random, 400, ps, 6)
	res := make([]pagecache.Result, 400)
	for lo := 0; lo < 400; lo += 16 {
		b, c := fill(t, pages[lo*ps:(lo+16)*ps], ps)
		if err := s.Put(1, "p", keysFrom(uint64(lo), 16), b, c, 0, res[lo:lo+16]); err != nil {
			t.Fatal(err)
		}
	}
	ok := 0
	for _, r := range res {
		if r == pagecache.OK {
			ok++
		} else if r != pagecache.NoSpace {
			t.Fatalf("result %v", r)
		}
	}
	// 4 slabs of 16 raw pages in RAM, 125 blocks of file: about 188 pages.
	if ok < 150 || ok == 400 {
		t.Fatalf("%d of 400 pages stored", ok)
	}
	var keys []uint64
	var want []byte
	for i, r := range res {
		if r == pagecache.OK {
			keys = append(keys, uint64(i))
			want = append(want, pages[i*ps:(i+1)*ps]...)
		}
	}
	checkAll(t, s, 1, "p", keys, want)
	if cs := fl.stats(); cs.FullRounds == 0 || cs.LastError == "" {
		t.Fatalf("file full not counted: %+v", cs)
	}
}

// A planned stop writes everything out; a new store restores it all,
// owners and zero pages included.
func TestPersistRestore(t *testing.T) {
	const ps = 4096
	path := backingFile(t, 16<<20)
	s := pagecache.New(ps, 0)
	fl, _ := withBacking(t, s, path, true)
	pages := corpus.Pages(corpus.Mixed, 500, ps, 7)
	copy(pages[10*ps:11*ps], make([]byte, ps)) // a zero page
	putOK(t, s, 42, "mine", keysFrom(100, 500), pages)
	putOK(t, s, 0, "root", keysFrom(0, 20), pages[:20*ps])
	if err := s.SetPoolCodec(42, "mine", pagefmt.CodecZstd); err != nil {
		t.Fatal(err)
	}
	if _, err := fl.PersistAll(); err != nil {
		t.Fatal(err)
	}
	if s.Arena().Used != 0 {
		t.Fatalf("%d bytes left in RAM after a planned stop", s.Arena().Used)
	}

	s2 := pagecache.New(ps, 0)
	if _, n := withBacking(t, s2, path, true); n != 520 {
		t.Fatalf("restored %d pages, want 520", n)
	}
	checkAll(t, s2, 42, "mine", keysFrom(100, 500), pages)
	checkAll(t, s2, 0, "root", keysFrom(0, 20), pages[:20*ps])
	if _, err := s2.PoolInfo(7, "mine"); err != pagecache.ErrPermission {
		t.Fatalf("owner not restored: %v", err)
	}
	if c, _ := s2.PoolCodec(42, "mine"); c != pagefmt.CodecZstd {
		t.Fatalf("pool codec not restored: %v", c)
	}
	if a, b := s.Stats(), s2.Stats(); a.Pages != b.Pages || a.ComprDataSize != b.ComprDataSize || a.ZeroPages != b.ZeroPages {
		t.Fatalf("stats differ: %+v / %+v", a, b)
	}
}

// After a crash, the last checkpoint's pages come back as they were
// then if nothing changed since; once pages were replaced and deleted
// (and their space freed), none of the pool comes back, and the loss is
// reported: never an older version of a page.
func TestCrashRestoresCheckpoint(t *testing.T) {
	const ps = 4096
	path := backingFile(t, 16<<20)
	s := pagecache.New(ps, 0)
	fl, _ := withBacking(t, s, path, true)
	v1 := corpus.Pages(corpus.Mixed, 300, ps, 8)
	putOK(t, s, 1, "p", keysFrom(0, 300), v1)
	if _, _, err := fl.Writeback(All, 0); err != nil {
		t.Fatal(err)
	}
	if err := fl.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	// A crash now: every page back as it is.
	still := pagecache.New(ps, 0)
	if fl2, n := withBacking(t, still, path, true); n != 300 || fl2.stats().LostAtStart != 0 {
		t.Fatalf("restored %d pages (%d lost), want 300", n, fl2.stats().LostAtStart)
	}
	checkAll(t, still, 1, "p", keysFrom(0, 300), v1)

	v2 := corpus.Pages(corpus.Text, 300, ps, 9)
	putOK(t, s, 1, "p", keysFrom(0, 300), v2)
	res := make([]pagecache.Result, 300)
	s.Del(1, "p", keysFrom(0, 100), res)
	if _, _, err := fl.Writeback(All, 0); err != nil { // reuses freed space if it may
		t.Fatal(err)
	}
	// Crash: no PersistAll.
	s2 := pagecache.New(ps, 0)
	fl2, n := withBacking(t, s2, path, true)
	if st := fl2.stats(); n != 0 || st.LostAtStart != 300 || len(st.ChangedPoolsAtStart) != 1 {
		t.Fatalf("restored %d pages, %d lost, pools changed %v: want none, 300 and p", n, st.LostAtStart, st.ChangedPoolsAtStart)
	}
	if _, res := getAll(t, s2, 1, "p", keysFrom(0, 300)); res[0] != pagecache.NotFound || res[299] != pagecache.NotFound {
		t.Fatalf("pages of a pool changed since the checkpoint: %v %v", res[0], res[299])
	}
}

// Pages still in RAM at a checkpoint are reported lost by a crash after
// it; the ones on the file come back as written.
func TestCrashLosesRAMReported(t *testing.T) {
	const ps = 4096
	path := backingFile(t, 64<<20)
	limit := uint64(32 * ps * slab.SlabPages)
	s := pagecache.New(ps, limit)
	fl, _ := withBacking(t, s, path, true)
	const n = 3000
	pages := corpus.Pages(corpus.Mixed, n, ps, 12)
	for lo := 0; lo < n; lo += 250 {
		putOK(t, s, 1, "p", keysFrom(uint64(lo), 250), pages[lo*ps:(lo+250)*ps])
	}
	if err := fl.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	s2 := pagecache.New(ps, 0)
	fl2, got := withBacking(t, s2, path, true)
	lost := int(fl2.stats().LostAtStart)
	if got == 0 || lost == 0 || got+lost != n {
		t.Fatalf("%d restored and %d lost of %d", got, lost, n)
	}
	_, res := getAll(t, s2, 1, "p", keysFrom(0, n))
	var keys []uint64
	var want []byte
	for i, r := range res {
		if r == pagecache.OK {
			keys = append(keys, uint64(i))
			want = append(want, pages[i*ps:(i+1)*ps]...)
		}
	}
	if len(keys) != got {
		t.Fatalf("%d pages read back, %d restored", len(keys), got)
	}
	checkAll(t, s2, 1, "p", keys, want)
}

func TestCompactFile(t *testing.T) {
	const ps = 4096
	s := pagecache.New(ps, 0)
	fl, _ := withBacking(t, s, backingFile(t, 16<<20), false)
	pages := corpus.Pages(corpus.Text, 2000, ps, 11)
	putOK(t, s, 1, "p", keysFrom(0, 2000), pages)
	if _, _, err := fl.Writeback(All, 0); err != nil {
		t.Fatal(err)
	}
	res := make([]pagecache.Result, 1)
	for k := uint64(0); k < 2000; k += 3 {
		s.Del(1, "p", []uint64{k}, res)
		s.Del(1, "p", []uint64{k + 1}, res)
	}
	before := fl.stats()
	moved, err := (&Tier{file: fl}).CompactFile()
	if err != nil || moved == 0 {
		t.Fatalf("compaction moved %d: %v", moved, err)
	}
	after := fl.stats()
	if after.FreeBytes <= before.FreeBytes || after.Pages != before.Pages {
		t.Fatalf("compaction: free %d -> %d, pages %d -> %d", before.FreeBytes, after.FreeBytes, before.Pages, after.Pages)
	}
	var keys []uint64
	var want []byte
	for k := 2; k < 2000; k += 3 {
		keys = append(keys, uint64(k))
		want = append(want, pages[k*ps:(k+1)*ps]...)
	}
	checkAll(t, s, 1, "p", keys, want)
}

// Puts, reads, deletes, forced writebacks and both compactions at once:
// every page read is a version that was put, and the counts add up.
func TestWritebackConcurrent(t *testing.T) {
	const ps, n = 4096, 200
	s := pagecache.New(ps, uint64(96*ps*slab.SlabPages))
	fl, _ := withBacking(t, s, backingFile(t, 64<<20), false)
	versions := make([][]byte, 3)
	for v := range versions {
		versions[v] = corpus.Pages(corpus.Mixed, n, ps, uint64(20+v))
	}
	keys := keysFrom(0, n)
	putOK(t, s, 1, "p", keys, versions[0])
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, c := fill(t, versions[g], ps)
			res := make([]pagecache.Result, n)
			for range 8 {
				if err := s.Put(1, "p", keys, b, c, 0, res); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	stop := make(chan struct{})
	var reader sync.WaitGroup
	reader.Add(1)
	go func() {
		defer reader.Done()
		res := make([]pagecache.Result, 10)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			fl.Writeback(Mode(i%3), 0)
			s.Compact()
			fl.CompactFile()
			s.Del(1, "p", keys[i%n:i%n+1], res)
			got, rs := viewAll(t, s, 1, "p", keys[:64])
			for k := range 64 {
				if rs[k] != pagecache.OK {
					continue
				}
				page := got[k*ps : (k+1)*ps]
				if !bytes.Equal(page, versions[0][k*ps:(k+1)*ps]) && !bytes.Equal(page, versions[1][k*ps:(k+1)*ps]) && !bytes.Equal(page, versions[2][k*ps:(k+1)*ps]) {
					t.Errorf("key %d: bytes of no version", k)
				}
			}
		}
	}()
	// A second reader, whose reads of the file (outside the store's lock)
	// overlap the first one's writebacks and file compactions.
	reader.Add(1)
	go func() {
		defer reader.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			got, rs := viewAll(t, s, 1, "p", keys)
			for k := range n {
				page := got[k*ps : (k+1)*ps]
				if rs[k] == pagecache.OK && !bytes.Equal(page, versions[0][k*ps:(k+1)*ps]) && !bytes.Equal(page, versions[1][k*ps:(k+1)*ps]) && !bytes.Equal(page, versions[2][k*ps:(k+1)*ps]) {
					t.Errorf("key %d: bytes of no version", k)
				}
				if rs[k] != pagecache.OK && rs[k] != pagecache.NotFound {
					t.Errorf("key %d: %v", k, rs[k])
				}
			}
		}
	}()
	wg.Wait()
	close(stop)
	reader.Wait()
	st := s.Stats()
	var stored uint64
	for _, r := range s.Pick(func(r pagecache.PageRef) bool { return r.Pool == "p" }, 1<<62) {
		stored += uint64(r.Size)
	}
	if st.ComprDataSize != stored {
		t.Fatalf("%d bytes counted, %d stored", st.ComprDataSize, stored)
	}
	onFile := uint64(onFileIn(s, "p"))
	if cs := fl.stats(); cs.Pages != onFile {
		t.Fatalf("the file holds %d objects, %d entries point there", cs.Pages, onFile)
	}
}

func onFileIn(s *pagecache.Store, pool string) int {
	return len(s.Pick(func(r pagecache.PageRef) bool { return r.Pool == pool && r.OnFile() }, 1<<62))
}

// Pressure takes the idle pages first; a forced writeback of idle pages
// takes them and leaves the others.
func TestWritebackColdestFirst(t *testing.T) {
	const ps = 4096
	s := pagecache.New(ps, uint64(96*ps*slab.SlabPages))
	fl, _ := withBacking(t, s, backingFile(t, 64<<20), false)
	old := corpus.Pages(corpus.Text, 1500, ps, 61)
	putOK(t, s, 1, "old", keysFrom(0, 1500), old)
	if _, err := s.MarkIdle(1, "old"); err != nil {
		t.Fatal(err)
	}
	young := corpus.Pages(corpus.Text, 3000, ps, 62)
	for lo := 0; lo < 3000; lo += 250 {
		putOK(t, s, 1, "young", keysFrom(uint64(lo), 250), young[lo*ps:(lo+250)*ps])
	}
	o, y := onFileIn(s, "old"), onFileIn(s, "young")
	// Young pages go only once no idle one is left.
	if o == 0 || y > 0 && o < 1500 {
		t.Fatalf("under pressure %d idle pages went to the file and %d young ones", o, y)
	}
	if _, _, err := fl.Writeback(Idle, pagecache.MaxAge); err != nil {
		t.Fatal(err)
	}
	if o2, y2 := onFileIn(s, "old"), onFileIn(s, "young"); o2 != 1500 || y2 != y {
		t.Fatalf("writeback of idle pages: %d of 1500 idle on the file, young %d -> %d", o2, y, y2)
	}
	checkAll(t, s, 1, "old", keysFrom(0, 1500), old)
	checkAll(t, s, 1, "young", keysFrom(0, 3000), young)
}

// BenchmarkNotedPut times a 64-page PUT into a persisted pool that the
// last checkpoint found at rest (it checkpoints first: Tier.Note) beside
// one into a pool already noted, for a pool of pages pages on the file.
func BenchmarkNotedPut(b *testing.B) {
	const ps = 4096
	for _, pages := range []int{4096, 65536} {
		for _, noted := range []bool{true, false} {
			b.Run(fmt.Sprintf("pages=%d/noted=%v", pages, noted), func(b *testing.B) {
				s := pagecache.New(ps, 0)
				path := backingFile(b, 1<<30)
				f, idx, err := backing.Open(path, ps, true)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				fl, _, err := attachFile(s, f, idx, true)
				if err != nil {
					b.Fatal(err)
				}
				all := corpus.Pages(corpus.Text, pages, ps, 40)
				for lo := 0; lo < pages; lo += 4096 {
					putOK(b, s, 1, "p", keysFrom(uint64(lo), 4096), all[lo*ps:(lo+4096)*ps])
				}
				if _, err := fl.PersistAll(); err != nil {
					b.Fatal(err)
				}
				bt, c := fill(b, all[:64*ps], ps)
				res := make([]pagecache.Result, 64)
				b.SetBytes(64 * ps)
				for i := 0; b.Loop(); i++ {
					if noted {
						b.StopTimer()
						fl.Checkpoint() // the pool at rest: the next PUT notes
						b.StartTimer()
					}
					if err := s.Put(1, "p", keysFrom(uint64(i%(pages/64)*64), 64), bt, c, 0, res); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// PUTs, DELs, writebacks and checkpoints at once on a persisted file (run
// it with -race): a crash after the last checkpoint, taken at rest, finds
// every page as the store has it, or reports it lost.
func TestNotesConcurrent(t *testing.T) {
	const ps, n = 4096, 256
	path := backingFile(t, 64<<20)
	s := pagecache.New(ps, uint64(8*ps*slab.SlabPages))
	fl, _ := withBacking(t, s, path, true)
	versions := [][]byte{corpus.Pages(corpus.Mixed, n, ps, 50), corpus.Pages(corpus.Text, n, ps, 51)}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pool := []string{"a", "b"}[g%2]
			b, c := fill(t, versions[g/2], ps)
			res := make([]pagecache.Result, n)
			for i := range 20 {
				if err := s.Put(1, pool, keysFrom(0, n), b, c, s.BackendID("cpu"), res); err != nil {
					t.Error(err)
					return
				}
				s.Del(1, pool, keysFrom(uint64(i*7%n), 5), res)
			}
		}()
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := fl.Checkpoint(); err != nil {
				t.Error(err)
			}
			fl.Writeback(All, 0)
		}
	}()
	wg.Wait()
	close(stop)
	<-done
	putOK(t, s, 1, "a", keysFrom(0, 10), versions[1][:10*ps]) // in RAM: lost by the crash
	if err := fl.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	s2 := pagecache.New(ps, 0)
	fl2, restored := withBacking(t, s2, path, true)
	if st := fl2.stats(); len(st.ChangedPoolsAtStart) != 0 || st.LostAtStart < 10 || restored+int(st.LostAtStart) != int(s.Stats().Pages) {
		t.Fatalf("%d restored, %d lost, pools changed %v; the store held %d", restored, st.LostAtStart, st.ChangedPoolsAtStart, s.Stats().Pages)
	} else {
		t.Logf("%d restored, %d lost with RAM", restored, st.LostAtStart)
	}
	for _, pool := range []string{"a", "b"} {
		got, res := getAll(t, s2, 1, pool, keysFrom(0, n))
		want, wres := getAll(t, s, 1, pool, keysFrom(0, n))
		for k := range n {
			if res[k] == pagecache.OK && (wres[k] != pagecache.OK || !bytes.Equal(got[k*ps:(k+1)*ps], want[k*ps:(k+1)*ps])) {
				t.Fatalf("pool %s key %d: restored other bytes than the store held", pool, k)
			}
		}
	}
}
