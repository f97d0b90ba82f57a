"""s4d.Client: the daemon's operations over one Unix socket connection."""

from __future__ import annotations

import functools
import json
import os
import struct
import threading
import weakref
from collections import deque

from . import _wire as w
from . import park as _park
from ._conn import Conn, _Req, default_socket
from ._keys import Keys
from .buffer import Buffer, address_of, live_buffers
from .pipeline import Pipeline
from .errors import (MalformedError, NOT_FOUND, OK, S4DConnectionError, S4DError, S4DTimeout,
                     error_for, page_error)

_SMALL = 64 << 10      # batches up to this many bytes travel through the socket
_SLOT = 8 << 20        # copied batches go through the scratch memfd in pieces of this size
_SLOTS = 4             # pieces of the scratch memfd in flight at once
_WINDOW = 4            # requests of one chunked batch in flight at once


# A child of fork must not speak on its parent's connection (their frames
# would interleave): it forgets it, and dials its own on first use.
_clients: "weakref.WeakSet[Client]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for c in list(_clients):
        c._lock = threading.RLock()  # another thread may have held it
        if c._conn is not None:
            c._conn.close()  # the child's copy of the descriptor only
            c._conn = None


os.register_at_fork(after_in_child=_after_fork_in_child)


def _locked(f):
    """Runs a method under the client's lock: a call that copies through
    the scratch memfd, or dials, must not interleave with another thread's."""
    @functools.wraps(f)
    def wrapper(self, *args, **kw):
        with self._lock:
            return f(self, *args, **kw)
    return wrapper


class Client:
    """A connection to the s4d daemon, dialled on first use and again after
    it breaks.

    socket: the daemon's socket path; None means $S4D_SOCKET, else
    /run/s4d/s4d.sock. timeout: seconds any one send or receive may wait
    before the call fails with S4DTimeout (None: wait forever). batch_pages:
    at most this many pages per request (None: as many as the daemon takes);
    a large batch goes out as several such requests, pipelined. A Client may
    be shared between threads; their calls take turns."""

    def __init__(self, socket: str | None = None, *, timeout: float | None = 30.0, name: str = "s4d-py",
                 batch_pages: int | None = None):
        if batch_pages is not None and (not isinstance(batch_pages, int) or batch_pages < 1):
            raise ValueError(f"batch_pages must be a positive number of pages, not {batch_pages!r}")
        self.socket = socket if socket is not None else default_socket()
        self.timeout = timeout
        self.name = name
        self.batch_pages = batch_pages
        self._conn: Conn | None = None
        self._lock = threading.RLock()
        self._scratch: Buffer | None = None
        _clients.add(self)

    # -- connection -------------------------------------------------------

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        """Closes the connection and the scratch buffer; a later call dials again."""
        with self._lock:
            self._drop()
            if self._scratch is not None:
                try:
                    self._scratch.close()
                except BufferError:
                    pass
                self._scratch = None

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @_locked
    def _connect(self) -> Conn:
        c = self._conn
        if c is not None:
            if c.alive():
                c.sock.settimeout(self.timeout)
                return c
            self._drop()
        try:
            c = Conn(self.socket, self.timeout, self.name)
        except TimeoutError:
            raise S4DTimeout(f"s4d at {self.socket} did not accept the connection within {self.timeout} s") from None
        try:
            c.say_hello(self.name)
        except BaseException as e:
            c.close()
            if isinstance(e, S4DError):
                raise
            if isinstance(e, TimeoutError):
                raise S4DTimeout(f"s4d at {self.socket} did not answer HELLO within {self.timeout} s") from None
            if isinstance(e, OSError):
                raise S4DConnectionError(f"connection to s4d lost during HELLO: {e}") from e
            raise
        self._conn = c
        return c

    def hello(self) -> dict:
        """What the daemon announced: version, page_size, max_frame,
        max_batch_pages, server and codec."""
        with self._lock:
            return dict(self._connect().hello)

    @property
    def page_size(self) -> int:
        return self.hello()["page_size"]

    def _exchange(self, reqs, window: int = 1) -> None:
        """Sends reqs with up to window in flight, reading answers as it goes
        (the daemon answers in order, and blocks while its answers go
        unread). The first error status stops further sending and is raised
        once the answers in flight are read. A broken or timed-out
        connection is dropped and raised as S4DConnectionError."""
        with self._lock:
            conn = self._connect()
            clean = False
            first_err = None
            inflight: deque = deque()
            it = iter(reqs)
            more = True
            try:
                while more or inflight:
                    while more and first_err is None and len(inflight) < window:
                        r = next(it, None)
                        if r is None:
                            more = False
                            break
                        if r.before is not None:
                            r.before()
                        conn.next_id += 1
                        conn.send(r.op, conn.next_id, r.parts, r.fds)
                        inflight.append((conn.next_id, r))
                    if first_err is not None:
                        more = False
                    if not inflight:
                        break
                    rid, r = inflight.popleft()
                    status, body = conn.recv(rid, r.op)
                    if status != OK and r.on_error is not None:
                        r.on_error(error_for(status, w.error_message(body)))
                    elif status != OK:
                        if first_err is None:
                            first_err = error_for(status, w.error_message(body))
                    elif r.handle is not None:
                        r.handle(body)
                clean = True
            except S4DError:
                raise
            except TimeoutError:
                raise S4DTimeout(f"s4d did not answer within {self.timeout} s; the connection is dropped") from None
            except OSError as e:
                raise S4DConnectionError(f"connection to s4d lost: {e.strerror or e}") from e
            finally:
                if not clean:
                    self._drop()
            if first_err is not None:
                # Not left in a local: the traceback would hold this frame,
                # and through it the callers' frames and the buffers they
                # export, until the garbage collector ran.
                try:
                    raise first_err
                finally:
                    first_err = None

    def _call(self, op: int, body: bytes = b"") -> bytes:
        out = []
        self._exchange([_Req(op, [body], out.append)])
        return out[0]

    def _json(self, op: int, body: bytes = b""):
        raw = self._call(op, body)
        try:
            return json.loads(raw)
        except ValueError as e:
            raise MalformedError(f"{w.OP_NAMES.get(op, op)} response is not JSON: {e}") from None

    # -- batches ----------------------------------------------------------

    def _limits(self, pool_len: int, ps: int) -> tuple[int, int]:
        """Pages per request through the socket and through a memfd."""
        h = self._connect().hello
        batch = min(h["max_batch_pages"], self.batch_pages or h["max_batch_pages"])
        room = h["max_frame"] - 16 - 2 - pool_len - 4
        return max(1, min(batch, room // (ps + 8))), max(1, min(batch, (room - 8) // 8))

    def _buffer_view(self, obj):
        """(buffer, offset) when obj is one of our Buffers or a writable,
        contiguous view lying wholly inside one; else None."""
        if isinstance(obj, Buffer):
            return obj, 0
        loc = address_of(obj)
        if loc is None:
            return None
        addr, n = loc
        for b in live_buffers():
            if b.address <= addr and addr + n <= b.address + len(b):
                return b, addr - b.address
        return None

    def _scratch_for(self, nbytes: int) -> Buffer:
        s = self._scratch
        if s is None or len(s) < nbytes:
            if s is not None:
                try:
                    s.close()
                except BufferError:
                    pass
            size = 1 << max(nbytes - 1, 65535).bit_length()
            self._scratch = s = Buffer(size, "s4d-scratch")
        return s

    @_locked
    def put(self, pool: str, keys, pages, *, offset: int = 0) -> None:
        """Stores pages under keys in pool (created on first use). pages is
        len(keys) pages back to back: a Buffer from client.buffer() (or a
        view of one) moves no byte here; any other buffer-protocol object is
        copied once into shared memory. With a Buffer, offset says where
        the first page starts in it. Pages refused raise NoSpaceError or
        LimitError (their keys keep their old contents; .keys lists them)."""
        karr = Keys(keys)
        n = len(karr)
        pool_b = w.pool_name(pool)
        if not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset must be a non-negative number of bytes, not {offset!r}")
        bv = self._buffer_view(pages)
        if bv is not None:
            buf, boff = bv
            nbytes = len(buf) - boff - offset if isinstance(pages, Buffer) else memoryview(pages).nbytes
            ps = self._page_size_of(nbytes, n, "put", exact=not isinstance(pages, Buffer))
            codes = self._fd_batches(w.OP_PUT_FD, pool_b, karr, buf, boff + offset, ps)
        else:
            if offset:
                raise ValueError("offset applies only to pages in a client.buffer()")
            try:
                src = memoryview(pages).cast("B")
            except TypeError:
                raise TypeError(f"pages must support the buffer protocol, not {type(pages).__name__}") from None
            ps = self._page_size_of(src.nbytes, n, "put", exact=True)
            if src.nbytes <= _SMALL:
                codes = self._socket_put(pool_b, karr, src, ps)
            else:
                codes = self._copy_batches(w.OP_PUT_FD, pool_b, karr, src, ps)
        if codes.count(OK) != n:
            raise page_error("put", karr.tolist(), codes)

    def _page_size_of(self, nbytes: int, n: int, what: str, exact: bool) -> int:
        ps = self._connect().hello["page_size"]
        if exact and nbytes != n * ps:
            raise ValueError(f"{what}: {nbytes} bytes are not {n} pages of {ps} bytes (the daemon's page size)")
        if nbytes < n * ps:
            raise ValueError(f"{what}: {n} pages of {ps} bytes do not fit in the {nbytes} bytes of the buffer")
        return ps

    def _socket_put(self, pool_b, karr: Keys, src, ps) -> bytearray:
        n = len(karr)
        codes = bytearray()
        per, _ = self._limits(len(pool_b) - 2, ps)
        reqs = []
        for a in range(0, n, per):
            b = min(a + per, n)
            head = pool_b + struct.pack("<II", ps, b - a)
            reqs.append(_Req(w.OP_PUT, [head, karr.wire(a, b), src[a * ps:b * ps]],
                             _codes_into(codes, b - a)))
        self._exchange(reqs, _WINDOW)
        return codes

    def _fd_batches(self, op, pool_b, karr: Keys, buf: Buffer, off: int, ps: int) -> bytearray:
        """PUT_FD or GET_FD of pages lying in buf from off, in requests the
        daemon's limits allow, pipelined. Each request's body is made only
        when it is sent, so the next is built while the daemon works."""
        n = len(karr)
        _, per = self._limits(len(pool_b) - 2, ps)
        codes = bytearray()
        fds = [buf.fileno()]

        def reqs():
            for a in range(0, n, per):
                b = min(a + per, n)
                yield _Req(op, [pool_b + struct.pack("<II", ps, b - a), karr.wire(a, b),
                                struct.pack("<Q", off + a * ps)], _codes_into(codes, b - a), fds=fds)
        self._exchange(reqs(), _WINDOW)
        return codes

    def _copy_batches(self, op, pool_b, karr: Keys, mem, ps) -> bytearray:
        """PUT_FD from, or GET_FD into, memory of the caller's through the
        scratch memfd, in slots, so that copying one piece overlaps the
        daemon's work on the others."""
        n = len(karr)
        _, per = self._limits(len(pool_b) - 2, ps)
        per = max(1, min(per, _SLOT // ps))
        npieces = (n + per - 1) // per
        nslots = min(_SLOTS, npieces)
        slot = per * ps
        scratch = self._scratch_for(slot * nslots)
        sv = memoryview(scratch)
        codes = bytearray()
        fds = [scratch.fileno()]

        def reqs():
            for j, a in enumerate(range(0, n, per)):
                b = min(a + per, n)
                so, nb = (j % nslots) * slot, (b - a) * ps
                parts = [pool_b + struct.pack("<II", ps, b - a), karr.wire(a, b), struct.pack("<Q", so)]
                if op == w.OP_PUT_FD:
                    yield _Req(op, parts, _codes_into(codes, b - a), fds=fds,
                               before=_copier(sv, so, mem, a * ps, nb))
                else:
                    yield _Req(op, parts, _codes_then(codes, b - a, _copier(mem, a * ps, sv, so, nb)), fds=fds)
        try:
            # A slot is reused only once its earlier piece is answered.
            self._exchange(reqs(), nslots)
        finally:
            sv.release()
        return codes

    def get(self, pool: str, keys, *, missing_ok: bool = False) -> bytes:
        """The pages of keys, back to back. A key with no page raises
        NotFoundError (its .keys lists the missing keys), or with
        missing_ok reads as a page of zeros."""
        karr = Keys(keys)
        ps = self._connect().hello["page_size"]
        out = bytearray(len(karr) * ps)
        self._get_into(pool, karr, out, ps, missing_ok)
        return bytes(out)

    def get_into(self, pool: str, keys, buffer, *, missing_ok: bool = False) -> None:
        """Fills buffer (writable, C-contiguous, exactly len(keys) pages)
        with the pages of keys, in place. In a client.buffer() (or a view
        of one) the daemon writes the pages itself; elsewhere they cost
        one copy. Missing keys as in get()."""
        karr = Keys(keys)
        ps = self._connect().hello["page_size"]
        try:
            mv = memoryview(buffer)
        except TypeError:
            raise TypeError(f"buffer must support the buffer protocol, not {type(buffer).__name__}") from None
        if mv.readonly:
            raise ValueError("get_into: the buffer is read-only")
        if not mv.c_contiguous:
            raise ValueError("get_into: the buffer is not contiguous")
        self._get_into(pool, karr, mv.cast("B"), ps, missing_ok)

    @_locked
    def _get_into(self, pool, karr, dst, ps: int, missing_ok: bool) -> None:
        n = len(karr)
        dv = memoryview(dst).cast("B")
        if dv.nbytes != n * ps:
            raise ValueError(f"get_into: {dv.nbytes} bytes are not {n} pages of {ps} bytes (the daemon's page size)")
        pool_b = w.pool_name(pool)
        bv = self._buffer_view(dst)
        if bv is not None:
            codes = self._fd_batches(w.OP_GET_FD, pool_b, karr, bv[0], bv[1], ps)
        elif dv.nbytes <= _SMALL:
            codes = self._socket_get(pool_b, karr, dv, ps)
        else:
            codes = self._copy_batches(w.OP_GET_FD, pool_b, karr, dv, ps)
        if codes.count(OK) == n:
            return
        zero = bytes(ps)
        for i, c in enumerate(codes):
            if c != OK:  # GET_FD leaves a missing page's place as it was: zero it.
                dv[i * ps:(i + 1) * ps] = zero
        if not (missing_ok and codes.count(OK) + codes.count(NOT_FOUND) == n):
            raise page_error("get", karr.tolist(), codes)

    def _socket_get(self, pool_b, karr: Keys, dv, ps) -> bytearray:
        codes = bytearray()
        n = len(karr)

        def handle(body):
            got_ps, c = w.decode_get_head(body, n)
            if got_ps != ps:
                raise MalformedError(f"the daemon returned pages of {got_ps} bytes, not {ps}")
            src = 8 + n
            if c.count(OK) == n:
                dv[:] = memoryview(body)[src:]
            else:
                for i, s in enumerate(c):
                    if s == OK:
                        dv[i * ps:(i + 1) * ps] = body[src:src + ps]
                        src += ps
            codes.extend(c)
        self._exchange([_Req(w.OP_GET, [pool_b + struct.pack("<I", n), karr.wire()], handle)])
        return codes

    def delete(self, pool: str, keys) -> int:
        """Removes keys from pool; returns how many had a page (missing keys
        are no error)."""
        karr = Keys(keys)
        codes = self._keys_op(w.OP_DEL, pool, karr)
        ok = codes.count(OK)
        if ok + codes.count(NOT_FOUND) != len(karr):
            raise page_error("delete", karr.tolist(), [c if c != NOT_FOUND else OK for c in codes])
        return ok

    def _keys_op(self, op, pool, karr: Keys, extra: bytes = b"") -> bytearray:
        pool_b = w.pool_name(pool)
        batch = self._connect().hello["max_batch_pages"]
        n = len(karr)
        codes = bytearray()

        def reqs():
            for a in range(0, n, batch):
                b = min(a + batch, n)
                yield _Req(op, [pool_b + extra + struct.pack("<I", b - a), karr.wire(a, b)], _codes_into(codes, b - a))
        self._exchange(reqs(), _WINDOW)
        return codes

    # -- inspection and maintenance ---------------------------------------

    def inspect(self, pool: str, keys, *, with_data: bool = False) -> list[dict]:
        """How each key is stored: dicts with key, status, class (zero,
        same, lz4, zstd, raw), stored_size, fill, backend, and data (the
        stored bytes) when with_data."""
        karr = w.key_array(keys)
        body = w.pool_name(pool) + bytes([1 if with_data else 0]) + struct.pack("<I", len(karr)) + w.key_bytes(karr)
        return w.decode_inspect(self._call(w.OP_INSPECT, body), list(karr), with_data)

    def stats(self, pool: str = "") -> dict:
        """The daemon's counters (the STATS JSON); pool "" covers every pool
        the caller may see."""
        return self._json(w.OP_STATS, w.pool_name(pool))

    def pools(self) -> list[dict]:
        """The caller's pools (every pool for root)."""
        return self._json(w.OP_POOLS) or []

    def compact(self) -> dict:
        return self._json(w.OP_COMPACT)

    def idle(self, pool: str = "", *, min_age_ms: int = 0, mark: bool = False, list: int = 0) -> dict:
        """Counts (and with list, lists up to that many) pages untouched for
        min_age_ms; mark first marks every chosen page idle."""
        body = w.pool_name(pool) + struct.pack(
            "<BQI", 1 if mark else 0, _u64(min_age_ms, "min_age_ms"), _u32(list, "list"))
        return self._json(w.OP_IDLE, body)

    def recompress(self, pool: str = "", *, min_age_ms: int = 0, idle: bool = True, huge: bool = False) -> dict:
        """Recompresses idle (and/or raw-stored, huge) pages with zstd now."""
        flags = (1 if idle else 0) | (2 if huge else 0)
        if not flags:
            raise ValueError("recompress: choose idle pages, huge pages or both")
        body = w.pool_name(pool) + struct.pack("<BQ", flags, _u64(min_age_ms, "min_age_ms"))
        return self._json(w.OP_RECOMPRESS, body)

    def writeback(self, mode: str = "idle", *, min_age_ms: int = 0) -> dict:
        """Moves pages to the daemon's backing file (root only): mode all,
        idle, huge or compact."""
        return self._json(w.OP_WRITEBACK, w.pack_str(mode, "mode") + struct.pack("<Q", _u64(min_age_ms, "min_age_ms")))

    def set_pool_codec(self, pool: str, codec: str = "") -> None:
        """Chooses lz4 or zstd for pool's future pages ("" = the daemon's)."""
        self._call(w.OP_POOL_CODEC, w.pool_name(pool) + w.pack_str(codec, "codec"))

    def park(self, name: str, array) -> "Parked":
        """Sets array (a NumPy array, a PyTorch CPU tensor of any dtype, or
        any object with the buffer protocol) aside in the daemon under name,
        with its dtype and shape; returns a handle whose restore() gives it
        back. A contiguous tensor is read in place, with no copy. A tensor
        on a GPU raises TypeError: move it with .cpu() first. Parking under
        a name in use replaces what was there."""
        return _park.park(self, name, array)

    def restore(self, name: str, *, keep: bool = False, out=None):
        """The array parked under name (by any process of this user), bit
        for bit: a PyTorch tensor when a tensor was parked, else a NumPy
        array when NumPy is importable, else a memoryview. With out (the
        same kind, dtype and shape; contiguous, writable) the bytes land in
        it and it is returned. Its pages are deleted unless keep."""
        return _park.restore(self, name, keep=keep, out=out)

    def pipeline(self) -> Pipeline:
        """Requests queued, then sent together by execute() without waiting
        for each answer: see Pipeline."""
        return Pipeline(self)

    def buffer(self, nbytes: int) -> Buffer:
        """Writable memory shared with the daemon (see Buffer): pages put
        from it or fetched into it move with no copy in this process."""
        return Buffer(nbytes)


def _codes_into(codes: bytearray, n: int):
    def handle(body):
        codes[len(codes):] = w.status_bytes(body, n)
    return handle


def _codes_then(codes: bytearray, n: int, then):
    def handle(body):
        codes[len(codes):] = w.status_bytes(body, n)
        then()
    return handle


def _copier(dst, doff: int, src, soff: int, n: int):
    def copy():
        dst[doff:doff + n] = src[soff:soff + n]
    return copy


def _u64(v, what: str) -> int:
    if not isinstance(v, int) or v < 0 or v > w.MAX_U64:
        raise ValueError(f"{what} must be an integer from 0 to 2**64-1, not {v!r}")
    return v


def _u32(v, what: str) -> int:
    if not isinstance(v, int) or v < 0 or v > 0xFFFFFFFF:
        raise ValueError(f"{what} must be an integer from 0 to 2**32-1, not {v!r}")
    return v
