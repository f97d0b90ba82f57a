"""A batch's keys, kept as the caller gave them (a range, an array) so that
each request's key bytes are made in bulk, never one Python int at a time."""

from __future__ import annotations

import sys
from array import array

from . import _wire as w

try:  # NumPy is optional: with it, ranges and integer arrays convert in C.
    import numpy as _np
except ImportError:  # pragma: no cover - depends on the host
    _np = None


class Keys:
    """len(keys) u64 keys; wire(a, b) is the little-endian bytes of keys[a:b]."""

    __slots__ = ("n", "_range", "_mem")

    def __init__(self, keys):
        self._range = None
        self._mem = None
        if isinstance(keys, range):
            if len(keys) == 0:
                raise ValueError("no keys: a batch needs at least one")
            lo, hi = min(keys[0], keys[-1]), max(keys[0], keys[-1])
            if lo < 0 or hi > w.MAX_U64:
                raise ValueError("keys must be integers from 0 to 2**64-1")
            self._range = keys
            self.n = len(keys)
            return
        if _np is not None and isinstance(keys, _np.ndarray):
            self._mem = _np_keys(keys)
        else:
            a = w.key_array(keys)
            if sys.byteorder == "big":
                a.byteswap()
            self._mem = memoryview(a).cast("B")
        self.n = len(self._mem) // 8
        if self.n == 0:
            raise ValueError("no keys: a batch needs at least one")

    def __len__(self) -> int:
        return self.n

    def wire(self, a: int = 0, b: int | None = None):
        """The keys a..b as they go on the wire (bytes or a memoryview)."""
        b = self.n if b is None else b
        if self._mem is not None:
            return self._mem[a * 8:b * 8]
        r = self._range[a:b]
        if _np is not None:
            return _np.arange(r.start, r.stop, r.step, dtype=_np.uint64).astype("<u8", copy=False).tobytes()
        return w.key_bytes(array("Q", r))

    def tolist(self) -> list[int]:
        """Every key as an int: for error messages, not the data path."""
        if self._range is not None:
            return list(self._range)
        a = array("Q", bytes(self._mem))
        if sys.byteorder == "big":
            a.byteswap()
        return a.tolist()


def _np_keys(arr) -> memoryview:
    if arr.dtype.kind not in "iu" or arr.dtype == bool:
        raise TypeError(f"keys must be integers, not an array of {arr.dtype}")
    flat = arr.reshape(-1)
    if arr.dtype.kind == "i" and flat.size and flat.min() < 0:
        raise ValueError("keys must be integers from 0 to 2**64-1")
    return memoryview(_np.ascontiguousarray(flat, dtype="<u8")).cast("B")
