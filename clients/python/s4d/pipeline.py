"""s4d.Pipeline: small requests sent back to back, their answers read as
they come."""

from __future__ import annotations

import struct
from typing import Protocol

from . import _wire as w
from ._conn import _Req
from .errors import MalformedError, NOT_FOUND, OK, S4DError, page_error


class _Exchanger(Protocol):
    """What a Pipeline needs of its Client: the page size and the exchange
    of requests, in flight at most window at a time."""

    page_size: int

    def _exchange(self, reqs: list, window: int) -> None: ...


class Pipeline:
    """Small requests sent back to back, their answers read as they come
    (the daemon answers in order): one round trip's wait for many.

        p = client.pipeline()
        p.put("pool", [1], page); p.get("pool", [1, 2]); p.delete("pool", [3])
        results = p.execute()   # [None, bytes, 1]

    Each request is one frame, so within the daemon's limits (its batch
    and frame sizes). A request the daemon refuses, or whose pages fail,
    leaves its error (an S4DError) in its place of the results and does
    not stop the others; execute(raise_first=True) raises the first."""

    def __init__(self, client: _Exchanger):
        self._c = client
        self._queued: list = []

    def __len__(self):
        return len(self._queued)

    def put(self, pool: str, keys, pages) -> "Pipeline":
        karr = w.key_array(keys)
        src = memoryview(pages).cast("B")
        ps = self._c.page_size
        if src.nbytes != len(karr) * ps:
            raise ValueError(f"put: {src.nbytes} bytes are not {len(karr)} pages of {ps} bytes")
        head = w.pool_name(pool) + struct.pack("<II", ps, len(karr)) + w.key_bytes(karr)

        def done(body):
            codes = w.decode_codes(body, len(karr))
            return page_error("put", karr, codes) if any(codes) else None
        self._queued.append((w.OP_PUT, [head, src], done))
        return self

    def get(self, pool: str, keys) -> "Pipeline":
        karr = w.key_array(keys)
        ps = self._c.page_size

        def done(body):
            got_ps, codes = w.decode_get_head(body, len(karr))
            if got_ps != ps:
                raise MalformedError(f"the daemon returned pages of {got_ps} bytes, not {ps}")
            if any(codes):
                return page_error("get", karr, codes)
            return bytes(body[8 + len(karr):])
        self._queued.append((w.OP_GET, [w.keys_body(pool, karr)], done))
        return self

    def delete(self, pool: str, keys) -> "Pipeline":
        karr = w.key_array(keys)

        def done(body):
            codes = w.decode_codes(body, len(karr))
            if any(c not in (OK, NOT_FOUND) for c in codes):
                return page_error("delete", karr, [c if c != NOT_FOUND else OK for c in codes])
            return sum(1 for c in codes if c == OK)
        self._queued.append((w.OP_DEL, [w.keys_body(pool, karr)], done))
        return self

    def execute(self, *, raise_first: bool = False) -> list:
        queued, self._queued = self._queued, []
        results: list = [None] * len(queued)
        reqs = []
        for i, (op, parts, done) in enumerate(queued):
            def handle(body, i=i, done=done):
                results[i] = done(body)

            def on_error(err, i=i):
                results[i] = err
            reqs.append(_Req(op, parts, handle, on_error=on_error))
        self._c._exchange(reqs, _PIPELINE_WINDOW)
        if raise_first:
            for r in results:
                if isinstance(r, S4DError):
                    raise r
        return results


# Requests of a pipeline in flight at once: enough to hide the round trip,
# few enough that unread answers never fill the socket buffers.
_PIPELINE_WINDOW = 64
