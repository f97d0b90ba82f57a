package backing

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// ReadBounds are the upper bounds of the read latency histogram: powers of
// two microseconds, 8 us (a 4 KiB read from a fast NVMe drive) to 4.2 s (a
// disk that is failing). Fixed bounds, the same on every host, are what lets
// Prometheus add hosts' histograms together.
var ReadBounds = func() []time.Duration {
	b := make([]time.Duration, readBuckets-1)
	for i := range b {
		b[i] = time.Duration(8<<i) * time.Microsecond
	}
	return b
}()

// readBuckets counts the buckets, the last one (past every bound) included.
const readBuckets = 21

type counters struct {
	writes, pagesWritten, bytesWritten, writeNanos atomic.Uint64
	reads, pagesRead, bytesRead, readNanos         atomic.Uint64
	readErrors, writeErrors, checkpoints, dropped  atomic.Uint64
	lat                                            [readBuckets]atomic.Uint64 // reads by latency, bucket i: at most ReadBounds[i]
}

// readBucket is the first bucket whose bound d does not exceed.
func readBucket(d time.Duration) int {
	us := (uint64(max(d, 0)) + 999) / 1000 // rounded up: 8.001 us is over 8 us
	if us <= 8 {
		return 0
	}
	// 8<<i >= us for the smallest i: i = bit length of us-1, less 3.
	return min(bits.Len64(us-1)-3, readBuckets-1)
}

func (c *counters) observeRead(d time.Duration) {
	c.reads.Add(1)
	c.readNanos.Add(uint64(d))
	c.lat[readBucket(d)].Add(1)
}

// Stats is what the file has done, in the manner of zram's bd_stat.
type Stats struct {
	Size, FreeBytes             uint64 // the file; blocks free now
	Pages, Bytes                uint64 // objects live in the file, their bytes
	Reads, PagesRead, BytesRead uint64 // read I/Os, objects and bytes read
	Writes, PagesWritten        uint64 // write I/Os, objects written
	BytesWritten                uint64
	ReadErrors, WriteErrors     uint64
	Dropped                     uint64 // writes that read back different (verify)
	Checkpoints                 uint64
	// Read I/Os by latency: ReadHist[i] took at most ReadBounds[i] (and
	// more than the bound before); the last, more than every bound.
	// ReadTime is their total time.
	ReadBounds []time.Duration // ReadBounds, for the caller's convenience
	ReadHist   []uint64
	ReadTime   time.Duration
	ReadMean   time.Duration // per read I/O
	ReadP99    time.Duration // the bound of the bucket that holds the 99th percentile
	WriteTime  time.Duration // spent in writes (batches)
}

// Stats returns a snapshot.
func (bf *File) Stats() Stats {
	c := &bf.st
	s := Stats{Size: bf.Size(), Reads: c.reads.Load(), PagesRead: c.pagesRead.Load(), BytesRead: c.bytesRead.Load(),
		Writes: c.writes.Load(), PagesWritten: c.pagesWritten.Load(), BytesWritten: c.bytesWritten.Load(),
		ReadErrors: c.readErrors.Load(), WriteErrors: c.writeErrors.Load(), Checkpoints: c.checkpoints.Load(), Dropped: c.dropped.Load(),
		WriteTime: time.Duration(c.writeNanos.Load()), ReadTime: time.Duration(c.readNanos.Load()), ReadBounds: ReadBounds, ReadHist: make([]uint64, readBuckets)}
	// The histogram's own total, not Reads: a read recorded between the two
	// loads would otherwise make the buckets disagree with their count.
	var n uint64
	for i := range c.lat {
		s.ReadHist[i] = c.lat[i].Load()
		n += s.ReadHist[i]
	}
	if n > 0 {
		s.ReadMean = s.ReadTime / time.Duration(n)
		var seen uint64
		for i, k := range s.ReadHist {
			if seen += k; seen*100 >= n*99 {
				// Past every bound: the last bound is the most it can say.
				s.ReadP99 = ReadBounds[min(i, len(ReadBounds)-1)]
				break
			}
		}
	}
	bf.mu.Lock()
	s.FreeBytes, s.Pages, s.Bytes = bf.a.free*BlockSize, bf.a.objs, bf.a.bytes
	bf.mu.Unlock()
	return s
}
