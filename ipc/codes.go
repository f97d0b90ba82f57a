package ipc

import (
	"errors"
	"fmt"
)

// Code is a status: the result of a request, or of one page in a batch.
type Code uint16

const (
	OK               Code = 0
	CodeMalformed    Code = 1  // frame or body does not parse
	CodeVersion      Code = 2  // protocol version not supported
	CodeUnknownOp    Code = 3  // operation not known
	CodePageSize     Code = 4  // page size differs from the daemon's
	CodeEmptyBatch   Code = 5  // a batch with no keys
	CodeDuplicateKey Code = 6  // a key appears twice in one batch
	CodeNotFound     Code = 7  // no such key or pool
	CodePermission   Code = 8  // the pool belongs to another user
	CodeNoSpace      Code = 9  // the memory limit is reached
	CodeTooLarge     Code = 10 // frame or batch over the daemon's limit
	CodeBadPool      Code = 11 // pool name empty, too long or not printable
	CodeInternal     Code = 12 // a daemon fault; the request had no effect
	CodeShuttingDown Code = 13 // the daemon is stopping
	CodeFailed       Code = 14 // the page could not be compressed or decoded
	CodeCorrupt      Code = 15 // stored data failed its integrity check
	CodeLimit        Code = 16 // a configured limit (pools, connections, quota)
	CodeBusy         Code = 17 // the daemon's memory for requests in flight is taken; retry later
)

var codeNames = map[Code]string{
	OK: "ok", CodeMalformed: "malformed request", CodeVersion: "unsupported protocol version",
	CodeUnknownOp: "unknown operation", CodePageSize: "wrong page size",
	CodeEmptyBatch: "empty batch", CodeDuplicateKey: "duplicate key in batch",
	CodeNotFound: "not found", CodePermission: "permission denied", CodeNoSpace: "no space",
	CodeTooLarge: "too large", CodeBadPool: "bad pool name", CodeInternal: "internal error",
	CodeShuttingDown: "shutting down", CodeFailed: "failed", CodeCorrupt: "corrupt",
	CodeLimit: "limit reached", CodeBusy: "busy",
}

func (c Code) String() string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return fmt.Sprintf("code %d", uint16(c))
}

// Error is a failure reported by the daemon.
type Error struct {
	Code Code
	Msg  string
}

func (e *Error) Error() string {
	if e.Msg == "" || e.Msg == e.Code.String() {
		return e.Code.String()
	}
	return e.Code.String() + ": " + e.Msg
}

// Is matches any *Error with the same code, so errors.Is(err, ipc.ErrNotFound) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels for errors.Is.
var (
	ErrNotFound     = &Error{Code: CodeNotFound}
	ErrPermission   = &Error{Code: CodePermission}
	ErrNoSpace      = &Error{Code: CodeNoSpace}
	ErrPageSize     = &Error{Code: CodePageSize}
	ErrTooLarge     = &Error{Code: CodeTooLarge}
	ErrShuttingDown = &Error{Code: CodeShuttingDown}
	ErrLimit        = &Error{Code: CodeLimit}
	ErrBusy         = &Error{Code: CodeBusy}
)

// CodeOf returns the daemon's code carried by err, or CodeInternal.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if err == nil {
		return OK
	}
	return CodeInternal
}

// PageError turns per-page codes into one error naming the first failure
// and how many pages failed, or nil when all are OK.
func PageError(keys []uint64, codes []Code) error {
	bad, first := 0, -1
	for i, c := range codes {
		if c != OK {
			bad++
			if first < 0 {
				first = i
			}
		}
	}
	if bad == 0 {
		return nil
	}
	return &Error{Code: codes[first], Msg: fmt.Sprintf("%d of %d pages, first key %d", bad, len(codes), keys[first])}
}
