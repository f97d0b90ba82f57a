package webgpu

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/pagefmt"
)

// engineRoundTrip compresses pages and decompresses them with the engine's
// own kernels, and says where a page differs.
func engineRoundTrip(b *Backend, pages []byte) error {
	in := &pagefmt.Batch{PageSize: PageSize, Pages: pages, Codec: pagefmt.CodecLZ4, Threshold: PageSize * 3 / 4}
	out := &pagefmt.Compressed{}
	if err := b.Compress(context.Background(), in, out); err != nil {
		return fmt.Errorf("compress: %w", err)
	}
	n := in.Len()
	d := &pagefmt.Decompression{PageSize: PageSize, Dst: make([]byte, len(pages)), Src: make([]pagefmt.Stored, n)}
	lz := 0
	for i := range n {
		d.Src[i] = pagefmt.Stored{Class: out.Class[i], Fill: out.Fill[i], Data: out.Bytes(i, in)}
		if out.Class[i] == pagefmt.ClassLZ4 {
			lz++
		}
	}
	if lz == 0 {
		return fmt.Errorf("no LZ4 page among %d: the decompress kernel did not run", n)
	}
	if err := b.Decompress(context.Background(), d); err != nil {
		return fmt.Errorf("decompress: %w", err)
	}
	for i := range n {
		if d.Failed[i] || string(d.Dst[i*PageSize:(i+1)*PageSize]) != string(in.Page(i)) {
			return fmt.Errorf("page %d differs (failed %v)", i, d.Failed[i])
		}
	}
	return nil
}

// The idle sweep gives the slots' host memory back, and a slot it emptied
// makes its buffers again for the next round, byte for byte: by hand,
// while callers run (the sweep must only touch free slots), and by the
// sweeper itself.
func TestVulkanIdleFree(t *testing.T) {
	kernelsHere(t)
	keep := vkIdleFree
	t.Cleanup(func() { vkIdleFree = keep })
	vkIdleFree = 0 // no sweeper: this engine is swept by hand
	b := openVK(t)
	pages := corpus.Pages(corpus.Mixed, 3000, PageSize, 11)
	if err := engineRoundTrip(b, pages); err != nil {
		t.Fatal(err)
	}
	if b.vk.slotBytes.Load() == 0 {
		t.Fatal("no slot buffers after a round trip")
	}
	// Nothing is idle for an hour yet.
	b.freeIdle(time.Now(), time.Hour)
	if b.vk.slotBytes.Load() == 0 || b.vk.nIdleFreed.Load() != 0 {
		t.Fatalf("slots freed before their time: %d bytes held, %d freed", b.vk.slotBytes.Load(), b.vk.nIdleFreed.Load())
	}
	// Sweeps with no idle time at all, beside callers.
	stop := make(chan struct{})
	var sweeps sync.WaitGroup
	sweeps.Add(1)
	go func() {
		defer sweeps.Done()
		for {
			select {
			case <-stop:
				return
			default:
				b.freeIdle(time.Now(), 0)
				time.Sleep(time.Millisecond)
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for g := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				if errs[g] = engineRoundTrip(b, pages[g*PageSize*100:]); errs[g] != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	sweeps.Wait()
	for g, err := range errs {
		if err != nil {
			t.Fatalf("caller %d beside the sweeps: %v", g, err)
		}
	}
	if b.vk.nIdleFreed.Load() == 0 {
		t.Fatal("the sweeps beside the callers freed no slot")
	}
	// The sweeper of an engine opened with 300 ms: every slot empty
	// within a generous bound of that.
	vkIdleFree = 300 * time.Millisecond
	b = openVK(t)
	if err := engineRoundTrip(b, pages); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(30 * time.Second); b.vk.slotBytes.Load() != 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d bytes of slot buffers still held 30 s after the last round", b.vk.slotBytes.Load())
		}
	}
	if err := engineRoundTrip(b, pages); err != nil {
		t.Fatalf("after the sweeper emptied the slots: %v", err)
	}
}
