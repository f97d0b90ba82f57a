package remote

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

func randObjs(rng *rand.Rand, n int) [][]byte {
	objs := make([][]byte, n)
	for i := range objs {
		objs[i] = make([]byte, 16+rng.IntN(4100))
		for j := range objs[i] {
			objs[i][j] = byte(rng.Uint32())
		}
	}
	return objs
}

func checkRead(t *testing.T, l *Level, locs []uint32, objs [][]byte) {
	t.Helper()
	data, errs := l.Read(testCtx(t), locs)
	for i := range locs {
		if errs[i] != nil {
			t.Fatalf("object %d at %#x: %v", i, locs[i], errs[i])
		}
		if !bytes.Equal(data[i], objs[i]) {
			t.Fatalf("object %d at %#x differs", i, locs[i])
		}
	}
}

// Objects go out packed, come back each as stored, in any order; a block
// goes when its last object is forgotten and no Hold stands; a tampered
// block fails every object in it; the table survives a restart, places no
// page claims are freed and their blocks deleted; the sweep removes
// blocks no table names.
func TestLevel(t *testing.T) {
	tc := getCluster(t)
	tr := openTier(t, tierConfig(t, tc))
	ctx := testCtx(t)
	if _, err := tr.Sweep(ctx, func([]byte) bool { return false }); err != nil {
		t.Fatal(err)
	}
	l := NewLevel(tr, "cold")
	rng := rand.New(rand.NewPCG(3, 4))
	objs := randObjs(rng, 1500) // about 3 MiB: 3-4 blocks
	locs, err := l.Store(ctx, objs)
	if err != nil {
		t.Fatal(err)
	}
	if l.Blocks() < 3 || l.Objects() != len(objs) {
		t.Fatalf("%d blocks, %d objects", l.Blocks(), l.Objects())
	}
	for _, loc := range locs {
		if loc&RemoteLoc == 0 {
			t.Fatalf("place %#x without RemoteLoc", loc)
		}
	}
	perm := rng.Perm(len(locs))
	pl, po := make([]uint32, len(locs)), make([][]byte, len(locs))
	for i, j := range perm {
		pl[i], po[i] = locs[j], objs[j]
	}
	checkRead(t, l, pl, po)

	// Forget the first block's objects while a Hold stands: it stays.
	first, _, _ := l.lookup(locs[0])
	var inFirst []int
	for i, loc := range locs {
		if p, _, _ := l.lookup(loc); p.block == first.block {
			inFirst = append(inFirst, i)
		}
	}
	unhold := l.Hold()
	for _, i := range inFirst {
		l.Forget(locs[i])
	}
	// A place taken back under the Hold is not given again before it ends:
	// a reader checking a page's place afterwards would take another
	// object's bytes for it.
	extra, err := l.Store(ctx, randObjs(rng, 1))
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range inFirst {
		if extra[0] == locs[i] {
			t.Fatalf("place %#x forgotten under a Hold given again before it ended", extra[0])
		}
	}
	l.Forget(extra[0])
	l.Flush(ctx)
	key := tr.Key("cold", first.block)
	exists := func() bool {
		r := tr.c.Do(ctx, []Cmd{{Key: key, Args: [][]byte{[]byte("EXISTS"), key}}})[0]
		return r.Err == nil && r.Val.Int == 1
	}
	if !exists() {
		t.Fatal("a held block was deleted")
	}
	unhold()
	if err := l.Flush(ctx); err != nil || exists() {
		t.Fatalf("emptied block still there after the hold: %v", err)
	}
	if _, errs := l.Read(ctx, locs[inFirst[0]:inFirst[0]+1]); !errors.Is(errs[0], ErrNoPlace) {
		t.Fatalf("forgotten place: %v", errs[0])
	}
	rest, restObjs := locs[len(inFirst):], objs[len(inFirst):]
	checkRead(t, l, rest, restObjs)

	// Restart: the table comes back; half the places are claimed.
	table := l.Marshal()
	l2 := NewLevel(tr, "cold")
	if err := l2.Restore(table); err != nil {
		t.Fatal(err)
	}
	last, _, _ := l.lookup(rest[len(rest)-1])
	var keep []int
	for i, loc := range rest {
		if p, _, _ := l.lookup(loc); p.block != last.block && i%2 == 0 {
			if err := l2.Claim(loc); err != nil {
				t.Fatal(err)
			}
			keep = append(keep, i)
		}
	}
	if err := l2.Claim(rest[keep[0]]); err == nil {
		t.Fatal("a place claimed twice")
	}
	l2.Settle()
	if err := l2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	kl, ko := make([]uint32, len(keep)), make([][]byte, len(keep))
	for j, i := range keep {
		kl[j], ko[j] = rest[i], restObjs[i]
	}
	checkRead(t, l2, kl, ko)
	lastKey := tr.Key("cold", last.block)
	if r := tr.c.Do(ctx, []Cmd{{Key: lastKey, Args: [][]byte{[]byte("EXISTS"), lastKey}}})[0]; r.Val.Int != 0 {
		t.Fatal("a block no page claimed was not deleted")
	}
	// New objects take freed places and new block IDs.
	more := randObjs(rng, 10)
	ml, err := l2.Store(ctx, more)
	if err != nil {
		t.Fatal(err)
	}
	checkRead(t, l2, ml, more)

	// Tamper with a block: each of its objects fails, none answers bytes.
	p, _, _ := l2.lookup(ml[0])
	k := tr.Key("cold", p.block)
	raw := tr.c.Do(ctx, []Cmd{{Key: k, Args: [][]byte{[]byte("GET"), k}}})[0].Val.Str
	raw[SealOverhead] ^= 1
	tr.c.Do(ctx, []Cmd{{Key: k, Args: [][]byte{[]byte("SET"), k, raw}}})
	data, errs := l2.Read(ctx, ml)
	for i := range ml {
		if !errors.Is(errs[i], ErrCorrupt) || data[i] != nil {
			t.Fatalf("object %d of a tampered block: %v, %d bytes", i, errs[i], len(data[i]))
		}
	}

	// A block no table names (the first level's, written and forgotten
	// by a crash) goes with the sweep; the named ones stay.
	orphan, err := l.Store(ctx, randObjs(rng, 3))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := l2.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("sweep removed %d: %v", n, err)
	}
	if _, errs := l.Read(ctx, orphan); !errors.Is(errs[0], ErrMissing) {
		t.Fatalf("orphan after the sweep: %v", errs[0])
	}
	checkRead(t, l2, kl, ko)

	if err := l2.Restore(table); err == nil {
		t.Fatal("Restore into a level in use")
	}
	for _, bad := range [][]byte{nil, table[:10], table[:len(table)-1], append(append([]byte{}, table...), 0)} {
		if err := NewLevel(tr, "x").Restore(bad); err == nil {
			t.Errorf("a damaged table of %d bytes restored", len(bad))
		}
	}
}
