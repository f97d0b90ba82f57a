package backing

import (
	"math/bits"
	"sync/atomic"
	"time"
)

type counters struct {
	writes, pagesWritten, bytesWritten, writeNanos atomic.Uint64
	reads, pagesRead, bytesRead, readNanos         atomic.Uint64
	readErrors, writeErrors, checkpoints, dropped  atomic.Uint64
	lat                                            [24]atomic.Uint64 // reads by latency: bucket k holds [2^k, 2^(k+1)) us
}

func (c *counters) observeRead(d time.Duration) {
	c.reads.Add(1)
	c.readNanos.Add(uint64(d))
	us := uint64(d / time.Microsecond)
	c.lat[min(bits.Len64(us), len(c.lat)-1)].Add(1)
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
	ReadMean, ReadP99           time.Duration // per read I/O
	WriteTime                   time.Duration // spent in writes (batches)
}

// Stats returns a snapshot.
func (bf *File) Stats() Stats {
	c := &bf.st
	s := Stats{Size: bf.Size(), Reads: c.reads.Load(), PagesRead: c.pagesRead.Load(), BytesRead: c.bytesRead.Load(),
		Writes: c.writes.Load(), PagesWritten: c.pagesWritten.Load(), BytesWritten: c.bytesWritten.Load(),
		ReadErrors: c.readErrors.Load(), WriteErrors: c.writeErrors.Load(), Checkpoints: c.checkpoints.Load(), Dropped: c.dropped.Load(),
		WriteTime: time.Duration(c.writeNanos.Load())}
	if s.Reads > 0 {
		s.ReadMean = time.Duration(c.readNanos.Load() / s.Reads)
		// The upper edge of the bucket that holds the 99th percentile.
		var seen uint64
		for k := range c.lat {
			seen += c.lat[k].Load()
			if seen*100 >= s.Reads*99 {
				s.ReadP99 = time.Duration(uint64(1)<<k) * time.Microsecond
				break
			}
		}
	}
	bf.mu.Lock()
	s.FreeBytes, s.Pages, s.Bytes = bf.a.free*BlockSize, bf.a.objs, bf.a.bytes
	bf.mu.Unlock()
	return s
}
