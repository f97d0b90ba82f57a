package daemon

import (
	"math/rand/v2"
	"testing"
)

// The swap store's cost per call, apart from ublk: a swap-in is one Get
// of the 8 pages of a readahead window (vm.page-cluster 3) or of 1, and
// in the guest the store's share of a swap-in was ~170 us per call under
// emulation, mostly per call rather than per page (tests/guest/README.md).
func BenchmarkSwapGet8(b *testing.B) { benchSwapGet(b, 8) }
func BenchmarkSwapGet1(b *testing.B) { benchSwapGet(b, 1) }

func benchSwapGet(b *testing.B, n int) {
	d, _ := serveDaemon(b, nil)
	st := newSwapStore(d, swapPool(1), 1)
	const blocks = 4096
	ps := d.cfg.PageSize
	// Like the guest's workload: 512 random bytes a page, the rest repeats.
	pages := make([]byte, blocks*ps)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < blocks; i++ {
		p := pages[i*ps : (i+1)*ps]
		for j := 0; j < 512; j++ {
			p[j] = byte(rng.Uint32())
		}
		for j := 512; j < ps; j++ {
			p[j] = p[j%512]
		}
	}
	keys := make([]uint64, blocks)
	for i := range keys {
		keys[i] = uint64(i)
	}
	for lo := 0; lo < blocks; lo += 256 {
		if err := st.Put(keys[lo:lo+256], pages[lo*ps:(lo+256)*ps]); err != nil {
			b.Fatal(err)
		}
	}
	dst := make([]byte, n*ps)
	missing, failed := make([]bool, n), make([]bool, n)
	b.SetBytes(int64(n * ps))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		lo := (i * n) % (blocks - n)
		clear(missing)
		clear(failed)
		if err := st.Get(keys[lo:lo+n], dst, missing, failed); err != nil {
			b.Fatal(err)
		}
	}
}
