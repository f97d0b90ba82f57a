package region

import (
	"time"

	"github.com/s4d-project/s4d/ipc"
)

// FaultBounds are the bounds /metrics counts fault times in: powers of two
// nanoseconds, 1.024 us to 1.07 s. Each is an edge of latency's finer
// buckets, so the counts are exact (but for a time of exactly 2^m ns,
// counted above its bound).
var FaultBounds = func() []time.Duration {
	b := make([]time.Duration, 21)
	for i := range b {
		b[i] = time.Duration(1) << (10 + i)
	}
	return b
}()

// counts are a region's counters that only grow: what the registry sums
// for the daemon's totals.
type counts struct {
	faults, zeroFills uint64
	evicted, restored uint64 // bytes
	lat               [fineBuckets]uint64
	latSum            time.Duration
}

func (r *Region) counts() counts {
	c := counts{faults: r.ctr.missing.Load(), zeroFills: r.ctr.zeroFills.Load(),
		evicted: r.ctr.evictions.Load() * r.ps, restored: r.ctr.restored.Load() * r.ps,
		latSum: time.Duration(r.lat.sum.Load())}
	for k := range c.lat {
		c.lat[k] = r.lat.b[k].Load()
	}
	return c
}

func (c *counts) add(o *counts) {
	c.faults += o.faults
	c.zeroFills += o.zeroFills
	c.evicted += o.evicted
	c.restored += o.restored
	for k := range c.lat {
		c.lat[k] += o.lat[k]
	}
	c.latSum += o.latSum
}

// faultHistogram folds the fine buckets into FaultBounds' buckets: fine
// bucket k holds times of 2^((k-1)/4) ns up to 2^(k/4), so those under
// 2^m ns are the buckets up to 4m.
func (c *counts) faultHistogram() *ipc.Histogram {
	out := make([]uint64, len(FaultBounds)+1)
	for k, n := range c.lat {
		j := 0
		for j < len(FaultBounds) && k > 4*(10+j) {
			j++
		}
		out[j] += n
	}
	return ipc.NewHistogram(FaultBounds, out, c.latSum)
}

// Totals sums every region's counters since the registry began, those of
// regions gone included, so that they only grow (Prometheus counters).
// Only root sees them: they are every user's.
func (s *Registry) Totals(uid uint32) *ipc.RegionTotals {
	if uid != 0 {
		return nil
	}
	s.mu.Lock()
	s.foldLocked()
	c := s.gone
	live := make([]*Region, 0, len(s.regs)+len(s.leaving))
	for _, e := range s.regs {
		live = append(live, e.R)
	}
	live = append(live, s.leaving...)
	n := len(s.regs)
	s.mu.Unlock()
	for _, r := range live {
		rc := r.counts()
		c.add(&rc)
	}
	return &ipc.RegionTotals{Regions: n, Faults: c.faults, ZeroFills: c.zeroFills, EvictedBytes: c.evicted,
		RestoredBytes: c.restored, FaultLatency: c.faultHistogram()}
}

// leave moves a region out of the registry (under s.mu). It stays counted
// live until it has finished closing, then its counters join gone's:
// dropped at once, the totals would go down while it closes.
func (s *Registry) leave(e *Entry) {
	delete(s.regs, e.ID)
	s.leaving = append(s.leaving, e.R)
}

// foldLocked adds the regions done closing to gone (under s.mu).
func (s *Registry) foldLocked() {
	kept := s.leaving[:0]
	for _, r := range s.leaving {
		if !r.finished.Load() {
			kept = append(kept, r)
			continue
		}
		rc := r.counts()
		s.gone.add(&rc)
	}
	clear(s.leaving[len(kept):])
	s.leaving = kept
}

func (s *Registry) fold() {
	s.mu.Lock()
	s.foldLocked()
	s.mu.Unlock()
}
