package cold

import (
	"errors"
	"sort"

	"github.com/s4d-project/s4d/backing"
	"github.com/s4d-project/s4d/pagecache"
)

// Persisting the store on the backing file, and keeping the file dense.

// Checkpoint records every page on the backing file, and every zero page,
// so that a restart on the file finds them, and the keys of the pages in
// RAM, so that it reports them lost (with persist; else nothing).
func (c *fileLevel) Checkpoint() error {
	if !c.persist {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.checkpointLocked()
}

func (c *fileLevel) checkpointLocked() error {
	if !c.persist {
		return nil
	}
	// The file's frees from here on are held back until the index is
	// written: the records must still be true if a crash comes first.
	names, pools := c.store.Records(c.f.BeginCheckpoint)
	idx := &backing.Index{Backends: names}
	for _, p := range pools {
		bp := backing.Pool{Name: p.Name, UID: p.UID, Codec: uint8(p.Codec), Keys: p.Keys, Words: p.Words}
		if p.Changed {
			bp.Codec |= changedBit
		}
		idx.Pools = append(idx.Pools, bp)
	}
	if c.remote != nil {
		idx.Pools = append(idx.Pools, c.remote.tableRecord()) // remote.go
	}
	sort.Slice(idx.Pools, func(i, j int) bool { return idx.Pools[i].Name < idx.Pools[j].Name })
	if err := c.f.Checkpoint(idx); err != nil {
		c.failed(err)
		return err
	}
	return nil
}

// PersistAll writes every page still in RAM to the backing file and
// checkpoints: what a planned stop does. It returns the pages written.
func (c *fileLevel) PersistAll() (uint64, error) {
	if !c.persist {
		return 0, errors.New("no persisted backing file")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	pages, _, werr := c.writebackLocked(All, 0)
	return pages, errors.Join(werr, c.checkpointLocked())
}

// CompactFile moves the pages of sparsely used blocks of the backing file
// together, so that the blocks can be reused whole, and says how many
// pages moved.
func (c *fileLevel) CompactFile() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.compactFile()
}

func (c *fileLevel) compactFile() uint64 {
	sparse := c.f.Sparse(backing.BlockSize / 2)
	all := c.store.Pick(func(r pagecache.PageRef) bool {
		return r.OnFile() && !isRemote(r.Loc()) && sparse(c.off(r.Loc()), r.ObjSize())
	}, 1<<62)
	var moved uint64
	for len(all) > 0 {
		n, total := 0, 0
		for n < len(all) && total < roundMax {
			total += all[n].ObjSize()
			n++
		}
		vs := all[:n]
		all = all[n:]
		ok, objs := c.readGood(vs)
		sizes := make([]int, len(objs))
		for i, o := range objs {
			sizes[i] = len(o)
		}
		b := c.f.Place(sizes)
		if len(b.Offs) == 0 {
			break
		}
		for i := range b.Offs {
			copy(b.Slot(i), objs[i])
		}
		if err := c.f.Write(b); err != nil {
			c.f.Abandon(b)
			c.failed(err)
			break
		}
		locs := make([]pagecache.Loc, len(b.Offs))
		for i, off := range b.Offs {
			locs[i] = c.loc(off)
		}
		for i, done := range c.store.Relocate(ok[:len(b.Offs)], locs) {
			if done {
				moved++
			} else {
				c.f.Free(b.Offs[i], sizes[i])
			}
		}
	}
	c.moved.Add(moved)
	return moved
}
