package cpu_test

import (
	"bytes"
	"testing"

	"github.com/pierrec/lz4/v4"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/cpu"
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
	for _, codec := range []backends.Codec{backends.CodecLZ4, backends.CodecZstd} {
		in := &backends.Batch{PageSize: ps, Pages: pages, Codec: codec, Threshold: ps * 3 / 4}
		var out backends.Compressed
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
		ok := b.DecodePage(backends.Stored{Class: backends.Class(class), Data: data}, buf[:ps:ps])
		for i := ps; i < len(buf); i++ {
			if buf[i] != 0xA5 {
				t.Fatalf("decoder wrote past the page at %d", i)
			}
		}
		if ok && backends.Class(class) == backends.ClassLZ4 {
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
		codec := backends.CodecLZ4
		if zstd {
			codec = backends.CodecZstd
		}
		in := &backends.Batch{PageSize: ps, Pages: page, Codec: codec, Threshold: ps * 3 / 4}
		var out backends.Compressed
		if err := b.Compress(t.Context(), in, &out); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, ps)
		if !b.DecodePage(backends.Stored{Class: out.Class[0], Fill: out.Fill[0], Data: out.Bytes(0, in)}, got) || !bytes.Equal(got, page) {
			t.Fatalf("round trip lost the page (class %v)", out.Class[0])
		}
	})
}
