package cpu_test

import (
	"fmt"
	"testing"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/cpu"
	"github.com/s4d-project/s4d/pagefmt"
)

// BenchmarkCompress reports single-worker and all-core throughput and the
// ratio per corpus kind, the reference other backends are compared with.
func BenchmarkCompress(b *testing.B) {
	for _, codec := range []pagefmt.Codec{pagefmt.CodecLZ4, pagefmt.CodecZstd} {
		for _, kind := range []corpus.Kind{corpus.Text, corpus.Pointers, corpus.Mixed} {
			for _, workers := range []int{1, 0} {
				name := fmt.Sprintf("%s/%s/workers=%d", codec, kind, workers)
				b.Run(name, func(b *testing.B) {
					be, _ := cpu.New(backends.Options{Workers: workers})
					pages := corpus.Pages(kind, 4096, 4096, 1)
					in := &pagefmt.Batch{PageSize: 4096, Pages: pages, Codec: codec, Threshold: 3072}
					var out pagefmt.Compressed
					b.SetBytes(int64(len(pages)))
					for b.Loop() {
						be.Compress(b.Context(), in, &out)
					}
					var stored int
					for _, s := range out.Size {
						stored += int(s)
					}
					b.ReportMetric(float64(len(pages))/float64(stored), "ratio")
				})
			}
		}
	}
}
