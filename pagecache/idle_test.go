package pagecache

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/pagefmt"
)

// ages returns the age of every key of pool, read without refreshing.
func ages(t *testing.T, s *Store, pool string) map[uint64]int {
	t.Helper()
	refs, err := s.Coldest(1<<20, ColdFilter{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	m := map[uint64]int{}
	for _, r := range refs {
		m[r.Key] = r.Age
	}
	return m
}

func putPages(t *testing.T, s *Store, uid uint32, pool string, keys []uint64, pages []byte) {
	t.Helper()
	b, c := fill(t, pages, s.PageSize())
	res := make([]Result, len(keys))
	if err := s.Put(uid, pool, keys, b, c, 0, res); err != nil {
		t.Fatal(err)
	}
}

func TestIdleAges(t *testing.T) {
	const ps, n = 4096, 100
	s := New(ps, 0)
	pages := corpus.Pages(corpus.Mixed, n, ps, 1)
	putPages(t, s, 1, "p", keysFrom(0, n), pages)
	for range 3 {
		s.AgeTick()
	}
	for k, a := range ages(t, s, "p") {
		if a != 3 {
			t.Fatalf("key %d: age %d after 3 epochs, want 3", k, a)
		}
	}
	// Reads (Get, View) and writes make a page young; Inspect does not.
	getAll(t, s, 1, "p", keysFrom(0, 10))
	res := make([]Result, 10)
	if _, err := s.View(1, "p", keysFrom(10, 10), nil, res, func([]pagefmt.Stored) error { return nil }); err != nil {
		t.Fatal(err)
	}
	putPages(t, s, 1, "p", keysFrom(20, 10), pages[:10*ps])
	if _, err := s.Inspect(1, "p", keysFrom(30, 10), true); err != nil {
		t.Fatal(err)
	}
	s.AgeTick()
	for k, a := range ages(t, s, "p") {
		if want := map[bool]int{true: 1, false: 4}[k < 30]; a != want {
			t.Fatalf("key %d: age %d, want %d", k, a, want)
		}
	}
	info, err := s.Idle(1, "")
	if err != nil || len(info) != 1 {
		t.Fatalf("Idle: %v %v", info, err)
	}
	if p, _ := info[0].Older(2); p != 70 {
		t.Fatalf("%d pages of age 2 or more, want 70", p)
	}
	if p, b := info[0].Older(0); p != n || b != s.PoolStatsOf(t, "p").StoredBytes {
		t.Fatalf("Older(0) = %d pages %d bytes, want %d and the pool's stored bytes", p, b, n)
	}
	// Ages saturate; MarkIdle makes every page the oldest.
	for range MaxAge + 5 {
		s.AgeTick()
	}
	getAll(t, s, 1, "p", []uint64{5})
	if m, err := s.MarkIdle(1, "p"); err != nil || m != n {
		t.Fatalf("MarkIdle: %d %v", m, err)
	}
	for k, a := range ages(t, s, "p") {
		if a != MaxAge {
			t.Fatalf("key %d: age %d, want %d", k, a, MaxAge)
		}
	}
	if _, err := s.MarkIdle(2, "p"); err != ErrPermission {
		t.Fatalf("another user's pool: %v", err)
	}
	if _, err := s.Idle(1, "nope"); err != ErrNoPool {
		t.Fatalf("no pool: %v", err)
	}
	// The entries still decode as they were: ages did not touch them.
	got, _ := getAll(t, s, 1, "p", keysFrom(0, n))
	want := append(append(append([]byte(nil), pages[:20*ps]...), pages[:10*ps]...), pages[30*ps:]...)
	if !bytes.Equal(got, want) {
		t.Fatal("pages changed")
	}
}

// PoolStatsOf is a test helper: one pool's counters.
func (s *Store) PoolStatsOf(t *testing.T, pool string) PoolStats {
	in, err := s.PoolInfo(0, pool)
	if err != nil {
		t.Fatal(err)
	}
	return in.PoolStats
}

func TestColdest(t *testing.T) {
	const ps = 4096
	s := New(ps, 0)
	pages := corpus.Pages(corpus.Text, 64, ps, 2)
	putPages(t, s, 1, "a", keysFrom(0, 64), pages)
	s.AgeTick()
	putPages(t, s, 2, "b", keysFrom(0, 32), pages[:32*ps])
	s.AgeTick()
	getAll(t, s, 1, "a", keysFrom(0, 8)) // age 0 now
	// a: 8 at age 0, 56 at 2; b: 32 at 1.
	refs, err := s.Coldest(60, ColdFilter{})
	if err != nil || len(refs) != 60 {
		t.Fatalf("Coldest: %d %v", len(refs), err)
	}
	for i, r := range refs {
		if want := map[bool]int{true: 2, false: 1}[i < 56]; r.Age != want || (i < 56) != (r.Pool == "a") {
			t.Fatalf("ref %d: %+v", i, r)
		}
	}
	refs, _ = s.Coldest(100, ColdFilter{UID: 2, MinAge: 1})
	if len(refs) != 32 || refs[0].Pool != "b" || refs[0].UID != 2 {
		t.Fatalf("user 2's pages: %d", len(refs))
	}
	refs, _ = s.Coldest(100, ColdFilter{Pool: "a", Want: func(r *PageRef) bool { return r.Key%2 == 0 }})
	if len(refs) != 32 {
		t.Fatalf("Want: %d pages", len(refs))
	}
	if _, err := s.Coldest(1, ColdFilter{UID: 2, Pool: "a"}); err != ErrPermission {
		t.Fatalf("another user's pool: %v", err)
	}
}

// recompress compresses refs' pages again with zstd, as the cold tier's
// job does, and replaces those that shrank.
// Pages rewritten since they were picked (mayChange says which keys may
// be) are not read back, and not kept.
func recompress(t *testing.T, s *Store, refs []PageRef, between func(), mayChange func(uint64) bool) Replaced {
	t.Helper()
	ps := s.PageSize()
	ok := make([]bool, len(refs))
	st, _ := s.ReadRefs(refs, nil, nil, ok)
	cb, _ := cpu.New(backends.Options{})
	pages := make([]byte, len(refs)*ps)
	for i := range refs {
		if !ok[i] && mayChange != nil && mayChange(refs[i].Key) {
			continue
		}
		if !ok[i] || !cb.DecodePage(st[i], pages[i*ps:(i+1)*ps]) {
			t.Fatalf("ref %d (key %d) does not read back", i, refs[i].Key)
		}
	}
	b := &pagefmt.Batch{PageSize: ps, Pages: pages, Codec: pagefmt.CodecZstd, Threshold: ps * 3 / 4}
	var c pagefmt.Compressed
	if err := cb.Compress(context.Background(), b, &c); err != nil {
		t.Fatal(err)
	}
	keep := make([]bool, len(refs))
	for i := range refs {
		keep[i] = ok[i] && c.Class[i] == pagefmt.ClassZstd && int(c.Size[i]) < refs[i].Size
	}
	if between != nil {
		between()
	}
	return s.Replace(refs, b, &c, 3, keep)
}

func TestReplaceLosesToNewerWrites(t *testing.T) {
	const ps, n = 4096, 64
	s := New(ps, 0)
	pages := corpus.Pages(corpus.Text, n, ps, 3)
	putPages(t, s, 1, "p", keysFrom(0, n), pages)
	before := s.PoolStatsOf(t, "p")
	s.AgeTick()
	refs, _ := s.Coldest(n, ColdFilter{Pool: "p"})
	newer := corpus.Pages(corpus.Pointers, 8, ps, 4)
	r := recompress(t, s, refs, func() {
		// While the job worked: keys 0-7 rewritten, 8-15 deleted, 16-23 read.
		putPages(t, s, 1, "p", keysFrom(0, 8), newer)
		s.Del(1, "p", keysFrom(8, 8), make([]Result, 8))
		getAll(t, s, 1, "p", keysFrom(16, 8))
	}, nil)
	if r.Pages != n-16 || r.Changed != 16 || r.After >= r.Before {
		t.Fatalf("%+v, want %d pages replaced and 16 changed", r, n-16)
	}
	if a := ages(t, s, "p"); a[20] != 0 || a[40] != 1 {
		t.Fatalf("replaced pages' ages: %d and %d, want 0 (read meanwhile) and 1", a[20], a[40])
	}
	got, res := getAll(t, s, 1, "p", keysFrom(0, n))
	for i := range n {
		want := pages[i*ps : (i+1)*ps]
		switch {
		case i < 8:
			want = newer[i*ps : (i+1)*ps]
		case i < 16:
			if res[i] != NotFound {
				t.Fatalf("key %d: deleted, then %v", i, res[i])
			}
			continue
		}
		if res[i] != OK || !bytes.Equal(got[i*ps:(i+1)*ps], want) {
			t.Fatalf("key %d: %v, wrong bytes", i, res[i])
		}
	}
	info, _ := s.Inspect(1, "p", keysFrom(0, n), false)
	var sum uint64
	for i, in := range info {
		if i >= 16 && in.Class != pagefmt.ClassZstd {
			t.Fatalf("key %d: class %v after recompression", i, in.Class)
		}
		if i < 8 && in.Class != pagefmt.ClassLZ4 {
			t.Fatalf("key %d: the newer write was replaced (%v)", i, in.Class)
		}
		sum += uint64(in.Size)
	}
	after := s.PoolStatsOf(t, "p")
	if after.StoredBytes != sum || after.Pages != n-8 || s.Stats().ComprDataSize != sum {
		t.Fatalf("accounting: %+v, stored bytes by inspect %d (before %+v)", after, sum, before)
	}
	// Pages tried are not picked again until written.
	again, _ := s.Coldest(n, ColdFilter{Pool: "p", Want: func(r *PageRef) bool { return !r.Tried() }})
	if len(again) != 8 {
		t.Fatalf("%d untried pages, want the 8 rewritten", len(again))
	}
}

// TestIdleConcurrent runs reads, writes, ticks, marks and replacements at
// once: run it with -race.
func TestIdleConcurrent(t *testing.T) {
	const ps, n = 4096, 2048
	s := New(ps, 0)
	pages := corpus.Pages(corpus.Mixed, n, ps, 5)
	putPages(t, s, 1, "p", keysFrom(0, n), pages)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	run := func(fn func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
					fn()
				}
			}
		}()
	}
	run(func() { getAll(t, s, 1, "p", keysFrom(0, 256)) })
	run(func() { getAll(t, s, 1, "p", keysFrom(128, 256)) })
	run(func() { s.AgeTick(); s.MarkIdle(1, "") })
	run(func() { putPages(t, s, 1, "p", keysFrom(1000, 64), pages[1000*ps:1064*ps]) })
	for range 3 {
		refs, _ := s.Coldest(512, ColdFilter{Pool: "p"})
		recompress(t, s, refs, nil, func(k uint64) bool { return k >= 1000 && k < 1064 })
	}
	close(stop)
	wg.Wait()
	got, res := getAll(t, s, 1, "p", keysFrom(0, n))
	for i := range n {
		if res[i] != OK || !bytes.Equal(got[i*ps:(i+1)*ps], pages[i*ps:(i+1)*ps]) {
			t.Fatalf("key %d: %v", i, res[i])
		}
	}
}

// Pages the memory limit leaves no room for stay untried, for a later round.
func TestReplaceWithoutRoom(t *testing.T) {
	const ps, n = 4096, 64
	s := New(ps, 0)
	putPages(t, s, 1, "p", keysFrom(0, n), corpus.Pages(corpus.Text, n, ps, 3))
	s.SetMemLimit(s.arena.Used()) // no new slab
	refs, _ := s.Coldest(n, ColdFilter{Pool: "p"})
	r := recompress(t, s, refs, nil, nil)
	again, _ := s.Coldest(n, ColdFilter{Pool: "p", Want: func(r *PageRef) bool { return !r.Tried() }})
	if r.Pages == n || len(again) != n-r.Pages {
		t.Fatalf("%d replaced, %d left untried of %d", r.Pages, len(again), n)
	}
}
