package pagecache

import (
	"runtime"
	"sync"
)

// inParallel runs fn over [0,n) in pieces of at least chunk on up to
// GOMAXPROCS goroutines; a batch of one chunk stays on the caller's.
// Checksumming or storing a batch on one core would leave the others idle
// while the request waits.
func inParallel(n, chunk int, fn func(lo, hi int)) {
	g := min(runtime.GOMAXPROCS(0), (n+chunk-1)/chunk)
	if g <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	per := (n + g - 1) / g
	for lo := per; lo < n; lo += per {
		wg.Add(1)
		go func(lo int) {
			defer wg.Done()
			fn(lo, min(lo+per, n))
		}(lo)
	}
	fn(0, min(per, n))
	wg.Wait()
}
