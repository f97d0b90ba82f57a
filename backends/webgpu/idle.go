package webgpu

import (
	"fmt"
	"os"
	"time"
)

// A slot's buffers grow to its largest round and used to stay for good:
// after one burst of large batches the Vulkan runtime held up to about
// 128 MiB of populated, imported host memory a slot (8 compress and 8
// decompression slots; 513-1154 MiB after one bench on an H200), and the
// webgpu.h runtime its mapped staging and readback buffers. A memory
// daemon holding that while idle gives back much of what it saves, so a
// sweeper empties the slots that no round used for idleFree. The next
// round makes its buffers again: on the Vulkan runtime populating and
// importing cost roughly 20 ms per 64 MiB (12 ms to populate here,
// imports about 7 GB/s on an H200), so bursts less than idleFree apart
// keep them.
var idleFree = idleFreeFromEnv()

// envIdleFree sets idleFree (a Go duration; 0 keeps the buffers for
// good), for measuring what the sweep costs.
const envIdleFree = "S4D_WEBGPU_IDLE_FREE"

func idleFreeFromEnv() time.Duration {
	if d, err := time.ParseDuration(os.Getenv(envIdleFree)); err == nil && d >= 0 {
		return d
	}
	return 30 * time.Second
}

// idleNote says what the sweeper does, for Describe.
func (b *Backend) idleNote() string {
	if b.idleKeep == 0 {
		return "kept while idle"
	}
	return fmt.Sprintf("given back after %v idle, %d slots so far", b.idleKeep, b.nIdleFreed.Load())
}

// startSweep starts the sweeper with the idle time of now (tests set
// idleFree before opening an engine; no sweeper reads it after).
func (b *Backend) startSweep() {
	b.idleKeep = idleFree
	if b.idleKeep > 0 {
		go b.sweep(b.idleKeep)
	}
}

// sweep frees the buffers of slots idle for keep, until Close.
func (b *Backend) sweep(keep time.Duration) {
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

// freeIdle frees the buffers of every free slot last handed back at
// least keep before now. It takes the free slots out of their channels
// for the time it looks at them, so no round uses a slot meanwhile; a
// slot in a round is not in its channel and is left alone. A caller
// waiting on a channel gets its slot as soon as the sweep puts them back.
func (b *Backend) freeIdle(now time.Time, keep time.Duration) {
	b.withFreeSlots(func(cs []*slot, ds []*dslot) { b.freeSlots(now, keep, cs, ds) })
}

// withFreeSlots runs f on the slots free now (compress, then
// decompression), out of their channels, under idleMu, and puts them
// back after.
func (b *Backend) withFreeSlots(f func(cs []*slot, ds []*dslot)) {
	b.idleMu.Lock()
	defer b.idleMu.Unlock()
	cs, es, ds := drain(b.slots), drain(b.extra), drain(b.dslots)
	f(append(cs[:len(cs):len(cs)], es...), ds)
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

// freeSlots frees the buffers of those of cs and ds idle for keep.
func (b *Backend) freeSlots(now time.Time, keep time.Duration, cs []*slot, ds []*dslot) {
	var fc []*slot
	var fd []*dslot
	for _, s := range cs {
		if now.Sub(s.used) >= keep && (b.vk != nil && s.vs.out != nil || b.vk == nil && s.capPages > 0) {
			fc = append(fc, s)
		}
	}
	for _, s := range ds {
		if now.Sub(s.used) >= keep && (b.vk != nil && s.vs.in != nil || b.vk == nil && s.cap > 0) {
			fd = append(fd, s)
		}
	}
	if len(fc)+len(fd) == 0 {
		return
	}
	b.nIdleFreed.Add(int64(len(fc) + len(fd)))
	if b.vk != nil {
		for _, s := range fc {
			s.vs.free()
		}
		for _, s := range fd {
			s.vs.free()
		}
		return
	}
	// webgpu.h: on the device thread, each staging buffer's map done first
	// (as Close does).
	b.d.do(func() error {
		for _, s := range fc {
			if s.uploadPending {
				b.d.wait(s.uploadWait, "staging map")
			}
			s.free(b.d.p)
		}
		for _, s := range fd {
			if s.upPending {
				b.d.wait(s.upWait, "staging map")
			}
			s.free(b.d.p)
		}
		return nil
	})
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
