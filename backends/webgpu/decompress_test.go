package webgpu

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/pagefmt"
)

// Decompressions overlap on the numDSlots buffer sets: four callers at
// once, batches of different sizes, each must get exactly its own pages.
func TestOverlappingDecompress(t *testing.T) {
	b := open(t)
	const callers = 4
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pages := corpus.Pages(corpus.Mixed, 300+200*g, PageSize, uint64(70+g))
			in := &pagefmt.Batch{PageSize: PageSize, Pages: pages, Codec: pagefmt.CodecLZ4, Threshold: PageSize * 3 / 4}
			out := &pagefmt.Compressed{}
			if err := b.Compress(context.Background(), in, out); err != nil {
				errs <- err
				return
			}
			for rep := range 3 {
				d := &pagefmt.Decompression{PageSize: PageSize, Dst: make([]byte, len(pages))}
				for i := range in.Len() {
					d.Src = append(d.Src, pagefmt.Stored{Class: out.Class[i], Fill: out.Fill[i], Data: out.Bytes(i, in)})
				}
				if err := b.Decompress(context.Background(), d); err != nil {
					errs <- err
					return
				}
				for i := range in.Len() {
					if d.Failed[i] || !bytes.Equal(d.Dst[i*PageSize:(i+1)*PageSize], in.Page(i)) {
						errs <- fmt.Errorf("caller %d, pass %d: page %d (class %v) came back wrong (failed %v)", g, rep, i, out.Class[i], d.Failed[i])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
