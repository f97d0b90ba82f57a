package daemon

import (
	"runtime"
	"runtime/debug"
)

// growHeap grows the Go heap to three quarters of its bound (limit) now,
// at the first swap device, and returns the heap's size after. The
// runtime grows the heap by mapping memory, and with the daemon's memory
// locked (MCL_FUTURE) a new mapping is filled at once: on a swap device's
// I/O path, with no memory free, that filling waits in direct reclaim,
// which the device's own server cannot swap its way out of (seen in the
// guest: the queue thread in mmap -> __mm_populate -> reclaim). Grown
// now, the heap's pages stay mapped and present: they are locked, so the
// runtime's scavenger cannot hand them back (madvise refuses locked
// pages), and the collector keeps the heap within the bound, so while the
// live heap stays under it no new mapping is needed.
//
// The heap is grown in objects of a page each, the smallest spans, and
// collected twice before it is let go: the runtime's metadata for spans
// (their structures, the sets that list them, their mark bits, allocated
// apart from the heap in chunks it maps as it needs them) grows now to
// what a heap of that size in the most spans needs, and is reused after.
// Grown in large objects, the heap had few spans, and the queue thread
// mapped a 256 KiB chunk of span metadata (runtime.persistentalloc)
// while it held the store's lock: at two CPUs in the guest, both queues
// then stalled for good.
func growHeap(limit int64) uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	target := uint64(limit) * 3 / 4
	const span = 8 << 10 // the runtime's page: one object per span
	var ballast [][]byte
	for have := ms.HeapSys; have < target; have += span {
		ballast = append(ballast, make([]byte, span))
	}
	runtime.GC()
	runtime.GC()
	runtime.KeepAlive(ballast)
	ballast = nil
	debug.FreeOSMemory() // a collection now: the ballast becomes free heap
	runtime.ReadMemStats(&ms)
	return ms.HeapSys
}
