package daemon

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/s4d-project/s4d/ipc"
	"github.com/s4d-project/s4d/pagecache"
	"github.com/s4d-project/s4d/reqmem"
)

// errorf is an error answered with code.
func errorf(code ipc.Code, format string, args ...any) error {
	return &ipc.Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// storeErr answers a store error; the store may wrap its sentinels.
func storeErr(err error, pool string) error {
	switch {
	case errors.Is(err, pagecache.ErrPermission):
		return errorf(ipc.CodePermission, "pool %q belongs to another user", pool)
	case errors.Is(err, pagecache.ErrNoPool):
		return errorf(ipc.CodeNotFound, "no pool %q", pool)
	case errors.Is(err, pagecache.ErrPoolLimit):
		return errorf(ipc.CodeLimit, "cannot create pool %q: this user has reached its limit of pools", pool)
	}
	return &ipc.Error{Code: ipc.CodeInternal, Msg: err.Error()}
}

// budgetErr is the answer to a refused reservation.
func budgetErr(err error) error {
	var be *reqmem.BudgetError
	if errors.As(err, &be) && be.Never {
		return &ipc.Error{Code: ipc.CodeTooLarge, Msg: err.Error()}
	}
	return &ipc.Error{Code: ipc.CodeBusy, Msg: err.Error()}
}

// errorCounts counts the requests answered with each error code.
type errorCounts [ipc.CodeBusy + 1]atomic.Uint64

func (e *errorCounts) add(c ipc.Code) {
	if int(c) < len(e) {
		e[c].Add(1)
	}
}

func (e *errorCounts) of(c ipc.Code) uint64 { return e[c].Load() }

// invalidCodes are the answers that say the request itself was wrong: it
// cannot succeed as sent. A missing key or pool (NOT_FOUND), a full budget
// (BUSY), a reached limit or quota, and the daemon's own failures are
// answers to good requests and are counted only under their own code.
var invalidCodes = []ipc.Code{ipc.CodeMalformed, ipc.CodeVersion, ipc.CodeUnknownOp, ipc.CodePageSize,
	ipc.CodeEmptyBatch, ipc.CodeDuplicateKey, ipc.CodeTooLarge, ipc.CodeBadPool, ipc.CodePermission}

// invalid is the number of invalid requests (STATS' invalid_io).
func (e *errorCounts) invalid() uint64 {
	var n uint64
	for _, c := range invalidCodes {
		n += e.of(c)
	}
	return n
}

// byName lists the codes answered at least once, by name.
func (e *errorCounts) byName() map[string]uint64 {
	out := map[string]uint64{}
	for c := range e {
		if n := e[c].Load(); n > 0 {
			out[ipc.Code(c).String()] = n
		}
	}
	return out
}

// backoff spaces out retries of a failing accept (EMFILE and the like): a
// short first wait, doubled on each failure in a row up to a second, back
// to the start after a success.
type backoff struct{ wait time.Duration }

const (
	backoffFirst = 5 * time.Millisecond
	backoffMax   = time.Second
)

func (b *backoff) next() time.Duration {
	if b.wait == 0 {
		b.wait = backoffFirst
	} else {
		b.wait = min(2*b.wait, backoffMax)
	}
	return b.wait
}

func (b *backoff) reset() { b.wait = 0 }
