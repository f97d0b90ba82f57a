package daemon

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/pagecache"
	"github.com/s4d-project/s4d/pagefmt"
	"github.com/s4d-project/s4d/region"
)

// Regions (#19): a client's memory whose cold pages the daemon keeps
// compressed, served through a userfaultfd (package region, which also
// keeps the registry and its limits). This file is the glue: the
// operations, and the region.Store that puts a region's pages through the
// router into the owner's pool.

// regionPool names the pool holding uid's region pages. The space in it
// keeps every client from naming it (ValidPool refuses spaces), so nobody
// can take it first or read it through GET.
func regionPool(uid uint32) string { return fmt.Sprintf("(regions of uid %d)", uid) }

// region answers the region operations.
func (c *conn) region(op ipc.Op, body []byte, fds []int) ([]byte, error) {
	if op == ipc.OpRegister {
		return c.register(body, fds)
	}
	if len(fds) > 0 {
		return nil, errorf(ipc.CodeMalformed, "%v takes no descriptors", op)
	}
	switch op {
	case ipc.OpSetBudget:
		id, rest, err := ipc.DecodeRegionID(body, 8)
		if err != nil {
			return nil, &ipc.Error{Code: ipc.CodeMalformed, Msg: err.Error()}
		}
		dr, err := c.d.regs.Lookup(c.uid, id)
		if err != nil {
			return nil, err
		}
		dr.R.SetBudget(leUint64(rest))
		return c.reply(nil), nil
	case ipc.OpUnregister:
		id, rest, err := ipc.DecodeRegionID(body, 1)
		if err != nil {
			return nil, &ipc.Error{Code: ipc.CodeMalformed, Msg: err.Error()}
		}
		dr, err := c.d.regs.Take(c.uid, id)
		if err != nil {
			return nil, err
		}
		if rest[0]&ipc.UnregisterRestore == 0 {
			dr.R.Close()
		} else if err := dr.R.Release(ipc.RegionReleased(id)); err != nil {
			return nil, &ipc.Error{Code: ipc.CodeFailed, Msg: err.Error()}
		}
		return c.reply(nil), nil
	case ipc.OpRegions:
		if len(body) != 0 {
			return nil, errorf(ipc.CodeMalformed, "REGIONS takes no body")
		}
		return c.jsonBody(c.d.regs.Stats(c.uid))
	}
	return nil, errorf(ipc.CodeUnknownOp, "operation %d is not known", uint8(op))
}

func leUint64(b []byte) uint64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// register takes over a client's memfd and userfaultfd. The connection it
// came on becomes the region's lifeline: the region ends when the client's
// end of it closes (its exit), and the client learns of the daemon's death
// by its end.
func (c *conn) register(body []byte, fds []int) ([]byte, error) {
	if len(fds) != 2 {
		return nil, errorf(ipc.CodeMalformed, "REGISTER needs two descriptors with the frame (a memfd, a userfaultfd), got %d", len(fds))
	}
	req, err := ipc.DecodeRegisterRequest(body)
	if err != nil {
		return nil, &ipc.Error{Code: ipc.CodeMalformed, Msg: err.Error()}
	}
	if c.d.cfg.PageSize != os.Getpagesize() {
		return nil, errorf(ipc.CodeInternal, "regions need the daemon's page size (%d) to be the system's (%d)", c.d.cfg.PageSize, os.Getpagesize())
	}
	if req.Length > region.MaxBytes {
		return nil, errorf(ipc.CodeTooLarge, "a region of %d bytes; the limit is %d", req.Length, uint64(region.MaxBytes))
	}
	if err := c.pages.CheckPool(c.uid, regionPool(c.uid)); err != nil {
		return nil, storeErr(err, regionPool(c.uid))
	}
	set := &c.d.regs
	id, err := set.Reserve(c.uid, req.Length)
	if err != nil {
		return nil, err
	}
	// The connection closes the descriptors it received once answered;
	// the region keeps copies, and one of the connection's socket.
	var own [3]int
	for i, fd := range []int{fds[0], fds[1], c.sock.Fd()} {
		if own[i], err = unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0); err != nil {
			ipc.CloseAll(own[:i])
			set.Unreserve(c.uid, req.Length)
			return nil, errorf(ipc.CodeInternal, "dup: %v", err)
		}
	}
	st := &regionStore{d: c.d, uid: c.uid, pool: regionPool(c.uid), base: id << 32}
	spec := region.Spec{Memfd: own[0], Uffd: own[1], Lifeline: own[2], Addr: req.Addr, Length: req.Length,
		Budget: req.Budget, PID: c.pid}
	r, err := region.New(spec, st, c.d.log, func(r *region.Region) { set.Lost(id) })
	if err != nil {
		set.Unreserve(c.uid, req.Length)
		return nil, &ipc.Error{Code: ipc.CodeMalformed, Msg: err.Error()}
	}
	set.Added(&region.Entry{ID: id, UID: c.uid, PID: c.pid, Size: req.Length, R: r})
	if r.Err() != nil {
		set.Lost(id) // it stopped before it was in the set: onLost missed it
	}
	c.d.log.Debug("region registered", "id", id, "uid", c.uid, "pid", c.pid, "bytes", req.Length, "budget", req.Budget)
	return c.reply(ipc.EncodeRegionID(id)), nil
}

// regionStore puts a region's pages through the router into the
// owner's region pool, under keys of the region's own range.
type regionStore struct {
	d    *Daemon
	uid  uint32
	pool string
	base uint64 // the region id, in the keys' top half
}

func (s *regionStore) Save(keys []uint64, pages []byte, size []int32) error {
	d := s.d
	full := make([]uint64, len(keys))
	for i, k := range keys {
		full[i] = s.base | k
		size[i] = -1
	}
	res := make([]pagecache.Result, len(keys))
	batch := &pagefmt.Batch{PageSize: d.cfg.PageSize, Pages: pages}
	out := d.bufs.GetOut()
	defer d.bufs.PutOut(out)
	_, err := d.router.Compress(d.ctx, batch, out, func(backend string, lo int, part *pagefmt.Compressed) error {
		n := len(part.Class)
		b := batch.Part(lo, n)
		if err := d.store.Put(s.uid, s.pool, full[lo:lo+n], &b, part, d.store.BackendID(backend), res[lo:lo+n]); err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if res[lo+i] == pagecache.OK {
				size[lo+i] = int32(part.Size[i])
			} else {
				size[lo+i] = -1
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, r := range res {
		if r == pagecache.NoSpace {
			d.noSpace.Add(1)
		}
	}
	return nil
}

var errRegionPage = errors.New("a region page did not come back whole")

func (s *regionStore) Load(keys []uint64, dst []byte) error {
	d := s.d
	full := make([]uint64, len(keys))
	for i, k := range keys {
		full[i] = s.base | k
	}
	res := make([]pagecache.Result, len(keys))
	var derr error
	_, err := d.store.View(s.uid, s.pool, full, nil, res, func(stored []pagefmt.Stored) error {
		for _, r := range res {
			if r != pagecache.OK {
				if r == pagecache.Corrupt {
					d.corrupt.Add(1)
				}
				return fmt.Errorf("%w: %v", errRegionPage, r)
			}
		}
		dd := pagefmt.Decompression{PageSize: d.cfg.PageSize, Src: stored, Dst: dst[:len(stored)*d.cfg.PageSize]}
		if derr = d.router.Decompress(d.ctx, &dd); derr != nil {
			return derr
		}
		for _, f := range dd.Failed {
			if f {
				return fmt.Errorf("%w: failed to decode", errRegionPage)
			}
		}
		return nil
	})
	if err != nil {
		d.failedRd.Add(uint64(len(keys)))
	}
	return err
}

func (s *regionStore) Drop(keys []uint64) {
	full := make([]uint64, len(keys))
	for i, k := range keys {
		full[i] = s.base | k
	}
	s.d.store.Del(s.uid, s.pool, full, make([]pagecache.Result, len(keys)))
}
