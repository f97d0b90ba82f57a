package remote

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
)

// Level is the remote tier as a level of the cold tier, below the backing
// file: objects (a page's checksum and stored bytes, as the store keeps
// them) go out packed in blocks, and each gets a place, a number that the
// store keeps in the page's entry (pagecache.Loc, with RemoteLoc set) and
// hands back to read or forget the object. The table from places to
// blocks is the level's; Marshal and Restore carry it across a restart,
// in the cold tier's checkpoint.
//
// A block lives until every object in it is forgotten; its deletion waits
// while a Hold stands, so that a reader that found a place under the
// store's lock reads the block it named.
type Level struct {
	t    *Tier
	pool string // the namespace pool every block of this host's level goes under

	mu      sync.Mutex
	places  []place // by place number; a free one has block 0
	free    []uint32
	parked  []uint32 // places taken back while held: reused only after the last Hold
	blocks  map[uint64]*blockInfo
	nextID  uint64
	holds   int
	doomed  []uint64 // blocks emptied while held
	claimed []bool   // during a restore: places a page named again (level_persist.go)
	deleted []deletion
}

type place struct {
	block uint64
	slot  uint32
}

type blockInfo struct {
	gen  uint64
	size int // packed bytes, for the quota
	live int // places still naming it
}

type deletion struct {
	id   uint64
	size int
}

// RemoteLoc marks a place as the remote level's in a 32-bit location the
// cold tier shares with the backing file (whose offsets, in its units,
// stay below it).
const RemoteLoc = uint32(1) << 31

// MaxPlaces is how many objects the level can place at once.
const MaxPlaces = RemoteLoc - 1

// blockTarget is the packed size a block is closed at.
const blockTarget = 1 << 20

// NewLevel makes the level on t; its blocks go under pool ("cold" for the
// daemon's cold pages).
func NewLevel(t *Tier, pool string) *Level {
	// IDs start at a random epoch per start, so that blocks a crash left
	// behind (written after the last checkpoint) are never overwritten by
	// new ones: the sweep finds them unnamed and deletes them.
	return &Level{t: t, pool: pool, places: []place{{}}, blocks: map[uint64]*blockInfo{}, nextID: randGen()&^(1<<32-1) | 1}
}

func randGen() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:]) | 1
}

// Store writes objs in blocks of about 1 MiB and answers each object's
// place (RemoteLoc set). Either every object is placed, acknowledged by a
// replica where there is one, or none is and err says why: the caller's
// pages then stay where they were.
func (l *Level) Store(ctx context.Context, objs [][]byte) (locs []uint32, err error) {
	type pending struct {
		b     Block
		first int // index of its first object in objs
		n     int
	}
	var out []pending
	l.mu.Lock()
	for lo := 0; lo < len(objs); {
		hi, size := lo, 4
		for hi < len(objs) && (hi == lo || size+12+len(objs[hi]) <= blockTarget) {
			size += 12 + len(objs[hi])
			hi++
		}
		keys := make([]uint64, hi-lo)
		for i := range keys {
			keys[i] = uint64(i)
		}
		id, err := l.liveID()
		if err != nil {
			l.mu.Unlock()
			return nil, err
		}
		out = append(out, pending{b: Block{ID: id, Gen: randGen(), Data: Pack(nil, keys, objs[lo:hi])}, first: lo, n: hi - lo})
		lo = hi
	}
	l.mu.Unlock()
	// Every name written to: released at the end (in our table, or
	// deleted below, or left to the sweep).
	var all []uint64
	var sizes []int
	defer func() { l.t.Release(l.pool, all) }()
	todo := make([]int, len(out))
	for i := range todo {
		todo[i] = i
	}
	for try := 0; ; try++ {
		blocks := make([]Block, len(todo))
		for k, i := range todo {
			blocks[k] = out[i].b
			all, sizes = append(all, out[i].b.ID), append(sizes, len(out[i].b.Data))
		}
		errs := l.t.Write(ctx, l.pool, blocks)
		var again []int
		for k, e := range errs {
			switch {
			case e == nil:
			case try == 0 && errors.Is(e, ErrNodeDown):
				again = append(again, todo[k])
			default:
				err = e
			}
		}
		if err != nil || len(again) == 0 {
			break
		}
		// Their node was found down during this spill (it is marked
		// now): those blocks go again, once, under names on live
		// nodes. What the down node may have taken is unnamed: swept.
		l.mu.Lock()
		for _, i := range again {
			if out[i].b.ID, err = l.liveID(); err != nil {
				break
			}
		}
		l.mu.Unlock()
		if err != nil {
			break
		}
		todo = again
	}
	if err != nil {
		// Nothing counts: blocks written anyway are deleted (or swept).
		l.t.Delete(ctx, l.pool, all, sizes)
		return nil, err
	}
	locs = make([]uint32, len(objs))
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.places)-1-len(l.free)-len(l.parked)+len(objs) > int(MaxPlaces) {
		return nil, errors.New("remote: the level's place table is full")
	}
	for _, p := range out {
		l.blocks[p.b.ID] = &blockInfo{gen: p.b.Gen, size: len(p.b.Data), live: p.n}
		for j := range p.n {
			locs[p.first+j] = RemoteLoc | l.alloc(place{block: p.b.ID, slot: uint32(j)})
		}
	}
	return locs, nil
}

// liveID takes the next block ID whose slot is served by a node that is
// up: while a node is down, no block goes to its slots and spills go on
// to the others. An ID is only a name, so skipping some costs nothing.
// After idTries IDs in a row on down nodes, every node (or nearly) is
// down, and the spill fails at once. The caller holds l.mu.
func (l *Level) liveID() (uint64, error) {
	var err error
	for range idTries {
		id := l.nextID
		l.nextID++
		if err = l.t.KeyDown(l.pool, id); err == nil {
			return id, nil
		}
	}
	return 0, fmt.Errorf("no block name on a live node in %d tries: %w", idTries, err)
}

// idTries: with one master of three down, 64 IDs in a row on it happen
// once in 3^64 spills.
const idTries = 64

func (l *Level) alloc(p place) uint32 {
	if n := len(l.free); n > 0 {
		i := l.free[n-1]
		l.free = l.free[:n-1]
		l.places[i] = p
		return i
	}
	l.places = append(l.places, p)
	return uint32(len(l.places) - 1)
}

func (l *Level) lookup(loc uint32) (place, *blockInfo, bool) {
	i := loc &^ RemoteLoc
	if loc&RemoteLoc == 0 || int(i) >= len(l.places) || l.places[i].block == 0 {
		return place{}, nil, false
	}
	p := l.places[i]
	return p, l.blocks[p.block], true
}

// ErrNoPlace is a location the level never gave or already took back.
var ErrNoPlace = errors.New("remote: no object at this place")

// Read reads the objects at locs, each block once, in one batch. Each is
// the object as stored, or an error: a block missing, stale or failing
// authentication fails every object in it, never answering other bytes.
func (l *Level) Read(ctx context.Context, locs []uint32) ([][]byte, []error) {
	data, errs := make([][]byte, len(locs)), make([]error, len(locs))
	idx := map[uint64]int{} // block -> refs index
	var refs []Ref
	where := make([]place, len(locs))
	l.mu.Lock()
	for i, loc := range locs {
		p, b, ok := l.lookup(loc)
		if !ok {
			errs[i] = fmt.Errorf("%w: %#x", ErrNoPlace, loc)
			continue
		}
		where[i] = p
		if _, seen := idx[p.block]; !seen {
			idx[p.block] = len(refs)
			refs = append(refs, Ref{ID: p.block, Gen: b.gen})
		}
	}
	l.mu.Unlock()
	blocks, berrs := l.t.Read(ctx, l.pool, refs)
	objs := make([][][]byte, len(refs))
	for j := range refs {
		if berrs[j] == nil {
			if _, objs[j], berrs[j] = Unpack(blocks[j]); berrs[j] != nil {
				berrs[j] = fmt.Errorf("%w: %v", ErrCorrupt, berrs[j])
			}
		}
	}
	for i := range locs {
		if errs[i] != nil {
			continue
		}
		j := idx[where[i].block]
		switch {
		case berrs[j] != nil:
			errs[i] = berrs[j]
		case int(where[i].slot) >= len(objs[j]):
			errs[i] = fmt.Errorf("%w: block %x has no object %d", ErrCorrupt, where[i].block, where[i].slot)
		default:
			data[i] = objs[j][where[i].slot]
		}
	}
	return data, errs
}

// Forget takes back a place whose object was replaced or deleted; a block
// left with no object is deleted (after the last Hold).
func (l *Level) Forget(loc uint32) {
	l.mu.Lock()
	p, b, ok := l.lookup(loc)
	if !ok {
		l.mu.Unlock()
		return
	}
	i := loc &^ RemoteLoc
	l.places[i] = place{}
	// A reader under a Hold checks afterwards that a page's place is
	// unchanged; a place given again meanwhile could pass that check with
	// another object's bytes, so it waits for the last Hold.
	if l.holds > 0 {
		l.parked = append(l.parked, i)
	} else {
		l.free = append(l.free, i)
	}
	if b.live--; b.live == 0 {
		l.doomed = append(l.doomed, p.block)
	}
	l.mu.Unlock()
	l.collect()
}

// Hold keeps every block from deletion until unhold is called. Holds nest.
func (l *Level) Hold() (unhold func()) {
	l.mu.Lock()
	l.holds++
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		l.holds--
		l.mu.Unlock()
		l.collect()
	}
}

// collect moves emptied blocks to the deletion queue when nothing holds
// them. Forget runs under the store's write lock, so the deletions
// themselves wait for Flush (no network call under the store's lock).
func (l *Level) collect() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holds > 0 {
		return
	}
	l.free = append(l.free, l.parked...)
	l.parked = l.parked[:0]
	for _, id := range l.doomed {
		if b := l.blocks[id]; b != nil && b.live == 0 {
			l.deleted = append(l.deleted, deletion{id, b.size})
			delete(l.blocks, id)
		}
	}
	l.doomed = l.doomed[:0]
}

// Flush deletes the blocks emptied since the last Flush. A deletion that
// fails is left to the sweep: no table names the block any more.
func (l *Level) Flush(ctx context.Context) error {
	l.mu.Lock()
	ds := l.deleted
	l.deleted = nil
	l.mu.Unlock()
	if len(ds) == 0 {
		return nil
	}
	ids, sizes := make([]uint64, len(ds)), make([]int, len(ds))
	for i, d := range ds {
		ids[i], sizes[i] = d.id, d.size
	}
	return l.t.Delete(ctx, l.pool, ids, sizes)
}

// Sweep deletes this host's blocks the table does not name (written
// before a crash and never checkpointed, or whose deletion failed).
func (l *Level) Sweep(ctx context.Context) (int, error) {
	l.mu.Lock()
	named := make(map[string]bool, len(l.blocks))
	for id := range l.blocks {
		named[string(l.t.Key(l.pool, id))] = true
	}
	l.mu.Unlock()
	return l.t.Sweep(ctx, func(k []byte) bool { return named[string(k)] })
}

// Objects and Blocks count what the level holds.
func (l *Level) Objects() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.places) - 1 - len(l.free) - len(l.parked)
}

func (l *Level) Blocks() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.blocks)
}
