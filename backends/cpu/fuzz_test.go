package cpu_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/pierrec/lz4/v4"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/pagefmt"
)

// FuzzDecodePage feeds arbitrary stored bytes to the decoders: they may
// refuse them but must never crash, write past the page, or claim a page
// they did not fill.
func FuzzDecodePage(f *testing.F) {
	b, err := cpu.New(backends.Options{Workers: 1})
	if err != nil {
		f.Fatal(err)
	}
	const ps = 4096
	pages := corpus.Pages(corpus.Mixed, 8, ps, 1)
	for _, codec := range []pagefmt.Codec{pagefmt.CodecLZ4, pagefmt.CodecZstd} {
		in := &pagefmt.Batch{PageSize: ps, Pages: pages, Codec: codec, Threshold: ps * 3 / 4}
		var out pagefmt.Compressed
		b.Compress(f.Context(), in, &out)
		for i := range 8 {
			f.Add(uint8(out.Class[i]), out.Bytes(i, in))
		}
	}
	f.Fuzz(func(t *testing.T, class uint8, data []byte) {
		buf := make([]byte, ps+64)
		for i := ps; i < len(buf); i++ {
			buf[i] = 0xA5 // canary
		}
		ok := b.DecodePage(pagefmt.Stored{Class: pagefmt.Class(class), Data: data}, buf[:ps:ps])
		for i := ps; i < len(buf); i++ {
			if buf[i] != 0xA5 {
				t.Fatalf("decoder wrote past the page at %d", i)
			}
		}
		if ok && pagefmt.Class(class) == pagefmt.ClassLZ4 {
			// Differential: an independent decode of the same block agrees.
			ref := make([]byte, ps)
			if n, err := lz4.UncompressBlock(data, ref); err != nil || n != ps || !bytes.Equal(ref, buf[:ps]) {
				t.Fatalf("lz4 decoders disagree: %v %d", err, n)
			}
		}
	})
}

// FuzzRoundTrip compresses arbitrary pages and checks they come back.
func FuzzRoundTrip(f *testing.F) {
	b, err := cpu.New(backends.Options{Workers: 1})
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte("hello hello hello hello"), false)
	f.Add(make([]byte, 100), true)
	f.Fuzz(func(t *testing.T, seed []byte, zstd bool) {
		const ps = 4096
		page := make([]byte, ps)
		for i := 0; len(seed) > 0 && i < ps; i += len(seed) {
			copy(page[i:], seed)
		}
		codec := pagefmt.CodecLZ4
		if zstd {
			codec = pagefmt.CodecZstd
		}
		in := &pagefmt.Batch{PageSize: ps, Pages: page, Codec: codec, Threshold: ps * 3 / 4}
		var out pagefmt.Compressed
		if err := b.Compress(t.Context(), in, &out); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, ps)
		if !b.DecodePage(pagefmt.Stored{Class: out.Class[0], Fill: out.Fill[0], Data: out.Bytes(0, in)}, got) || !bytes.Equal(got, page) {
			t.Fatalf("round trip lost the page (class %v)", out.Class[0])
		}
		if out.Class[0] == pagefmt.ClassLZ4 {
			if err := endRules(out.Bytes(0, in), ps); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// endRules checks LZ4's end-of-block rules, which decoders do not all
// enforce: the last sequence is literals only, at least 5 of them, and the
// last match starts at least 12 bytes before the end of the page.
func endRules(b []byte, n int) error {
	pos, lastMatch := 0, -1
	for i := 0; i < len(b); {
		tok := int(b[i])
		i++
		lits := tok >> 4
		if lits == 15 {
			for ; i < len(b); i++ {
				lits += int(b[i])
				if b[i] != 255 {
					i++
					break
				}
			}
		}
		i += lits
		pos += lits
		if i == len(b) { // the last sequence
			if lits < 5 {
				return fmt.Errorf("block ends with %d literals", lits)
			}
			if lastMatch >= 0 && lastMatch > n-12 {
				return fmt.Errorf("last match starts %d bytes before the end", n-lastMatch)
			}
			return nil
		}
		i += 2
		ml := tok&15 + 4
		if tok&15 == 15 {
			for ; i < len(b); i++ {
				ml += int(b[i])
				if b[i] != 255 {
					i++
					break
				}
			}
		}
		lastMatch = pos
		pos += ml
	}
	return fmt.Errorf("block ends inside a sequence")
}

func TestEndRulesCheck(t *testing.T) {
	if err := endRules([]byte{0x50, 'a', 'b', 'c', 'd', 'e'}, 5); err != nil {
		t.Fatal(err)
	}
	if endRules([]byte{0x30, 'a', 'b', 'c'}, 3) == nil {
		t.Fatal("3 final literals accepted")
	}
	// 16 literals, a match of 4 at offset 16 starting 8 bytes before the
	// end, then 5 literals: the match starts too late.
	late := append([]byte{0xf0, 1}, make([]byte, 16)...)
	late = append(late, 16, 0, 0x50, 'a', 'b', 'c', 'd', 'e')
	if endRules(late, 25) == nil {
		t.Fatal("a match 9 bytes before the end accepted")
	}
}
