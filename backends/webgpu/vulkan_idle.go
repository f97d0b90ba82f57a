package webgpu

import (
	"fmt"
	"os"
	"time"
)

// A Vulkan slot's buffers are host memory, populated and imported (pinned)
// as the slot first needs them, and grown to its largest round: after
// one burst of large batches the engine held them for good, up to about
// 128 MiB a slot with 8 compress and 8 decompression slots. A memory
// daemon holding that while idle gives back much of what it saves, so a
// sweeper empties the slots that no round used for vkIdleFree. The next
// round makes its buffers again: populating and importing cost roughly
// 20 ms per 64 MiB (12 ms to populate here, imports about 7 GB/s on an
// H200), so bursts less than vkIdleFree apart keep them.
var vkIdleFree = idleFreeFromEnv()

// envIdleFree sets vkIdleFree (a Go duration; 0 keeps the buffers for
// good), for measuring what the sweep costs.
const envIdleFree = "S4D_VULKAN_IDLE_FREE"

func idleFreeFromEnv() time.Duration {
	if d, err := time.ParseDuration(os.Getenv(envIdleFree)); err == nil && d >= 0 {
		return d
	}
	return 30 * time.Second
}

func idleNote(keep time.Duration, freed int64) string {
	if keep == 0 {
		return "kept while idle"
	}
	return fmt.Sprintf("given back after %v idle, %d slots so far", keep, freed)
}

// sweepVulkan frees the buffers of slots idle for keep, until Close.
func (b *Backend) sweepVulkan(keep time.Duration) {
	t := time.NewTicker(min(time.Second, keep))
	defer t.Stop()
	for {
		select {
		case <-b.gone:
			return
		case now := <-t.C:
			b.freeIdle(now, keep)
		}
	}
}

// freeIdle frees the buffers of every free slot whose last round began
// at least keep before now. It takes the free slots out of their channels
// for the time it looks at them, so no round uses a slot meanwhile; a
// slot in a round is not in its channel and is left alone.
func (b *Backend) freeIdle(now time.Time, keep time.Duration) {
	b.idleMu.Lock()
	defer b.idleMu.Unlock()
	// A caller waiting on a channel meanwhile gets its slot as soon as
	// the sweep puts them back.
	cs, es, ds := drain(b.slots), drain(b.extra), drain(b.dslots)
	for _, s := range append(cs, es...) {
		if v := s.vs; v.out != nil && now.Sub(v.used) >= keep {
			v.free()
			b.vk.nIdleFreed.Add(1)
		}
	}
	for _, s := range ds {
		if v := s.vs; v.in != nil && now.Sub(v.used) >= keep {
			v.free()
			b.vk.nIdleFreed.Add(1)
		}
	}
	for _, s := range cs {
		b.slots <- s
	}
	for _, s := range es {
		b.extra <- s
	}
	for _, s := range ds {
		b.dslots <- s
	}
}

// drain takes what c holds now, without waiting.
func drain[T any](c chan T) []T {
	var out []T
	for {
		select {
		case x := <-c:
			out = append(out, x)
		default:
			return out
		}
	}
}
