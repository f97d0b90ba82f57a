package ublk

import (
	"errors"
	"math/bits"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Store keeps a device's blocks, one page each, by block number. It is
// all the server needs of whoever keeps the pages (the daemon puts them
// in a pool), in the manner of go-nbd's backend.
type Store interface {
	// Put stores len(keys) pages, pages holding them one after another.
	Put(keys []uint64, pages []byte) error
	// Get fills dst with the pages of keys. For a key never stored (or
	// deleted) it sets missing[i] and leaves that page of dst alone: the
	// server reads it as zeros. For a page it cannot serve (lost,
	// corrupt) it sets failed[i]: only the requests holding such a page
	// fail (EIO), the batch's others are served. An error fails them all.
	Get(keys []uint64, dst []byte, missing, failed []bool) error
	// Delete forgets the pages of keys; unknown keys are no error.
	Delete(keys []uint64) error
}

// Request is one I/O the kernel handed the server.
type Request struct {
	Tag    uint16
	Op     uint8
	Flags  uint32
	Sector uint64 // in 512-byte sectors
	Count  uint32 // sectors
	Buf    []byte // the tag's buffer; a WRITE's data is in it, a READ fills it
}

// ErrMisaligned refuses an I/O that is not a whole number of blocks.
var ErrMisaligned = errors.New("I/O not aligned to the block size")

// deleteChunk bounds the keys of one Delete: a discard of a whole device
// (swapon does one) must not need memory in proportion to its size.
const deleteChunk = 4096

// gatherer serves the requests one ring wait returned as one batch: every
// WRITE's pages in one Put, every READ's in one Get, so the engine behind
// the store sees as many pages at once as the kernel had in flight. Its
// buffers are sized once, for a queue's depth of the largest I/O: the I/O
// path allocates nothing.
//
// The requests of a batch were in flight together, and the block layer
// promises no order among requests in flight; the order here is writes,
// then discards, then reads.
type gatherer struct {
	st        Store
	shift     uint // log2 of the block size
	blockSize int
	stats     *Stats

	keys    []uint64
	pages   []byte
	missing []bool
	failed  []bool
	idx     []int // request of each page gathered
}

func newGatherer(st Store, blockSize, depth, maxIO int, stats *Stats) *gatherer {
	n := depth * (maxIO / blockSize)
	return &gatherer{st: st, shift: uint(bits.TrailingZeros(uint(blockSize))), blockSize: blockSize, stats: stats,
		keys: make([]uint64, 0, max(n, deleteChunk)), pages: touched(n * blockSize), missing: make([]bool, n),
		failed: make([]bool, n), idx: make([]int, 0, n)}
}

// touched is a buffer whose pages are present now (see Touch).
func touched(n int) []byte {
	b := make([]byte, n)
	Touch(b)
	return b
}

// blocks returns the first block and the count of a request, or an error.
func (g *gatherer) blocks(r *Request) (uint64, int, error) {
	per := uint64(g.blockSize >> sectorShift)
	if r.Sector%per != 0 || uint64(r.Count)%per != 0 {
		return 0, 0, ErrMisaligned
	}
	n := int(uint64(r.Count) / per)
	if r.Op == OpRead || r.Op == OpWrite {
		if n*g.blockSize > len(r.Buf) {
			return 0, 0, ErrMisaligned
		}
	}
	return r.Sector / per, n, nil
}

// serve runs reqs and sets res[i] to the bytes done or a negative errno.
func (g *gatherer) serve(reqs []Request, res []int32) {
	for i := range res {
		res[i] = -int32(unix.EOPNOTSUPP)
	}
	g.writes(reqs, res)
	g.deletes(reqs, res)
	g.reads(reqs, res)
	for i, r := range reqs {
		if r.Op == OpFlush {
			// Pages are kept once Put returns: nothing is cached here.
			res[i] = 0
		}
	}
}

func (g *gatherer) writes(reqs []Request, res []int32) {
	keys, idx, off := g.keys[:0], g.idx[:0], 0
	for i := range reqs {
		r := &reqs[i]
		if r.Op != OpWrite {
			continue
		}
		first, n, err := g.blocks(r)
		if err != nil {
			res[i] = -int32(unix.EINVAL)
			continue
		}
		for b := 0; b < n; b++ {
			keys = append(keys, first+uint64(b))
			idx = append(idx, i)
		}
		off += copy(g.pages[off:], r.Buf[:n*g.blockSize])
	}
	if len(keys) == 0 {
		return
	}
	t0 := time.Now()
	err := g.st.Put(keys, g.pages[:off])
	g.stats.Writes.StoreNs.Add(uint64(time.Since(t0)))
	g.stats.note(&g.stats.Writes, len(keys), err)
	for _, i := range idx {
		if err != nil {
			res[i] = -int32(unix.EIO)
		} else {
			res[i] = int32(reqs[i].Count) << sectorShift
		}
	}
}

func (g *gatherer) deletes(reqs []Request, res []int32) {
	for i := range reqs {
		r := &reqs[i]
		if r.Op != OpDiscard && r.Op != OpWriteZeroes {
			continue
		}
		// A page never written reads as zeros: zeroing is forgetting.
		first, n, err := g.blocks(r)
		if err != nil {
			res[i] = -int32(unix.EINVAL)
			continue
		}
		res[i] = 0
		for done := 0; done < n; {
			k := min(n-done, cap(g.keys))
			keys := g.keys[:k]
			for j := range keys {
				keys[j] = first + uint64(done+j)
			}
			if err := g.st.Delete(keys); err != nil {
				res[i] = -int32(unix.EIO)
				break
			}
			done += k
		}
		g.stats.Discarded.Add(uint64(n))
	}
}

func (g *gatherer) reads(reqs []Request, res []int32) {
	keys, idx := g.keys[:0], g.idx[:0]
	for i := range reqs {
		r := &reqs[i]
		if r.Op != OpRead {
			continue
		}
		first, n, err := g.blocks(r)
		if err != nil {
			res[i] = -int32(unix.EINVAL)
			continue
		}
		for b := 0; b < n; b++ {
			keys = append(keys, first+uint64(b))
			idx = append(idx, i)
		}
	}
	if len(keys) == 0 {
		return
	}
	missing := g.missing[:len(keys)]
	failed := g.failed[:len(keys)]
	clear(missing)
	clear(failed)
	// A swap-in is mostly one READ per wait (the readahead's pages): then
	// the store fills that request's buffer itself, with no copy back.
	one := idx[0] == idx[len(idx)-1]
	dst := g.pages[:len(keys)*g.blockSize]
	if one {
		dst = reqs[idx[0]].Buf[:len(keys)*g.blockSize]
	}
	t0 := time.Now()
	err := g.st.Get(keys, dst, missing, failed)
	t1 := time.Now()
	g.stats.Reads.StoreNs.Add(uint64(t1.Sub(t0)))
	defer func() { g.stats.Reads.CopyNs.Add(uint64(time.Since(t1))) }()
	g.stats.note(&g.stats.Reads, len(keys), err)
	// Pages go back to their requests in the order they were gathered.
	off, p := 0, 0
	for i := range reqs {
		r := &reqs[i]
		if r.Op != OpRead || res[i] == -int32(unix.EINVAL) {
			continue
		}
		n := int(r.Count) << sectorShift / g.blockSize
		if err != nil || slices.Contains(failed[p:p+n], true) {
			res[i] = -int32(unix.EIO)
			off += n * g.blockSize
			p += n
			continue
		}
		for b := 0; b < n; b++ {
			page := r.Buf[b*g.blockSize : (b+1)*g.blockSize]
			switch {
			case missing[p]:
				clear(page)
			case !one:
				copy(page, g.pages[off:off+g.blockSize])
			}
			off += g.blockSize
			p++
		}
		res[i] = int32(r.Count) << sectorShift
	}
}

// Stats counts a device's I/O and the batches its queues gathered.
type Stats struct {
	Reads, Writes Counter
	Discarded     atomic.Uint64 // blocks discarded or zeroed
	Errors        atomic.Uint64 // store calls that failed
	Waits         atomic.Uint64 // ring waits that returned requests
	Requests      atomic.Uint64 // requests served
	// ServeNs is the queues' time from a wait's requests in hand to
	// their results committed to the kernel (store calls, copies, the
	// commit's system call), summed over Waits.
	ServeNs atomic.Uint64
	// RingFlags are the io_uring setup flags the queue rings got (0: a
	// plain ring, the kernel refused them or S4D_UBLK_PLAIN_RING=1).
	RingFlags atomic.Uint32
	// BatchPages counts store calls by pages in them: bucket i holds
	// calls of 2^i to 2^(i+1)-1 pages.
	BatchPages [16]atomic.Uint64
}

// Counter counts store calls and their pages, and the time they took:
// StoreNs in the store (index, engine, checksums), CopyNs copying pages
// back to the requests' buffers (reads). Against the swap-in latency a
// process sees, what is left is the kernel's side and io_uring's round
// trip.
type Counter struct {
	Calls, Pages    atomic.Uint64
	StoreNs, CopyNs atomic.Uint64
}

func (s *Stats) note(c *Counter, pages int, err error) {
	c.Calls.Add(1)
	c.Pages.Add(uint64(pages))
	s.BatchPages[min(bits.Len(uint(pages))-1, len(s.BatchPages)-1)].Add(1)
	if err != nil {
		s.Errors.Add(1)
	}
}
