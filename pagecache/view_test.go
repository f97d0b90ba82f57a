package pagecache

import (
	"context"
	"testing"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/pagefmt"
)

// BenchmarkView splits the CPU cost of a large GET on the store's side.
// 256 MiB of mixed pages are stored, then decoded in chunks of 1024 keys
// as the daemon does:
//   - codec: straight from the compressor's output, one contiguous buffer
//     (what `s4d bench` measures in-process);
//   - view: through View, with lookups and checksum checks;
//   - view-deferred: through ViewUnchecked, the engine checking each
//     page's checksum right before decoding it (what GETs do);
//   - view-only: View alone, no decoding (lookups and checksums);
//   - unchecked: lookups and decoding from the slabs, no checksums.
//
// Run with -cpu 1 to compare per-core costs without scheduling effects.
func BenchmarkView(b *testing.B) {
	const n, ps, chunk = 65536, 4096, 1024
	pages := corpus.Pages(corpus.Mixed, n, ps, 1)
	be, err := cpu.New(backends.Options{})
	if err != nil {
		b.Fatal(err)
	}
	s := New(ps, 0)
	keys := keysFrom(0, n)
	res := make([]Result, n)
	var direct []pagefmt.Decompression
	for lo := 0; lo < n; lo += chunk {
		batch, comp := fill(b, pages[lo*ps:(lo+chunk)*ps], ps)
		if err := s.Put(1, "p", keys[lo:lo+chunk], batch, comp, 0, res[lo:lo+chunk]); err != nil {
			b.Fatal(err)
		}
		d := pagefmt.Decompression{PageSize: ps, Src: make([]pagefmt.Stored, chunk)}
		for i := range chunk {
			d.Src[i] = pagefmt.Stored{Class: comp.Class[i], Fill: comp.Fill[i], Data: comp.Bytes(i, batch)}
		}
		direct = append(direct, d)
	}
	dst := make([]byte, chunk*ps)
	decode := func(st []pagefmt.Stored) error {
		d := pagefmt.Decompression{PageSize: ps, Src: st, Dst: dst}
		if err := be.Decompress(context.Background(), &d); err != nil {
			return err
		}
		for _, f := range d.Failed {
			if f {
				b.Fatal("a page did not decode")
			}
		}
		return nil
	}
	var out []pagefmt.Stored
	cases := []struct {
		name string
		run  func(lo int) error
	}{
		{"codec", func(lo int) error { return decode(direct[lo/chunk].Src) }},
		{"view", func(lo int) (err error) {
			out, err = s.View(1, "p", keys[lo:lo+chunk], out, res[lo:lo+chunk], decode)
			return err
		}},
		{"view-deferred", func(lo int) (err error) {
			out, err = s.ViewUnchecked(1, "p", keys[lo:lo+chunk], out, res[lo:lo+chunk], decode)
			return err
		}},
		{"view-only", func(lo int) (err error) {
			out, err = s.View(1, "p", keys[lo:lo+chunk], out, res[lo:lo+chunk], func([]pagefmt.Stored) error { return nil })
			return err
		}},
		{"unchecked", func(lo int) error {
			s.mu.RLock()
			defer s.mu.RUnlock()
			out = out[:0]
			w := s.pools["p"].ix.Walk(false)
			for _, key := range keys[lo : lo+chunk] {
				e, _ := w.At(key).Get(key)
				st := pagefmt.Stored{Class: e.Class()}
				if e.HasObject() {
					st.Data = s.arena.Bytes(e.Handle(), e.ObjSize())[checksumSize:]
					if st.Class == pagefmt.ClassSame {
						st.Fill = uint64(st.Data[0]) // the value does not matter here
					}
				}
				out = append(out, st)
			}
			w.Done()
			return decode(out)
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(n * ps))
			for b.Loop() {
				for lo := 0; lo < n; lo += chunk {
					if err := c.run(lo); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
