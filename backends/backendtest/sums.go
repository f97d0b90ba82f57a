package backendtest

import (
	"bytes"
	"context"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/pagefmt"
)

// sums checks a backend that checks pages' sums as it decodes them
// (backends.SumChecker): handed pages still to check, it flags the one
// page of each class whose bytes do not match its sum Corrupt and Failed
// and decodes every other, into ordinary memory and, where it takes it,
// memory registered with it.
func sums(t *testing.T, b backends.Backend, ps int, codec pagefmt.Codec) {
	if _, ok := b.(backends.SumChecker); !ok {
		t.Skip("the backend checks no sums: the router checks pages before handing them to it")
	}
	const n = 256
	pages := corpus.Pages(corpus.Mixed, n, ps, 11)
	batch := &pagefmt.Batch{PageSize: ps, Pages: pages, Codec: codec, Threshold: ps * 3 / 4}
	var out pagefmt.Compressed
	if err := reference(t).Compress(context.Background(), batch, &out); err != nil {
		t.Fatal(err)
	}
	damaged := make([]bool, n)
	seen := map[pagefmt.Class]bool{}
	for i := range n {
		if c := out.Class[i]; c != pagefmt.ClassZero && !seen[c] {
			seen[c], damaged[i] = true, true
		}
	}
	for _, registered := range []bool{false, true} {
		dst, err := unix.Mmap(-1, 0, n*ps, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(dst)
		if registered {
			p, ok := b.(backends.Pinner)
			if !ok {
				continue
			}
			unpin, err := p.Pin(dst)
			if err != nil {
				t.Fatalf("registering the destination: %v", err)
			}
			defer unpin()
		}
		d := &pagefmt.Decompression{PageSize: ps, Src: make([]pagefmt.Stored, n), Dst: dst}
		for i := range n {
			d.Src[i] = pagefmt.Stored{Class: out.Class[i], Fill: out.Fill[i], Data: out.Bytes(i, batch),
				Check: true, Sum: out.Checksum(i, batch)}
			if damaged[i] {
				d.Src[i].Sum ^= 0x400
			}
		}
		if err := b.Decompress(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if d.Corrupt[i] != damaged[i] || d.Failed[i] != damaged[i] {
				t.Fatalf("registered %v: page %d (%v): corrupt %v, failed %v, damaged %v", registered, i,
					out.Class[i], d.Corrupt[i], d.Failed[i], damaged[i])
			}
			if !damaged[i] && !bytes.Equal(dst[i*ps:(i+1)*ps], batch.Page(i)) {
				t.Fatalf("registered %v: page %d (%v) came back different", registered, i, out.Class[i])
			}
		}
	}
}
