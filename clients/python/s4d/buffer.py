"""Page buffers shared with the daemon: a memfd, sealed against shrinking,
mapped here. The daemon maps the same file (PUT_FD, GET_FD), so pages placed
in a Buffer reach it, and come back from it, without crossing the socket."""

from __future__ import annotations

import ctypes
import gc
import fcntl
import mmap
import os
import weakref

# Seals the daemon requires (a file cut short under its mapping would crash
# it); growing and further sealing are ruled out too, as the Go client does.
_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL


class Buffer(mmap.mmap):
    """Writable memory backed by a memfd the daemon can map.

    It supports the buffer protocol: memoryview(buf), numpy.frombuffer(buf,
    dtype) and buf[a:b] = data all work on the shared pages. Pass the buffer
    (or a NumPy array or memoryview over it) to Client.put / get_into and the
    pages move with no copy in this process. Close it when done; the daemon
    keeps its mapping while a connection that used it stays open."""

    def __new__(cls, nbytes: int, name: str = "s4d-pages"):
        if not isinstance(nbytes, int) or nbytes <= 0:
            raise ValueError(f"buffer size must be a positive number of bytes, not {nbytes!r}")
        fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, nbytes)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
            self = super().__new__(cls, fd, nbytes, flags=mmap.MAP_SHARED,
                                   prot=mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._size = nbytes
        # The mapping's address, to recognise views of this buffer.
        self._addr = ctypes.addressof(ctypes.c_char.from_buffer(self))
        _live.add(self)
        return self

    def __init__(self, nbytes: int, name: str = "s4d-pages"):
        pass  # all done in __new__ (mmap takes its arguments there)

    def fileno(self) -> int:
        """The memfd's descriptor (sent to the daemon with PUT_FD/GET_FD)."""
        if self._fd < 0:
            raise ValueError("buffer is closed")
        return self._fd

    @property
    def address(self) -> int:
        return self._addr

    def close(self) -> None:
        """Unmaps the buffer and closes the memfd. It fails (BufferError)
        while views of it, NumPy arrays included, are still alive."""
        try:
            super().close()
        except BufferError:
            # A view may be held only by a reference cycle (a traceback's
            # frames): collect, then try once more.
            gc.collect()
            super().close()
        _live.discard(self)
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self):
        fd = getattr(self, "_fd", -1)
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass
            self._fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# Open buffers, so that views of them (NumPy arrays, memoryview slices)
# are recognised and sent by descriptor.
_live: "weakref.WeakSet[Buffer]" = weakref.WeakSet()


def live_buffers() -> list:
    return [b for b in list(_live) if b._fd >= 0]


def address_of(obj) -> tuple[int, int] | None:
    """The address and length in bytes of a writable, C-contiguous buffer
    object, or None when it is neither (its bytes then travel by copy)."""
    try:
        mv = memoryview(obj)
    except TypeError:
        return None
    if mv.readonly or not mv.c_contiguous or mv.nbytes == 0:
        return None
    mv = mv.cast("B")
    c = ctypes.c_char.from_buffer(mv)
    addr = ctypes.addressof(c)
    del c
    return addr, mv.nbytes
