package pagecache

import (
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
	if got, err := s2.Restore(names, pools, claim); err != nil || got != 100 || len(claimed) != 99 {
		t.Fatalf("restored %d (%d places claimed): %v", got, len(claimed), err)
	}
	checkAll(t, s2, 7, "q", keysFrom(0, 100), pages)
	if _, err := s2.PoolInfo(8, "q"); err != ErrPermission {
		t.Fatalf("owner not restored: %v", err)
	}
	if _, err := New(ps, 0).Restore(names, append(pools, pools[0]), claim); err == nil {
		t.Fatal("a pool recorded twice was restored")
	}
}
