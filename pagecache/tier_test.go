package pagecache

import (
	"errors"
	"sync"
	"testing"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/slab"
)

// memTier is a level below RAM that keeps objects in a map: the store's
// side of the Tier hook, tested without a backing file (the file's own
// tests are in package cold).
type memTier struct {
	s      *Store
	mu     sync.Mutex
	objs   map[Loc][]byte
	next   Loc
	rounds int
	notes  []string                // pools noted
	onNote func(pool string) error // what a note does (nil: nothing)
}

func (m *memTier) MakeRoom(need uint64) error {
	m.rounds++
	refs := m.s.Pick(func(r PageRef) bool { return r.InRAM() }, int(need)+int(m.s.Arena().Slab))
	slots := make([][]byte, len(refs))
	for i := range refs {
		slots[i] = make([]byte, refs[i].ObjSize())
	}
	m.s.CopyObjects(refs, func(i int) []byte { return slots[i] })
	locs := make([]Loc, len(refs))
	m.mu.Lock()
	for i := range refs {
		m.next++
		locs[i] = m.next
		m.objs[locs[i]] = slots[i]
	}
	m.mu.Unlock()
	for i, ok := range m.s.Relocate(refs, locs) {
		if !ok {
			m.Forget(locs[i], 0)
		}
	}
	return nil
}

func (m *memTier) Read(rs []TierRead) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range rs {
		rs[i].Data = m.objs[rs[i].Loc][:rs[i].Len]
	}
}

func (m *memTier) Hold() func() { return func() {} }

func (m *memTier) Note(pool string) error {
	m.notes = append(m.notes, pool)
	if m.onNote != nil {
		return m.onNote(pool)
	}
	return nil
}

func (m *memTier) Forget(loc Loc, _ int) {
	m.mu.Lock()
	delete(m.objs, loc)
	m.mu.Unlock()
}

// Past the memory limit a PUT has the Tier make room, pages off RAM read
// back through it, and a page replaced or deleted is forgotten there.
func TestTierHook(t *testing.T) {
	const ps, n = 4096, 3000
	limit := uint64(64 * ps * slab.SlabPages)
	s := New(ps, limit)
	m := &memTier{s: s, objs: map[Loc][]byte{}}
	s.SetTier(m)
	pages := corpus.Pages(corpus.Mixed, n, ps, 31)
	for lo := 0; lo < n; lo += 500 {
		putOK(t, s, 1, "p", keysFrom(uint64(lo), 500), pages[lo*ps:(lo+500)*ps])
		if s.Arena().Used > limit {
			t.Fatalf("arena %d over the limit %d", s.Arena().Used, limit)
		}
	}
	off := len(s.Pick(func(r PageRef) bool { return r.OnFile() }, 1<<62))
	if m.rounds == 0 || off == 0 || len(m.objs) != off {
		t.Fatalf("%d rounds, %d pages off RAM, %d objects kept below", m.rounds, off, len(m.objs))
	}
	checkAll(t, s, 1, "p", keysFrom(0, n), pages)
	if err := s.Del(1, "p", keysFrom(0, n), make([]Result, n)); err != nil {
		t.Fatal(err)
	}
	if len(m.objs) != 0 || s.Stats().Pages != 0 {
		t.Fatalf("%d objects left below, %d pages counted, after deleting all", len(m.objs), s.Stats().Pages)
	}
}

// Records and Restore carry pages off RAM and zero pages to a new store;
// a record naming a place twice is refused.
func TestRecordsRestore(t *testing.T) {
	const ps = 4096
	s := New(ps, 0)
	m := &memTier{s: s, objs: map[Loc][]byte{}}
	s.SetTier(m)
	pages := corpus.Pages(corpus.Text, 100, ps, 32)
	copy(pages[:ps], make([]byte, ps)) // a zero page
	putOK(t, s, 7, "q", keysFrom(0, 100), pages)
	m.MakeRoom(1 << 30) // every page in RAM goes below
	marked := false
	names, pools := s.Records(func() { marked = true })
	if !marked || len(names) != 1 || len(pools) != 1 || len(pools[0].Keys) != 100 {
		t.Fatalf("records: %v %d pools, then run %v", names, len(pools), marked)
	}
	s2 := New(ps, 0)
	m.s = s2
	s2.SetTier(m)
	claimed := map[Loc]bool{}
	claim := func(l Loc, _ int) error { claimed[l] = true; return nil }
	if got, err := s2.Restore(names, pools, claim); err != nil || got.Pages != 100 || got.Lost != 0 || len(claimed) != 99 {
		t.Fatalf("restored %+v (%d places claimed): %v", got, len(claimed), err)
	}
	checkAll(t, s2, 7, "q", keysFrom(0, 100), pages)
	if _, err := s2.PoolInfo(8, "q"); err != ErrPermission {
		t.Fatalf("owner not restored: %v", err)
	}
	if _, err := New(ps, 0).Restore(names, append(pools, pools[0]), claim); err == nil {
		t.Fatal("a pool recorded twice was restored")
	}
}

// What a crash loses, as the records tell it: pages in RAM when they were
// taken, and every page of a pool being changed then; a pool recorded
// whole is noted before its next change, once.
func TestRecordsWhatACrashLoses(t *testing.T) {
	const ps = 4096
	s := New(ps, 0)
	m := &memTier{s: s, objs: map[Loc][]byte{}}
	s.SetTier(m)
	pages := corpus.Pages(corpus.Text, 100, ps, 33)
	putOK(t, s, 1, "p", keysFrom(0, 60), pages[:60*ps])
	m.MakeRoom(1 << 30)
	putOK(t, s, 1, "p", keysFrom(60, 40), pages[60*ps:]) // in RAM
	if len(m.notes) != 1 {
		t.Fatalf("notes before any record: %v, want the new pool's one", m.notes)
	}
	names, pools := s.Records(func() {})
	if pools[0].Changed {
		t.Fatal("a pool at rest recorded changed")
	}
	restore := func(pools []PoolRecord) (*Store, Restored) {
		t.Helper()
		s2 := New(ps, 0)
		m.s = s2
		s2.SetTier(m)
		r, err := s2.Restore(names, pools, func(Loc, int) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		m.s = s
		return s2, r
	}
	s2, r := restore(pools)
	if r.Pages != 60 || r.Lost != 40 || len(r.Changed) != 0 {
		t.Fatalf("restored %+v, want 60 pages and the 40 in RAM lost", r)
	}
	checkAll(t, s2, 1, "p", keysFrom(0, 60), pages[:60*ps])
	if _, res := getAll(t, s2, 1, "p", keysFrom(60, 40)); res[0] != NotFound {
		t.Fatalf("a lost page: %v", res[0])
	}
	// The next PUT is noted first, and a record taken while it is under
	// way (as the note itself takes one) says the pool changed.
	var during []PoolRecord
	m.onNote = func(string) error { _, during = s.Records(func() {}); return nil }
	putOK(t, s, 1, "p", keysFrom(0, 1), pages[99*ps:])
	putOK(t, s, 1, "p", keysFrom(1, 1), pages[99*ps:])
	if len(m.notes) != 2 || len(during) != 1 || !during[0].Changed {
		t.Fatalf("notes %v, record during the PUT %+v", m.notes, during)
	}
	if _, r := restore(during); r.Pages != 0 || r.Lost != 100 || len(r.Changed) != 1 {
		t.Fatalf("restored from a changed pool's record: %+v, want nothing and 100 lost", r)
	}
	// A note that fails fails the change: the page stays as it was.
	s.Records(func() {})
	m.onNote = func(string) error { return errors.New("disk gone") }
	b, c := fill(t, pages[:ps], ps)
	if err := s.Put(1, "p", keysFrom(5, 1), b, c, 0, make([]Result, 1)); err == nil {
		t.Fatal("a PUT whose note failed succeeded")
	}
	if err := s.Del(1, "p", keysFrom(5, 1), make([]Result, 1)); err == nil {
		t.Fatal("a DEL whose note failed succeeded")
	}
	checkAll(t, s, 1, "p", keysFrom(5, 1), pages[5*ps:6*ps])
}
