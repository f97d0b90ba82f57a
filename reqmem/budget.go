package reqmem

import (
	"sync"
	"time"
)

// Budget bounds the memory that requests and replies in flight may take:
// large request bodies, compression outputs and the snapshots a streamed
// GET decodes from. Each user may hold at most perUser of the total, so
// one user's flood leaves room for the others. A reservation is taken
// whole before the memory is used and given back when the request is
// answered; it may wait for others to finish, until a deadline.
type Budget struct {
	total, perUser int64

	mu    sync.Mutex
	used  int64
	users map[uint32]int64
	freed chan struct{} // closed and replaced whenever memory is given back
	peak  int64
}

// NewBudget allows total bytes in all and perUser to one user.
func NewBudget(total, perUser int64) *Budget {
	return &Budget{total: total, perUser: min(perUser, total), users: map[uint32]int64{}, freed: make(chan struct{})}
}

// BudgetError says why a reservation was refused.
type BudgetError struct {
	Never bool // larger than the user's share: waiting cannot help
}

func (e *BudgetError) Error() string {
	if e.Never {
		return "request needs more memory than one user's share of the daemon's request budget"
	}
	return "the daemon's request memory budget is in use; try again"
}

// Reserve takes n bytes for uid, waiting until deadline (or stop closes)
// for room.
func (b *Budget) Reserve(uid uint32, n int64, deadline time.Time, stop <-chan struct{}) error {
	if n <= 0 {
		return nil
	}
	if n > b.perUser {
		return &BudgetError{Never: true}
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		b.mu.Lock()
		if b.used+n <= b.total && b.users[uid]+n <= b.perUser {
			b.used += n
			b.users[uid] += n
			b.peak = max(b.peak, b.used)
			b.mu.Unlock()
			return nil
		}
		freed := b.freed
		b.mu.Unlock()
		left := time.Until(deadline)
		if left <= 0 {
			return &BudgetError{}
		}
		if timer == nil {
			timer = time.NewTimer(left)
		}
		select {
		case <-freed:
		case <-timer.C:
			return &BudgetError{}
		case <-stop:
			return &BudgetError{}
		}
	}
}

// Release gives back n bytes of uid's.
func (b *Budget) Release(uid uint32, n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	if b.users[uid] -= n; b.users[uid] <= 0 {
		delete(b.users, uid)
	}
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}

// Total is the budget's size.
func (b *Budget) Total() int64 { return b.total }

// InUse returns the bytes reserved now and the most ever reserved at once.
func (b *Budget) InUse() (used, peak int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak
}
