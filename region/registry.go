package region

import (
	"fmt"
	"log/slog"
	"sort"
	"sync"

	"github.com/s4d-project/s4d/ipc"
)

// Limits on what one user may register: a region's bookkeeping takes 3
// bytes a page, so these bound one user's to 192 MiB.
const (
	MaxBytes       = 64 << 30 // one region
	MaxOfUser      = 16       // regions of one user
	MaxBytesOfUser = 256 << 30
)

// Registry is a daemon's regions by id, and each user's share of the limits.
type Registry struct {
	mu       sync.Mutex
	next     uint64
	regs     map[uint64]*Entry
	reserved map[uint32]usage // registrations under way, counted against the limits
	leaving  []*Region        // out of regs, maybe still closing (totals.go)
	gone     counts           // the counters of regions done closing
}

type usage struct {
	n     int
	bytes uint64
}

// Entry is one registered region and who registered it.
type Entry struct {
	ID   uint64
	UID  uint32
	PID  int32
	Size uint64
	R    *Region
}

// Reserve counts a region of size bytes against uid's limits and gives it
// an id, or says which limit refuses it. Added (or Unreserve) must follow.
func (s *Registry) Reserve(uid uint32, size uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.reserved[uid]
	for _, e := range s.regs {
		if e.UID == uid {
			u.n++
			u.bytes += e.Size
		}
	}
	if u.n >= MaxOfUser {
		return 0, &ipc.Error{Code: ipc.CodeLimit, Msg: fmt.Sprintf("user %d has %d regions; the limit is %d", uid, u.n, MaxOfUser)}
	}
	if u.bytes+size > MaxBytesOfUser {
		return 0, &ipc.Error{Code: ipc.CodeLimit, Msg: fmt.Sprintf("user %d has %d bytes in regions; the limit is %d", uid, u.bytes, uint64(MaxBytesOfUser))}
	}
	if s.reserved == nil {
		s.reserved = map[uint32]usage{}
	}
	r := s.reserved[uid]
	s.reserved[uid] = usage{r.n + 1, r.bytes + size}
	s.next++
	return s.next, nil
}

// Unreserve undoes a Reserve whose registration failed.
func (s *Registry) Unreserve(uid uint32, size uint64) { s.settle(uid, size, nil) }

// Added replaces a reservation by the region it became.
func (s *Registry) Added(e *Entry) { s.settle(e.UID, e.Size, e) }

func (s *Registry) settle(uid uint32, size uint64, e *Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reserved[uid]
	if r.n <= 1 {
		delete(s.reserved, uid)
	} else {
		s.reserved[uid] = usage{r.n - 1, r.bytes - size}
	}
	s.foldLocked()
	if e != nil {
		if s.regs == nil {
			s.regs = map[uint64]*Entry{}
		}
		s.regs[e.ID] = e
	}
}

// Lookup finds a region uid may use (root may use all).
func (s *Registry) Lookup(uid uint32, id uint64) (*Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.regs[id]
	if e == nil {
		return nil, &ipc.Error{Code: ipc.CodeNotFound, Msg: fmt.Sprintf("no region %d", id)}
	}
	if uid != 0 && e.UID != uid {
		return nil, &ipc.Error{Code: ipc.CodePermission, Msg: fmt.Sprintf("region %d belongs to another user", id)}
	}
	return e, nil
}

// Take is Lookup that also removes the region from the registry.
func (s *Registry) Take(uid uint32, id uint64) (*Entry, error) {
	e, err := s.Lookup(uid, id)
	if err == nil {
		s.mu.Lock()
		s.foldLocked()
		if s.regs[id] == e {
			s.leave(e)
		}
		s.mu.Unlock()
	}
	return e, err
}

// Lost frees a region that stopped serving: its client went away, or it
// failed, and then the client learns it by the lifeline's end.
func (s *Registry) Lost(id uint64) {
	s.mu.Lock()
	e := s.regs[id]
	if e != nil {
		s.leave(e)
	}
	s.mu.Unlock()
	if e != nil {
		e.R.Close()
		s.fold()
	}
}

// ReleaseAll hands every region back whole before the daemon stops: their
// evicted pages are placed back and the clients told on their lifelines,
// so that a restart of the daemon costs them memory, not their lives. A
// region that cannot be restored (no memory for its pages, say) ends as if
// the daemon had died: its client stops.
func (s *Registry) ReleaseAll(log *slog.Logger) {
	s.mu.Lock()
	list := s.regs
	s.regs = map[uint64]*Entry{}
	for _, e := range list {
		s.leaving = append(s.leaving, e.R) // counted until released (totals.go)
	}
	s.mu.Unlock()
	for id, e := range list {
		if err := e.R.Release(ipc.RegionReleased(id)); err != nil {
			log.Warn("region not handed back whole", "id", id, "pid", e.PID, "err", err)
		}
	}
	s.fold()
}

// Stats lists the regions uid may see (all for root), by id.
func (s *Registry) Stats(uid uint32) []ipc.RegionStats {
	s.mu.Lock()
	list := make([]*Entry, 0, len(s.regs))
	for _, e := range s.regs {
		if uid == 0 || e.UID == uid {
			list = append(list, e)
		}
	}
	s.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
	out := []ipc.RegionStats{}
	for _, e := range list {
		st := e.R.Stats()
		rs := ipc.RegionStats{ID: e.ID, UID: e.UID, PID: e.PID, Addr: st.Addr, Size: st.Size, Budget: st.Budget,
			Resident: st.Resident, Evicted: st.Evicted, Stored: st.Stored, Faults: st.Faults, WPFaults: st.WPFaults,
			ZeroFills: st.ZeroFills, Evictions: st.Evictions, Cancelled: st.Cancelled, Refused: st.Refused, Throttled: st.Throttled,
			FaultP50: float64(st.FaultP50.Nanoseconds()) / 1e3, FaultP99: float64(st.FaultP99.Nanoseconds()) / 1e3, Error: st.Err}
		if st.Stored > 0 {
			rs.Ratio = float64(st.Evicted) / float64(st.Stored)
		}
		out = append(out, rs)
	}
	return out
}
