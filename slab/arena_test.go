package slab

import (
	"slices"
	"testing"
)

func TestArenaReuse(t *testing.T) {
	a := New(4096, 0)
	var hs []Handle
	for i := range 5000 {
		h, buf, err := a.Alloc(100 + i%50)
		if err != nil {
			t.Fatal(err)
		}
		for j := range buf {
			buf[j] = byte(i)
		}
		hs = append(hs, h)
	}
	for i, h := range hs {
		if b := a.Bytes(h, 100+i%50); b[0] != byte(i) || b[len(b)-1] != byte(i) {
			t.Fatalf("object %d overwritten", i)
		}
	}
	peak := a.used
	for _, h := range hs {
		a.Free(h)
	}
	if a.used != 0 {
		t.Fatalf("%d bytes held after freeing everything", a.used)
	}
	for i := range 5000 {
		if _, _, err := a.Alloc(100 + i%50); err != nil {
			t.Fatal(err)
		}
	}
	if a.used != peak {
		t.Fatalf("refill used %d, first fill %d", a.used, peak)
	}
}

// Emptied slabs lend their memory to new ones until two sweeps pass.

func TestArenaKeepsEmptiedSlabs(t *testing.T) {
	a := New(4096, 0)
	var hs []Handle
	for i := range 3000 {
		h, _, err := a.Alloc(100 + i%50)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	slabs := int(a.used) / a.slabSize
	mem := map[*byte]bool{}
	for _, s := range a.slabs {
		mem[&s.buf[0]] = true
	}
	for _, h := range hs {
		a.Free(h)
	}
	if a.used != 0 || a.keptBytes() != uint64(slabs*a.slabSize) {
		t.Fatalf("after freeing: used %d, kept %d, want 0 and %d", a.used, a.keptBytes(), slabs*a.slabSize)
	}
	a.sweep()
	for i := range 3000 {
		if _, _, err := a.Alloc(100 + i%50); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range a.slabs {
		if s != nil && !mem[&s.buf[0]] {
			t.Fatal("a new slab did not reuse kept memory")
		}
	}
	if a.keptBytes() != 0 {
		t.Fatalf("%d bytes still kept", a.keptBytes())
	}
	for _, s := range a.slabs {
		for j := 0; j < int(s.fresh); j++ {
			a.Free(Handle(uint32(slices.Index(a.slabs, s))<<slotBits | uint32(j)))
		}
	}
	kept := a.keptBytes()
	if let := a.sweep(); len(let) != 0 || a.keptBytes() != kept || kept == 0 {
		t.Fatalf("first sweep let go of %d slabs, kept %d of %d bytes", len(let), a.keptBytes(), kept)
	}
	if let := a.sweep(); uint64(len(let)*a.slabSize) != kept || a.keptBytes() != 0 {
		t.Fatalf("second sweep let go of %d slabs of %d bytes, %d still kept", len(let), kept, a.keptBytes())
	}
}
