package cuda_test

import (
	"bytes"
	"context"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/cuda"
)

// zeroRunPages lays runs of zero pages of many lengths (below and at the
// shortest left on the host, more runs than one piece leaves there, at a
// piece's start and end) between non-zero pages.
func zeroRunPages(ps int) []byte {
	fill := corpus.Pages(corpus.Mixed, 9000, ps, 5)
	var out []byte
	at := 0
	take := func(n int) {
		for range n {
			p := fill[at*ps : (at+1)*ps]
			if bytes.Equal(p, make([]byte, ps)) {
				p = bytes.Repeat([]byte{1}, ps) // runs stay as laid out
			}
			out = append(out, p...)
			at++
		}
	}
	zeros := func(n int) { out = append(out, make([]byte, n*ps)...) }
	zeros(cuda.MinZeroRun + 3) // a piece's first pages
	for i, n := range []int{1, cuda.MinZeroRun - 1, cuda.MinZeroRun, cuda.MinZeroRun + 1, 40, 300, 1500} {
		take(7 + i*13)
		zeros(n)
	}
	for range 3 * cuda.MaxZeroRuns { // more runs than a piece leaves behind
		take(5)
		zeros(cuda.MinZeroRun + 2)
	}
	take(100)
	zeros(4096*2 - len(out)/ps) // up to the end of the second 16 MiB piece
	take(50)
	return out
}

func TestZeroRunsFound(t *testing.T) {
	const ps = 4096
	pages := zeroRunPages(ps)
	n := len(pages) / ps
	runs := cuda.ZeroRuns(pages, ps, make([]bool, n), nil)
	if len(runs) != cuda.MaxZeroRuns {
		t.Fatalf("%d runs, want the %d longest", len(runs), cuda.MaxZeroRuns)
	}
	zero := make([]byte, ps)
	last := int32(-1)
	for _, r := range runs {
		if r[0] <= last || r[1]-r[0] < cuda.MinZeroRun {
			t.Fatalf("runs %v: out of order or too short", runs)
		}
		for i := r[0]; i < r[1]; i++ {
			if !bytes.Equal(pages[int(i)*ps:int(i+1)*ps], zero) {
				t.Fatalf("run %v: page %d is not zero", r, i)
			}
		}
		last = r[1]
	}
	if r := cuda.ZeroRuns(make([]byte, cuda.MinZeroRun*ps), ps, make([]bool, cuda.MinZeroRun), nil); len(r) != 1 || r[0] != [2]int32{0, cuda.MinZeroRun} {
		t.Fatalf("all-zero pages: runs %v", r)
	}
}

// Pages in registered memory whose zero runs stay on the host compress
// exactly as the same pages staged whole, though the device buffers hold
// an earlier batch's pages: the runs are cleared there.
func TestZeroRunsStayOnHost(t *testing.T) {
	b := openGPU(t, backends.Options{})
	const ps = 4096
	pages := zeroRunPages(ps)
	mem, err := unix.Mmap(-1, 0, len(pages), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	unpin, err := b.Pin(mem)
	if err != nil {
		t.Fatal(err)
	}
	defer unpin()
	ctx := context.Background()
	// Fill every slot's device buffer with non-zero pages first.
	copy(mem, corpus.Pages(corpus.Text, len(mem)/ps, ps, 9))
	for range 3 {
		var c backends.Compressed
		in := &backends.Batch{PageSize: ps, Pages: mem, Codec: backends.CodecLZ4, Threshold: ps * 3 / 4}
		if err := b.Compress(ctx, in, &c); err != nil {
			t.Fatal(err)
		}
	}
	copy(mem, pages)
	in := &backends.Batch{PageSize: ps, Pages: mem, Codec: backends.CodecLZ4, Threshold: ps * 3 / 4, Sums: true}
	ref := &backends.Batch{PageSize: ps, Pages: pages, Codec: backends.CodecLZ4, Threshold: ps * 3 / 4, Sums: true}
	before := stageBytes(b)
	var got, want backends.Compressed
	if err := b.Compress(ctx, in, &got); err != nil {
		t.Fatal(err)
	}
	up := stageBytes(b)["upload"] - before["upload"]
	if err := b.Compress(ctx, ref, &want); err != nil {
		t.Fatal(err)
	}
	zeros := 0
	for i := range in.Len() {
		if got.Class[i] != want.Class[i] || got.Fill[i] != want.Fill[i] || got.Sum[i] != want.Sum[i] ||
			!bytes.Equal(got.Bytes(i, in), want.Bytes(i, ref)) {
			t.Fatalf("page %d: %v (sum %08x), staged whole %v (sum %08x)", i, got.Class[i], got.Sum[i], want.Class[i], want.Sum[i])
		}
		if got.Class[i] == backends.ClassZero {
			zeros++
		}
	}
	if up >= int64(len(pages)) || up < int64(len(pages)-zeros*ps) {
		t.Fatalf("%d bytes uploaded for %d bytes of pages, %d of them zero pages", up, len(pages), zeros)
	}
	t.Logf("%d pages, %d zero, %d bytes uploaded", in.Len(), zeros, up)
	roundTrip(t, b, mem, ps, backends.CodecLZ4)
}
