package region

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// zeroRun is how many untouched pages a first touch fills at once: a
// program writing fresh memory takes one fault per 64 KiB instead of one
// per page.
const zeroRun = 16

// serve is the fault loop: it sleeps in poll on the userfaultfd, the stop
// eventfd and the lifeline, and resolves the faults it reads in order.
func (r *Region) serve() {
	defer r.wg.Done()
	fds := []unix.PollFd{{Fd: int32(r.spec.Uffd), Events: unix.POLLIN}, {Fd: int32(r.stop), Events: unix.POLLIN}}
	if r.spec.Lifeline >= 0 {
		// The client's end closing (its exit) shows as RDHUP; the daemon
		// never reads this descriptor, so data arriving is ignored.
		fds = append(fds, unix.PollFd{Fd: int32(r.spec.Lifeline), Events: unix.POLLRDHUP})
	}
	buf := make([]byte, 64*msgSize)
	var faults []fault
	for {
		for i := range fds {
			fds[i].Revents = 0
		}
		if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
			r.fail(fmt.Errorf("poll: %v", err))
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		if len(fds) > 2 && fds[2].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0 {
			r.fail(errors.New("the client went away"))
			return
		}
		if fds[0].Revents&(unix.POLLERR|unix.POLLHUP) != 0 {
			r.fail(errors.New("the userfaultfd failed"))
			return
		}
		for {
			n, err := unix.Read(r.spec.Uffd, buf)
			if err == unix.EAGAIN || err == unix.EINTR {
				break
			}
			if err != nil || n <= 0 {
				r.fail(fmt.Errorf("reading the userfaultfd: %v", err))
				return
			}
			faults = parseFaults(buf[:n], faults[:0])
			for _, f := range faults {
				t0 := time.Now()
				if err := r.resolve(f); err != nil {
					r.fail(err)
					return
				}
				r.lat.add(time.Since(t0))
			}
			if n < len(buf) {
				break
			}
		}
	}
}

// resolve answers one fault.
func (r *Region) resolve(f fault) error {
	addr := f.addr &^ (r.ps - 1)
	if addr < r.spec.Addr || addr >= r.spec.Addr+r.spec.Length {
		return nil // not ours: cannot happen with one registration
	}
	i := int((addr - r.spec.Addr) / r.ps)
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.state[i]
	switch s & stateMask {
	case resident, evicting:
		r.state[i] |= refBit
		if f.flags&flagWP == 0 {
			// A second thread's fault on a page the first one's brought
			// in: the message was queued before the page arrived.
			return r.ignoreGone(r.u.wake(addr, r.ps))
		}
		r.ctr.wp.Add(1)
		if s&stateMask == evicting {
			// Written while being stored: the eviction must not punch it.
			r.state[i] |= cancelBit
		}
		return r.ignoreGone(r.u.protect(addr, r.ps, false))
	case evicted:
		r.ctr.missing.Add(1)
		r.throttle()
		// A fault just after the last one's pages is a scan: read ahead,
		// twice as far each time. Any other fault starts over.
		if i == r.last+1 {
			r.ahead = min(max(2*r.ahead, 4), maxRun)
		} else {
			r.ahead = 1
		}
		n := r.evictedRun(i, r.ahead)
		r.last = i + n - 1
		err := r.fill(i, n)
		r.kickIfOver()
		return r.ignoreGone(err)
	default:
		r.ctr.missing.Add(1)
		r.ctr.zeroFills.Add(1)
		r.throttle()
		// A first touch: zero pages for it and the untouched pages after
		// it, within one aligned run.
		hi := min((i/zeroRun+1)*zeroRun, r.pages)
		j := i + 1
		for j < hi && r.state[j] == never {
			j++
		}
		zeroed, err := r.u.zero(addr, uint64(j-i)*r.ps)
		if err == unix.ENOENT && j-i > 1 {
			// The run crosses into another VMA (the program split the
			// mapping, as NumPy's madvise(MADV_HUGEPAGE) does one page
			// in): one page then.
			zeroed, err = r.u.zero(addr, r.ps)
		}
		if err == unix.EEXIST || err == unix.EAGAIN {
			// Something put a page there already: count what was zeroed
			// and wake the thread; a retry faults again if need be.
			err = r.u.wake(addr, r.ps)
		}
		for k := 0; k < int(max(zeroed, 0)/int64(r.ps)); k++ {
			r.state[i+k] = resident | refBit
			r.resident++
		}
		r.kickIfOver()
		return r.ignoreGone(err)
	}
}

// throttle holds a fault that would bring a page in while the region is
// well over its budget, until the evictor has caught up (or for 200 ms at
// most: the store may be refusing pages). Without it a program writing
// fresh memory faster than pages compress (several GB/s against one) runs
// far over its budget: a 1 GiB NumPy array under a 128 MiB budget peaked
// at 906 MiB resident. Called under r.mu, which it lets go while waiting.
func (r *Region) throttle() {
	limit := int(r.budget.Load()/r.ps) + r.slack()
	if r.resident < limit {
		return
	}
	r.ctr.throttled.Add(1)
	deadline := time.NewTimer(200 * time.Millisecond)
	defer deadline.Stop()
	for r.resident >= limit && r.Err() == nil {
		r.wakeEvictor()
		r.mu.Unlock()
		select {
		case <-r.progress:
		case <-deadline.C:
			r.mu.Lock()
			return
		case <-r.quit:
			r.mu.Lock()
			return
		}
		r.mu.Lock()
	}
}

// slack is how far over its budget a region may run before faults wait:
// two eviction batches, or a sixteenth of the budget if more.
func (r *Region) slack() int { return max(2*evictBatch, int(r.budget.Load()/r.ps)/16) }

// kickIfOver wakes the evictor when the region is over its budget (under
// r.mu): waking it after every fault cost the fault path a thread wake-up.
func (r *Region) kickIfOver() {
	if r.resident > int(r.budget.Load()/r.ps) {
		r.wakeEvictor()
	}
}

// ignoreGone tells the errors that mean the client's memory is gone (it
// exited or unmapped the range) from real failures: those only end the
// region when the lifeline closes.
func (r *Region) ignoreGone(err error) error {
	if err == nil || err == unix.ESRCH || err == unix.ENOENT || errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// latency is a histogram of fault service times: bucket k holds times
// below 2^(k/4) ns, so quantiles are within 19%.
type latency struct {
	b   [fineBuckets]atomic.Uint64
	sum atomic.Uint64 // nanoseconds, for /metrics' histogram
}

const fineBuckets = 160

func (l *latency) add(d time.Duration) {
	ns := uint64(max(d, 1))
	// k = ceil(4*log2(ns)), from the top bit and the next two.
	top := bits.Len64(ns) - 1
	frac := 0
	if top >= 2 {
		frac = int(ns>>(top-2)) & 3
	}
	k := min(4*top+frac+1, len(l.b)-1)
	l.b[k].Add(1)
	l.sum.Add(uint64(max(d, 0)))
}

func (l *latency) quantile(q float64) time.Duration {
	var total uint64
	for i := range l.b {
		total += l.b[i].Load()
	}
	if total == 0 {
		return 0
	}
	want := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for k := range l.b {
		if seen += l.b[k].Load(); seen >= want {
			return time.Duration(math.Pow(2, float64(k)/4))
		}
	}
	return 0
}
