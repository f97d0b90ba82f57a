package pageindex

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/s4d-project/s4d/pagefmt"
)

func TestIndexAgainstMap(t *testing.T) {
	var ix Index
	want := map[uint64]Entry{}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200000 {
		k := r.Uint64N(20000)
		if i%7 == 0 {
			k = r.Uint64() // sparse keys too
		}
		switch r.IntN(3) {
		case 0, 1:
			e := Entry(r.Uint64() | 1<<49)
			old, ok := ix.Set(k, e)
			if wo, wok := want[k]; ok != wok || old != wo {
				t.Fatalf("set %d: replaced=%v old=%x, want %v %x", k, ok, old, wok, wo)
			}
			want[k] = e
		case 2:
			old, ok := ix.Del(k)
			if wo, wok := want[k]; ok != wok || old != wo {
				t.Fatalf("del %d: %v %x, want %v %x", k, ok, old, wok, wo)
			}
			delete(want, k)
		}
		if ix.n != len(want) {
			t.Fatalf("n=%d want %d", ix.n, len(want))
		}
	}
	for k, e := range want {
		if got, ok := ix.Get(k); !ok || got != e {
			t.Fatalf("get %d = %x %v, want %x", k, got, ok, e)
		}
	}
	seen := 0
	ix.Each(func(k uint64, e *Entry) {
		if want[k] != *e {
			t.Fatalf("each: %d", k)
		}
		seen++
	})
	if seen != len(want) {
		t.Fatalf("each saw %d of %d", seen, len(want))
	}
}

func TestEntryPacking(t *testing.T) {
	for _, c := range []pagefmt.Class{pagefmt.ClassZero, pagefmt.ClassSame, pagefmt.ClassLZ4, pagefmt.ClassZstd, pagefmt.ClassRaw} {
		e := MakeEntry(0xFFFFFFFF, 65536, c, 15)
		if e.Handle() != 0xFFFFFFFF || e.Size() != 65536 || e.Class() != c || e.Backend() != 15 || e == 0 {
			t.Fatalf("%v: %x unpacks to %x %d %v %d", c, uint64(e), e.Handle(), e.Size(), e.Class(), e.Backend())
		}
		if e2 := e.WithHandle(7); e2.Handle() != 7 || e2.Size() != 65536 || e2.Class() != c {
			t.Fatalf("withHandle broke %x", uint64(e2))
		}
	}
}

func TestShardSize(t *testing.T) {
	if n := unsafe.Sizeof(shard{}); n != 128 {
		t.Fatalf("a shard takes %d bytes, want 128 (two cache lines)", n)
	}
}
