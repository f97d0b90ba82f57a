package cuda_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/backends/cuda"
	"github.com/s4d-project/s4d/pagefmt"
)

// openAll opens every visible GPU (or skips), returning the devices.
func openAll(t testing.TB, o backends.Options) (backends.Backend, []backends.Backend) {
	t.Helper()
	be, err := cuda.OpenAll(backends.FromEnv(o))
	if backends.IsUnavailable(err) {
		t.Skipf("cuda backend %v", err)
	}
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { be.Close() })
	if m, ok := be.(backends.Multi); ok {
		return be, m.Devices()
	}
	return be, []backends.Backend{be}
}

// Each GPU's output decodes on the CPU to the pages, every device writes
// the same bytes, and pages one device stored decode on every other.
func TestDevicesEach(t *testing.T) {
	all, devs := openAll(t, backends.Options{PageSize: 4096})
	t.Logf("%d GPUs: %s", len(devs), all.Describe())
	pages := corpus.Pages(corpus.Mixed, 2*4096+77, 4096, 21)
	for _, codec := range []pagefmt.Codec{pagefmt.CodecLZ4, pagefmt.CodecZstd} {
		var first *pagefmt.Compressed
		in := &pagefmt.Batch{PageSize: 4096, Pages: pages, Codec: codec, Threshold: 3072}
		for i, d := range devs {
			t.Logf("%s: %s", d.Name(), d.Describe())
			roundTrip(t, d, pages, 4096, codec) // against the CPU decoders
			var out pagefmt.Compressed
			if err := d.Compress(context.Background(), in, &out); err != nil {
				t.Fatalf("%s: %v", d.Name(), err)
			}
			if first == nil {
				first = &out
			} else {
				for p := range in.Len() {
					if out.Class[p] != first.Class[p] || !bytes.Equal(out.Bytes(p, in), first.Bytes(p, in)) {
						t.Fatalf("%v page %d: %s wrote other bytes than %s", codec, p, d.Name(), devs[0].Name())
					}
				}
			}
			// Decoded by the next device.
			next := devs[(i+1)%len(devs)]
			dd := &pagefmt.Decompression{PageSize: 4096, Dst: make([]byte, len(pages))}
			for p := range in.Len() {
				dd.Src = append(dd.Src, pagefmt.Stored{Class: out.Class[p], Fill: out.Fill[p], Data: out.Bytes(p, in)})
			}
			if err := next.Decompress(context.Background(), dd); err != nil {
				t.Fatalf("%s decoding %s's pages: %v", next.Name(), d.Name(), err)
			}
			if !bytes.Equal(dd.Dst, pages) {
				t.Fatalf("%v: %s decoded %s's pages to other bytes", codec, next.Name(), d.Name())
			}
		}
	}
	// The engine as a whole (what Get("cuda") gives) round-trips too.
	roundTrip(t, all, pages, 4096, pagefmt.CodecLZ4)
}

// Memory registered through one device is used in place by the others,
// registered once however many devices pin it.
func TestDevicesSharePinned(t *testing.T) {
	_, devs := openAll(t, backends.Options{PageSize: 4096})
	pages := corpus.Pages(corpus.Mixed, 3000, 4096, 5)
	mem, err := unix.Mmap(-1, 0, len(pages)+4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	in := mem[4096:]
	copy(in, pages)
	var unpins []func()
	for _, d := range devs {
		unpin, err := d.(backends.Pinner).Pin(mem)
		if err != nil {
			t.Fatalf("%s pinning memory another device registered: %v", d.Name(), err)
		}
		unpins = append(unpins, unpin)
	}
	for _, d := range devs {
		for _, codec := range []pagefmt.Codec{pagefmt.CodecLZ4, pagefmt.CodecZstd} {
			roundTrip(t, d, in, 4096, codec)
		}
	}
	// Pages decoded straight into the shared memory by each device.
	ref := cpuRef(t)
	src := storedByCPU(t, ref, pages, 4096, 3072)
	for _, d := range devs {
		clear(in)
		dd := &pagefmt.Decompression{PageSize: 4096, Dst: in, Src: src}
		if err := d.Decompress(context.Background(), dd); err != nil {
			t.Fatalf("%s: %v", d.Name(), err)
		}
		if !bytes.Equal(in, pages) {
			t.Fatalf("%s decoded into shared pinned memory wrongly", d.Name())
		}
	}
	for _, u := range unpins {
		u()
	}
	// Unregistered now: registering it again works.
	unpin, err := devs[len(devs)-1].(backends.Pinner).Pin(mem)
	if err != nil {
		t.Fatalf("pinning after every hold was undone: %v", err)
	}
	unpin()
}

// Registration stops at the bound, across devices.
func TestDevicesPinLimit(t *testing.T) {
	_, devs := openAll(t, backends.Options{PageSize: 4096, GPUPinLimit: 1 << 20})
	mem, err := unix.Mmap(-1, 0, 3<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	p := devs[0].(backends.Pinner)
	if _, err := p.Pin(mem[:2<<20]); err == nil || !strings.Contains(err.Error(), "bound") {
		t.Fatalf("2 MiB past a 1 MiB bound: %v", err)
	}
	unpin, err := p.Pin(mem[:512<<10])
	if err != nil {
		t.Fatal(err)
	}
	defer unpin()
	last := devs[len(devs)-1].(backends.Pinner)
	if _, err := last.Pin(mem[1<<20 : 2<<20]); err == nil {
		t.Fatal("a second range passed the bound on another device")
	}
}
