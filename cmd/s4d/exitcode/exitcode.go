// Package exitcode maps an error to the documented exit status of s4d, so
// scripts can tell a typo from a missing pool from a daemon that is down
// without reading messages:
//
//	0  success
//	1  any other failure (a page failed, the memory limit, a daemon fault)
//	2  usage: unknown command, flag, column or a malformed value
//	3  not found: no such pool or key
//	4  permission denied: another user's pool, or the socket's permissions
//	5  the daemon is not reachable, or the connection to it was lost
package exitcode

import (
	"errors"
	"os"
	"syscall"

	"github.com/s4d-project/s4d/client"
	"github.com/s4d-project/s4d/ipc"
)

const (
	OK          = 0
	Failure     = 1
	Usage       = 2
	NotFound    = 3
	Permission  = 4
	Unreachable = 5
)

// UsageError marks an error as the caller's mistake in how s4d was called.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// UsageErr wraps err as a usage error (nil stays nil).
func UsageErr(err error) error {
	if err == nil {
		return nil
	}
	return &UsageError{Err: err}
}

// Of returns the exit status for err.
func Of(err error) int {
	var ue *UsageError
	var de *client.DialError
	switch {
	case err == nil:
		return OK
	// A pool name the daemon refuses is the caller's to fix, like a flag.
	case errors.As(err, &ue), errors.Is(err, errBadPool):
		return Usage
	// A socket we may not open is a permission problem, not a dead daemon:
	// the fix (join group s4d) differs.
	case errors.Is(err, ipc.ErrPermission), errors.Is(err, os.ErrPermission):
		return Permission
	case errors.As(err, &de), errors.Is(err, client.ErrConnLost), errors.Is(err, ipc.ErrShuttingDown),
		errors.Is(err, syscall.ECONNREFUSED):
		return Unreachable
	case errors.Is(err, ipc.ErrNotFound):
		return NotFound
	}
	return Failure
}

var errBadPool = &ipc.Error{Code: ipc.CodeBadPool}
