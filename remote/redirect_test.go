package remote

import (
	"strconv"
	"testing"
)

// A slot map that is wrong (as after a resharding) is corrected by MOVED:
// every block still goes in and comes back, and the map is right after.
func TestMovedRedirects(t *testing.T) {
	tc := getCluster(t)
	s := newTestStore(t, tc, testKey, nil)
	ns := Namespace{"host-m", "pool"}
	scramble := func() {
		s.c.mu.Lock()
		one := s.c.slots[0]
		for i := range s.c.slots {
			s.c.slots[i] = one
		}
		s.c.mu.Unlock()
	}
	bs := randBlocks(100, 2048, 1)
	scramble()
	mustPut(t, s, ns, bs)
	if s.c.Stats().Moved == 0 {
		t.Fatal("no MOVED followed: the test did not test redirects")
	}
	scramble()
	checkGet(t, s, ns, bs)
	fresh := newTestStore(t, tc, testKey, nil)
	for _, b := range bs {
		k := s.Key(ns, b.ID)
		got, _ := s.c.route(k)
		want, _ := fresh.c.route(k)
		if got != want {
			t.Fatalf("slot %d routed to %s after redirects, owner %s", Slot(k), got, want)
		}
	}
}

// A slot being migrated answers ASK for keys its source no longer has:
// the client asks the target with ASKING, once, without moving the slot in
// its map.
func TestAskRedirects(t *testing.T) {
	tc := getCluster(t)
	s := newTestStore(t, tc, testKey, nil)
	ns := Namespace{"host-ask", "pool"}
	b := randBlocks(1, 3000, 1)
	k := s.Key(ns, 0)
	slot := strconv.Itoa(Slot(k))
	src, _ := s.c.route(k)
	si := tc.index(src)
	di := -1
	for _, m := range s.c.Masters() {
		if m != src {
			di = tc.index(m)
			break
		}
	}
	id := func(i int) string {
		v, err := tc.nodeDo(i, "CLUSTER", "MYID")
		if err != nil {
			t.Fatal(err)
		}
		return string(v.Str)
	}
	srcID, dstID := id(si), id(di)
	if _, err := tc.nodeDo(di, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.nodeDo(si, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID); err != nil {
		t.Fatal(err)
	}
	defer func() {
		tc.nodeDo(si, "CLUSTER", "SETSLOT", slot, "STABLE")
		tc.nodeDo(di, "CLUSTER", "SETSLOT", slot, "STABLE")
	}()
	mustPut(t, s, ns, b)
	checkGet(t, s, ns, b)
	if s.c.Stats().Ask < 2 {
		t.Fatalf("%d ASK followed, want 2 (put and get)", s.c.Stats().Ask)
	}
	if a, _ := s.c.route(k); a != src {
		t.Fatalf("ASK moved the slot to %s in the map", a)
	}
	// The block is on the target, not the source.
	o := tc.opts().withDefaults()
	cn, err := dial(testCtx(t), tc.addr(di), &o)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := cn.pipeline(testCtx(t), [][][]byte{args("ASKING"), {[]byte("EXISTS"), k}})
	cn.close()
	if err != nil || vs[1].Int != 1 {
		t.Fatalf("block not on the import target: %v %+v", err, vs)
	}
	for _, err := range s.Delete(testCtx(t), ns, []uint64{0}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	_, errs := s.Get(testCtx(t), ns, refs(b))
	wantErr(t, "deleted during migration", errs, ErrMissing)
}
