package daemon

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/s4d-project/s4d/pagecache"
	"github.com/s4d-project/s4d/pagefmt"
)

// swapStore is a swap device's ublk.Store: its blocks are pages of a root
// pool, put through the router like any client's pages, so every engine,
// limit, checksum and the cold tier serve swap too.
type swapStore struct {
	d     *Daemon
	pool  string
	codec pagefmt.Codec // the pool's; 0 the daemon's
	// Compression outputs of its own, one per queue, kept for the
	// device's life: the request pool's are unmapped when idle, and a
	// swap-out must not need fresh memory to grow them again (warm).
	outs chan *pagefmt.Compressed
	// After a takeover that could not prove every page is the last
	// written (swapkeep.go): a bit per block written or discarded since.
	trustAll bool
	fresh    []atomic.Uint64
	lost     atomic.Uint64 // reads refused for it (SwapDevice.Lost)
	// writes counts Puts and Deletes begun, each under gate's read side;
	// emptying the device after swapoff takes the write side and drops
	// nothing if one came since swap was seen off (emptyAfterSwapoff).
	gate   sync.RWMutex
	writes atomic.Uint64
}

func newSwapStore(d *Daemon, pool string, queues int) *swapStore {
	s := &swapStore{d: d, pool: pool, outs: make(chan *pagefmt.Compressed, queues), trustAll: true}
	for range queues {
		s.outs <- new(pagefmt.Compressed)
	}
	return s
}

// warm runs a batch of n pages through Put and Delete, so that the
// compression outputs and the router's buffers have grown to a batch's
// size before the first swap-out needs them. Its keys lie past the
// device's last block (size bytes), in whole words of the takeover's
// bitmap: a device taken over holds pages in use from block 0 on (the
// swap header first), which warming there would delete, and marking them
// written would vouch for them after a crash.
func (s *swapStore) warm(n int, size uint64) error {
	base := (size/4096 + 63) &^ 63
	keys := make([]uint64, n)
	for i := range keys {
		keys[i] = base + uint64(i)
	}
	pages := make([]byte, n*s.d.cfg.PageSize)
	for i := range keys {
		// Compressible, not zero: the engines do their whole work.
		for j := 0; j < s.d.cfg.PageSize; j += 64 {
			pages[i*s.d.cfg.PageSize+j] = byte(i + j)
		}
	}
	// The outputs are taken in turn (a channel is first in, first out):
	// one Put per queue grows each.
	for range cap(s.outs) {
		if err := s.Put(keys, pages); err != nil {
			return err
		}
	}
	return s.Delete(keys)
}

// swapPool names device n's pool. The space keeps clients from naming
// it (ValidPool refuses spaces).
func swapPool(n int) string { return fmt.Sprintf("(swap %d)", n) }

var (
	errSwapStore = errors.New("swap pages not stored")
)

func (s *swapStore) Put(keys []uint64, pages []byte) error {
	s.gate.RLock()
	defer s.gate.RUnlock()
	s.writes.Add(1)
	d := s.d
	res := make([]pagecache.Result, len(keys))
	batch := &pagefmt.Batch{PageSize: d.cfg.PageSize, Pages: pages, Codec: s.codec}
	out := <-s.outs
	defer func() { s.outs <- out }()
	_, err := d.router.Compress(d.ctx, batch, out, func(backend string, lo int, part *pagefmt.Compressed) error {
		b := batch.Part(lo, len(part.Class))
		return d.store.Put(0, s.pool, keys[lo:lo+len(part.Class)], &b, part, d.store.BackendID(backend), res[lo:lo+len(part.Class)])
	})
	bad := 0
	for i, r := range res {
		if err != nil || r != pagecache.OK {
			// An older version of the block must not stay behind a failed
			// write: it would read back as valid, wrong data.
			d.store.Del(0, s.pool, keys[i:i+1], res[i:i+1])
			bad++
		}
	}
	if bad > 0 {
		d.noSpace.Add(uint64(bad))
		select { // the reserve ran out: refill it now (keepSpare)
		case d.swaps.refill <- struct{}{}:
		default:
		}
		if err == nil {
			err = fmt.Errorf("%w: %d of %d pages refused (memory limit)", errSwapStore, bad, len(keys))
		}
	}
	if err == nil {
		s.mark(keys)
	}
	return err
}

// Get serves what it can of keys and fails the rest page by page
// (failed[i]): a batch gathers several processes' swap-ins, and a page
// one of them lost must not fail the others'.
func (s *swapStore) Get(keys []uint64, dst []byte, missing, failed []bool) error {
	d := s.d
	res := make([]pagecache.Result, len(keys))
	_, err := d.store.View(0, s.pool, keys, nil, res, func(stored []pagefmt.Stored) error {
		for i, r := range res {
			switch {
			case !s.known(keys[i]):
				// After a crash's takeover a page the pool holds may be
				// older than the last one written (restored from the
				// backing file), and one it lacks may have been lost:
				// either fails until written again.
				s.lose(keys[i])
				failed[i] = true
			case r == pagecache.OK:
				continue
			case r == pagecache.NotFound:
				// Never written or discarded: decodes as zeros in place.
				missing[i] = true
			default:
				if r == pagecache.Corrupt {
					d.corrupt.Add(1)
				}
				failed[i] = true
			}
			stored[i] = pagefmt.Stored{Class: pagefmt.ClassZero}
		}
		dd := pagefmt.Decompression{PageSize: d.cfg.PageSize, Src: stored, Dst: dst[:len(stored)*d.cfg.PageSize]}
		if err := d.router.Decompress(d.ctx, &dd); err != nil {
			return err
		}
		for i, f := range dd.Failed {
			failed[i] = failed[i] || f
		}
		return nil
	})
	if errors.Is(err, pagecache.ErrNoPool) {
		// Nothing written yet: every block reads as zeros, but for one
		// lost with a crash.
		for i, k := range keys {
			if missing[i] = s.known(k); !missing[i] {
				s.lose(k)
				failed[i] = true
			}
		}
		err = nil
	}
	if err != nil {
		d.failedRd.Add(uint64(len(keys)))
		return err
	}
	n := 0
	for _, f := range failed {
		if f {
			n++
		}
	}
	d.failedRd.Add(uint64(n))
	return nil
}

// lose counts a read refused for a page lost with the last crash, and
// says so in the log the first time.
func (s *swapStore) lose(k uint64) {
	if s.lost.Add(1) == 1 {
		s.d.log.Warn("swap read of a page lost with the last crash: answered with an I/O error (the process gets SIGBUS)", "pool", s.pool, "block", k)
	}
}

func (s *swapStore) Delete(keys []uint64) error {
	s.gate.RLock()
	defer s.gate.RUnlock()
	s.writes.Add(1)
	err := s.d.store.Del(0, s.pool, keys, make([]pagecache.Result, len(keys)))
	if errors.Is(err, pagecache.ErrNoPool) {
		err = nil
	}
	if err == nil {
		s.mark(keys)
	}
	return err
}
