package cold

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/s4d-project/s4d/backing"
	"github.com/s4d-project/s4d/pagecache"
	"github.com/s4d-project/s4d/remote"
)

// The remote tier (a Valkey cluster, remote.Level) as the level below the
// backing file: when the file is full, its coldest pages are spilled to
// the cluster, packed, and the file's space goes to newer ones. A page
// there keeps its entry in the store, with a place of the level's
// (remote.RemoteLoc set) instead of the file's offset; the level's table
// of places goes in the file's checkpoints as a pool no client can name.
// A spill that fails (the cluster down, a write no replica took) leaves
// every page where it was; for a while after, none is tried, so PUTs are
// refused at once rather than waiting on a cluster that is down.

// remoteTablePool names the level's table in the file's index.
const remoteTablePool = "\x00remote-level"

// downPause is how long after a failed spill no new one is tried.
const downPause = 5 * time.Second

type remoteLevel struct {
	l *remote.Level
	t *remote.Tier

	spills, spilled, failures atomic.Uint64
	readFailures              atomic.Uint64
	pausedUntil               atomic.Int64 // unix nanoseconds
	lastErr                   atomic.Pointer[string]
}

// Option adds to what Open sets up.
type Option func(*Tier)

// WithRemote makes the remote tier t the level below the backing file.
func WithRemote(t *remote.Tier) Option {
	return func(tr *Tier) { tr.remote = &remoteLevel{l: remote.NewLevel(t, "cold"), t: t} }
}

func isRemote(loc pagecache.Loc) bool { return uint32(loc)&remote.RemoteLoc != 0 }

// ctx bounds one call to the cluster: its own retries ride out a failover.
func (r *remoteLevel) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

func (r *remoteLevel) failed(err error) {
	r.failures.Add(1)
	r.pausedUntil.Store(time.Now().Add(downPause).UnixNano())
	msg := err.Error()
	r.lastErr.Store(&msg)
}

// read fills the remote reads of rs, one batch.
func (r *remoteLevel) read(rs []pagecache.TierRead, idx []int) {
	locs := make([]uint32, len(idx))
	for j, i := range idx {
		locs[j] = uint32(rs[i].Loc)
	}
	ctx, cancel := r.ctx()
	defer cancel()
	data, errs := r.l.Read(ctx, locs)
	for j, i := range idx {
		rs[i].Data, rs[i].Err = data[j], errs[j]
		if errs[j] != nil {
			r.readFailures.Add(1)
		} else if len(data[j]) != rs[i].Len {
			rs[i].Data, rs[i].Err = nil, fmt.Errorf("%w: object of %d bytes, want %d", remote.ErrCorrupt, len(data[j]), rs[i].Len)
			r.readFailures.Add(1)
		}
	}
}

// spill moves pages from the file to the cluster until about want bytes
// of the file are free again. The caller holds c.mu.
func (c *fileLevel) spill(want int) error {
	r := c.remote
	if until := r.pausedUntil.Load(); time.Now().UnixNano() < until {
		return fmt.Errorf("remote tier: paused after a failure (%s)", *r.lastErr.Load())
	}
	r.spills.Add(1)
	vs := c.store.Pick(func(p pagecache.PageRef) bool { return p.OnFile() && !isRemote(p.Loc()) }, max(want, roundMin))
	if len(vs) == 0 {
		return errors.New("nothing on the backing file to spill to the remote tier")
	}
	ok, objs := c.readGood(vs)
	if len(ok) == 0 {
		return errors.New("no page on the backing file could be read to spill")
	}
	ctx, cancel := r.ctx()
	defer cancel()
	locs, err := r.l.Store(ctx, objs)
	if err != nil {
		err = fmt.Errorf("remote tier: %w", err)
		r.failed(err)
		return err
	}
	plocs := make([]pagecache.Loc, len(locs))
	for i, l := range locs {
		plocs[i] = pagecache.Loc(l)
	}
	// Relocate frees each moved page's file space (Forget); a page that
	// changed meanwhile keeps its new state and its copy goes.
	moved := 0
	for i, done := range c.store.Relocate(ok, plocs) {
		if done {
			moved++
		} else {
			r.l.Forget(locs[i])
		}
	}
	r.spilled.Add(uint64(moved))
	r.l.Flush(ctx)
	return nil
}

// fileReserve is the share of the file kept free, with a remote level,
// by spilling before a writeback: checkpoints need room for the index,
// in one run of blocks, and a full file leaves them none.
// The spilled pages' space comes back only after the next checkpoint
// (persist holds frees until then), which needs its room first: so
// spills begin while half the file is still free.
const fileReserve = 2 // a half

// keepFileRoom spills the file's pages to the cluster while less than
// 1/fileReserve of it is free. The caller holds c.mu. With persist, the
// spilled pages' space is free only once a checkpoint no longer names it.
func (c *fileLevel) keepFileRoom() error {
	if c.remote == nil {
		return nil
	}
	for try := 0; try < 4; try++ {
		st := c.f.Stats()
		if st.FreeBytes >= st.Size/fileReserve {
			return nil
		}
		if err := c.spill(int(st.Size/fileReserve - st.FreeBytes)); err != nil {
			return err
		}
		if c.persist {
			if err := c.checkpointLocked(); err != nil {
				// Free space in pieces: packed together, then again.
				c.compactFile()
				if err := c.checkpointLocked(); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// tableRecord is the level's table as a pool record of the file's index:
// its bytes in words, 8 to a word, under keys 0, 1, ...; the first word
// is the length.
func (r *remoteLevel) tableRecord() backing.Pool {
	b := r.l.Marshal()
	words := []uint64{uint64(len(b))}
	for i := 0; i < len(b); i += 8 {
		var w [8]byte
		copy(w[:], b[i:])
		words = append(words, uint64(w[0])|uint64(w[1])<<8|uint64(w[2])<<16|uint64(w[3])<<24|
			uint64(w[4])<<32|uint64(w[5])<<40|uint64(w[6])<<48|uint64(w[7])<<56)
	}
	keys := make([]uint64, len(words))
	for i := range keys {
		keys[i] = uint64(i)
	}
	return backing.Pool{Name: remoteTablePool, Keys: keys, Words: words}
}

// restoreTable takes the level's table out of idx and loads it.
func (r *remoteLevel) restoreTable(idx *backing.Index) error {
	for i, p := range idx.Pools {
		if p.Name != remoteTablePool {
			continue
		}
		idx.Pools = append(idx.Pools[:i:i], idx.Pools[i+1:]...)
		if len(p.Words) == 0 || p.Words[0] > uint64(8*(len(p.Words)-1)) {
			return errors.New("remote tier: the table in the backing file's index is damaged")
		}
		b := make([]byte, 0, 8*(len(p.Words)-1))
		for _, w := range p.Words[1:] {
			for k := 0; k < 8; k++ {
				b = append(b, byte(w>>(8*k)))
			}
		}
		return r.l.Restore(b[:p.Words[0]])
	}
	return nil
}

// RemoteStats describes the level below the file.
type RemoteStats struct {
	Objects, Blocks int
	Spills          uint64 // rounds that moved pages from the file
	Spilled         uint64 // pages moved
	Failures        uint64 // rounds that failed (their pages stayed on the file)
	ReadFailures    uint64
	Paused          bool // a recent failure stops new spills for a while
	LastError       string
}

// RemoteStats is nil-ok: false without a remote level.
func (t *Tier) RemoteStats() (RemoteStats, bool) {
	if t.file == nil || t.file.remote == nil {
		return RemoteStats{}, false
	}
	r := t.file.remote
	s := RemoteStats{Objects: r.l.Objects(), Blocks: r.l.Blocks(), Spills: r.spills.Load(), Spilled: r.spilled.Load(),
		Failures: r.failures.Load(), ReadFailures: r.readFailures.Load(), Paused: time.Now().UnixNano() < r.pausedUntil.Load()}
	if e := r.lastErr.Load(); e != nil {
		s.LastError = *e
	}
	return s, true
}

// SweepRemote deletes the cluster's blocks of this host that the level's
// table does not name (a crash after a spill, before its checkpoint).
func (t *Tier) SweepRemote(ctx context.Context) (int, error) {
	if t.file == nil || t.file.remote == nil {
		return 0, nil
	}
	return t.file.remote.l.Sweep(ctx)
}
