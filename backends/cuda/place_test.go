package cuda_test

import (
	"bytes"
	"context"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/pagecache"
	"github.com/s4d-project/s4d/pagefmt"
)

// Parts placed by the GPU straight into a store's registered slabs (and,
// in a store that registers nothing, through the engine's own buffer)
// hold exactly the bytes Compress gives, checksums included, and come back
// through the direct read path (s4d_fetch from the slabs, decoded into
// registered memory) as the pages that went in.
func TestPlaceIntoStore(t *testing.T) {
	b := openGPU(t, backends.Options{})
	ref, err := cpu.New(backends.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	const ps = 4096
	pages := corpus.Pages(corpus.Mixed, 9000, ps, 7) // more than one slot's worth
	n := len(pages) / ps
	dst, err := unix.Mmap(-1, 0, len(pages), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(dst)
	unpin, err := b.Pin(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer unpin()
	keys := make([]uint64, n)
	for i := range keys {
		keys[i] = uint64(i)
	}
	for _, codec := range []pagefmt.Codec{pagefmt.CodecLZ4, pagefmt.CodecZstd} {
		for _, pinned := range []bool{true, false} {
			want := &pagefmt.Compressed{}
			in := &pagefmt.Batch{PageSize: ps, Pages: pages, Codec: codec, Threshold: ps * 3 / 4, Sums: true}
			if err := b.Compress(context.Background(), in, want); err != nil {
				t.Fatal(err)
			}
			store := pagecache.New(ps, 0)
			if pinned {
				store.SetPinner(b)
			}
			res := make([]pagecache.Result, n)
			in.Placed = true
			placed := 0
			err := b.CompressParts(context.Background(), in, func(lo int, part *pagefmt.Compressed) error {
				if part.Place == nil || len(part.Data) != 0 {
					t.Fatalf("part at %d: not offered for placing", lo)
				}
				placed += len(part.Class)
				k := len(part.Class)
				p := in.Part(lo, k)
				return store.Put(0, "p", keys[lo:lo+k], &p, part, 0, res[lo:lo+k])
			})
			if err != nil || placed != n {
				t.Fatalf("%v pinned %v: %v (%d of %d pages placed)", codec, pinned, err, placed, n)
			}
			info, err := store.Inspect(0, "p", keys, true)
			if err != nil {
				t.Fatal(err)
			}
			for i, pi := range info {
				if res[i] != pagecache.OK || pi.Result != pagecache.OK || pi.Class != want.Class[i] {
					t.Fatalf("%v pinned %v page %d: %v/%v class %v, want %v", codec, pinned, i, res[i], pi.Result, pi.Class, want.Class[i])
				}
				if w := want.Bytes(i, in); pi.Class != pagefmt.ClassZero && !bytes.Equal(pi.Data, w) {
					t.Fatalf("%v pinned %v page %d (%v): placed bytes differ from Compress's", codec, pinned, i, pi.Class)
				}
			}
			// Read back in place: from the slabs, into registered memory,
			// by the GPU, and by the CPU engine as a reference.
			for _, eng := range []backends.Backend{b, ref} {
				clear(dst)
				_, err = store.View(0, "p", keys, nil, res, func(st []pagefmt.Stored) error {
					d := &pagefmt.Decompression{PageSize: ps, Src: st, Dst: dst}
					before := stageBytes(b)
					if err := eng.Decompress(context.Background(), d); err != nil {
						return err
					}
					// Into registered memory every page comes down from the GPU.
					if down := stageBytes(b)["download"] - before["download"]; eng == b && codec == pagefmt.CodecLZ4 && down < int64(len(dst)) {
						t.Fatalf("%v pinned %v: %d bytes came down for %d bytes of pages", codec, pinned, down, len(dst))
					}
					for i, f := range d.Failed {
						if f {
							t.Fatalf("%s: page %d did not decode", eng.Name(), i)
						}
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(dst, pages) {
					t.Fatalf("%v pinned %v: pages read back by %s differ", codec, pinned, eng.Name())
				}
			}
		}
	}
	if n, why := b.Untimed(); n > 0 {
		t.Errorf("%d pieces untimed: %v", n, why)
	}
	var up, down int64
	for _, s := range b.Stages() {
		t.Logf("stage %-8s %8.4f s %12d bytes", s.Name, s.Seconds, s.Bytes)
		switch s.Name {
		case "upload":
			up = s.Bytes
		case "download":
			down = s.Bytes
		}
	}
	if up == 0 || down == 0 {
		t.Fatal("the stage breakdown counted no transfers")
	}
}

func stageBytes(b backends.Staged) map[string]int64 {
	m := map[string]int64{}
	for _, s := range b.Stages() {
		m[s.Name] = s.Bytes
	}
	return m
}

// Into registered memory every page of a batch is written by the GPU:
// zero, same-filled (from its word, or from Fill alone), raw and LZ4; a
// damaged block or a raw page of the wrong length is flagged and comes
// out as zeros, the others as they were.
func TestWholeBatchIntoPinned(t *testing.T) {
	b := openGPU(t, backends.Options{})
	ref, err := cpu.New(backends.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	const ps = 4096
	pages := corpus.Pages(corpus.Mixed, 3000, ps, 11)
	in := &pagefmt.Batch{PageSize: ps, Pages: pages, Codec: pagefmt.CodecLZ4, Threshold: ps * 3 / 4}
	var c pagefmt.Compressed
	if err := ref.Compress(context.Background(), in, &c); err != nil {
		t.Fatal(err)
	}
	n := in.Len()
	src := make([]pagefmt.Stored, n)
	bad := map[int]bool{}
	seen := map[pagefmt.Class]int{}
	for i := range n {
		src[i] = pagefmt.Stored{Class: c.Class[i], Fill: c.Fill[i], Data: append([]byte(nil), c.Bytes(i, in)...)}
		seen[c.Class[i]]++
		switch {
		case c.Class[i] == pagefmt.ClassSame && i%2 == 0:
			src[i].Data = nil // Fill alone
		case c.Class[i] == pagefmt.ClassLZ4 && i%97 == 0:
			src[i].Data = src[i].Data[:len(src[i].Data)/2]
			bad[i] = true
		case c.Class[i] == pagefmt.ClassRaw && i%5 == 0:
			src[i].Data = src[i].Data[:ps-8]
			bad[i] = true
		}
	}
	t.Logf("classes %v, %d damaged", seen, len(bad))
	dst, err := unix.Mmap(-1, 0, len(pages), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(dst)
	for i := range dst {
		dst[i] = 0xEE // what an earlier reply left there
	}
	unpin, err := b.Pin(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer unpin()
	d := &pagefmt.Decompression{PageSize: ps, Src: src, Dst: dst}
	if err := b.Decompress(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	zero := make([]byte, ps)
	for i := range n {
		got, want := dst[i*ps:(i+1)*ps], pages[i*ps:(i+1)*ps]
		if bad[i] {
			if !d.Failed[i] || !bytes.Equal(got, zero) {
				t.Fatalf("damaged page %d (%v): failed %v, zeroed %v", i, c.Class[i], d.Failed[i], bytes.Equal(got, zero))
			}
		} else if d.Failed[i] || !bytes.Equal(got, want) {
			t.Fatalf("page %d (%v): failed %v, same bytes %v", i, c.Class[i], d.Failed[i], bytes.Equal(got, want))
		}
	}
}
