package backendtest

import (
	"context"
	"testing"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/pagefmt"
)

// CompressCPU compresses pages with the cpu engine (LZ4, pages over 3/4
// of their size kept raw), as the daemon does: what tests of a store put.
func CompressCPU(t testing.TB, pages []byte, ps int) (*pagefmt.Batch, *pagefmt.Compressed) {
	t.Helper()
	cb, err := cpu.New(backends.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := &pagefmt.Batch{PageSize: ps, Pages: pages, Codec: pagefmt.CodecLZ4, Threshold: ps * 3 / 4}
	var c pagefmt.Compressed
	if err := cb.Compress(context.Background(), b, &c); err != nil {
		t.Fatal(err)
	}
	return b, &c
}

// Keys is n keys from first up.
func Keys(first uint64, n int) []uint64 {
	k := make([]uint64, n)
	for i := range k {
		k[i] = first + uint64(i)
	}
	return k
}
