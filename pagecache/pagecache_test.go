package pagecache

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/backendtest"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/pageindex"
	"github.com/s4d-project/s4d/slab"
)

// The cpu engine compresses what the tests put, as the daemon does.
var (
	fill     = backendtest.CompressCPU
	keysFrom = backendtest.Keys
)

func putOK(t *testing.T, s *Store, uid uint32, pool string, keys []uint64, pages []byte) {
	t.Helper()
	b, c := fill(t, pages, s.PageSize())
	res := make([]Result, len(keys))
	if err := s.Put(uid, pool, keys, b, c, s.BackendID("cpu"), res); err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r != OK {
			t.Fatalf("put key %d: %v", keys[i], r)
		}
	}
}

// viewAll reads keys through View, the daemon's path, decoding each page.
func viewAll(t *testing.T, s *Store, uid uint32, pool string, keys []uint64) ([]byte, []Result) {
	t.Helper()
	ps := s.PageSize()
	cb, _ := cpu.New(backends.Options{})
	out := make([]byte, len(keys)*ps)
	res := make([]Result, len(keys))
	_, err := s.View(uid, pool, keys, nil, res, func(st []pagefmt.Stored) error {
		for i := range st {
			if res[i] == OK && !cb.DecodePage(st[i], out[i*ps:(i+1)*ps]) {
				t.Errorf("key %d does not decode", keys[i])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, res
}

// checkAll reads keys through Get and View and compares them with want.
func checkAll(t *testing.T, s *Store, uid uint32, pool string, keys []uint64, want []byte) {
	t.Helper()
	for _, read := range []func(*testing.T, *Store, uint32, string, []uint64) ([]byte, []Result){getAll, viewAll} {
		got, res := read(t, s, uid, pool, keys)
		for i := range keys {
			ps := s.PageSize()
			if res[i] != OK || !bytes.Equal(got[i*ps:(i+1)*ps], want[i*ps:(i+1)*ps]) {
				t.Fatalf("key %d: %v, or other bytes", keys[i], res[i])
			}
		}
	}
}

func getAll(t *testing.T, s *Store, uid uint32, pool string, keys []uint64) ([]byte, []Result) {
	t.Helper()
	res := make([]Result, len(keys))
	st, _, err := s.Get(uid, pool, keys, nil, nil, res)
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := cpu.New(backends.Options{})
	out := make([]byte, len(keys)*s.PageSize())
	for i := range keys {
		if res[i] == OK && !cb.DecodePage(st[i], out[i*s.PageSize():(i+1)*s.PageSize()]) {
			t.Fatalf("key %d does not decode", keys[i])
		}
	}
	return out, res
}

func TestPutGetReplaceDel(t *testing.T) {
	const ps = 4096
	s := New(ps, 0)
	pages := corpus.Pages(corpus.Mixed, 300, ps, 1)
	b, c := fill(t, pages, ps)
	keys := keysFrom(1000, 300)
	res := make([]Result, 300)
	if err := s.Put(1000, "p", keys, b, c, s.BackendID("cpu"), res); err != nil {
		t.Fatal(err)
	}
	got, gres := getAll(t, s, 1000, "p", keys)
	for i := range gres {
		if gres[i] != OK {
			t.Fatalf("key %d: %v", keys[i], gres[i])
		}
	}
	if !bytes.Equal(got, pages) {
		t.Fatal("pages differ after round trip")
	}
	st := s.Stats()
	if st.Pages != 300 || st.OrigDataSize != 300*ps {
		t.Fatalf("stats %+v", st)
	}
	var zero, same, huge uint64
	for i := range c.Class {
		switch c.Class[i] {
		case pagefmt.ClassZero:
			zero++
		case pagefmt.ClassSame:
			same++
		case pagefmt.ClassRaw:
			huge++
		}
	}
	if st.ZeroPages != zero || st.SamePages != same || st.HugePages != huge || zero == 0 || same == 0 || huge == 0 {
		t.Fatalf("stats %+v, want zero %d same %d huge %d", st, zero, same, huge)
	}

	// Replace the first 100 keys with text; the rest must stay.
	text := corpus.Pages(corpus.Text, 100, ps, 2)
	b2, c2 := fill(t, text, ps)
	if err := s.Put(1000, "p", keys[:100], b2, c2, 0, res[:100]); err != nil {
		t.Fatal(err)
	}
	got, _ = getAll(t, s, 1000, "p", keys)
	if !bytes.Equal(got[:100*ps], text) || !bytes.Equal(got[100*ps:], pages[100*ps:]) {
		t.Fatal("replace changed the wrong pages")
	}
	if st := s.Stats(); st.Pages != 300 {
		t.Fatalf("pages after replace: %d", st.Pages)
	}

	if err := s.Del(1000, "p", append([]uint64{5}, keys[:150]...), res[:151]); err != nil {
		t.Fatal(err)
	}
	if res[0] != NotFound || res[1] != OK {
		t.Fatalf("del results %v %v", res[0], res[1])
	}
	_, gres = getAll(t, s, 1000, "p", keys)
	if gres[0] != NotFound || gres[149] != NotFound || gres[150] != OK {
		t.Fatalf("after del: %v %v %v", gres[0], gres[149], gres[150])
	}
	if err := s.Del(1000, "p", keys[150:], res[:150]); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Pages != 0 || st.ComprDataSize != 0 || s.arena.Used() != 0 {
		t.Fatalf("empty store holds %+v, arena %d", st, s.arena.Used())
	}
}

func TestPermissions(t *testing.T) {
	const ps = 4096
	s := New(ps, 0)
	b, c := fill(t, corpus.Pages(corpus.Text, 2, ps, 1), ps)
	res := make([]Result, 2)
	if err := s.Put(1000, "alice", []uint64{1, 2}, b, c, 0, res); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(1001, "alice", []uint64{1, 2}, b, c, 0, res); err != ErrPermission {
		t.Fatalf("foreign put: %v", err)
	}
	if _, _, err := s.Get(1001, "alice", []uint64{1}, nil, nil, res); err != ErrPermission {
		t.Fatalf("foreign get: %v", err)
	}
	if err := s.Del(1001, "alice", []uint64{1}, res); err != ErrPermission {
		t.Fatalf("foreign del: %v", err)
	}
	if _, err := s.Inspect(1001, "alice", []uint64{1}, true); err != ErrPermission {
		t.Fatalf("foreign inspect: %v", err)
	}
	if _, err := s.PoolInfo(1001, "alice"); err != ErrPermission {
		t.Fatalf("foreign pool info: %v", err)
	}
	if len(s.Pools(1001)) != 0 || len(s.Pools(1000)) != 1 || len(s.Pools(0)) != 1 {
		t.Fatal("pool listing crosses users")
	}
	if _, _, err := s.Get(0, "alice", []uint64{1}, nil, nil, res); err != nil {
		t.Fatalf("root get: %v", err)
	}
	if _, _, err := s.Get(1000, "nobody", []uint64{1}, nil, nil, res); err != ErrNoPool {
		t.Fatalf("missing pool: %v", err)
	}
}

func TestMemLimit(t *testing.T) {
	const ps = 4096
	limit := uint64(4 * ps * slab.SlabPages) // four slabs
	s := New(ps, limit)
	pages := corpus.Pages(corpus.Random, 200, ps, 9) // raw: 16 per slab
	b, c := fill(t, pages, ps)
	keys := keysFrom(0, 200)
	res := make([]Result, 200)
	if err := s.Put(7, "p", keys, b, c, 0, res); err != nil {
		t.Fatal(err)
	}
	stored := 0
	for _, r := range res {
		if r == OK {
			stored++
		} else if r != NoSpace {
			t.Fatalf("result %v", r)
		}
	}
	if want := 4 * s.arena.SlotsPer(slab.TopClass); stored != want {
		t.Fatalf("stored %d pages under a 4-slab limit, want %d", stored, want)
	}
	if st := s.Stats(); st.MemUsedTotal-st.MetadataBytes > limit || st.MemUsedMax > limit {
		t.Fatalf("over the limit: %+v", st)
	}
	// A replacement that does not fit leaves the old page readable.
	b2, c2 := fill(t, corpus.Pages(corpus.Random, 1, ps, 10), ps)
	if err := s.Put(7, "p", keys[:1], b2, c2, 0, res[:1]); err != nil || res[0] != NoSpace {
		t.Fatalf("replace at the limit: %v %v", err, res[0])
	}
	got, _ := getAll(t, s, 7, "p", keys[:stored])
	if !bytes.Equal(got, pages[:stored*ps]) {
		t.Fatal("stored pages changed at the limit")
	}
	// Zero pages need no memory and are still taken.
	b3, c3 := fill(t, make([]byte, ps), ps)
	if err := s.Put(7, "p", []uint64{999}, b3, c3, 0, res[:1]); err != nil || res[0] != OK {
		t.Fatalf("zero page at the limit: %v %v", err, res[0])
	}
}

func TestCompact(t *testing.T) {
	const ps = 4096
	s := New(ps, 0)
	pages := corpus.Pages(corpus.Text, 4000, ps, 3)
	b, c := fill(t, pages, ps)
	keys := keysFrom(0, 4000)
	res := make([]Result, 4000)
	if err := s.Put(1, "p", keys, b, c, 0, res); err != nil {
		t.Fatal(err)
	}
	// Delete 3 of every 4 pages: slabs end up a quarter full.
	var del []uint64
	for i, k := range keys {
		if i%4 != 0 {
			del = append(del, k)
		}
	}
	if err := s.Del(1, "p", del, make([]Result, len(del))); err != nil {
		t.Fatal(err)
	}
	before := s.Stats().MemUsedTotal
	moved, freed := s.Compact()
	after := s.Stats()
	t.Logf("compact moved %d pages, freed %d bytes (%d -> %d)", moved, freed, before, after.MemUsedTotal)
	if moved == 0 || freed == 0 || after.MemUsedTotal >= before || after.PagesCompacted != moved {
		t.Fatalf("compaction did nothing: moved %d freed %d", moved, freed)
	}
	for i := 0; i < 4000; i += 4 {
		got, r := getAll(t, s, 1, "p", keys[i:i+1])
		if r[0] != OK || !bytes.Equal(got, pages[i*ps:(i+1)*ps]) {
			t.Fatalf("key %d wrong after compaction", i)
		}
	}
	if m, _ := s.Compact(); m != 0 {
		t.Fatalf("second compaction moved %d", m)
	}
}

// BenchmarkMetadata stores 1M+ pages and reports index bytes per page.
func BenchmarkMetadata(b *testing.B) {
	for _, n := range []int{1 << 20, 1500000, 2 << 20} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for range b.N {
				s := New(4096, 0)
				bt, c := fill(b, make([]byte, 4096*1024), 4096) // zero pages: metadata only
				res := make([]Result, 1024)
				for k := 0; k < n; k += 1024 {
					cnt := min(1024, n-k)
					s.Put(1, "p", keysFrom(uint64(k)*7919, cnt), bt, c, 0, res[:cnt])
				}
				st := s.Stats()
				b.ReportMetric(float64(st.MetadataBytes)/float64(st.Pages), "meta-B/page")
			}
		})
	}
}

func TestChecksum(t *testing.T) {
	const ps = 4096
	s := New(ps, 0)
	pages := corpus.Pages(corpus.Text, 3, ps, 1)
	b, c := fill(t, pages, ps)
	res := make([]Result, 3)
	if err := s.Put(1, "p", []uint64{1, 2, 3}, b, c, 0, res); err != nil {
		t.Fatal(err)
	}
	// Flip one stored bit of key 2, as a memory fault would.
	w := s.pools["p"].ix.Walk(false)
	e, _ := w.At(2).Get(2)
	w.Done()
	s.arena.Bytes(e.Handle(), e.ObjSize())[checksumSize+e.Size()/2] ^= 0x10
	_, r := getAll(t, s, 1, "p", []uint64{1, 2, 3})
	if r[0] != OK || r[1] != Corrupt || r[2] != OK {
		t.Fatalf("get after corruption: %v", r)
	}
	infos, err := s.Inspect(1, "p", []uint64{2, 3}, true)
	if err != nil || infos[0].Result != Corrupt || infos[0].Data != nil || infos[1].Result != OK {
		t.Fatalf("inspect after corruption: %+v %v", infos, err)
	}
	// Compaction carries the checksum along with the bytes.
	s.Compact()
	_, r = getAll(t, s, 1, "p", []uint64{1, 3})
	if r[0] != OK || r[1] != OK {
		t.Fatalf("after compaction: %v", r)
	}
}

func TestUserLimits(t *testing.T) {
	const ps = 4096
	s := New(ps, 0)
	s.SetLimits(Limits{PoolsPerUser: 2, BytesPerUser: 10 * ps})
	b, c := fill(t, corpus.Pages(corpus.Random, 12, ps, 1), ps) // raw: 4096 bytes each
	res := make([]Result, 12)
	if err := s.Put(5, "a", keysFrom(0, 12), b, c, 0, res); err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if want := map[bool]Result{true: OK, false: OverQuota}[i < 10]; r != want {
			t.Fatalf("page %d: %v, want %v", i, r, want)
		}
	}
	// Replacing a page within the quota still works.
	if err := s.Put(5, "a", keysFrom(0, 1), b, c, 0, res[:1]); err != nil || res[0] != OK {
		t.Fatalf("replace at quota: %v %v", err, res[0])
	}
	// Another user has a quota of its own.
	if err := s.Put(6, "b", keysFrom(0, 1), b, c, 0, res[:1]); err != nil || res[0] != OK {
		t.Fatalf("other user: %v %v", err, res[0])
	}
	if err := s.Put(5, "c", keysFrom(0, 1), b, c, 0, res[:1]); err != nil {
		t.Fatalf("second pool: %v", err)
	}
	if err := s.Put(5, "d", keysFrom(0, 1), b, c, 0, res[:1]); err != ErrPoolLimit {
		t.Fatalf("third pool: %v", err)
	}
	// Deleting frees quota.
	if err := s.Del(5, "a", keysFrom(0, 5), make([]Result, 5)); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(5, "a", keysFrom(100, 4), b, c, 0, res[:4]); err != nil || res[3] != OK {
		t.Fatalf("after delete: %v %v", err, res[:4])
	}
}

// Checksums a backend computed are kept as given (and checked on reads);
// a Sum of the wrong length is ignored and the store computes its own.
func TestBackendChecksums(t *testing.T) {
	const ps = 4096
	s := New(ps, 0)
	pages := corpus.Pages(corpus.Mixed, 8, ps, 2)
	b, c := fill(t, pages, ps)
	keys := keysFrom(0, 8)
	res := make([]Result, 8)
	c.Sum = make([]uint32, 7) // wrong length: ignored
	if err := s.Put(1, "p", keys, b, c, 0, res); err != nil {
		t.Fatal(err)
	}
	if got, r := getAll(t, s, 1, "p", keys); !bytes.Equal(got, pages) || r[7] != OK {
		t.Fatalf("with a short Sum: %v", r)
	}
	c.Sum = make([]uint32, 8)
	checksums(b, c, c.Sum, 0, 8)
	bad := -1
	for i := range c.Class {
		if c.Class[i] != pagefmt.ClassZero && bad < 0 {
			bad = i
			c.Sum[i] ^= 1 // a backend's wrong checksum shows on the first read
		}
	}
	if err := s.Put(1, "q", keys, b, c, 0, res); err != nil {
		t.Fatal(err)
	}
	_, r := getAll(t, s, 1, "q", keys)
	for i := range r {
		if want := OK; i == bad {
			if r[i] != Corrupt {
				t.Fatalf("page %d stored with a wrong checksum: %v", i, r[i])
			}
		} else if r[i] != want {
			t.Fatalf("page %d: %v", i, r[i])
		}
	}
}

// Batches filling their slots outside the lock, compaction and readers at
// once: every key ends up holding one whole version that was put, and the
// totals match what is held.
// TestConcurrentPutCompactGet replaces the same keys from several
// goroutines while others compact, read and delete: every key ends with
// one of the versions put, and the counters agree with the index.
func TestConcurrentPutCompactGet(t *testing.T) {
	const ps, n = 4096, 300
	for _, stride := range []uint64{1, 700} { // one shard; keys over all shards
		s := New(ps, 0)
		versions := make([][]byte, 4)
		batches := make([]*pagefmt.Batch, 4)
		comps := make([]*pagefmt.Compressed, 4)
		for v := range versions {
			versions[v] = corpus.Pages(corpus.Mixed, n, ps, uint64(v+10))
			batches[v], comps[v] = fill(t, versions[v], ps)
		}
		keys := make([]uint64, n)
		for i := range keys {
			keys[i] = uint64(i) * stride
		}
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res := make([]Result, n)
				for it := range 20 {
					v := (g + it) % 4
					if err := s.Put(1, "p", keys, batches[v], comps[v], 0, res); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		stop := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := make([]Result, n)
			for {
				select {
				case <-stop:
					return
				default:
					s.Compact()
					s.Get(1, "p", keys, nil, nil, res)
					s.Del(1, "p", keys[n/2:n/2+10], res)
				}
			}
		}()
		time.Sleep(50 * time.Millisecond)
		close(stop)
		wg.Wait()
		// The last writes are Puts of every key.
		res := make([]Result, n)
		if err := s.Put(1, "p", keys, batches[0], comps[0], 0, res); err != nil {
			t.Fatal(err)
		}
		got, res := getAll(t, s, 1, "p", keys)
		for i := range keys {
			if res[i] != OK {
				t.Fatalf("stride %d key %d: %v", stride, keys[i], res[i])
			}
			if !bytes.Equal(got[i*ps:(i+1)*ps], versions[0][i*ps:(i+1)*ps]) {
				t.Fatalf("stride %d key %d holds another version than the last put", stride, keys[i])
			}
		}
		st := s.Stats()
		var stored uint64
		s.pools["p"].ix.Each(func(_ uint64, e *pageindex.Entry) { stored += uint64(e.Size()) })
		if st.Pages != n || st.ComprDataSize != stored {
			t.Fatalf("stride %d: %d pages counted, %d keys; %d bytes counted, %d stored", stride, st.Pages, n, st.ComprDataSize, stored)
		}
	}
}

// BenchmarkPutParallel stores 4096-page batches from four goroutines into
// one pool, as four connections do: the throughput of Put itself, with the
// batches replacing keys of a small range (the index in cache) and of a
// range of 1M keys (as a GiB-sized pool).
func BenchmarkPutParallel(b *testing.B) {
	const ps, n = 4096, 4096
	pages := corpus.Pages(corpus.Mixed, n, ps, 1)
	batch, comp := fill(b, pages, ps)
	comp.Sum = make([]uint32, n)
	checksums(batch, comp, comp.Sum, 0, n) // as a GPU backend hands them over
	for _, ranges := range []int{4, 256} {
		b.Run(fmt.Sprintf("keys=%d", ranges*n), func(b *testing.B) {
			s := New(ps, 0)
			var next atomic.Int64
			b.SetBytes(int64(len(pages)))
			var wg sync.WaitGroup
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res := make([]Result, n)
					for i := next.Add(1) - 1; i < int64(b.N); i = next.Add(1) - 1 {
						keys := keysFrom(uint64(i%int64(ranges))*n, n)
						if err := s.Put(1, "p", keys, batch, comp, 0, res); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}

// Backend numbers are stable, shared by concurrent callers, and the
// seventeenth name onwards shares the last number.
func TestBackendID(t *testing.T) {
	s := New(4096, 0)
	var wg sync.WaitGroup
	ids := make([]uint8, 8)
	for g := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[g] = s.BackendID("cuda")
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] || s.backendName(id) != "cuda" {
			t.Fatalf("ids %v, name %q", ids, s.backendName(id))
		}
	}
	for i := range 20 {
		id := s.BackendID(fmt.Sprint("b", i))
		if want := min(i+1, 15); id != uint8(want) {
			t.Fatalf("backend %d: id %d, want %d", i, id, want)
		}
	}
	if s.BackendID("cuda") != ids[0] || s.backendName(99) != "?" {
		t.Fatal("ids moved, or an unknown id has a name")
	}
}
