package cuda

import (
	"bytes"
	"slices"
)

// Zero pages stay on the host. On the H100 the upload of a piece's pages
// is what bounds a PUT (the link busy 80-86% of the time at 35 GB/s), and
// a live process's memory is largely zero pages (58% of the test
// process's). Before a piece goes up, the caller finds its runs of zero
// pages on the CPU, a non-zero page costing a compare of its first bytes;
// the longest runs are not copied but cleared on the device, where the
// classify kernel finds them zero as before. Runs are few per piece, each
// a copy and a memset queued by the worker, so short ones go up anyway.

const (
	// minZeroRun is the shortest run of zero pages left on the host: a
	// shorter one saves less time on the link than its calls cost.
	minZeroRun = 16
	// maxZeroRuns caps the runs left on the host per piece, the longest
	// kept, so that queuing a piece stays a handful of calls.
	maxZeroRuns = 16
)

// zeroPage is compared against: memequal reads it from L1.
var zeroPage [maxOwnLZ4Page]byte

// zeroRuns returns the runs [from, to) of zero pages of src (pages of ps
// bytes) to leave on the host, at most maxZeroRuns of at least minZeroRun
// pages, in order; zero is scratch of one bool per page.
func zeroRuns(src []byte, ps int, zero []bool, runs [][2]int32) [][2]int32 {
	runs = runs[:0]
	n := len(src) / ps
	if ps > len(zeroPage) || n < minZeroRun {
		return runs
	}
	zero = zero[:n]
	parallelFor(n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			zero[i] = bytes.Equal(src[i*ps:(i+1)*ps], zeroPage[:ps])
		}
	})
	for i := 0; i < n; {
		if !zero[i] {
			i++
			continue
		}
		j := i
		for j < n && zero[j] {
			j++
		}
		if j-i >= minZeroRun {
			runs = append(runs, [2]int32{int32(i), int32(j)})
		}
		i = j
	}
	if len(runs) > maxZeroRuns {
		slices.SortFunc(runs, func(a, b [2]int32) int { return int(b[1]-b[0]) - int(a[1]-a[0]) })
		runs = runs[:maxZeroRuns]
		slices.SortFunc(runs, func(a, b [2]int32) int { return int(a[0] - b[0]) })
	}
	return runs
}

// uploadPages queues the copy of a piece's pages to din on the slot's
// stream, the zero runs cleared on the device instead, and returns the
// bytes copied.
func (b *Backend) uploadPages(s *slot, src []byte, ps int) (int, error) {
	d := &b.drv
	at, sent := 0, 0
	up := func(to int) error {
		if to <= at {
			return nil
		}
		sent += to - at
		return d.HtoD(s.din+uint64(at), src[at:to], s.s)
	}
	for _, r := range s.zeroRuns {
		lo, hi := int(r[0])*ps, int(r[1])*ps
		if err := up(lo); err != nil {
			return 0, err
		}
		if err := d.MemsetD32(s.din+uint64(lo), 0, (hi-lo)/4, s.s); err != nil {
			return 0, err
		}
		at = hi
	}
	err := up(len(src))
	return sent, err
}
