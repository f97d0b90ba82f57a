package webgpu

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/pagelz4"
	"github.com/s4d-project/s4d/pagefmt"
)

// rawSkipPages returns random pages whose last k bytes repeat the random
// part before them, k over the whole page in steps; then pages of
// float weights (the daemon's live corpus is mostly these). So the
// compressed sizes sweep across every threshold, and the kernel's step
// 1b (a page with too few repeated windows is stored raw without the
// search) meets pages on both sides of its bound.
func rawSkipPages() []byte {
	r := rand.New(rand.NewPCG(5, 6))
	var out []byte
	for k := 0; k <= PageSize-64; k += 29 {
		p := make([]byte, PageSize)
		for i := range p {
			p[i] = byte(r.Uint32())
		}
		for i := PageSize - k; i < PageSize; i++ {
			p[i] = p[i-(PageSize-k)] // the random part again, repeated
		}
		out = append(out, p...)
	}
	for range 64 {
		p := make([]byte, PageSize)
		for i := 0; i < PageSize; i += 4 {
			binary.LittleEndian.PutUint32(p[i:], math.Float32bits(float32(r.NormFloat64()*0.02)))
		}
		out = append(out, p...)
	}
	return out
}

// windowHits is step 1b's count: windows whose 16-bit hash an earlier
// window of the page has (an upper bound on windows repeating one).
func windowHits(p []byte) int {
	var seen [1 << 16]bool
	n := 0
	for i := 0; i+4 <= len(p); i++ {
		h := (binary.LittleEndian.Uint32(p[i:]) * 2654435761) >> 16
		if seen[h] {
			n++
		}
		seen[h] = true
	}
	return n
}

// The bound of step 1b holds for pagelz4 (every page it lets skip is one
// pagelz4 stores raw), and the kernel stores every page of the sweep as
// pagelz4 does at several thresholds, on both runtimes.
func TestRawSkipSameBytes(t *testing.T) {
	pages := rawSkipPages()
	var s pagelz4.Scratch
	thresholds := []int{1024, 3072, 3900, PageSize}
	for _, th := range thresholds {
		dst := make([]byte, th)
		skipped, raw, lz4 := 0, 0, 0
		for i := 0; i < len(pages); i += PageSize {
			p := pages[i : i+PageSize]
			n := pagelz4.Compress(p, dst, &s)
			if windowHits(p)+th < PageSize+1 {
				skipped++
				if n != 0 {
					t.Fatalf("threshold %d, page %d: skipped by the bound, but pagelz4 fits it in %d bytes", th, i/PageSize, n)
				}
			} else if n == 0 {
				raw++
			} else {
				lz4++
			}
		}
		if (skipped == 0 && th < PageSize) || lz4 == 0 || (th == 3072 && raw == 0) {
			t.Fatalf("threshold %d: %d pages skipped, %d searched and raw, %d LZ4: the sweep misses a side", th, skipped, raw, lz4)
		}
		t.Logf("threshold %d: %d skipped, %d searched and raw, %d LZ4", th, skipped, raw, lz4)
	}
	t.Run("webgpu", func(t *testing.T) {
		open(t) // skips where there is no library
		// pagelz4's chain depth, as TestSameBytesAsPagelz4 does.
		chainDepth = 0
		defer func() { chainDepth = defaultChainDepth }()
		b, err := New(webgpuh(backends.Options{WebGPUNoSubgroups: os.Getenv("S4D_WEBGPU_NO_SUBGROUPS") == "1"}), true)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if !exactKernel(b.kp) {
			t.Fatalf("kernel parameters %+v are not pagelz4's", b.kp)
		}
		for _, th := range thresholds {
			out := checkRoundTrip(t, b, pages, th)
			in := &pagefmt.Batch{PageSize: PageSize, Pages: pages, Threshold: th}
			if _, err := samePagelz4(in, out); err != nil {
				t.Fatalf("threshold %d: %v", th, err)
			}
		}
	})
	// The Vulkan runtime runs the engine's depth only: its blocks must be
	// the webgpu.h runtime's, byte for byte, from the same WGSL.
	t.Run("vulkan", func(t *testing.T) {
		kernelsHere(t)
		v, w := openVK(t), open(t)
		if v.kp.Depth != w.kp.Depth && !(exactKernel(v.kp) && exactKernel(w.kp)) {
			t.Skipf("depths differ: %+v, %+v", v.kp, w.kp)
		}
		for _, th := range thresholds {
			in := &pagefmt.Batch{PageSize: PageSize, Pages: pages, Threshold: th}
			vo, wo := checkRoundTrip(t, v, pages, th), checkRoundTrip(t, w, pages, th)
			for i := range in.Len() {
				if vo.Class[i] != wo.Class[i] || !bytes.Equal(vo.Bytes(i, in), wo.Bytes(i, in)) {
					t.Fatalf("threshold %d, page %d: vulkan class %v size %d, webgpu class %v size %d", th, i, vo.Class[i], vo.Size[i], wo.Class[i], wo.Size[i])
				}
			}
		}
	})
}
