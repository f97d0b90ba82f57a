package daemon

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/s4d-project/s4d/backends"
	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/pagecache"
	"github.com/s4d-project/s4d/region"
)

// Regions (#19): a client's memory whose cold pages the daemon keeps
// compressed, served through a userfaultfd (package region). This file is
// the glue: the operations, the registry, and the region.Store that puts
// a region's pages through the dispatcher into the owner's pool.

const (
	maxRegionBytes       = 64 << 30 // per region: its bookkeeping takes 3 bytes a page
	maxRegionsOfUser     = 16
	maxRegionBytesOfUser = 256 << 30 // bounds one user's bookkeeping to 192 MiB
)

// regionSet is a daemon's regions.
type regionSet struct {
	mu       sync.Mutex
	next     uint64
	regs     map[uint64]*daemonRegion
	reserved map[uint32]usage // registrations under way, counted against the limits
}

type usage struct {
	n     int
	bytes uint64
}

type daemonRegion struct {
	id   uint64
	uid  uint32
	pid  int32
	size uint64
	r    *region.Region
}

// reserve counts a region of size bytes against uid's limits, or says
// which limit refuses it; release undoes it once the region is in the set
// (or failed).
func (s *regionSet) reserve(uid uint32, size uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.reserved[uid]
	for _, dr := range s.regs {
		if dr.uid == uid {
			u.n++
			u.bytes += dr.size
		}
	}
	if u.n >= maxRegionsOfUser {
		return 0, errorf(ipc.CodeLimit, "user %d has %d regions; the limit is %d", uid, u.n, maxRegionsOfUser)
	}
	if u.bytes+size > maxRegionBytesOfUser {
		return 0, errorf(ipc.CodeLimit, "user %d has %d bytes in regions; the limit is %d", uid, u.bytes, uint64(maxRegionBytesOfUser))
	}
	if s.reserved == nil {
		s.reserved = map[uint32]usage{}
	}
	r := s.reserved[uid]
	s.reserved[uid] = usage{r.n + 1, r.bytes + size}
	s.next++
	return s.next, nil
}

func (s *regionSet) release(uid uint32, size uint64, dr *daemonRegion) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reserved[uid]
	if r.n <= 1 {
		delete(s.reserved, uid)
	} else {
		s.reserved[uid] = usage{r.n - 1, r.bytes - size}
	}
	if dr != nil {
		s.regs[dr.id] = dr
	}
}

func (d *Daemon) regions() *regionSet {
	s := &d.regs
	s.mu.Lock()
	if s.regs == nil {
		s.regs = map[uint64]*daemonRegion{}
	}
	s.mu.Unlock()
	return s
}

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
		dr, err := c.d.regions().lookup(c.uid, id)
		if err != nil {
			return nil, err
		}
		dr.r.SetBudget(leUint64(rest))
		return c.reply(nil), nil
	case ipc.OpUnregister:
		id, rest, err := ipc.DecodeRegionID(body, 1)
		if err != nil {
			return nil, &ipc.Error{Code: ipc.CodeMalformed, Msg: err.Error()}
		}
		dr, err := c.d.regions().take(c.uid, id)
		if err != nil {
			return nil, err
		}
		if rest[0]&ipc.UnregisterRestore == 0 {
			dr.r.Close()
		} else if err := dr.r.Release(ipc.RegionReleased(id)); err != nil {
			return nil, &ipc.Error{Code: ipc.CodeFailed, Msg: err.Error()}
		}
		return c.reply(nil), nil
	case ipc.OpRegions:
		if len(body) != 0 {
			return nil, errorf(ipc.CodeMalformed, "REGIONS takes no body")
		}
		return c.jsonBody(c.d.regionStats(c.uid))
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
	if req.Length > maxRegionBytes {
		return nil, errorf(ipc.CodeTooLarge, "a region of %d bytes; the limit is %d", req.Length, uint64(maxRegionBytes))
	}
	if err := c.d.store.CheckPool(c.uid, regionPool(c.uid)); err != nil {
		return nil, storeErr(err, regionPool(c.uid))
	}
	set := c.d.regions()
	id, err := set.reserve(c.uid, req.Length)
	if err != nil {
		return nil, err
	}
	// The connection closes the descriptors it received once answered;
	// the region keeps copies, and one of the connection's socket.
	var own [3]int
	for i, fd := range []int{fds[0], fds[1], c.sock.Fd()} {
		if own[i], err = unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0); err != nil {
			closeAll(own[:i])
			set.release(c.uid, req.Length, nil)
			return nil, errorf(ipc.CodeInternal, "dup: %v", err)
		}
	}
	st := &regionStore{d: c.d, uid: c.uid, pool: regionPool(c.uid), base: id << 32}
	spec := region.Spec{Memfd: own[0], Uffd: own[1], Lifeline: own[2], Addr: req.Addr, Length: req.Length,
		Budget: req.Budget, PID: c.pid}
	r, err := region.New(spec, st, c.d.log, func(r *region.Region) { set.lost(id) })
	if err != nil {
		set.release(c.uid, req.Length, nil)
		return nil, &ipc.Error{Code: ipc.CodeMalformed, Msg: err.Error()}
	}
	set.release(c.uid, req.Length, &daemonRegion{id: id, uid: c.uid, pid: c.pid, size: req.Length, r: r})
	if r.Err() != nil {
		set.lost(id) // it stopped before it was in the set: onLost missed it
	}
	c.d.log.Debug("region registered", "id", id, "uid", c.uid, "pid", c.pid, "bytes", req.Length, "budget", req.Budget)
	return c.reply(ipc.EncodeRegionID(id)), nil
}

// lookup finds a region uid may use (root may use all).
func (s *regionSet) lookup(uid uint32, id uint64) (*daemonRegion, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dr := s.regs[id]
	if dr == nil {
		return nil, errorf(ipc.CodeNotFound, "no region %d", id)
	}
	if uid != 0 && dr.uid != uid {
		return nil, errorf(ipc.CodePermission, "region %d belongs to another user", id)
	}
	return dr, nil
}

// take is lookup that also removes the region from the set.
func (s *regionSet) take(uid uint32, id uint64) (*daemonRegion, error) {
	dr, err := s.lookup(uid, id)
	if err == nil {
		s.mu.Lock()
		delete(s.regs, id)
		s.mu.Unlock()
	}
	return dr, err
}

// lost frees a region that stopped serving: its client went away, or it
// failed, and then the client learns it by the lifeline's end.
func (s *regionSet) lost(id uint64) {
	s.mu.Lock()
	dr := s.regs[id]
	delete(s.regs, id)
	s.mu.Unlock()
	if dr != nil {
		dr.r.Close()
	}
}

// releaseRegions hands every region back whole before the daemon stops:
// their evicted pages are placed back and the clients told on their
// lifelines, so that a restart of the daemon costs them memory, not their
// lives. A region that cannot be restored (no memory for its pages, say)
// ends as if the daemon had died: its client stops.
func (d *Daemon) releaseRegions() {
	set := d.regions()
	set.mu.Lock()
	list := set.regs
	set.regs = map[uint64]*daemonRegion{}
	set.mu.Unlock()
	for id, dr := range list {
		if err := dr.r.Release(ipc.RegionReleased(id)); err != nil {
			d.log.Warn("region not handed back whole", "id", id, "pid", dr.pid, "err", err)
		}
	}
}

// regionStats lists the regions uid may see (all for root).
func (d *Daemon) regionStats(uid uint32) []ipc.RegionStats {
	set := d.regions()
	set.mu.Lock()
	list := make([]*daemonRegion, 0, len(set.regs))
	for _, dr := range set.regs {
		if uid == 0 || dr.uid == uid {
			list = append(list, dr)
		}
	}
	set.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].id < list[j].id })
	out := []ipc.RegionStats{}
	for _, dr := range list {
		s := dr.r.Stats()
		rs := ipc.RegionStats{ID: dr.id, UID: dr.uid, PID: dr.pid, Addr: s.Addr, Size: s.Size, Budget: s.Budget,
			Resident: s.Resident, Evicted: s.Evicted, Stored: s.Stored, Faults: s.Faults, WPFaults: s.WPFaults,
			ZeroFills: s.ZeroFills, Evictions: s.Evictions, Cancelled: s.Cancelled, Refused: s.Refused, Throttled: s.Throttled,
			FaultP50: float64(s.FaultP50.Nanoseconds()) / 1e3, FaultP99: float64(s.FaultP99.Nanoseconds()) / 1e3, Error: s.Err}
		if s.Stored > 0 {
			rs.Ratio = float64(s.Evicted) / float64(s.Stored)
		}
		out = append(out, rs)
	}
	return out
}

// regionStore puts a region's pages through the dispatcher into the
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
	batch := &backends.Batch{PageSize: d.cfg.PageSize, Pages: pages}
	out := d.bufs.GetOut()
	defer d.bufs.PutOut(out)
	_, err := d.disp.Compress(d.ctx, batch, out, func(backend string, lo int, part *backends.Compressed) error {
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
	_, err := d.store.View(s.uid, s.pool, full, nil, res, func(stored []backends.Stored) error {
		for _, r := range res {
			if r != pagecache.OK {
				if r == pagecache.Corrupt {
					d.corrupt.Add(1)
				}
				return fmt.Errorf("%w: %v", errRegionPage, r)
			}
		}
		dd := backends.Decompression{PageSize: d.cfg.PageSize, Src: stored, Dst: dst[:len(stored)*d.cfg.PageSize]}
		if derr = d.disp.Decompress(d.ctx, &dd); derr != nil {
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
