package all_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/s4d-project/s4d/backends"
	_ "github.com/s4d-project/s4d/backends/all"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/internal/refc"
	"github.com/s4d-project/s4d/backends/vulkan/vk"
	"github.com/s4d-project/s4d/pagefmt"
)

const (
	fuzzPageSize = 4096
	fuzzMaxPages = 8
)

// fuzzPages makes whole pages of data: up to fuzzMaxPages, data repeated
// to fill them (so that it compresses) unless zeroTail leaves the rest 0.
func fuzzPages(data []byte, zeroTail bool) []byte {
	n := min(max(1, (len(data)+fuzzPageSize-1)/fuzzPageSize), fuzzMaxPages)
	out := make([]byte, n*fuzzPageSize)
	if len(data) == 0 {
		return out
	}
	k := copy(out, data)
	for !zeroTail && k < len(out) {
		k += copy(out[k:], data)
	}
	return out
}

// FuzzDifferential compresses each input with every engine available here
// and decodes every stored page with every engine, and with C liblz4 and
// libzstd where the machine has them: the formats are a contract, so all
// must give back the same bytes. In CI's short pass the engines are the
// cpu one and webgpu on lavapipe; on the GPU machine cuda joins them.
func FuzzDifferential(f *testing.F) {
	set := backends.Open(backends.FromEnv(backends.Options{PageSize: fuzzPageSize, WebGPUCPU: true}))
	f.Cleanup(func() { set.Close() })
	engines := set.Usable()
	for _, st := range set.Statuses() {
		f.Logf("engine %s: %s %s %s", st.Name, st.State, st.Reason, st.Describe)
	}
	// The WGSL engine's Vulkan runtime joins them where the set's webgpu
	// engine runs another one: on a GPU, or on lavapipe with
	// S4D_VULKAN_KERNELS=1 (it compiles the compress kernel for minutes
	// at the first dispatch there).
	if vulkanEngineWanted(set) {
		vs := backends.Open(backends.FromEnv(backends.Options{PageSize: fuzzPageSize, WebGPUCPU: true, WGSLRuntime: "vulkan"}), "webgpu")
		f.Cleanup(func() { vs.Close() })
		for _, st := range vs.Statuses() {
			f.Logf("engine %s on the Vulkan runtime: %s %s %s", st.Name, st.State, st.Reason, st.Describe)
		}
		engines = append(engines, vs.Usable()...)
		if len(vs.Usable()) == 0 && os.Getenv("S4D_REQUIRE_VULKAN") == "1" {
			f.Fatal("S4D_REQUIRE_VULKAN=1, and the Vulkan runtime is not usable")
		}
	} else if os.Getenv("S4D_REQUIRE_VULKAN") == "1" {
		f.Fatal("S4D_REQUIRE_VULKAN=1, and the Vulkan runtime does not join (no Vulkan device, or lavapipe without S4D_VULKAN_KERNELS=1)")
	}
	ref := refc.Open()
	if len(ref.Missing) > 0 {
		f.Logf("reference decoders missing: %v", ref.Missing)
	}
	for i, k := range corpus.Kinds {
		f.Add(uint8(i), corpus.Pages(k, 2, fuzzPageSize, uint64(i)))
	}
	f.Add(uint8(2), []byte("a short string, then zeros"))
	f.Add(uint8(1), []byte{})
	f.Fuzz(func(t *testing.T, mode uint8, data []byte) {
		codec := pagefmt.CodecLZ4
		if mode&1 != 0 {
			codec = pagefmt.CodecZstd
		}
		b := &pagefmt.Batch{PageSize: fuzzPageSize, Pages: fuzzPages(data, mode&2 != 0), Codec: codec,
			Threshold: fuzzPageSize * 3 / 4}
		n := b.Len()
		for _, enc := range engines {
			if !backends.Takes(enc, codec, fuzzPageSize) {
				continue
			}
			var out pagefmt.Compressed
			if err := enc.Compress(context.Background(), b, &out); err != nil {
				t.Fatalf("%s: compress: %v", enc.Name(), err)
			}
			stored := make([]pagefmt.Stored, n)
			for i := range n {
				stored[i] = pagefmt.Stored{Class: out.Class[i], Fill: out.Fill[i], Data: out.Bytes(i, b)}
				if c := out.Class[i]; (c == pagefmt.ClassLZ4 || c == pagefmt.ClassZstd) && c != codec.Class() {
					t.Fatalf("%s: page %d stored as %v, asked for %v", enc.Name(), i, c, codec)
				}
			}
			for _, dec := range engines {
				if !backends.Takes(dec, codec, fuzzPageSize) {
					continue
				}
				dd := &pagefmt.Decompression{PageSize: fuzzPageSize, Src: append([]pagefmt.Stored(nil), stored...),
					Dst: make([]byte, n*fuzzPageSize), Failed: make([]bool, n)}
				if err := dec.Decompress(context.Background(), dd); err != nil {
					t.Fatalf("%s's pages, decoded by %s: %v", enc.Name(), dec.Name(), err)
				}
				for i := range n {
					if dd.Failed[i] || !bytes.Equal(dd.Dst[i*fuzzPageSize:(i+1)*fuzzPageSize], b.Page(i)) {
						t.Fatalf("%s's page %d (%v), decoded by %s: failed %v or different bytes", enc.Name(), i, stored[i].Class, dec.Name(), dd.Failed[i])
					}
				}
			}
			page := make([]byte, fuzzPageSize)
			for i, s := range stored {
				var err error
				switch {
				case s.Class == pagefmt.ClassLZ4 && ref.HasLZ4():
					err = ref.LZ4(s.Data, page)
				case s.Class == pagefmt.ClassZstd && ref.HasZstd():
					err = ref.Zstd(s.Data, page)
				default:
					continue
				}
				if err != nil || !bytes.Equal(page, b.Page(i)) {
					t.Fatalf("%s's page %d (%v), decoded by the C library: %v or different bytes", enc.Name(), i, s.Class, err)
				}
			}
		}
	})
}

// vulkanEngineWanted reports whether FuzzDifferential adds the webgpu
// engine on the Vulkan runtime: the set's own webgpu engine is on another
// runtime, and the Vulkan device is a GPU or S4D_VULKAN_KERNELS=1.
func vulkanEngineWanted(set *backends.Set) bool {
	if b, ok := set.Get("webgpu"); ok && strings.Contains(b.Describe(), "runtime vulkan") {
		return false
	}
	d, err := vk.Open(vk.Options{Device: -1})
	if err != nil {
		return false
	}
	defer d.Close()
	return !d.Info().CPU || os.Getenv("S4D_VULKAN_KERNELS") == "1"
}
