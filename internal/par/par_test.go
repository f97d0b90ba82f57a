package par

import (
	"sync"
	"sync/atomic"
	"testing"
)

func TestForCoversOnce(t *testing.T) {
	for _, tc := range []struct{ n, chunk, workers int }{
		{0, 4, 4}, {1, 4, 4}, {5, 1, 3}, {100, 7, 0}, {1000, 16, 2}, {1000, 5000, 8}, {64, 0, 4}, {33, 8, 64},
	} {
		seen := make([]atomic.Int32, tc.n)
		var mu sync.Mutex
		calls, maxPart := 0, 0
		For(tc.n, tc.chunk, tc.workers, func(lo, hi int) {
			if lo >= hi || lo < 0 || hi > tc.n {
				t.Errorf("%+v: part [%d,%d)", tc, lo, hi)
				return
			}
			mu.Lock()
			calls++
			maxPart = max(maxPart, hi-lo)
			mu.Unlock()
			for i := lo; i < hi; i++ {
				seen[i].Add(1)
			}
		})
		for i := range seen {
			if seen[i].Load() != 1 {
				t.Fatalf("%+v: index %d run %d times", tc, i, seen[i].Load())
			}
		}
		if tc.n > 0 && tc.chunk > 0 && tc.n > tc.chunk && maxPart > tc.chunk {
			t.Fatalf("%+v: a part of %d", tc, maxPart)
		}
	}
}

func TestForBoundsGoroutines(t *testing.T) {
	var now, most atomic.Int32
	For(1000, 1, 3, func(lo, hi int) {
		c := now.Add(1)
		for {
			m := most.Load()
			if c <= m || most.CompareAndSwap(m, c) {
				break
			}
		}
		for range 1000 {
		}
		now.Add(-1)
	})
	if most.Load() > 3 {
		t.Fatalf("%d at once, want at most 3", most.Load())
	}
}

func TestEach(t *testing.T) {
	var sum atomic.Int64
	Each(100, 4, func(i int) { sum.Add(int64(i)) })
	if sum.Load() != 4950 {
		t.Fatalf("sum %d", sum.Load())
	}
}
