package pagecache

import (
	"runtime"

	"github.com/s4d-project/s4d/internal/par"
)

// inParallel runs fn over [0,n) in one piece per core, each of at least
// chunk; a batch of one chunk stays on the caller's goroutine.
// Checksumming or storing a batch on one core would leave the others idle
// while the request waits.
func inParallel(n, chunk int, fn func(lo, hi int)) {
	g := max(1, min(runtime.GOMAXPROCS(0), (n+chunk-1)/chunk))
	par.For(n, (n+g-1)/g, g, fn)
}
