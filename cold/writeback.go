package cold

import (
	"errors"
	"fmt"

	"github.com/s4d-project/s4d/backing"
	"github.com/s4d-project/s4d/pagecache"
	"github.com/s4d-project/s4d/pagefmt"
)

// Writeback: pages leave the store's RAM for the backing file under
// pressure (a PUT that found no room, or KeepRoom ahead of the PUTs), or
// when asked (Writeback, PersistAll).

const (
	// A round moves at most this many bytes of objects, so that the
	// buffers it holds stay small; under pressure it moves at least
	// roundMin, so that each write is large.
	roundMax = 8 << 20
	roundMin = 2 << 20
)

// coldness ranks pages for writeback under pressure: larger goes first.
// Slabs go by the mean age of their pages; among equals, the sparsest
// first (most memory freed per byte written), then in slab order from a
// moving cursor (pagecache.Store.DrainColdest).
func coldness(age int) uint32 { return uint32(age) }

// Mode chooses the pages a forced writeback moves.
type Mode uint8

const (
	All  Mode = iota // every page with stored bytes
	Idle             // pages of at least the age asked for
	Huge             // pages stored raw
)

// ParseMode reads a mode's name.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "all":
		return All, nil
	case "idle":
		return Idle, nil
	case "huge":
		return Huge, nil
	}
	return 0, fmt.Errorf("writeback mode %q: want all, idle or huge", s)
}

func (m Mode) takes(r *pagecache.PageRef, minAge int) bool {
	switch m {
	case Huge:
		return r.Class == pagefmt.ClassRaw
	case Idle:
		return r.Age >= minAge
	}
	return true
}

// makeRoom writes back the pages of the coldest slabs until the arena can
// take need more bytes under its limit.
func (c *fileLevel) makeRoom(need uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for try := 0; ; try++ {
		a := c.store.Arena()
		room := uint64(0)
		if a.Limit > a.Used {
			room = a.Limit - a.Used
		}
		// Another writer made room meanwhile.
		if room >= need+a.Slab {
			return nil
		}
		// A spill that fails (the cluster down) stops nothing here: the
		// file may still have room, and a full one says so below.
		c.keepFileRoom() // remote.go
		vs, undrain := c.store.DrainColdest(max(need+a.Slab-room, roundMin), coldness, &c.cursor)
		if len(vs) == 0 {
			undrain()
			return errors.New("nothing in the arena to write back")
		}
		c.pressure.Add(1)
		_, err := c.moveOut(vs)
		undrain()
		if errors.Is(err, backing.ErrFull) && try == 0 {
			// Space held for the last checkpoint, or scattered among
			// sparse blocks, may be had back.
			if cerr := c.checkpointLocked(); cerr == nil || !c.persist {
				c.compactFile()
				continue
			}
		}
		if errors.Is(err, backing.ErrFull) && c.remote != nil && try < 8 {
			// The file is full: its coldest pages go to the cluster
			// (remote.go), then the round is tried again.
			if serr := c.spill(int(max(need+a.Slab-room, roundMin))); serr != nil {
				return errors.Join(err, serr)
			}
			if c.persist {
				// The spilled pages' file space is freed at a checkpoint.
				if cerr := c.checkpointLocked(); cerr != nil {
					return errors.Join(err, cerr)
				}
			}
			continue
		}
		return err
	}
}

// KeepRoom writes back the coldest slabs' pages, outside any PUT, until
// percent of the memory limit is free (and a slab more, as for a PUT), so
// that PUTs find room without writing back themselves. It does nothing
// without a limit, or while that much is free.
func (c *fileLevel) KeepRoom(percent int) error {
	a := c.store.Arena()
	room := a.Limit / 100 * uint64(percent)
	if a.Limit == 0 || a.Used+room+a.Slab <= a.Limit {
		return nil
	}
	c.kept.Add(1)
	return c.makeRoom(room)
}

// moveOut writes the arena objects of vs to the file and has the store
// point them there, and says how many moved.
func (c *fileLevel) moveOut(vs []pagecache.PageRef) (int, error) {
	sizes := make([]int, len(vs))
	for i := range vs {
		sizes[i] = vs[i].ObjSize()
	}
	b := c.f.Place(sizes)
	placed := vs[:len(b.Offs)]
	c.store.CopyObjects(placed, b.Slot)
	var err error
	if len(b.Offs) > 0 {
		err = c.f.Write(b)
	}
	if err != nil {
		c.f.Abandon(b)
		err = fmt.Errorf("writing pages back to %s: %w", c.f.Path(), err)
		c.failed(err)
		return 0, err
	}
	locs := make([]pagecache.Loc, len(b.Offs))
	for i, off := range b.Offs {
		locs[i] = c.loc(off)
	}
	moved := 0
	for i, ok := range c.store.Relocate(placed, locs) {
		if ok {
			moved++
		} else {
			c.f.Free(b.Offs[i], sizes[i]) // the page changed: its copy goes
		}
	}
	c.pages.Add(uint64(moved))
	if len(b.Offs) < len(vs) {
		err = fmt.Errorf("%s: %w (%d of %d pages written back)", c.f.Path(), backing.ErrFull, len(b.Offs), len(vs))
		c.failed(err)
		return moved, err
	}
	return moved, nil
}

// Writeback moves the pages mode picks (for Idle, those of minAge epochs
// or more) to the backing file, in rounds, and says how many went and
// their bytes.
func (c *fileLevel) Writeback(mode Mode, minAge int) (pages, bytes uint64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writebackLocked(mode, minAge)
}

func (c *fileLevel) writebackLocked(mode Mode, minAge int) (pages, bytes uint64, err error) {
	for {
		c.keepFileRoom() // remote.go; as in makeRoom
		vs := c.store.Pick(func(r pagecache.PageRef) bool { return r.InRAM() && mode.takes(&r, minAge) }, roundMax)
		if len(vs) == 0 {
			return pages, bytes, nil
		}
		n, err := c.moveOut(vs)
		pages += uint64(n)
		for _, v := range vs[:n] {
			bytes += uint64(v.ObjSize()) // about: which moved is not told
		}
		c.forced.Add(uint64(n))
		if err != nil || n == 0 {
			// n == 0: every page changed under us; the caller may ask again.
			return pages, bytes, err
		}
	}
}
