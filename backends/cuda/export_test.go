package cuda

import "time"

// Trace returns and resets the worker's time split: staging copy, queueing
// GPU work, waiting for the GPU, and unpacking results.
func (b *Backend) Trace() (stage, submit, wait, finish time.Duration) {
	var t [5]time.Duration
	for i := range t {
		t[i] = time.Duration(b.trace[i].Swap(0))
	}
	return t[0], t[1], t[2], t[4]
}
