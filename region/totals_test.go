package region

import (
	"encoding/binary"
	"os"
	"testing"
	"time"

	"github.com/s4d-project/s4d/ipc"
)

// Fine buckets fold into FaultBounds' exactly: a time lands in the first
// bound it does not exceed (a time of exactly 2^m ns, in the next).
func TestFaultHistogramFold(t *testing.T) {
	r := &Region{ps: 4096}
	var sum time.Duration
	for _, d := range []time.Duration{1, 1000, 1023, 1025, 2047, 3000, time.Second, 2 * time.Second} {
		r.lat.add(d)
		sum += d
	}
	c := r.counts()
	h := c.faultHistogram()
	want := map[int]uint64{0: 3, 1: 2, 2: 1, 20: 1, 21: 1} // bucket: count (21: past every bound)
	if len(h.Bounds) != len(FaultBounds) || len(h.Counts) != len(FaultBounds)+1 || h.Bounds[0] != 1.024e-6 {
		t.Fatalf("histogram %+v", h)
	}
	for i, n := range h.Counts {
		if n != want[i] {
			t.Errorf("bucket %d (le %v): %d, want %d", i, FaultBounds[min(i, len(FaultBounds)-1)], n, want[i])
		}
	}
	if h.Sum != sum.Seconds() {
		t.Errorf("sum %v, want %v", h.Sum, sum.Seconds())
	}
}

// The registry's totals only grow: a region unregistered, lost or released
// takes its counters with it from Stats but not from Totals.
func TestTotalsOutliveRegions(t *testing.T) {
	var reg Registry
	ps := os.Getpagesize()
	const pages = 64
	use := func(id uint64) *Entry {
		r, mem, _ := newTestRegion(t, pages*ps, 8*ps)
		for i := 0; i < pages; i++ {
			binary.LittleEndian.PutUint64(mem[i*ps:], uint64(i)+1)
		}
		waitFor(t, "eviction to the budget", func() bool { return r.Stats().Resident <= 8*uint64(ps) })
		for i := pages - 1; i >= 0; i-- { // backwards: a fault each, no read-ahead
			if binary.LittleEndian.Uint64(mem[i*ps:]) != uint64(i)+1 {
				t.Fatalf("page %d", i)
			}
		}
		e := &Entry{ID: id, UID: 1000, R: r}
		reg.Added(e)
		return e
	}
	use(1)
	e2 := use(2)
	t0 := reg.Totals(0)
	if reg.Totals(1000) != nil {
		t.Fatal("a user saw every user's totals")
	}
	// A fault's time is recorded after its thread is woken: the count
	// may be a fault or two behind, so only its presence is checked.
	var timed uint64
	for _, n := range t0.FaultLatency.Counts {
		timed += n
	}
	if t0.Regions != 2 || t0.Faults == 0 || t0.EvictedBytes == 0 || t0.RestoredBytes == 0 || timed == 0 || t0.FaultLatency.Sum <= 0 {
		t.Fatalf("totals of two regions: %+v %+v", t0, t0.FaultLatency)
	}
	grew := func(a, b *ipc.RegionTotals) bool {
		return b.Faults >= a.Faults && b.EvictedBytes >= a.EvictedBytes && b.RestoredBytes >= a.RestoredBytes &&
			b.FaultLatency.Sum >= a.FaultLatency.Sum
	}
	// Unregistered with its pages handed back: counted while it closes,
	// and after.
	e1, err := reg.Take(1000, 1)
	if err != nil {
		t.Fatal(err)
	}
	mid := reg.Totals(0)
	if err := e1.R.Release(nil); err != nil {
		t.Fatal(err)
	}
	t1 := reg.Totals(0)
	if !grew(t0, mid) || !grew(mid, t1) || t1.Regions != 1 || len(reg.leaving) != 0 {
		t.Fatalf("taking a region: %+v, then %+v, before %+v (%d leaving)", mid, t1, t0, len(reg.leaving))
	}
	// Released, its every evicted page came back: restored catches up.
	s1 := e1.R.counts()
	if s1.restored != s1.evicted || s1.evicted == 0 {
		t.Fatalf("released region: %d bytes evicted, %d restored", s1.evicted, s1.restored)
	}
	reg.Lost(e2.ID)
	t2 := reg.Totals(0)
	if !grew(t1, t2) || t2.Regions != 0 || len(reg.leaving) != 0 {
		t.Fatalf("after losing the other: %+v, before %+v (%d leaving)", t2, t1, len(reg.leaving))
	}
	if c := e2.R.counts(); t2.Faults != s1.faults+c.faults || t2.EvictedBytes != s1.evicted+c.evicted {
		t.Fatalf("totals %+v are not the two regions' sums", t2)
	}
}
