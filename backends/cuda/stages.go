package cuda

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/backends/cuda/cu"
)

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

// stageClock sums each stage's seconds (over pieces, so overlapping ones
// count each) and bytes; for the GPU's stages it also keeps their busy
// time, the union of their intervals on every stream: the share of the
// wall time a stage was at work, which tells whether it bounds the rate.
type stageClock struct {
	ns, bytes [numStages]atomic.Int64
	epoch     cu.Event // the device clock's origin (see setup)

	mu   sync.Mutex
	busy [stDownload + 1]unionTime

	untimed atomic.Int64 // pieces whose events could not be read
	lastErr atomic.Value // why, the last time
}

func (c *stageClock) add(st int, seconds float64, bytes int) {
	c.ns[st].Add(int64(seconds * 1e9))
	c.bytes[st].Add(int64(bytes))
}

// interval adds a GPU stage's interval, in seconds from the epoch.
func (c *stageClock) interval(st int, from, to float64) {
	c.mu.Lock()
	c.busy[st].add(from, to)
	c.mu.Unlock()
}

// unionTime is the length of a union of intervals that arrive roughly in
// time order (streams interleave): recent ones are kept and merged, older
// ones folded into done once no new interval can reach back to them.
type unionTime struct {
	done   float64
	recent [][2]float64
}

const unionKeep = 64 // merged intervals kept open for late arrivals

func (u *unionTime) add(from, to float64) {
	if to <= from {
		return
	}
	u.recent = append(u.recent, [2]float64{from, to})
	if len(u.recent) < 8*unionKeep {
		return
	}
	u.merge()
	if n := len(u.recent) - unionKeep; n > 0 {
		for _, iv := range u.recent[:n] {
			u.done += iv[1] - iv[0]
		}
		u.recent = append(u.recent[:0], u.recent[n:]...)
	}
}

// merge sorts and merges the recent intervals.
func (u *unionTime) merge() {
	slices.SortFunc(u.recent, func(a, b [2]float64) int {
		if a[0] < b[0] {
			return -1
		}
		if a[0] > b[0] {
			return 1
		}
		return 0
	})
	out := u.recent[:0]
	for _, iv := range u.recent {
		if k := len(out) - 1; k >= 0 && iv[0] <= out[k][1] {
			out[k][1] = max(out[k][1], iv[1])
			continue
		}
		out = append(out, iv)
	}
	u.recent = out
}

func (u *unionTime) total() float64 {
	u.merge()
	t := u.done
	for _, iv := range u.recent {
		t += iv[1] - iv[0]
	}
	return t
}

// Stages reports the breakdown since the backend opened. Busy is set for
// the GPU's stages.
func (b *Backend) Stages() []backends.Stage {
	out := make([]backends.Stage, numStages)
	b.stages.mu.Lock()
	defer b.stages.mu.Unlock()
	for i := range out {
		out[i] = backends.Stage{Name: stageNames[i], Seconds: float64(b.stages.ns[i].Load()) / 1e9,
			Bytes: b.stages.bytes[i].Load()}
		if i <= stDownload {
			out[i].Busy = b.stages.busy[i].total()
		}
	}
	return out
}

// slotTimes are a slot's timing events: the stream reaching the start of
// a piece, the end of its upload, of its kernels and of its download.
type slotTimes [4]cu.Event

// account adds a finished piece's GPU stages; up and down are the bytes it
// moved. A failed reading (an event not recorded) is skipped.
func (b *Backend) account(t *slotTimes, up, down int) {
	var at [4]float64
	for i := range at {
		s, err := b.drv.Elapsed(b.stages.epoch, t[i])
		if err != nil {
			b.stages.untimed.Add(1)
			b.stages.lastErr.Store(err.Error())
			return
		}
		at[i] = s
	}
	for st, n := range [3]int{up, 0, down} {
		b.stages.add(st, at[st+1]-at[st], n)
		b.stages.interval(st, at[st], at[st+1])
	}
}

// accountSpan adds one GPU interval between two events to stage st.
func (b *Backend) accountSpan(st int, from, to cu.Event, bytes int) {
	f, err1 := b.drv.Elapsed(b.stages.epoch, from)
	t, err2 := b.drv.Elapsed(b.stages.epoch, to)
	if err1 != nil || err2 != nil {
		b.stages.untimed.Add(1)
		return
	}
	b.stages.add(st, t-f, bytes)
	b.stages.interval(st, f, t)
}
