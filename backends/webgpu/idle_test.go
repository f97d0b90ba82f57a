package webgpu

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/s4d-project/s4d/backends"
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

// heldSlots counts the slots holding buffers, looking at them as the
// sweep does (out of their channels).
func heldSlots(b *Backend) int {
	n := 0
	b.withFreeSlots(func(cs []*slot, ds []*dslot) {
		for _, s := range cs {
			if b.vk != nil && s.vs.out != nil || b.vk == nil && s.capPages > 0 {
				n++
			}
		}
		for _, s := range ds {
			if b.vk != nil && s.vs.in != nil || b.vk == nil && s.cap > 0 {
				n++
			}
		}
	})
	return n
}

// checkIdleSweep: the idle sweep gives the slots' buffers back, and a
// slot it emptied makes them again for the next round, byte for byte:
// by hand, while callers run (the sweep must only touch free slots), and
// by the sweeper itself. open opens an engine with idleFree as it is.
func checkIdleSweep(t *testing.T, open func(t *testing.T) *Backend, npages int) {
	keep := idleFree
	t.Cleanup(func() { idleFree = keep })
	idleFree = 0 // no sweeper: this engine is swept by hand
	b := open(t)
	pages := corpus.Pages(corpus.Mixed, npages, PageSize, 11)
	if err := engineRoundTrip(b, pages); err != nil {
		t.Fatal(err)
	}
	if heldSlots(b) == 0 {
		t.Fatal("no slot holds buffers after a round trip")
	}
	// Nothing is idle for an hour yet.
	b.freeIdle(time.Now(), time.Hour)
	if heldSlots(b) == 0 || b.nIdleFreed.Load() != 0 {
		t.Fatalf("slots freed before their time: %d hold buffers, %d freed", heldSlots(b), b.nIdleFreed.Load())
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
				if errs[g] = engineRoundTrip(b, pages[g*PageSize*(npages/40):]); errs[g] != nil {
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
	if b.nIdleFreed.Load() == 0 {
		t.Fatal("the sweeps beside the callers freed no slot")
	}
	// The sweeper of an engine opened with 300 ms: every slot empty
	// within a generous bound of that.
	idleFree = 300 * time.Millisecond
	b = open(t)
	if err := engineRoundTrip(b, pages); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(30 * time.Second); heldSlots(b) != 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d slots still hold buffers 30 s after the last round", heldSlots(b))
		}
	}
	if err := engineRoundTrip(b, pages); err != nil {
		t.Fatalf("after the sweeper emptied the slots: %v", err)
	}
	if !strings.Contains(b.Describe(), "given back after 300ms idle") {
		t.Fatalf("Describe does not say what becomes of idle slots: %s", b.Describe())
	}
}

// On the Vulkan runtime, whose slots also count their host memory.
func TestVulkanIdleFree(t *testing.T) {
	kernelsHere(t)
	checkIdleSweep(t, func(t *testing.T) *Backend {
		b := openVK(t)
		t.Cleanup(func() {
			if n := b.vk.slotBytes.Load(); n != 0 && heldSlots(b) == 0 {
				t.Errorf("no slot holds buffers, yet %d bytes are counted", n)
			}
		})
		return b
	}, 3000)
}

// On the webgpu.h runtime.
func TestIdleFree(t *testing.T) {
	checkIdleSweep(t, func(t *testing.T) *Backend {
		b, err := New(webgpuh(backends.Options{}), true)
		if err != nil {
			if backends.IsUnavailable(err) {
				t.Skipf("no webgpu.h runtime here: %v", err)
			}
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}, 1000)
}
