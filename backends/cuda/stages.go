package cuda

import (
	"sync/atomic"

	"github.com/s4d-project/s4d/backends"
)

// stage indexes the breakdown (backends.Staged).
// staged is the host copying bytes for the GPU: pages to compress that
// were not in registered memory, blocks to decode that were not in the
// store's registered slabs, results copied out of the engine's buffers.
// Its bytes are what the direct paths save.
const (
	stUpload = iota
	stKernels
	stDownload
	stHost
	stStaged
	numStages
)

var stageNames = [numStages]string{"upload", "kernels", "download", "host", "staged"}

// stageClock sums each stage's nanoseconds and bytes.
type stageClock struct {
	ns, bytes [numStages]atomic.Int64
}

func (c *stageClock) add(st int, seconds float64, bytes int) {
	c.ns[st].Add(int64(seconds * 1e9))
	c.bytes[st].Add(int64(bytes))
}

// Stages reports the breakdown since the backend opened.
func (b *Backend) Stages() []backends.Stage {
	out := make([]backends.Stage, numStages)
	for i := range out {
		out[i] = backends.Stage{Name: stageNames[i], Seconds: float64(b.stages.ns[i].Load()) / 1e9,
			Bytes: b.stages.bytes[i].Load()}
	}
	return out
}

// slotTimes are a slot's timing events: the stream reaching the start of
// a piece, the end of its upload, of its kernels and of its download.
type slotTimes [4]cuEvent

// account adds a finished piece's GPU stages; up and down are the bytes it
// moved. A failed reading (an event not recorded) is skipped.
func (b *Backend) account(t *slotTimes, up, down int) {
	var sec [3]float64
	for i := range sec {
		s, err := b.drv.Elapsed(t[i], t[i+1])
		if err != nil {
			return
		}
		sec[i] = s
	}
	b.stages.add(stUpload, sec[0], up)
	b.stages.add(stKernels, sec[1], 0)
	b.stages.add(stDownload, sec[2], down)
}
