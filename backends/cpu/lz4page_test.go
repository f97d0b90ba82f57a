package cpu

import (
	"bytes"
	"os"
	"syscall"
	"testing"

	"github.com/s4d-project/s4d/backends/corpus"
	"github.com/s4d-project/s4d/pagefmt"
)

// BenchmarkPageLZ4 times the page compressor alone on one core, without
// the batch's classification, sums and fan-out, beside the bounds-checked
// reference (ref) on the same pages. S4D_BENCH_PAGES names a file of pages
// (a snapshot of a live heap) to add to the corpus kinds. On a busy
// machine compare MB/cpu-s, the speed per CPU-second of this process.
func BenchmarkPageLZ4(b *testing.B) {
	for name, pages := range pageSets(b) {
		// Only pages the engine would compress: zero and same-filled
		// ones never reach the compressor.
		var idx []int
		for i := 0; i+4096 <= len(pages); i += 4096 {
			if cl, _ := pagefmt.Classify(pages[i : i+4096]); cl == 0 {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			continue
		}
		var c pageLZ4
		var r refPageLZ4
		for _, impl := range []struct {
			name string
			fn   func(src, dst []byte) int
		}{{"new", c.compress}, {"ref", r.compress}} {
			b.Run(name+"/"+impl.name, func(b *testing.B) {
				dst := make([]byte, 3072)
				b.SetBytes(int64(len(idx) * 4096))
				var stored, loops int
				cpu0 := cpuSeconds()
				for b.Loop() {
					stored = 0
					for _, i := range idx {
						n := impl.fn(pages[i:i+4096], dst)
						if n == 0 {
							n = 4096
						}
						stored += n
					}
					loops++
				}
				b.ReportMetric(float64(loops*len(idx)*4096)/1e6/(cpuSeconds()-cpu0), "MB/cpu-s")
				b.ReportMetric(float64(len(idx)*4096)/float64(stored), "ratio")
			})
		}
	}
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// pageSets are the pages the compressor is checked on: the corpus kinds,
// and S4D_BENCH_PAGES if set.
func pageSets(t testing.TB) map[string][]byte {
	sets := map[string][]byte{}
	for _, k := range []corpus.Kind{corpus.Text, corpus.Pointers, corpus.Random, corpus.Mixed} {
		sets[string(k)] = corpus.Pages(k, 256, 4096, 7)
	}
	if f := os.Getenv("S4D_BENCH_PAGES"); f != "" {
		p, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sets["file"] = p[:len(p)/4096*4096]
	}
	return sets
}

// The compressor writes what the bounds-checked reference writes, byte for
// byte, at every threshold (so it gives up on exactly the same pages), and
// never writes past the end of dst.
func TestPageLZ4MatchesReference(t *testing.T) {
	var c pageLZ4
	var r refPageLZ4
	buf := make([]byte, 4096+64)
	want := make([]byte, 4096)
	for name, pages := range pageSets(t) {
		for i := 0; i+4096 <= len(pages); i += 4096 {
			page := pages[i : i+4096]
			for _, size := range []int{4096, 3072, 2048, 1024, 512, 100, 13, 12, 5, 0} {
				for _, cut := range []int{4096, 4095, 4093, 1000, 19, 13, 12, 1} {
					if name == "file" && (size != 3072 || cut != 4096) {
						continue // the live heap is large: one case each
					}
					src := page[:min(cut, len(page))]
					for j := range buf {
						buf[j] = 0xA5
					}
					got := c.compress(src, buf[:size:size])
					exp := r.compress(src, want[:size:size])
					if got != exp || !bytes.Equal(buf[:got], want[:exp]) {
						t.Fatalf("%s page %d, %d bytes into %d: %d bytes, reference %d", name, i/4096, len(src), size, got, exp)
					}
					for j := size; j < len(buf); j++ {
						if buf[j] != 0xA5 {
							t.Fatalf("%s page %d, %d bytes into %d: wrote at %d", name, i/4096, len(src), size, j)
						}
					}
				}
			}
		}
	}
}

// Larger pages too, up to the 64 KiB the 16-bit table allows.
func TestPageLZ4MatchesReferenceLarge(t *testing.T) {
	var c pageLZ4
	var r refPageLZ4
	for _, ps := range []int{16384, 65536} {
		for _, k := range []corpus.Kind{corpus.Text, corpus.Pointers, corpus.Mixed, corpus.Random} {
			pages := corpus.Pages(k, 8, ps, 3)
			got, want := make([]byte, ps), make([]byte, ps)
			for i := 0; i < len(pages); i += ps {
				for _, size := range []int{ps, ps * 3 / 4, ps / 4} {
					g := c.compress(pages[i:i+ps], got[:size])
					w := r.compress(pages[i:i+ps], want[:size])
					if g != w || !bytes.Equal(got[:g], want[:w]) {
						t.Fatalf("%s, %d-byte page %d into %d: %d bytes, reference %d", k, ps, i/ps, size, g, w)
					}
				}
			}
		}
	}
}

// FuzzPageLZ4 checks arbitrary inputs and room against the reference, with
// a canary behind dst.
func FuzzPageLZ4(f *testing.F) {
	f.Add([]byte("hello hello hello hello hello"), uint16(20))
	f.Add(corpus.Pages(corpus.Mixed, 1, 4096, 1), uint16(3072))
	f.Fuzz(func(t *testing.T, src []byte, room uint16) {
		var c pageLZ4
		var r refPageLZ4
		buf := make([]byte, int(room)+16)
		for i := range buf {
			buf[i] = 0xA5
		}
		want := make([]byte, room)
		g := c.compress(src, buf[:room:room])
		w := r.compress(src, want)
		if g != w || !bytes.Equal(buf[:g], want[:w]) {
			t.Fatalf("%d bytes into %d: %d, reference %d", len(src), room, g, w)
		}
		for i := int(room); i < len(buf); i++ {
			if buf[i] != 0xA5 {
				t.Fatalf("wrote past dst at %d", i)
			}
		}
	})
}
