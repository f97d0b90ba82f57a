package daemon

import (
	"runtime/debug"
	"time"
)

// returnAt is how much dropped buffer memory makes the sweeper hand it
// back to the kernel at once; so does any large request buffer dropped,
// as the requests that used it left garbage on the heap too (16 unread
// 64 MiB GETs left 59 MiB resident until a collection). Dropped buffers are garbage on the Go heap
// until a collection, and an idle daemon allocates nothing to start one:
// after a few rounds of a 1 GiB benchmark it kept hundreds of MiB resident
// with an empty store. With the store's slabs off the heap, the heap is
// small and a forced collection cheap. (The store gives its slab memory
// back itself.)
const returnAt = 8 << 20

// sweepEvery drops request buffers left unused for one to two periods,
// and the memory of emptied arena slabs after four to eight (a client that
// frees pages and stores others within seconds reuses it instead of
// having the kernel zero fresh pages), until stop is closed. Once enough
// buffer memory is dropped, it is given back to the kernel.
func (d *Daemon) sweepEvery(every time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	dropped := 0
	for n := 1; ; n++ {
		select {
		case <-t.C:
			heap, unmapped := d.bufs.Sweep()
			dropped += heap
			if n%4 == 0 {
				d.store.Sweep()
			}
			if dropped >= returnAt || unmapped > 0 {
				debug.FreeOSMemory()
				dropped = 0
			}
		case <-stop:
			return
		}
	}
}
