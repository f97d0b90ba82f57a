package pagecache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/slab"
)

// hostPlacer places a compressed batch's objects as an engine would,
// from a Compressed held aside, and can be told to fail.
type hostPlacer struct {
	b    *pagefmt.Batch
	c    *pagefmt.Compressed
	fail bool
	seen int
}

func (p *hostPlacer) Place(dst [][]byte) error {
	if p.fail {
		return errors.New("device lost")
	}
	for i, d := range dst {
		if d == nil {
			continue
		}
		p.seen++
		if len(d) != pagefmt.ObjectHeader+int(p.c.Size[i]) {
			return errors.New("slot of the wrong size")
		}
		binary.LittleEndian.PutUint32(d, p.c.Checksum(i, p.b))
		copy(d[pagefmt.ObjectHeader:], p.c.Bytes(i, p.b))
	}
	return nil
}

// pinRecorder stands for an engine that registers memory.
type pinRecorder struct{ pinned, unpinned int }

func (r *pinRecorder) Pin(mem []byte) (func(), error) {
	r.pinned++
	return func() { r.unpinned++ }, nil
}

// A part offered with a Placer is stored by it, bytes and checksums as
// Put's own copy would make them; a Placer that fails leaves nothing
// stored or counted and says so with a PlaceError. Registered slabs are
// kept while their mapping is in use, and the mapping goes back whole once
// it is not.
func TestPutPlaced(t *testing.T) {
	const ps = 4096
	pages := corpus.Pages(corpus.Mixed, 600, ps, 3)
	b, c := fill(t, pages, ps)
	s := New(ps, 0)
	var pins pinRecorder
	s.SetPinner(&pins)
	s.arena.SetPinner(&pins, 0) // give back every idle mapping (slab.IdlePinnedKeep is 16 of them)
	keys := keysFrom(0, b.Len())
	res := make([]Result, len(keys))

	p := &hostPlacer{b: b, c: c, fail: true}
	c.Place = p
	err := s.Put(1, "p", keys, b, c, 0, res)
	if !pagefmt.IsPlaceError(err) {
		t.Fatalf("failing placer: %v, want a PlaceError", err)
	}
	if st := s.Stats(); st.Pages != 0 || st.ComprDataSize != 0 {
		t.Fatalf("after a failed placing the store counts %d pages, %d bytes", st.Pages, st.ComprDataSize)
	}
	p.fail = false
	if err := s.Put(1, "p", keys, b, c, 0, res); err != nil {
		t.Fatal(err)
	}
	if p.seen == 0 || pins.pinned == 0 {
		t.Fatalf("placer wrote %d objects, %d mappings registered", p.seen, pins.pinned)
	}
	got, gres := getAll(t, s, 1, "p", keys)
	for i, r := range gres {
		if r != OK {
			t.Fatalf("key %d: %v", i, r)
		}
	}
	if !bytes.Equal(got, pages) {
		t.Fatal("placed pages read back different")
	}
	// Emptied registered slabs are kept, not given back one by one, while
	// their mapping holds a page in use...
	held := 0 // a page that keeps arena memory
	for c.Class[held] == pagefmt.ClassZero {
		held++
	}
	others := append(append([]uint64{}, keys[:held]...), keys[held+1:]...)
	if err := s.Del(1, "p", others, res[:len(others)]); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if n := s.Sweep(); n != 0 || pins.unpinned != 0 {
			t.Fatalf("sweep gave back %d bytes of registered slabs, %d mappings unregistered, one page in use", n, pins.unpinned)
		}
	}
	// ... and the mapping goes back whole, unregistered first, once none
	// is in use.
	if err := s.Del(1, "p", keys[held:held+1], res[:1]); err != nil {
		t.Fatal(err)
	}
	var back uint64
	for range 3 {
		back += s.Sweep()
	}
	if pins.unpinned != pins.pinned || back < uint64(slab.PinnedRegionSlabs*s.arena.SlabSize()) || mapped(s) != 0 {
		t.Fatalf("idle: %d mappings registered, %d unregistered, %d bytes back, %d mappings left",
			pins.pinned, pins.unpinned, back, mapped(s))
	}
	// The store goes on with a fresh mapping.
	if err := s.Put(1, "p", keys, b, c, 0, res); err != nil {
		t.Fatal(err)
	}
	if got, _ := getAll(t, s, 1, "p", keys); !bytes.Equal(got, pages) || pins.pinned != pins.unpinned+1 {
		t.Fatalf("after giving back: pages equal %v, %d registered, %d unregistered", bytes.Equal(got, pages), pins.pinned, pins.unpinned)
	}
	s.arena.Unmap()
	if pins.unpinned != pins.pinned {
		t.Fatalf("%d mappings registered, %d unregistered", pins.pinned, pins.unpinned)
	}
}

// Idle registered mappings beyond keepIdle bytes go back; up to it they
// stay, for the next burst to reuse without registering memory again.
func TestIdlePinnedKeep(t *testing.T) {
	const ps, n = 4096, 3 * 4096
	s := New(ps, 0)
	var pins pinRecorder
	s.SetPinner(&pins)
	s.arena.SetPinner(&pins, slab.PinnedRegionSlabs*s.arena.SlabSize()) // keep one mapping
	keys := keysFrom(0, n)
	pages := corpus.Pages(corpus.Random, n, ps, 4) // stored raw: three mappings and more
	putOK(t, s, 1, "p", keys, pages)
	if pins.pinned < 3 {
		t.Fatalf("%d mappings registered for %d raw pages", pins.pinned, n)
	}
	res := make([]Result, n)
	if err := s.Del(1, "p", keys, res); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		s.Sweep()
	}
	if pins.unpinned != pins.pinned-1 || registered(s) != 1 {
		t.Fatalf("%d registered, %d unregistered, %d left; want one left", pins.pinned, pins.unpinned, registered(s))
	}
	putOK(t, s, 1, "p", keys[:1000], pages[:1000*ps]) // reuses the one kept
	checkAll(t, s, 1, "p", keys[:1000], pages[:1000*ps])
}

func mapped(s *Store) int     { n, _ := s.arena.Mappings(); return n }
func registered(s *Store) int { _, n := s.arena.Mappings(); return n }
