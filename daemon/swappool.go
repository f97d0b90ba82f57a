package daemon

import (
	"errors"
	"fmt"

	"github.com/s4d-project/s4d/pagecache"
	"github.com/s4d-project/s4d/pagefmt"
)

// A swap device's pages between two daemons: a stop with persist puts
// them in a root pool of the daemon's store, which the backing file
// keeps, and the next start takes them back out (swapnativekeep.go).

// swapPool names device n's pool. The space keeps clients from naming
// it (ValidPool refuses spaces).
func swapPool(n int) string { return fmt.Sprintf("(swap %d)", n) }

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

// dropBlocks deletes pool's pages from key first to size/4096.
func (d *Daemon) dropBlocks(pool string, size, first uint64) {
	blocks := size / 4096
	keys := make([]uint64, 0, 16384)
	res := make([]pagecache.Result, cap(keys))
	for k := first; k < blocks; {
		keys = keys[:0]
		for ; k < blocks && len(keys) < cap(keys); k++ {
			keys = append(keys, k)
		}
		if err := d.store.Del(0, pool, keys, res[:len(keys)]); err != nil {
			break // no pool: nothing was ever written
		}
	}
}
