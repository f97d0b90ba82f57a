package daemon

import (
	"errors"
	"fmt"

	"github.com/s4d-project/s4d/pagecache"
	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/swapdev"
)

// A swap device's pages between two daemons: a stop with persist puts
// them in a root pool of the daemon's store, which the backing file
// keeps, and the next start takes them back out (package swapdev). This
// is that store as swapdev asks for it (swapdev.Store).

// swapStore is the daemon's store as swap devices keep pages in it.
type swapStore struct{ d *Daemon }

var _ swapdev.Store = swapStore{}

func (s swapStore) Pages(pool string) swapdev.Pages { return newPoolPages(s.d, pool) }

func (s swapStore) Drop(pool string, n uint64) { s.d.dropBlocks(pool, n) }

// poolPages reads and writes pool's pages by block number; one per
// goroutine (out is its compression buffer).
type poolPages struct {
	d    *Daemon
	pool string
	out  pagefmt.Compressed
}

func newPoolPages(d *Daemon, pool string) *poolPages { return &poolPages{d: d, pool: pool} }

// Put stores pages under keys, through the router like any client's.
func (p *poolPages) Put(keys []uint64, pages []byte) error {
	d := p.d
	res := make([]pagecache.Result, len(keys))
	batch := &pagefmt.Batch{PageSize: d.cfg.PageSize, Pages: pages}
	_, err := d.router.Compress(d.ctx, batch, &p.out, func(backend string, lo int, part *pagefmt.Compressed) error {
		b := batch.Part(lo, len(part.Class))
		return d.store.Put(0, p.pool, keys[lo:lo+len(part.Class)], &b, part, d.store.BackendID(backend), res[lo:lo+len(part.Class)])
	})
	if err != nil {
		return err
	}
	for _, r := range res {
		if r != pagecache.OK {
			return fmt.Errorf("swap pages not stored: %v", r)
		}
	}
	return nil
}

// Get reads keys into dst; missing[i]: never stored (dst zeros), failed[i]:
// stored but not readable. A pool never made has every key missing.
func (p *poolPages) Get(keys []uint64, dst []byte, missing, failed []bool) error {
	d := p.d
	res := make([]pagecache.Result, len(keys))
	_, err := d.store.View(0, p.pool, keys, nil, res, func(stored []pagefmt.Stored) error {
		for i, r := range res {
			switch r {
			case pagecache.OK:
				continue
			case pagecache.NotFound:
				missing[i] = true
			case pagecache.Corrupt:
				d.corrupt.Add(1)
				failed[i] = true
			default:
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
		for i := range keys {
			missing[i] = true
		}
		return nil
	}
	return err
}

// dropBlocks deletes pool's pages of keys 0 to n-1.
func (d *Daemon) dropBlocks(pool string, n uint64) {
	keys := make([]uint64, 0, 16384)
	res := make([]pagecache.Result, cap(keys))
	for k := uint64(0); k < n; {
		keys = keys[:0]
		for ; k < n && len(keys) < cap(keys); k++ {
			keys = append(keys, k)
		}
		if err := d.store.Del(0, pool, keys, res[:len(keys)]); err != nil {
			break // no pool: nothing was ever written
		}
	}
}
