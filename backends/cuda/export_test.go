package cuda

import (
	"context"
	"time"
)

// Trace returns and resets the worker's time split: staging copy, queueing
// GPU work, waiting for the GPU, and unpacking results.
func (b *Backend) Trace() (stage, submit, wait, finish time.Duration) {
	var t [5]time.Duration
	b.do(context.Background(), func() error { t, b.trace = b.trace, [5]time.Duration{}; return nil })
	return t[0], t[1], t[2], t[4]
}
