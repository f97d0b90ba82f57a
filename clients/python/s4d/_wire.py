"""The wire format of ipc/PROTOCOL.md: frame headers, strings, key lists
and the bodies of the batch responses. Everything little-endian."""

from __future__ import annotations

import struct
import sys
from array import array

from .errors import MalformedError

VERSION = 1
FLAG_RESPONSE = 1
HELLO_MAGIC = 0x50443453  # "S4DP" in memory

OP_HELLO, OP_PUT, OP_GET, OP_DEL, OP_INSPECT, OP_STATS, OP_POOLS, OP_COMPACT = 1, 2, 3, 4, 5, 6, 7, 8
OP_PUT_FD, OP_GET_FD = 9, 10
OP_IDLE, OP_RECOMPRESS, OP_WRITEBACK, OP_POOL_CODEC = 20, 21, 22, 23
OP_NAMES = {1: "HELLO", 2: "PUT", 3: "GET", 4: "DEL", 5: "INSPECT", 6: "STATS", 7: "POOLS",
            8: "COMPACT", 9: "PUT_FD", 10: "GET_FD", 20: "IDLE", 21: "RECOMPRESS",
            22: "WRITEBACK", 23: "POOL_CODEC"}

HEADER = struct.Struct("<IBBHIQ")  # length, version, op, status, flags, id
HEADER_SIZE = HEADER.size  # 20
MAX_U64 = (1 << 64) - 1
STORE_CLASSES = {1: "zero", 2: "same", 3: "lz4", 4: "zstd", 5: "raw"}


def header(op: int, rid: int, body_len: int) -> bytes:
    return HEADER.pack(16 + body_len, VERSION, op, 0, 0, rid)


def pack_str(s: str | bytes, what: str = "string") -> bytes:
    b = s.encode() if isinstance(s, str) else bytes(s)
    if len(b) > 0xFFFF:
        raise ValueError(f"{what} is {len(b)} bytes; the protocol carries at most 65535")
    return struct.pack("<H", len(b)) + b


def pool_name(pool) -> bytes:
    """A pool name as sent. The daemon judges it (BAD_POOL); only what
    cannot be encoded at all is refused here."""
    if isinstance(pool, bytes):
        return pack_str(pool, "pool name")
    if not isinstance(pool, str):
        raise TypeError(f"pool name must be str or bytes, not {type(pool).__name__}")
    try:
        return pack_str(pool.encode("ascii"), "pool name")
    except UnicodeEncodeError:
        raise ValueError(f"pool name {pool!r} is not ASCII") from None


def key_array(keys) -> array:
    """Keys as an array of u64: an int, a range or any iterable of ints
    (NumPy integer arrays included)."""
    if isinstance(keys, int):
        keys = (keys,)
    elif isinstance(keys, (str, bytes, bytearray, float)):
        raise TypeError(f"keys must be an int or an iterable of ints, not {type(keys).__name__}")
    try:
        a = array("Q", keys)
    except OverflowError:
        raise ValueError("keys must be integers from 0 to 2**64-1") from None
    except TypeError as e:
        # array() refuses floats and other non-integers; ints of NumPy go
        # through int().
        try:
            a = array("Q", (int(k) if _integral(k) else _bad_key(k) for k in keys))
        except OverflowError:
            raise ValueError("keys must be integers from 0 to 2**64-1") from None
        except TypeError:
            raise TypeError(f"keys must be integers: {e}") from None
    if len(a) == 0:
        raise ValueError("no keys: a batch needs at least one")
    return a


def _integral(k) -> bool:
    return hasattr(k, "__index__") and not isinstance(k, bool)


def _bad_key(k):
    raise TypeError(f"key {k!r} is not an integer")


def key_bytes(a: array) -> bytes:
    if sys.byteorder == "big":
        a = array("Q", a)
        a.byteswap()
    return a.tobytes()


def keys_body(pool, a: array) -> bytes:
    return pool_name(pool) + struct.pack("<I", len(a)) + key_bytes(a)


def decode_str(body, off: int = 0) -> tuple[str, int]:
    if len(body) < off + 2:
        raise MalformedError("response: string cut short")
    (n,) = struct.unpack_from("<H", body, off)
    if len(body) < off + 2 + n:
        raise MalformedError("response: string cut short")
    return bytes(body[off + 2:off + 2 + n]).decode("utf-8", "replace"), off + 2 + n


def error_message(body) -> str:
    try:
        return decode_str(body)[0]
    except MalformedError:
        return bytes(body).decode("utf-8", "replace")


def decode_codes(body, n: int) -> list[int]:
    """The `u32 n, n u8 statuses` answer of PUT, DEL, PUT_FD and GET_FD."""
    if len(body) != 4 + n:
        raise MalformedError(f"response of {len(body)} bytes for {n} statuses")
    (got,) = struct.unpack_from("<I", body)
    if got != n:
        raise MalformedError(f"response has {got} statuses for {n} keys")
    return list(body[4:4 + n])


def status_bytes(body, n: int):
    """The n statuses of a `u32 n, n u8 statuses` answer, as bytes (checked
    in bulk by the callers: bytes.count runs in C)."""
    if len(body) != 4 + n:
        raise MalformedError(f"response of {len(body)} bytes for {n} statuses")
    (got,) = struct.unpack_from("<I", body)
    if got != n:
        raise MalformedError(f"response has {got} statuses for {n} keys")
    return memoryview(body)[4:]


def decode_get_head(body, n: int) -> tuple[int, bytes]:
    """GET's page size and statuses; the pages follow at 8 + n."""
    if len(body) < 8 + n:
        raise MalformedError(f"GET response of {len(body)} bytes for {n} keys")
    ps, got = struct.unpack_from("<II", body)
    if got != n:
        raise MalformedError(f"GET response has {got} statuses for {n} keys")
    codes = bytes(body[8:8 + n])
    ok = codes.count(0)
    if len(body) != 8 + n + ok * ps:
        raise MalformedError(f"GET response of {len(body)} bytes for {ok} pages of {ps}")
    return ps, codes


def decode_hello(body) -> dict:
    if len(body) < 14:
        raise MalformedError("HELLO response cut short")
    version, ps, max_frame, max_batch = struct.unpack_from("<HIII", body)
    server, off = decode_str(body, 14)
    codec, off = decode_str(body, off)
    return {"version": version, "page_size": ps, "max_frame": max_frame,
            "max_batch_pages": max_batch, "server": server, "codec": codec}


def decode_inspect(body, keys, with_data: bool) -> list[dict]:
    if len(body) < 4:
        raise MalformedError("INSPECT response cut short")
    (n,) = struct.unpack_from("<I", body)
    if n != len(keys):
        raise MalformedError(f"INSPECT response has {n} entries for {len(keys)} keys")
    out, off = [], 4
    for k in keys:
        if len(body) < off + 14:
            raise MalformedError("INSPECT response cut short")
        status, cls, size, fill = struct.unpack_from("<BBIQ", body, off)
        backend, off = decode_str(body, off + 14)
        info = {"key": k, "status": status, "class": STORE_CLASSES.get(cls, "" if cls == 0 else str(cls)),
                "stored_size": size, "fill": fill, "backend": backend}
        if with_data:
            if len(body) < off + 4:
                raise MalformedError("INSPECT response cut short")
            (dl,) = struct.unpack_from("<I", body, off)
            if len(body) < off + 4 + dl:
                raise MalformedError("INSPECT response cut short")
            info["data"] = bytes(body[off + 4:off + 4 + dl])
            off += 4 + dl
        out.append(info)
    if off != len(body):
        raise MalformedError("INSPECT response has trailing bytes")
    return out
