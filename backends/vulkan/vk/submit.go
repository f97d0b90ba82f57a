package vk

/*
#include "glue.h"
*/
import "C"

import (
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Submitting. A caller takes a command buffer of the queue's ring, records
// its work there with no lock held (each buffer has its own pool), and
// joins the queue's pending list; whoever then holds the queue submits
// every pending buffer in one vkQueueSubmit. Each queue has its own lock
// (Vulkan asks no more), so copies and kernels do not wait for each
// other's submissions. On the H200 with 16 clients this cut the time a
// GET round spent submitting by a quarter to a third at batch 4096 against
// one device lock around recording and submitting, without a measurable
// change in GET's speed: what callers wait for is the driver's
// vkQueueSubmit, a few microseconds, except that it stalls 10-100+ ms
// while the driver imports a mapping; SubmitStats.Slow counts those
// (docs/benchmarks/2026-12-04-vulkan-submit.md). S4D_VULKAN_SUBMIT=serial
// brings the one lock back, for comparison.

// ring is the Go side of one queue's s4dvk_ring.
type ring struct {
	free chan int    // the buffers no caller holds, oldest submission first
	val  []uint64    // each buffer's last submission's value; written holding q
	q    *sync.Mutex // the VkQueue: both rings' when they share one
	sent uint64      // the last value submitted; holding q
	pmu  sync.Mutex  // pend
	pend []*pending  // recorded, not yet submitted
	work []*pending  // the batch being submitted; holding q
	c    *submitArgs // C memory: s4dvk_submit's arrays; holding q
}

// submitArgs are s4dvk_submit's per-buffer arguments.
type submitArgs struct {
	idx, afterRing [C.S4DVK_RING]C.int32_t
	after          [C.S4DVK_RING]C.uint64_t
}

// pending is one recorded buffer on its way to the queue; v, err and done
// are written by whoever submits it, holding the queue.
type pending struct {
	idx, afterRing int
	after, v       uint64
	err            error
	done           bool
}

// submitStats counts what the rings did (SubmitStats).
type submitStats struct {
	n, calls, lockNs, callNs atomic.Int64
	slow                     [len(SubmitStats{}.Slow)]atomic.Int64
}

// SubmitStats is what a Device's submissions cost so far.
type SubmitStats struct {
	N     int64         // buffers submitted
	Calls int64         // vkQueueSubmit calls made for them
	Lock  time.Duration // waiting for a queue, summed over callers
	Call  time.Duration // in vkQueueSubmit
	// Slow counts the calls that took at least 0.1, 1, 10 and 100 ms:
	// whether the driver's time is spread evenly or spent in a few
	// long stalls.
	Slow [4]int64
}

// slowAt are SubmitStats.Slow's thresholds.
var slowAt = [...]time.Duration{100 * time.Microsecond, time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond}

// SubmitStats reports the submissions so far: where a busy engine's
// submitting goes.
func (d *Device) SubmitStats() SubmitStats {
	s := &d.stats
	r := SubmitStats{N: s.n.Load(), Calls: s.calls.Load(), Lock: time.Duration(s.lockNs.Load()), Call: time.Duration(s.callNs.Load())}
	for i := range r.Slow {
		r.Slow[i] = s.slow[i].Load()
	}
	return r
}

// initRings sets up the Go side of the device's two rings.
func (d *Device) initRings() {
	d.serial = os.Getenv("S4D_VULKAN_SUBMIT") == "serial"
	q := &sync.Mutex{}
	for r := range d.rings {
		g := &d.rings[r]
		g.free = make(chan int, C.S4DVK_RING)
		for i := range C.S4DVK_RING {
			g.free <- i
		}
		g.val = make([]uint64, C.S4DVK_RING)
		if r == 0 || d.d.oneQueue == 0 {
			q = &sync.Mutex{}
		}
		g.q = q
		g.c = (*submitArgs)(C.calloc(1, C.size_t(unsafe.Sizeof(submitArgs{}))))
	}
}

// freeRings frees the rings' C memory.
func (d *Device) freeRings() {
	for r := range d.rings {
		C.free(unsafe.Pointer(d.rings[r].c))
		d.rings[r].c = nil
	}
}

// last is the ring's last submitted value.
func (d *Device) last(r int) Ticket {
	g := &d.rings[r]
	g.q.Lock()
	defer g.q.Unlock()
	return Ticket{r, g.sent}
}

// submit records work into a buffer of ring r (record gets its index)
// and submits it after after.
func (d *Device) submit(r int, after Ticket, record func(i C.int, after C.uint64_t) C.VkResult) (Ticket, error) {
	if d.serial {
		t0 := time.Now()
		d.serialMu.Lock()
		d.stats.lockNs.Add(int64(time.Since(t0)))
		defer d.serialMu.Unlock()
	}
	g := &d.rings[r]
	i := <-g.free
	defer func() { g.free <- i }()
	// The buffer's last submission must be done before it is reset; with
	// 64 a queue and a few dozen in flight at most, it nearly always is.
	if v := g.val[i]; v != 0 {
		if err := check(C.s4dvk_wait(d.d, C.int(r), C.uint64_t(v), C.UINT64_MAX)); err != nil {
			return Ticket{}, err
		}
	}
	if err := check(record(C.int(i), C.uint64_t(after.v))); err != nil {
		return Ticket{}, err
	}
	p := &pending{idx: i, afterRing: after.ring, after: after.v}
	g.pmu.Lock()
	g.pend = append(g.pend, p)
	g.pmu.Unlock()
	t0 := time.Now()
	g.q.Lock()
	d.stats.lockNs.Add(int64(time.Since(t0)))
	if !p.done {
		d.flush(r)
	}
	g.q.Unlock()
	return Ticket{r, p.v}, p.err
}

// flush submits every pending buffer of ring r in one call; the caller
// holds the queue.
func (d *Device) flush(r int) {
	g := &d.rings[r]
	g.pmu.Lock()
	g.work = append(g.work[:0], g.pend...)
	clear(g.pend)
	g.pend = g.pend[:0]
	g.pmu.Unlock()
	c := g.c
	for j, p := range g.work {
		c.idx[j], c.afterRing[j], c.after[j] = C.int32_t(p.idx), C.int32_t(p.afterRing), C.uint64_t(p.after)
	}
	n, first := len(g.work), g.sent+1
	t0 := time.Now()
	err := check(C.s4dvk_submit(d.d, C.int(r), C.uint32_t(n), &c.idx[0], &c.afterRing[0], &c.after[0], C.uint64_t(first)))
	took := time.Since(t0)
	d.stats.callNs.Add(int64(took))
	for i, at := range slowAt {
		if took >= at {
			d.stats.slow[i].Add(1)
		}
	}
	d.stats.calls.Add(1)
	d.stats.n.Add(int64(n))
	for j, p := range g.work {
		if err == nil {
			p.v = first + uint64(j)
			g.val[p.idx] = p.v
		}
		p.err, p.done = err, true
	}
	if err == nil {
		g.sent += uint64(n)
	}
	clear(g.work)
}
