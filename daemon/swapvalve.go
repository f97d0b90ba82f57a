package daemon

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/s4d-project/s4d/settings"
	"github.com/s4d-project/s4d/slab"
	"github.com/s4d-project/s4d/ublk"
	"golang.org/x/sys/unix"
)

// A relief valve for swap: memory the daemon holds locked from the first
// swap device on, and hands to the kernel when a swap device's queue has
// served one batch for longer than valveStall.
//
// Why: every thread of a swap daemon is an I/O flusher (its reclaim
// cannot write pages out, or it would wait on its own devices), and the
// kernel neither OOM-kills for such an allocation nor fails it (a user
// page fault retries for ever). The Go runtime still maps a little memory
// now and then, on whatever thread allocates, the queue threads among
// them, and with the store's lock held. Seen in the guest at two CPUs,
// after the heap and its metadata were grown up front (growHeap): a queue
// thread in the runtime's mmap, reclaiming without end for 256 KiB while
// it held the store's lock, the other queue waiting for that lock, and
// every other task waiting for the swap-outs they held, with 3 MB free.
// What frees memory then is memory the kernel can take without the
// daemon: this one is a memfd mapped and locked, so punching a hole in it
// frees its pages at once and needs none of the locks a stuck thread may
// hold (not the process's mmap lock: munmap or madvise would).
type valve struct {
	fd    int
	mem   []byte
	opens atomic.Uint64 // times it was opened (SwapStats)
	open  atomic.Bool
	at    atomic.Int64 // when it was last opened (Unix ns)
}

// valveStall is how long one batch may be served before the valve opens:
// in the guest under emulation a batch takes milliseconds, and a queue
// stuck in reclaim stays so for good.
const valveStall = 250 * time.Millisecond

// valveSize is what the valve holds: RAM/128, from 8 to 64 MiB.
func valveSize() int { return int(min(max(settings.RAM()/128, 8<<20), 64<<20)) }

// newValve makes the valve, full. It is made at the first swap device,
// while memory is to be had.
func newValve(size int) (*valve, error) {
	fd, err := unix.MemfdCreate("s4d-swap-valve", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	v := &valve{fd: fd}
	if err := unix.Fallocate(fd, 0, 0, int64(size)); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if v.mem, err = unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		unix.Close(fd)
		return nil, err
	}
	slab.Present(v.mem) // locked, as the daemon's memory is
	return v, nil
}

// release hands the valve's pages to the kernel. It allocates nothing and
// takes no lock of the process's.
func (v *valve) release() {
	unix.Fallocate(v.fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, int64(len(v.mem)))
	v.at.Store(time.Now().UnixNano())
	v.opens.Add(1)
	v.open.Store(true)
}

// refill takes the pages back, faulting them in under the mapping's own
// lock (slab.Present); the caller's reclaim may write pages out to the
// swap devices meanwhile, so it must hold nothing they need.
func (v *valve) refill() {
	if unix.Fallocate(v.fd, 0, 0, int64(len(v.mem))) != nil {
		return // no memory yet: the next round tries again
	}
	slab.Present(v.mem)
	v.open.Store(false)
}

// refillValve, from keepSpare, fills the valve again a second after it
// opened, once no queue is stuck, and says in the log that it opened.
func (d *Daemon) refillValve() {
	v := d.swaps.valve
	if v == nil || !v.open.Load() || time.Now().UnixNano()-v.at.Load() < int64(time.Second) {
		return
	}
	if devs := d.swaps.live.Load(); devs != nil && anyStuck(*devs, time.Now().UnixNano()) {
		return
	}
	d.log.Warn("a swap queue was stuck: the relief valve gave its memory to the kernel", "bytes", len(v.mem), "times", v.opens.Load())
	v.refill()
}

// watchStalls opens the valve when a swap queue is stuck. Its goroutine
// keeps its thread, and sleeps and reads atomics only: it must run when
// nothing else of the daemon can.
func (d *Daemon) watchStalls(v *valve) {
	runtime.LockOSThread()
	ts := unix.Timespec{Nsec: int64(valveStall / 5)}
	for {
		select {
		case <-d.quit:
			return
		default:
		}
		unix.Nanosleep(&ts, nil)
		if v.open.Load() {
			continue
		}
		if devs := d.swaps.live.Load(); devs != nil && anyStuck(*devs, time.Now().UnixNano()) {
			v.release()
		}
	}
}

func anyStuck(devs []*ublk.Device, now int64) bool {
	for _, dev := range devs {
		if dev.StuckFor(valveStall, now) {
			return true
		}
	}
	return false
}

// valveOpens is how many times the valve opened, 0 without one.
func (s *swapSet) valveOpens() uint64 {
	if s.valve == nil {
		return 0
	}
	return s.valve.opens.Load()
}

// publish makes the devices' list for watchStalls again; s.mu is held.
func (s *swapSet) publish() {
	devs := make([]*ublk.Device, 0, len(s.devs))
	for _, sd := range s.devs {
		devs = append(devs, sd.dev)
	}
	s.live.Store(&devs)
}
