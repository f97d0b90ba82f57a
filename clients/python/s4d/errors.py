"""Exceptions: one class per protocol status code (ipc/PROTOCOL.md) under
S4DError, and S4DConnectionError for a daemon that cannot be reached or went
away mid-call (the next call dials again)."""

from __future__ import annotations

# Status codes, as numbered in ipc/PROTOCOL.md.
OK = 0
MALFORMED = 1
VERSION = 2
UNKNOWN_OP = 3
PAGE_SIZE = 4
EMPTY_BATCH = 5
DUPLICATE_KEY = 6
NOT_FOUND = 7
PERMISSION = 8
NO_SPACE = 9
TOO_LARGE = 10
BAD_POOL = 11
INTERNAL = 12
SHUTTING_DOWN = 13
FAILED = 14
CORRUPT = 15
LIMIT = 16
BUSY = 17

STATUS_NAMES = {
    OK: "OK", MALFORMED: "MALFORMED", VERSION: "VERSION", UNKNOWN_OP: "UNKNOWN_OP",
    PAGE_SIZE: "PAGE_SIZE", EMPTY_BATCH: "EMPTY_BATCH", DUPLICATE_KEY: "DUPLICATE_KEY",
    NOT_FOUND: "NOT_FOUND", PERMISSION: "PERMISSION", NO_SPACE: "NO_SPACE",
    TOO_LARGE: "TOO_LARGE", BAD_POOL: "BAD_POOL", INTERNAL: "INTERNAL",
    SHUTTING_DOWN: "SHUTTING_DOWN", FAILED: "FAILED", CORRUPT: "CORRUPT",
    LIMIT: "LIMIT", BUSY: "BUSY",
}


class S4DError(Exception):
    """Base of every error this package raises about the daemon.

    code is the protocol status (None for connection errors); for per-page
    failures, keys lists the keys that failed and statuses holds one status
    per key of the request, in order."""

    code: int | None = None

    def __init__(self, message: str, *, keys=None, statuses=None):
        super().__init__(message)
        self.message = message
        self.keys = list(keys) if keys is not None else []
        self.statuses = list(statuses) if statuses is not None else None


class S4DConnectionError(S4DError, ConnectionError):
    """The daemon could not be reached, or the connection broke mid-call.
    Requests in flight may or may not have taken effect; the next call
    connects again."""


class S4DTimeout(S4DConnectionError, TimeoutError):
    """The daemon did not answer within the client's timeout. The connection
    is dropped (its stream can no longer be trusted); the next call dials."""


class MalformedError(S4DError):
    code = MALFORMED


class VersionError(S4DError):
    code = VERSION


class UnknownOpError(S4DError):
    code = UNKNOWN_OP


class PageSizeError(S4DError):
    code = PAGE_SIZE


class EmptyBatchError(S4DError):
    code = EMPTY_BATCH


class DuplicateKeyError(S4DError):
    code = DUPLICATE_KEY


class NotFoundError(S4DError):
    code = NOT_FOUND


class PermissionDeniedError(S4DError):
    code = PERMISSION


class NoSpaceError(S4DError):
    code = NO_SPACE


class TooLargeError(S4DError):
    code = TOO_LARGE


class BadPoolError(S4DError):
    code = BAD_POOL


class InternalError(S4DError):
    code = INTERNAL


class ShuttingDownError(S4DError):
    code = SHUTTING_DOWN


class FailedError(S4DError):
    code = FAILED


class CorruptError(S4DError):
    code = CORRUPT


class LimitError(S4DError):
    code = LIMIT


class BusyError(S4DError):
    code = BUSY


_BY_CODE = {cls.code: cls for cls in (
    MalformedError, VersionError, UnknownOpError, PageSizeError, EmptyBatchError,
    DuplicateKeyError, NotFoundError, PermissionDeniedError, NoSpaceError,
    TooLargeError, BadPoolError, InternalError, ShuttingDownError, FailedError,
    CorruptError, LimitError, BusyError)}


def status_name(code: int) -> str:
    return STATUS_NAMES.get(code, f"status {code}")


def error_for(code: int, message: str, **kw) -> S4DError:
    """The exception for a status code; an unknown code (a newer daemon)
    still gets S4DError with the code set."""
    cls = _BY_CODE.get(code)
    if cls is None:
        err = S4DError(f"{status_name(code)}: {message}", **kw)
        err.code = code
        return err
    return cls(message, **kw)


def page_error(op: str, keys, statuses) -> S4DError | None:
    """The error for a batch whose per-page statuses are not all OK, named
    after the first failing status; None when every page is OK."""
    bad = [(k, s) for k, s in zip(keys, statuses) if s != OK]
    if not bad:
        return None
    first = bad[0][1]
    shown = ", ".join(f"{k} ({status_name(s)})" for k, s in bad[:8])
    more = f" and {len(bad) - 8} more" if len(bad) > 8 else ""
    msg = f"{op}: {len(bad)} of {len(statuses)} pages failed: keys {shown}{more}"
    return error_for(first, msg, keys=[k for k, _ in bad], statuses=statuses)
