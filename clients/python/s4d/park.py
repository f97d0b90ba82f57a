"""Park and restore: an array set aside in the daemon and given back bit for
bit, by this process or another of the same user.

A parked array lives in the pool "park:NAME": key 0 holds a header page
(magic, then JSON: format version, kind, dtype, shape, byte count), keys 1..
its bytes, the last page padded with zeros. The header is written last, so a
restore never reads a header newer than the pages it describes.

Header format versions: 1 had no "v" field (kinds numpy and buffer); 2 adds
"v" and the kind torch. A client refuses a header of a version above the
one it knows, rather than guess at it."""

from __future__ import annotations

import ast
import ctypes
import json
import mmap
import struct

from .errors import MalformedError, NotFoundError

MAGIC = b"S4DPARK1"
FORMAT = 2  # the header format this client writes and the newest it reads

try:  # NumPy is optional: without it, restore gives a memoryview.
    import numpy as _np
except ImportError:  # pragma: no cover - depends on the host
    _np = None


def pool_of(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError("a parked array needs a non-empty name")
    return "park:" + name


def _is_tensor(obj) -> bool:
    return type(obj).__module__.split(".")[0] == "torch" and hasattr(obj, "untyped_storage")


def _describe_tensor(t):
    """(bytes view, header dict, owner) of a PyTorch tensor: its own memory,
    read in place (no copy through NumPy, so bfloat16 and every other dtype
    go as they are); owner keeps that memory alive while it is read."""
    if t.device.type != "cpu":
        raise TypeError(f"cannot park a tensor on {t.device}: move it to host memory first with .cpu()")
    if t.is_sparse or t.layout != t.contiguous().layout:
        raise TypeError(f"cannot park a {t.layout} tensor; only strided (dense) tensors")
    t = t.detach()
    if not t.is_contiguous():
        t = t.contiguous()
    n = t.numel() * t.element_size()
    meta = {"v": FORMAT, "kind": "torch", "dtype": str(t.dtype).removeprefix("torch."),
            "shape": list(t.shape), "nbytes": n}
    if n == 0:
        return memoryview(b""), meta, t
    view = memoryview((ctypes.c_ubyte * n).from_address(t.data_ptr())).cast("B")
    return view, meta, t


def _describe(obj):
    """(bytes view, header dict, owner) for an array, tensor or buffer object."""
    if _is_tensor(obj):
        return _describe_tensor(obj)
    if _np is not None and (isinstance(obj, _np.ndarray) or not _has_buffer(obj)):
        arr = _np.asarray(obj)
        if not arr.flags.c_contiguous:  # (ascontiguousarray would make a 0-d array 1-d)
            arr = arr.copy(order="C")
        if arr.dtype.hasobject:
            raise TypeError("arrays of Python objects cannot be parked: their bytes are pointers")
        # repr, read back by literal_eval: a structured dtype's tuples
        # would come back from JSON as lists.
        descr = repr(_np.lib.format.dtype_to_descr(arr.dtype))
        return memoryview(arr.reshape(-1)).cast("B"), {
            "v": FORMAT, "kind": "numpy", "dtype": descr, "shape": list(arr.shape), "nbytes": arr.nbytes}, arr
    try:
        mv = memoryview(obj)
    except TypeError:
        raise TypeError(f"cannot park a {type(obj).__name__}: it has no buffer (and NumPy is not importable)") from None
    if not mv.c_contiguous:
        raise ValueError("cannot park a non-contiguous buffer; copy it first")
    return mv.cast("B"), {"v": FORMAT, "kind": "buffer", "format": mv.format, "itemsize": mv.itemsize,
                          "shape": list(mv.shape), "nbytes": mv.nbytes}, obj


def _has_buffer(obj) -> bool:
    try:
        memoryview(obj).release()
        return True
    except TypeError:
        return False


def header_page(meta: dict, ps: int) -> bytes:
    body = json.dumps(meta, separators=(",", ":")).encode()
    page = MAGIC + struct.pack("<I", len(body)) + body
    if len(page) > ps:
        raise ValueError(f"the array's description takes {len(page)} bytes, over one page of {ps}")
    return page + bytes(ps - len(page))


def parse_header(page: bytes, name: str) -> dict:
    if page[:8] != MAGIC:
        raise MalformedError(f"pool {pool_of(name)!r} holds no parked array (no header page)")
    (n,) = struct.unpack_from("<I", page, 8)
    try:
        meta = json.loads(page[12:12 + n])
        nbytes = int(meta["nbytes"])
        if nbytes < 0:
            raise ValueError
        v = int(meta.get("v", 1))
    except (ValueError, KeyError, TypeError):
        raise MalformedError(f"parked array {name!r} has a damaged header") from None
    if v > FORMAT:
        raise MalformedError(f"parked array {name!r} was parked by a newer s4d client (header format {v}; "
                             f"this one reads formats up to {FORMAT}): upgrade the s4d Python package to restore it")
    return meta


def park(client, name: str, obj) -> "Parked":
    pool = pool_of(name)
    src, meta, owner = _describe(obj)
    ps = client.page_size
    n = meta["nbytes"]
    full, tail = divmod(n, ps)
    npages = full + (1 if tail else 0)
    meta["pages"] = npages
    old = _old_pages(client, name)
    try:
        if full:
            client.put(pool, range(1, full + 1), src[:full * ps])
        if tail:
            client.put(pool, [full + 1], bytes(src[full * ps:]) + bytes(ps - tail))
    finally:
        src.release()
        del owner
    client.put(pool, [0], header_page(meta, ps))
    if old > npages:  # pages of a larger array parked here before
        client.delete(pool, range(npages + 1, old + 1))
    return Parked(client, name, meta)


def _old_pages(client, name: str) -> int:
    try:
        page = client.get(pool_of(name), [0])
    except NotFoundError:
        return 0
    try:
        return int(parse_header(page, name).get("pages", 0))
    except MalformedError:
        return 0


def restore(client, name: str, *, keep: bool = False, out=None):
    """The array parked under name, bit for bit: a NumPy array when NumPy
    is importable, else a memoryview; a tensor when a tensor was parked.
    With out (an array or tensor of the same kind, dtype and shape,
    contiguous and writable) the bytes land there and out is returned.
    Unless keep, its pages are deleted."""
    pool = pool_of(name)
    ps = client.page_size
    try:
        meta = parse_header(client.get(pool, [0]), name)
    except NotFoundError:
        raise NotFoundError(f"no array is parked as {name!r}") from None
    n = meta["nbytes"]
    npages = (n + ps - 1) // ps
    if meta.get("kind") == "torch":
        torch = _torch()  # before any page is read: a clear error if it is missing
    if out is not None:
        dst = _out_view(out, meta, name)
        full, tail = divmod(n, ps)
        if full:
            client.get_into(pool, range(1, full + 1), dst[:full * ps])
        if tail:
            dst[full * ps:] = client.get(pool, [full + 1])[:tail]
        if not keep:
            client.delete(pool, range(0, meta.get("pages", npages) + 1))
        return out
    mem = _fresh(npages * ps) if n else bytearray()
    if npages:
        client.get_into(pool, range(1, npages + 1), mem)
    if not keep:
        client.delete(pool, range(0, meta.get("pages", npages) + 1))
    if meta.get("kind") == "torch":
        return _tensor(torch, mem, meta, name)
    if _np is not None:
        out = _np.frombuffer(mem, dtype=_np.uint8, count=n) if n else _np.empty(0, dtype=_np.uint8)
        return _shape(out, memoryview(out), meta)
    dst = memoryview(mem)[:n]
    return _shape(dst, dst, meta)


_HUGE = 2 << 20
_MADV_POPULATE_WRITE = 23  # Linux 5.14


def _fresh(nbytes: int) -> mmap.mmap:
    """Anonymous private memory for a restored array, faulted in as a whole
    before the pages are copied in (a fault per 4 KiB page as they land cost
    as much as the copy), in huge pages where it is large enough."""
    m = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        if nbytes >= _HUGE:
            m.madvise(mmap.MADV_HUGEPAGE)
        m.madvise(_MADV_POPULATE_WRITE)
    except (OSError, AttributeError):
        pass  # an older kernel: faulted in as the pages land
    return m


def _out_view(out, meta, name) -> memoryview:
    """out's bytes, once it is checked to be what was parked."""
    kind = meta.get("kind")
    if _is_tensor(out):
        if kind != "torch":
            raise TypeError(f"{name!r} was parked as a {kind} array, not a tensor")
        if out.device.type != "cpu" or not out.is_contiguous():
            raise ValueError("out must be a contiguous tensor in host memory")
        if str(out.dtype).removeprefix("torch.") != meta["dtype"] or list(out.shape) != meta["shape"]:
            raise ValueError(f"out is {out.dtype} {list(out.shape)}; {name!r} is {meta['dtype']} {meta['shape']}")
        n = meta["nbytes"]
        return memoryview((ctypes.c_ubyte * n).from_address(out.data_ptr())).cast("B") if n else memoryview(bytearray())
    mv = memoryview(out)
    if mv.readonly or not mv.c_contiguous:
        raise ValueError("out must be writable and C-contiguous")
    if kind == "numpy" and _np is not None:
        arr = _np.asarray(out)
        want = _np.lib.format.descr_to_dtype(_descr(meta["dtype"]))
        if arr.dtype != want or list(arr.shape) != meta["shape"]:
            raise ValueError(f"out is {arr.dtype} {list(arr.shape)}; {name!r} is {want} {meta['shape']}")
    elif mv.nbytes != meta["nbytes"]:
        raise ValueError(f"out holds {mv.nbytes} bytes; {name!r} holds {meta['nbytes']}")
    return mv.cast("B")


def _torch():
    try:
        import torch
    except ImportError:
        raise ImportError("this array was parked as a PyTorch tensor; install torch to restore it") from None
    return torch


def _tensor(torch, mem, meta, name):
    dt = getattr(torch, str(meta.get("dtype")), None)
    if not isinstance(dt, torch.dtype):
        raise MalformedError(f"parked tensor {name!r} has a dtype this torch does not know: {meta.get('dtype')!r}")
    shape = tuple(meta.get("shape", ()))
    n = meta["nbytes"]
    if n == 0:
        return torch.empty(shape, dtype=dt)
    flat = torch.frombuffer(mem, dtype=torch.uint8, count=n)
    return flat.view(dt).reshape(shape)


def _shape(out, dst, meta):
    shape = tuple(meta.get("shape", ()))
    if _np is not None:
        if meta.get("kind") == "numpy":
            dt = _np.lib.format.descr_to_dtype(_descr(meta["dtype"]))
        else:
            try:
                dt = _np.dtype(meta.get("format", "B"))
            except TypeError:
                dt = _np.dtype(("V", meta.get("itemsize", 1)))
        return out.view(dt).reshape(shape)
    fmt = meta.get("format") or _buffer_format(meta.get("dtype"))
    try:
        if fmt and 0 in shape:  # memoryview refuses shapes with a zero
            return dst.cast(fmt)
        return dst.cast(fmt, shape) if fmt else dst
    except (TypeError, ValueError):
        return dst  # a format memoryview cannot take: the bytes


def _descr(d):
    try:
        return ast.literal_eval(d)
    except (ValueError, SyntaxError):
        raise MalformedError(f"parked array has a damaged dtype {d!r}") from None


_FORMATS = {"|b1": "?", "|i1": "b", "|u1": "B", "<i2": "h", "<u2": "H", "<i4": "i", "<u4": "I",
            "<i8": "q", "<u8": "Q", "<f2": "e", "<f4": "f", "<f8": "d"}


def _buffer_format(dtype):
    """The memoryview format of a NumPy dtype restored without NumPy."""
    try:
        return _FORMATS.get(ast.literal_eval(dtype)) if isinstance(dtype, str) else None
    except (ValueError, SyntaxError):
        return None


class Parked:
    """A parked array: restore() gives it back."""

    def __init__(self, client, name: str, meta: dict):
        self.client, self.name, self.meta = client, name, meta

    @property
    def shape(self):
        return tuple(self.meta["shape"])

    @property
    def nbytes(self) -> int:
        return self.meta["nbytes"]

    def restore(self, *, keep: bool = False, out=None):
        return restore(self.client, self.name, keep=keep, out=out)

    def drop(self) -> None:
        """Deletes the parked pages without reading them."""
        self.client.delete(pool_of(self.name), range(0, self.meta["pages"] + 1))

    def __repr__(self):
        return f"<s4d.Parked {self.name!r} shape={self.shape} {self.nbytes} bytes>"
