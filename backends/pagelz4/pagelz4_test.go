package pagelz4

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/pierrec/lz4/v4"

	"github.com/s4d-project/s4d/backends/corpus"
)

// checkBlock decodes blk with pierrec/lz4 and walks its sequences to check
// the end-of-block rules strict decoders may enforce.
func checkBlock(t *testing.T, src, blk []byte) {
	t.Helper()
	out := make([]byte, len(src))
	n, err := lz4.UncompressBlock(blk, out)
	if err != nil || n != len(src) || !bytes.Equal(out, src) {
		t.Fatalf("block of %d bytes does not decode to its %d-byte page (n=%d err=%v)", len(blk), len(src), n, err)
	}
	pos := 0
	for i := 0; i < len(blk); {
		tok := blk[i]
		i++
		ll := int(tok >> 4)
		if ll == 15 {
			for blk[i] == 255 {
				ll += 255
				i++
			}
			ll += int(blk[i])
			i++
		}
		i += ll
		pos += ll
		if i == len(blk) {
			if tok&15 != 0 {
				t.Fatalf("last sequence has a match nibble %d", tok&15)
			}
			break
		}
		off := int(binary.LittleEndian.Uint16(blk[i:]))
		i += 2
		ml := int(tok&15) + 4
		if tok&15 == 15 {
			for blk[i] == 255 {
				ml += 255
				i++
			}
			ml += int(blk[i])
			i++
		}
		if off == 0 || off > pos {
			t.Fatalf("offset %d at position %d", off, pos)
		}
		if pos > len(src)-matchLimit || pos+ml > len(src)-lastLits {
			t.Fatalf("match at %d+%d breaks the end-of-block rules of a %d-byte block", pos, ml, len(src))
		}
		pos += ml
	}
	if pos != len(src) {
		t.Fatalf("sequences cover %d of %d bytes", pos, len(src))
	}
}

func TestRoundTrip(t *testing.T) {
	var s Scratch
	dst := make([]byte, 2*MaxPage)
	for _, kind := range corpus.Kinds {
		pages := corpus.Pages(kind, 64, 4096, 7)
		for i := 0; i < len(pages); i += 4096 {
			p := pages[i : i+4096]
			n := Compress(p, dst, &s)
			if n == 0 {
				t.Fatalf("%s page %d: did not fit in %d bytes", kind, i/4096, len(dst))
			}
			checkBlock(t, p, dst[:n])
		}
	}
}

// Small and odd sizes, runs, and data built to hit long matches, long
// literal runs and matches that would cross the end-of-block limits.
func TestEdges(t *testing.T) {
	var s Scratch
	r := rand.New(rand.NewPCG(1, 2))
	dst := make([]byte, 2*MaxPage)
	for _, n := range []int{0, 1, 4, 11, 12, 13, 16, 17, 100, 271, 1024, 4095, 4096} {
		for kind := range 5 {
			p := make([]byte, n)
			switch kind {
			case 0: // zeros: one long match
			case 1:
				for i := range p {
					p[i] = byte(r.IntN(256))
				}
			case 2:
				for i := range p {
					p[i] = byte(i % 7)
				}
			case 3:
				for i := range p {
					p[i] = "ab"[r.IntN(2)]
				}
			case 4: // a random prefix, then a repeat of it
				for i := range p {
					if i < n/2 {
						p[i] = byte(r.IntN(256))
					} else {
						p[i] = p[i-n/2]
					}
				}
			}
			t.Run(fmt.Sprint(n, "/", kind), func(t *testing.T) {
				k := Compress(p, dst, &s)
				if k == 0 {
					t.Fatal("did not fit")
				}
				checkBlock(t, p, dst[:k])
			})
		}
	}
}

// A destination too small is refused with 0 and never overrun.
func TestShortDst(t *testing.T) {
	var s Scratch
	p := corpus.Pages(corpus.Text, 1, 4096, 3)
	full := make([]byte, 2*MaxPage)
	n := Compress(p, full, &s)
	for _, size := range []int{0, 1, n / 2, n - 1} {
		buf := make([]byte, size+16)
		for i := range buf {
			buf[i] = 0xA5
		}
		if got := Compress(p, buf[:size], &s); got != 0 {
			t.Fatalf("dst of %d bytes: got %d, want 0", size, got)
		}
		for i := size; i < len(buf); i++ {
			if buf[i] != 0xA5 {
				t.Fatalf("dst of %d bytes: byte %d overwritten", size, i)
			}
		}
	}
	if got := Compress(p, full[:n], &s); got != n {
		t.Fatalf("dst of exactly %d bytes: got %d", n, got)
	}
}

func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte("abcabcabcabcabcabcabcabc0123456789"))
	f.Add(make([]byte, 300))
	var s Scratch
	dst := make([]byte, 2*MaxPage)
	f.Fuzz(func(t *testing.T, p []byte) {
		if len(p) > MaxPage {
			p = p[:MaxPage]
		}
		n := Compress(p, dst, &s)
		if n == 0 {
			t.Fatal("did not fit in twice the page")
		}
		checkBlock(t, p, dst[:n])
	})
}

// BenchmarkRatio compares the stored size with pierrec/lz4 (the cpu
// engine's compressor) on the same pages; speed is the CPU reference's.
func BenchmarkRatio(b *testing.B) {
	for _, kind := range []corpus.Kind{corpus.Text, corpus.Pointers, corpus.Mixed} {
		pages := corpus.Pages(kind, 256, 4096, 1)
		b.Run(string(kind), func(b *testing.B) {
			var s Scratch
			var lc lz4.Compressor
			dst := make([]byte, 4096)
			var ours, ref int
			for b.Loop() {
				ours, ref = 0, 0
				for i := 0; i < len(pages); i += 4096 {
					ours += Compress(pages[i:i+4096], dst, &s)
					n, _ := lc.CompressBlock(pages[i:i+4096], dst)
					ref += n
				}
			}
			b.SetBytes(int64(len(pages)))
			b.ReportMetric(float64(len(pages))/float64(ours), "ratio")
			b.ReportMetric(float64(ref)/float64(ours), "x-pierrec")
		})
	}
}
