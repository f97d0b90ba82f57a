package cuda

import (
	"context"
	"time"

	"github.com/s4d-project/s4d/pagefmt"
)

// Trace returns and resets the worker's time split: staging copy, queueing
// GPU work, waiting for the GPU, and unpacking results.
func (b *Backend) Trace() (stage, submit, wait, finish time.Duration) {
	var t [5]time.Duration
	for i := range t {
		t[i] = time.Duration(b.trace[i].Swap(0))
	}
	return t[0], t[1], t[2], t[4]
}

// Untimed is how many pieces the breakdown could not time, and why.
func (b *Backend) Untimed() (int64, any) { return b.stages.untimed.Load(), b.stages.lastErr.Load() }

// TimeUnpack times s4d_unpack's parts on the first slot's worth of d's
// LZ4 pages: the upload, the kernel and the download, each repeated reps
// times on its own.
func (b *Backend) TimeUnpack(d *pagefmt.Decompression, reps int) (up, kernel, down time.Duration, pages int, err error) {
	c, release, err := b.use(context.Background(), d.PageSize)
	if err != nil {
		return
	}
	defer release()
	s := <-c.idle
	defer func() { c.idle <- s }()
	var idx []int
	for i, st := range d.Src {
		if st.Class == pagefmt.ClassLZ4 && len(idx) < c.pages {
			idx = append(idx, i)
		}
	}
	cnt := len(idx)
	l, ps := c.lay, d.PageSize
	offs, size := u32s(s.harr, l.offs, cnt), u32s(s.harr, l.psize, cnt)
	used := 0
	for j, i := range idx {
		data := d.Src[i].Data
		offs[j], size[j] = uint32(used), uint32(len(data))
		copy(s.hpacked[used:], data)
		used += (len(data) + 7) &^ 7
	}
	a := func(off int) uint64 { return s.darr + uint64(off) }
	timed := func(fn func() error) (time.Duration, error) {
		var el time.Duration
		e := b.onThread(func() error {
			t0 := time.Now()
			for range reps {
				if err := fn(); err != nil {
					return err
				}
			}
			if err := b.drv.Sync(s.s); err != nil {
				return err
			}
			el = time.Since(t0) / time.Duration(reps)
			return nil
		})
		return el, e
	}
	if up, err = timed(func() error {
		if err := b.drv.HtoD(s.dpacked, s.hpacked[:used], s.s); err != nil {
			return err
		}
		return b.drv.HtoD(a(l.offs), s.harr[l.offs:l.psize+4*cnt], s.s)
	}); err != nil {
		return
	}
	if kernel, err = timed(func() error {
		return b.drv.Launch(b.fUnpack, grid(cnt, unpackWarps), unpackWarps*32, s.s, uint64(cnt), a(l.offs), a(l.psize),
			s.dpacked, s.din, uint64(ps), a(l.status), 0)
	}); err != nil {
		return
	}
	down, err = timed(func() error { return b.drv.DtoH(s.hin[:cnt*ps], s.din, s.s) })
	return up, kernel, down, cnt, err
}
