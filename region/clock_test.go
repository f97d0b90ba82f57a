package region

import (
	"encoding/binary"
	"os"
	"testing"
)

// TestHotSetStaysResident: a program looping over a hot set that fits the
// budget, while holding a cold set four times larger, takes almost no
// faults once warmed up: the clock keeps what is touched.
func TestHotSetStaysResident(t *testing.T) {
	ps := os.Getpagesize()
	const pages, budget, hot = 8192, 2048, 1024 // 32 MiB, 8 MiB, 4 MiB
	r, mem, _ := newTestRegion(t, pages*ps, budget*ps)
	// The whole region is written once: the cold set is 7/8 of it.
	for i := 0; i < pages; i++ {
		binary.LittleEndian.PutUint64(mem[i*ps:], uint64(i))
	}
	waitFor(t, "eviction to the budget", func() bool { return r.Stats().Resident <= budget*uint64(ps) })
	// The hot set is spread over the region: every 8th page.
	pass := func() {
		for k := 0; k < hot; k++ {
			i := k * (pages / hot)
			p := mem[i*ps:]
			if got := binary.LittleEndian.Uint64(p); got != uint64(i) {
				t.Fatalf("page %d holds %d", i, got)
			}
			p[8]++ // and written
		}
	}
	for w := 0; w < 5; w++ {
		pass()
	}
	before := r.Stats()
	const passes = 50
	for w := 0; w < passes; w++ {
		pass()
	}
	after := r.Stats()
	faults := after.Faults + after.WPFaults - before.Faults - before.WPFaults
	touches := uint64(passes * hot)
	t.Logf("%d faults in %d touches after warm-up (%d in warm-up); resident %d KiB of a %d KiB budget",
		faults, touches, before.Faults, after.Resident>>10, budget*ps>>10)
	// Almost none: a generous bound, for a loaded machine (the evictor may
	// still be finishing the warm-up's work).
	if faults > touches/100 {
		t.Fatalf("%d faults in %d touches of a hot set within the budget", faults, touches)
	}
	waitFor(t, "eviction back to the budget", func() bool { return r.Stats().Resident <= budget*uint64(ps) })
}
