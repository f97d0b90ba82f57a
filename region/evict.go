package region

import (
	"fmt"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// evictBatch is the most pages stored in one go: large enough for a GPU
// batch to pay, small enough that the faults waiting meanwhile are few.
const evictBatch = 256

// evictLoop keeps the resident pages within the budget. It wakes when a
// fault brought a page in or the budget changed, and every 100 ms.
func (r *Region) evictLoop() {
	defer r.wg.Done()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	buf := make([]byte, evictBatch*int(r.ps))
	for {
		select {
		case <-r.quit:
			return
		case <-r.kick:
		case <-tick.C:
		}
		if time.Now().Before(r.backoff) {
			continue
		}
		for r.Err() == nil {
			n, err := r.evictOnce(buf)
			select {
			case r.progress <- struct{}{}:
			default:
			}
			if err != nil {
				r.fail(err)
				break
			}
			if n == 0 || time.Now().Before(r.backoff) {
				break
			}
			select {
			case <-r.quit:
				return
			default:
			}
		}
	}
}

// excess is how many pages should go now (under r.mu). Once over the
// budget, eviction goes a little below it, so that a program working
// just at the budget does not cause one eviction per fault.
func (r *Region) excess() int {
	limit := int(r.budget.Load() / r.ps)
	if r.resident <= limit {
		return 0
	}
	return r.resident - limit + limit/64
}

// pick runs the clock hand over the pages and marks up to n cold resident
// pages as evicting: a page touched since the hand last passed (its
// reference bit set by a fault) loses the bit and stays.
func (r *Region) pick(n int, out []int) []int {
	for steps := 0; len(out) < n && steps < 2*r.pages; steps++ {
		i := r.hand
		if r.hand++; r.hand == r.pages {
			r.hand = 0
		}
		s := r.state[i]
		if s&stateMask != resident {
			continue
		}
		if s&refBit != 0 {
			r.state[i] = resident
			continue
		}
		r.state[i] = evicting
		out = append(out, i)
	}
	return out
}

// runs calls fn for each run of consecutive page numbers in pages
// (ascending): first index in pages and count.
func runs(pages []int, fn func(at, n int) error) error {
	for at := 0; at < len(pages); {
		n := 1
		for at+n < len(pages) && pages[at+n] == pages[at]+n {
			n++
		}
		if err := fn(at, n); err != nil {
			return err
		}
		at += n
	}
	return nil
}

// evictOnce stores and punches out one batch of cold pages; it returns
// how many it picked.
func (r *Region) evictOnce(buf []byte) (int, error) {
	r.mu.Lock()
	want := min(r.excess(), evictBatch)
	if want == 0 {
		r.mu.Unlock()
		return 0, nil
	}
	victims := r.pick(want, make([]int, 0, want))
	r.mu.Unlock()
	if len(victims) == 0 {
		return 0, nil
	}
	slices.Sort(victims) // ascending but for one wrap of the hand
	ps := int(r.ps)
	// Write-protect first: from here a write to a victim stops in the
	// kernel and reaches the fault loop, which cancels that victim.
	err := runs(victims, func(at, n int) error {
		return r.u.protect(r.addrOf(victims[at]), uint64(n*ps), true)
	})
	if err == nil {
		err = runs(victims, func(at, n int) error {
			got, err := unix.Pread(r.spec.Memfd, buf[at*ps:(at+n)*ps], int64(victims[at]*ps))
			if err == nil && got != n*ps {
				err = fmt.Errorf("short read of %d bytes", got)
			}
			return err
		})
	}
	if err != nil {
		r.undo(victims, nil)
		return 0, r.ignoreGone(err)
	}
	keys := make([]uint64, len(victims))
	for j, i := range victims {
		keys[j] = uint64(i)
	}
	size := make([]int32, len(victims))
	if err := r.store.Save(keys, buf[:len(victims)*ps], size); err != nil {
		r.log.Debug("region eviction not stored", "err", err)
		r.ctr.refused.Add(uint64(len(victims)))
		r.undo(victims, nil)
		r.backoff = time.Now().Add(time.Second)
		// A full store is no reason to stop serving; try again later.
		return 0, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	punch := victims[:0:0]
	var drop []uint64
	refused := 0
	for j, i := range victims {
		switch {
		case r.state[i]&cancelBit != 0:
			r.ctr.cancelled.Add(1)
			r.state[i] = resident | refBit
			if size[j] >= 0 {
				drop = append(drop, keys[j])
			}
		case size[j] < 0:
			r.ctr.refused.Add(1)
			refused++
			r.state[i] = resident
			r.u.protect(r.addrOf(i), r.ps, false)
		default:
			punch = append(punch, i)
			r.size[i] = uint16(min(size[j], 65535))
		}
	}
	err = runs(punch, func(at, n int) error {
		return unix.Fallocate(r.spec.Memfd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE,
			int64(punch[at]*ps), int64(n*ps))
	})
	if err != nil {
		// Nothing was lost: the pages are still there, and stored.
		for _, i := range punch {
			r.state[i] = resident
			r.u.protect(r.addrOf(i), r.ps, false)
			drop = append(drop, uint64(i))
		}
		punch = punch[:0]
	}
	for _, i := range punch {
		r.state[i] = evicted
		r.stored += uint64(r.size[i])
	}
	r.resident -= len(punch)
	r.evicted += len(punch)
	r.ctr.evictions.Add(uint64(len(punch)))
	if len(punch) == 0 && refused > 0 {
		// Nothing stored (quota, memory limit): no use compressing the
		// same pages again at once.
		r.backoff = time.Now().Add(time.Second)
	}
	if len(drop) > 0 {
		r.store.Drop(drop)
	}
	if err != nil {
		return len(victims), fmt.Errorf("punching pages out of the memfd: %v", err)
	}
	return len(victims), nil
}

// undo makes victims resident again after a failed eviction, lifting the
// write protection where it was set.
func (r *Region) undo(victims []int, _ []uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, i := range victims {
		r.state[i] = resident | (r.state[i] & refBit)
	}
	runs(victims, func(at, n int) error {
		r.u.protect(r.addrOf(victims[at]), uint64(n)*r.ps, false)
		return nil
	})
}

func (r *Region) addrOf(i int) uint64 { return r.spec.Addr + uint64(i)*r.ps }
