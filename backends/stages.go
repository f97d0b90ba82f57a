package backends

// Stage is where an engine's time went, summed over its batches since it
// opened: the GPU's copies up and down (timed on the device, with the
// bytes they moved), its kernels, and the host's own work for the engine
// (staging, bookkeeping, pages decoded on the CPU). Stages of concurrent
// batches overlap, so their seconds can add up to more than the wall time.
type Stage struct {
	Name    string
	Seconds float64
	Bytes   int64
	// Busy is the time the stage was at work at all, overlaps counted
	// once (the union of its intervals), where the engine knows it.
	Busy float64
}

// Staged is implemented by engines that time their stages.
type Staged interface {
	Stages() []Stage
}
