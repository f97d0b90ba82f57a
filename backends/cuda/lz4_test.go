package cuda_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/backends/pagelz4"
	"github.com/s4d-project/s4d/pagefmt"
)

// edgePages are pages built to reach the corners of s4d_lz4: long matches
// that need extending, matches cut by the end-of-block rules, long literal
// runs, blocks just under and over the raw threshold.
func edgePages(ps int) []byte {
	r := rand.New(rand.NewPCG(5, 6))
	var out []byte
	page := make([]byte, ps)
	for kind := range 9 {
		for i := range page {
			switch kind {
			case 0: // a random half, then a repeat of it
				if i < ps/2 {
					page[i] = byte(r.IntN(256))
				} else {
					page[i] = page[i-ps/2]
				}
			case 1: // short period
				page[i] = byte(i % 7)
			case 2: // two letters
				page[i] = "ab"[r.IntN(2)]
			case 3: // random with a zero tail of 40 bytes
				page[i] = 0
				if i < ps-40 {
					page[i] = byte(r.IntN(256))
				}
			case 4: // zeros with one random byte near the end
				page[i] = 0
				if i == ps-9 {
					page[i] = 0x5a
				}
			case 5: // random prefix of varying length, then zeros
				page[i] = 0
				if i < ps*5/8 {
					page[i] = byte(r.IntN(256))
				}
			case 6:
				page[i] = 0
				if i < ps*3/4 {
					page[i] = byte(r.IntN(256))
				}
			case 7: // sparse: runs of literals between matches of every length
				page[i] = byte(r.IntN(4))
			case 8: // random
				page[i] = byte(r.IntN(256))
			}
		}
		out = append(out, page...)
	}
	return out
}

// s4d_lz4 must produce exactly the bytes of its reference, pagelz4, and
// decide raw pages the same way.
func TestOwnLZ4MatchesReference(t *testing.T) {
	b := openGPU(t, backends.Options{})
	for _, ps := range []int{4096, 2048, 1024} {
		var pages []byte
		for _, kind := range corpus.Kinds {
			pages = append(pages, corpus.Pages(kind, 300, ps, 3)...)
		}
		pages = append(pages, edgePages(ps)...)
		in := &pagefmt.Batch{PageSize: ps, Pages: pages, Codec: pagefmt.CodecLZ4, Threshold: ps * 3 / 4}
		var out pagefmt.Compressed
		if err := b.Compress(context.Background(), in, &out); err != nil {
			t.Fatalf("%d-byte pages: %v", ps, err)
		}
		var s pagelz4.Scratch
		dst := make([]byte, in.Threshold)
		counts := map[pagefmt.Class]int{}
		for i := range in.Len() {
			c := out.Class[i]
			counts[c]++
			if c == pagefmt.ClassZero || c == pagefmt.ClassSame {
				continue
			}
			n := pagelz4.Compress(in.Page(i), dst, &s)
			switch {
			case n == 0 && c != pagefmt.ClassRaw:
				t.Fatalf("%d-byte page %d: GPU stored %v, reference says raw", ps, i, c)
			case n > 0 && c != pagefmt.ClassLZ4:
				t.Fatalf("%d-byte page %d: GPU stored %v, reference made a %d-byte block", ps, i, c, n)
			case n > 0 && !bytes.Equal(out.Bytes(i, in), dst[:n]):
				t.Fatalf("%d-byte page %d: GPU block (%d bytes) differs from the reference (%d bytes)", ps, i, out.Size[i], n)
			}
		}
		t.Logf("%d-byte pages: %d pages, classes %v", ps, in.Len(), counts)
		roundTrip(t, b, pages, ps, pagefmt.CodecLZ4)
	}
}

// Memory registered with Pin is uploaded in place and gives the same result.
func TestPinnedMapping(t *testing.T) {
	b := openGPU(t, backends.Options{})
	pages := corpus.Pages(corpus.Mixed, 5000, 4096, 4)
	mem, err := unix.Mmap(-1, 0, len(pages)+8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	if _, err := b.Pin(mem[1:]); err == nil {
		t.Fatal("Pin took memory that is not page aligned")
	}
	unpin, err := b.Pin(mem)
	if err != nil {
		t.Fatal(err)
	}
	in := mem[4096 : 4096+len(pages)]
	copy(in, pages)
	for _, codec := range []pagefmt.Codec{pagefmt.CodecLZ4, pagefmt.CodecZstd} {
		roundTrip(t, b, in, 4096, codec)
	}
	unpin()
	// Unpinned, the same memory is staged as any other.
	roundTrip(t, b, in, 4096, pagefmt.CodecLZ4)

	// A memfd mapped read-only, as the daemon maps a client's pages to
	// compress, is registered read-only.
	fd, err := unix.MemfdCreate("pages", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, pages); err != nil {
		t.Fatal(err)
	}
	ro, err := unix.Mmap(fd, 0, len(pages), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(ro)
	unpin, err = b.Pin(ro)
	if err != nil {
		t.Fatalf("pinning a read-only mapping: %v", err)
	}
	defer unpin()
	roundTrip(t, b, ro, 4096, pagefmt.CodecLZ4)
}

// Batches from several callers share the slot ring; each gets its own
// pages back, whatever the interleaving.
func TestConcurrentBatches(t *testing.T) {
	b := openGPU(t, backends.Options{})
	ref, err := cpu.New(backends.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codec := pagefmt.CodecLZ4
			if g == 5 {
				codec = pagefmt.CodecZstd
			}
			for it := range 3 {
				pages := corpus.Pages(corpus.Mixed, 2000+g*1500+it*333, 4096, uint64(g*10+it))
				in := &pagefmt.Batch{PageSize: 4096, Pages: pages, Codec: codec, Threshold: 3072}
				var out pagefmt.Compressed
				if err := b.Compress(context.Background(), in, &out); err != nil {
					errs <- err
					return
				}
				got := make([]byte, 4096)
				for i := range in.Len() {
					s := pagefmt.Stored{Class: out.Class[i], Fill: out.Fill[i], Data: out.Bytes(i, in)}
					if !ref.DecodePage(s, got) || !bytes.Equal(got, in.Page(i)) {
						errs <- fmt.Errorf("caller %d batch %d page %d (%v) came back different", g, it, i, out.Class[i])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
