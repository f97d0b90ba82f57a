// Package backendtest is the conformance suite every backend passes: each
// page class, every corpus kind, the raw threshold, corrupt input, and the
// stored LZ4/zstd bytes decoded by independent reference decoders (the C
// liblz4 through Debian's python3-lz4, and the zstd command).
package backendtest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os/exec"
	"sync"
	"testing"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/pagefmt"
)

// Config says what the backend under test supports.
type Config struct {
	PageSizes []int // default 4096 only
	Codecs    []pagefmt.Codec
	BatchSize int // pages per batch; default 256
	// PartPages is the batch a PartCompressor is checked with, large
	// enough to come back in several parts; default 4*BatchSize.
	PartPages int
}

// Run runs the whole suite against b.
func Run(t *testing.T, b backends.Backend, cfg Config) {
	if len(cfg.PageSizes) == 0 {
		cfg.PageSizes = []int{4096}
	}
	if len(cfg.Codecs) == 0 {
		cfg.Codecs = []pagefmt.Codec{pagefmt.CodecLZ4, pagefmt.CodecZstd}
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = 256
	}
	for _, ps := range cfg.PageSizes {
		for _, codec := range cfg.Codecs {
			t.Run(fmt.Sprintf("%s/%d", codec, ps), func(t *testing.T) {
				if !backends.Takes(b, codec, ps) {
					t.Skipf("%s does not take %v pages of %d bytes: the router passes them over", b.Name(), codec, ps)
				}
				for _, kind := range corpus.Kinds {
					t.Run(string(kind), func(t *testing.T) {
						pages := corpus.Pages(kind, cfg.BatchSize, ps, 7)
						checkBatch(t, b, pages, ps, codec, ps*3/4, kind)
					})
				}
				t.Run("threshold-low", func(t *testing.T) {
					// A threshold of 64 bytes: text still compresses below
					// it only rarely, so raw and compressed pages mix.
					pages := corpus.Pages(corpus.Text, 64, ps, 3)
					checkBatch(t, b, pages, ps, codec, 64, corpus.Text)
				})
				t.Run("single-page", func(t *testing.T) {
					checkBatch(t, b, corpus.Pages(corpus.Pointers, 1, ps, 5), ps, codec, ps*3/4, corpus.Pointers)
				})
				t.Run("concurrent", func(t *testing.T) { concurrent(t, b, ps, codec) })
				if pc, ok := b.(backends.PartCompressor); ok && ps == cfg.PageSizes[0] {
					t.Run("parts", func(t *testing.T) { parts(t, b, pc, ps, codec, cfg) })
				}
				t.Run("corrupt", func(t *testing.T) { corrupt(t, b, ps, codec) })
				t.Run("sums", func(t *testing.T) { sums(t, b, ps, codec) })
			})
		}
	}
	t.Run("empty", func(t *testing.T) {
		var out pagefmt.Compressed
		in := &pagefmt.Batch{PageSize: 4096, Codec: pagefmt.CodecLZ4, Threshold: 3072}
		if err := b.Compress(context.Background(), in, &out); err != nil {
			t.Fatalf("empty batch: %v", err)
		}
		if len(out.Class) != 0 {
			t.Fatalf("empty batch gave %d results", len(out.Class))
		}
	})
}

var (
	refOnce sync.Once
	ref     *cpu.Backend
)

func reference(t *testing.T) *cpu.Backend {
	refOnce.Do(func() {
		var err error
		if ref, err = cpu.New(backends.Options{}); err != nil {
			panic(err)
		}
	})
	return ref
}

func checkBatch(t *testing.T, b backends.Backend, pages []byte, ps int, codec pagefmt.Codec, threshold int, kind corpus.Kind) {
	t.Helper()
	in := &pagefmt.Batch{PageSize: ps, Pages: pages, Codec: codec, Threshold: threshold, Sums: true}
	var out pagefmt.Compressed
	if err := b.Compress(context.Background(), in, &out); err != nil {
		t.Fatalf("compress: %v", err)
	}
	n := in.Len()
	if len(out.Class) != n || len(out.Size) != n || len(out.Off) != n || len(out.Fill) != n {
		t.Fatalf("result has %d classes for %d pages", len(out.Class), n)
	}
	if len(out.Sum) != 0 && len(out.Sum) != n {
		t.Fatalf("%d checksums for %d pages", len(out.Sum), n)
	}
	var lz4s, zstds [][]byte
	var lz4Want, zstdWant []byte
	for i := range n {
		page := in.Page(i)
		wantClass, wantFill := pagefmt.Classify(page)
		c := out.Class[i]
		switch {
		case wantClass != 0 && (c != wantClass || out.Fill[i] != wantFill):
			t.Fatalf("page %d: class %v fill %#x, want %v fill %#x", i, c, out.Fill[i], wantClass, wantFill)
		case wantClass == 0 && c != codec.Class() && c != pagefmt.ClassRaw:
			t.Fatalf("page %d: class %v for a %v page with codec %v", i, c, kind, codec)
		case c == pagefmt.ClassRaw && out.Size[i] != uint32(ps):
			t.Fatalf("page %d: raw with size %d", i, out.Size[i])
		case (c == pagefmt.ClassLZ4 || c == pagefmt.ClassZstd) && (out.Size[i] == 0 || out.Size[i] > uint32(threshold)):
			t.Fatalf("page %d: %v size %d over threshold %d", i, c, out.Size[i], threshold)
		}
		if kind == corpus.Random && c != pagefmt.ClassRaw {
			t.Fatalf("page %d: random page stored as %v (%d bytes)", i, c, out.Size[i])
		}
		data := out.Bytes(i, in)
		if len(out.Sum) == n && out.Sum[i] != crc32.Checksum(data, pagefmt.Castagnoli) {
			t.Fatalf("page %d (%v): checksum %#x, the bytes' is %#x", i, c, out.Sum[i], crc32.Checksum(data, pagefmt.Castagnoli))
		}
		got := make([]byte, ps)
		if !reference(t).DecodePage(pagefmt.Stored{Class: c, Fill: out.Fill[i], Data: data}, got) || !bytes.Equal(got, page) {
			t.Fatalf("page %d (%v, %d bytes): reference decoder does not give back the page", i, c, len(data))
		}
		switch c {
		case pagefmt.ClassLZ4:
			lz4s = append(lz4s, data)
			lz4Want = append(lz4Want, page...)
		case pagefmt.ClassZstd:
			zstds = append(zstds, data)
			zstdWant = append(zstdWant, page...)
		}
	}
	if kind == corpus.Text && threshold >= ps/2 && len(lz4s)+len(zstds) == 0 {
		t.Fatalf("no text page compressed")
	}
	if len(lz4s) > 0 {
		if got := ExternalLZ4(t, lz4s, ps); !bytes.Equal(got, lz4Want) {
			t.Fatalf("liblz4 (python3-lz4) decodes %d blocks differently", len(lz4s))
		}
	}
	if len(zstds) > 0 {
		if got := ExternalZstd(t, zstds); !bytes.Equal(got, zstdWant) {
			t.Fatalf("zstd CLI decodes %d frames differently", len(zstds))
		}
	}
	// Round trip through the backend's own decompressor.
	d := &pagefmt.Decompression{PageSize: ps, Dst: make([]byte, n*ps)}
	for i := range n {
		d.Src = append(d.Src, pagefmt.Stored{Class: out.Class[i], Fill: out.Fill[i], Data: out.Bytes(i, in)})
	}
	if err := b.Decompress(context.Background(), d); err != nil {
		t.Fatalf("decompress: %v", err)
	}
	for i := range n {
		if d.Failed[i] || !bytes.Equal(d.Dst[i*ps:(i+1)*ps], in.Page(i)) {
			t.Fatalf("page %d (%v): backend's own decompress differs (failed=%v)", i, out.Class[i], d.Failed[i])
		}
	}
}

func concurrent(t *testing.T, b backends.Backend, ps int, codec pagefmt.Codec) {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pages := corpus.Pages(corpus.Mixed, 64, ps, uint64(100+g))
			in := &pagefmt.Batch{PageSize: ps, Pages: pages, Codec: codec, Threshold: ps * 3 / 4}
			var out pagefmt.Compressed
			if err := b.Compress(context.Background(), in, &out); err != nil {
				errs <- err
				return
			}
			got := make([]byte, ps)
			for i := range in.Len() {
				s := pagefmt.Stored{Class: out.Class[i], Fill: out.Fill[i], Data: out.Bytes(i, in)}
				if !reference(t).DecodePage(s, got) || !bytes.Equal(got, in.Page(i)) {
					errs <- fmt.Errorf("goroutine %d page %d: wrong bytes", g, i)
					return
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

// parts checks CompressParts against Compress: the parts cover the batch
// in order, each page as Compress stores it, and the reference decodes it.
func parts(t *testing.T, b backends.Backend, pc backends.PartCompressor, ps int, codec pagefmt.Codec, cfg Config) {
	n := cfg.PartPages
	if n == 0 {
		n = 4 * cfg.BatchSize
	}
	in := &pagefmt.Batch{PageSize: ps, Pages: corpus.Pages(corpus.Mixed, n, ps, 11), Codec: codec, Threshold: ps * 3 / 4, Sums: true}
	var whole pagefmt.Compressed
	if err := b.Compress(context.Background(), in, &whole); err != nil {
		t.Fatalf("compress: %v", err)
	}
	next, count := 0, 0
	got := make([]byte, ps)
	err := pc.CompressParts(context.Background(), in, func(lo int, part *pagefmt.Compressed) error {
		if lo != next || len(part.Class) == 0 || lo+len(part.Class) > n {
			return fmt.Errorf("part of %d pages at %d, want one at %d", len(part.Class), lo, next)
		}
		pb := in.Part(lo, len(part.Class))
		for k := range part.Class {
			i := lo + k
			data := part.Bytes(k, &pb)
			if part.Class[k] != whole.Class[i] || !bytes.Equal(data, whole.Bytes(i, in)) {
				return fmt.Errorf("page %d: part gives %v (%d bytes), Compress %v (%d bytes)",
					i, part.Class[k], len(data), whole.Class[i], whole.Size[i])
			}
			if len(part.Sum) > 0 && len(whole.Sum) > 0 && part.Sum[k] != whole.Sum[i] {
				return fmt.Errorf("page %d: checksum %#x in the part, %#x whole", i, part.Sum[k], whole.Sum[i])
			}
			if !reference(t).DecodePage(pagefmt.Stored{Class: part.Class[k], Fill: part.Fill[k], Data: data}, got) ||
				!bytes.Equal(got, in.Page(i)) {
				return fmt.Errorf("page %d: the reference does not decode the part's bytes", i)
			}
		}
		next += len(part.Class)
		count++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if next != n {
		t.Fatalf("parts covered %d of %d pages", next, n)
	}
	// An error from deliver ends the batch and comes back as it is.
	stop := errors.New("stop")
	if err := pc.CompressParts(context.Background(), in, func(int, *pagefmt.Compressed) error { return stop }); err != stop {
		t.Fatalf("deliver's error came back as %v", err)
	}
	t.Logf("%d pages in %d parts", n, count)
}

// corrupt checks that damaged stored bytes are flagged, never returned as
// a page and never a crash.
func corrupt(t *testing.T, b backends.Backend, ps int, codec pagefmt.Codec) {
	class := codec.Class()
	src := []pagefmt.Stored{
		{Class: class, Data: nil},
		{Class: class, Data: []byte{0xff, 0xff, 0xff, 0xff, 0xff}},
		{Class: class, Data: bytes.Repeat([]byte{0x1f, 0, 0, 0}, 8)},
		{Class: pagefmt.ClassRaw, Data: make([]byte, ps-1)},
	}
	d := &pagefmt.Decompression{PageSize: ps, Src: src, Dst: make([]byte, len(src)*ps)}
	if err := b.Decompress(context.Background(), d); err != nil {
		t.Fatalf("decompress of corrupt pages failed the whole batch: %v", err)
	}
	for i := range src {
		if !d.Failed[i] {
			t.Errorf("corrupt page %d (%v) not flagged", i, src[i].Class)
		}
	}
}

// ExternalLZ4 decodes raw LZ4 blocks with the reference C liblz4 (Debian's
// python3-lz4 calls LZ4_decompress_safe) and returns the pages concatenated.
func ExternalLZ4(t testing.TB, blocks [][]byte, pageSize int) []byte {
	t.Helper()
	var in bytes.Buffer
	for _, b := range blocks {
		binary.Write(&in, binary.LittleEndian, uint32(len(b)))
		in.Write(b)
	}
	const script = `
import sys, struct, lz4.block
ps = int(sys.argv[1]); data = sys.stdin.buffer.read(); out = sys.stdout.buffer; i = 0
while i < len(data):
    (n,) = struct.unpack_from('<I', data, i); i += 4
    page = lz4.block.decompress(data[i:i+n], uncompressed_size=ps); i += n
    assert len(page) == ps, len(page)
    out.write(page)
`
	return external(t, in.Bytes(), "/usr/bin/python3", "-c", script, fmt.Sprint(pageSize))
}

// ExternalZstd decodes zstd frames with the zstd command.
func ExternalZstd(t testing.TB, frames [][]byte) []byte {
	t.Helper()
	return external(t, bytes.Join(frames, nil), "zstd", "-q", "-d", "-c")
}

func external(t testing.TB, stdin []byte, name string, args ...string) []byte {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Fatalf("%s not found: the reference decoders come with `make deps` (python3-lz4, zstd)", name)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v: %s", name, err, stderr.String())
	}
	return out
}
