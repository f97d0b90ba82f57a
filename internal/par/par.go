// Package par runs a loop over an index range on several goroutines: the
// one parallel-for that engines, the store, the router and the backing
// file share.
package par

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// For runs fn over [0,n) in parts of chunk indices (the last one shorter),
// on up to workers goroutines (0: GOMAXPROCS), the caller's among them.
// Each goroutine takes the next part when done with one, so parts that
// cost more than others do not hold the rest back. It returns when every
// part is done; a range of one part runs on the caller alone.
func For(n, chunk, workers int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	chunk = max(chunk, 1)
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	parts := (n + chunk - 1) / chunk
	g := min(workers, parts)
	if g <= 1 {
		fn(0, n)
		return
	}
	var next atomic.Int64
	work := func() {
		for {
			p := int(next.Add(1)) - 1
			if p >= parts {
				return
			}
			fn(p*chunk, min((p+1)*chunk, n))
		}
	}
	var wg sync.WaitGroup
	for range g - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}

// Each runs fn(i) for every i in [0,n), on up to workers goroutines.
func Each(n, workers int, fn func(i int)) {
	For(n, 1, workers, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			fn(i)
		}
	})
}
