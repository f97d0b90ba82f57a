package cuda

import (
	"time"
	"unsafe"

	"github.com/s4d-project/s4d/backends/cuda/cu"
	"github.com/s4d-project/s4d/pagefmt"
)

// Placing compressed pages where the store keeps them (pagefmt.Placer):
// a piece's sizes come down first with its other per-page results; the
// store reserves a slot per page in its registered slabs; s4d_place then
// writes every object, checksum first, straight into its slot across PCIe.
// That second trip is on the piece's critical path (the store publishes
// only once every byte is there), so it is made short: see Place.

// slotPlacer places the objects of the piece in a slot; the slot stays the
// piece's until the part is delivered.
type slotPlacer struct {
	b   *Backend
	c   *config
	s   *slot
	cnt int
}

// Place writes each page's object to dst[i]. Destinations in memory
// registered with the GPU get it straight from s4d_place; others (a slab
// the driver would not register) through the slot's mapped pinned buffer,
// copied on by the host.
func (p *slotPlacer) Place(dst [][]byte) error {
	t0 := time.Now()
	b, c, s, l, cnt := p.b, p.c, p.s, p.c.lay, p.cnt
	ptrs := u64s(s.harr, l.dst, cnt)
	s.bounce = s.bounce[:0]
	placed := 0
	look := b.lookup()
	for i, d := range dst[:cnt] {
		ptrs[i] = 0
		if len(d) == 0 {
			continue
		}
		placed += len(d)
		if a := look.devAddr(d); a != 0 && a%4 == 0 {
			ptrs[i] = uint64(a)
			continue
		}
		ptrs[i] = uint64(s.hpackedDev) + uint64(i*c.stride)
		s.bounce = append(s.bounce, i)
	}
	look.done()
	t1 := time.Now()
	// On the slot's urgent stream: the kernel reads its destinations from
	// the mapped pinned array where the host wrote them, so nothing goes up
	// first behind other pieces' uploads, and its blocks go before those of
	// kernels queued for later pieces.
	err := b.onThread(func() error {
		dr, a := &b.drv, func(off int) uint64 { return s.darr + uint64(off) }
		steps := []func() error{
			func() error { return dr.Record(s.times[0], s.place) },
			func() error {
				return dr.Launch(b.fPlace, grid(cnt*32, blockThreads), blockThreads, s.place, uint64(cnt), a(l.cls),
					a(l.fill), a(l.pos), a(l.psize), s.din, uint64(c.pageSize), s.dout, uint64(c.stride),
					a(l.sums), s.harrDev+uint64(l.dst))
			},
			func() error { return dr.Record(s.times[1], s.place) },
			func() error { return dr.Sync(s.place) },
		}
		for _, step := range steps {
			if err := step(); err != nil {
				dr.Sync(s.place)
				return err
			}
		}
		b.accountSpan(stDownload, s.times[0], s.times[1], placed)
		return nil
	})
	if err != nil {
		return &pagefmt.PlaceError{Err: err}
	}
	t2 := time.Now()
	for _, i := range s.bounce {
		copy(dst[i], s.hpacked[i*c.stride:])
	}
	b.stages.add(stHost, t1.Sub(t0).Seconds()+time.Since(t2).Seconds(), 0)
	return nil
}

// pinLookup finds the device addresses of host memory registered with the
// GPU, holding the read lock on the ranges until done; it remembers the
// last range hit, since a batch's slots lie mostly in one slab mapping.
type pinLookup struct {
	b    *Backend
	last int
}

func (b *Backend) lookup() pinLookup {
	b.grp.mu.RLock()
	return pinLookup{b: b, last: -1}
}

func (l *pinLookup) done() { l.b.grp.mu.RUnlock() }

// devAddr is the device address of m's first byte, or 0 when m does not
// lie whole in one mapped range (with room to the next multiple of 4, as
// s4d_fetch reads).
func (l *pinLookup) devAddr(m []byte) cu.DevPtr {
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(m)))
	hi := lo + uintptr((len(m)+3)&^3)
	in := func(i int) bool {
		r := &l.b.grp.pins[i]
		plo := uintptr(unsafe.Pointer(unsafe.SliceData(r.mem)))
		return l.b.grp.devPtr(r, l.b.ordinal) != 0 && lo >= plo && hi <= plo+uintptr(len(r.mem))
	}
	if l.last < 0 || !in(l.last) {
		l.last = -1
		for i := range l.b.grp.pins {
			if in(i) {
				l.last = i
				break
			}
		}
		if l.last < 0 {
			return 0
		}
	}
	r := &l.b.grp.pins[l.last]
	return l.b.grp.devPtr(r, l.b.ordinal) + cu.DevPtr(lo-uintptr(unsafe.Pointer(unsafe.SliceData(r.mem))))
}
