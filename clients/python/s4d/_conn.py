"""One connection to the daemon: dialling with advice when it fails, HELLO,
sending frames (with a memfd attached where needed) and reading answers."""

from __future__ import annotations

import os
import select
import socket
import stat
import struct
from array import array

from . import _wire as w
from .errors import MalformedError, S4DConnectionError, error_for

DEFAULT_SOCKET = "/run/s4d/s4d.sock"
SOCKET_GROUP = "s4d"
_RBUF = 256 << 10


def default_socket() -> str:
    return os.environ.get("S4D_SOCKET") or DEFAULT_SOCKET


def dial_error(path: str, err: OSError) -> S4DConnectionError:
    """Says what to do: join the socket's group, give the socket's own path,
    or start the daemon."""
    why = err.strerror or str(err)
    try:
        st = os.stat(path)
    except OSError:
        st = None
    if isinstance(err, PermissionError):
        group = SOCKET_GROUP
        if st is not None:
            try:
                import grp
                group = grp.getgrgid(st.st_gid).gr_name
            except (KeyError, ImportError):
                group = str(st.st_gid)
        hint = f"permission denied: join group {group} to use it (sudo usermod -aG {group} $USER, then log in again)"
    elif st is not None and stat.S_ISDIR(st.st_mode):
        hint = f"it is a directory; give the socket's own path (the default is {DEFAULT_SOCKET})"
    elif st is not None and not stat.S_ISSOCK(st.st_mode):
        hint = f"it is not a socket; give the path of s4d's socket (the default is {DEFAULT_SOCKET})"
    else:
        hint = f"start it with 'systemctl start s4d' or 's4d daemon --socket {path}'"
    e = S4DConnectionError(f"s4d is not reachable at {path} ({why}): {hint}")
    e.errno = err.errno
    return e


class Conn:
    def __init__(self, path: str, timeout: float | None, name: str):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        sock.settimeout(timeout)
        try:
            sock.connect(path)
        except TimeoutError:
            sock.close()
            raise
        except OSError as e:
            sock.close()
            raise dial_error(path, e) from e
        self.sock = sock
        self.poller = select.poll()
        self.poller.register(sock, select.POLLIN | select.POLLRDHUP)
        self.rbuf = bytearray(_RBUF)
        self.rview = memoryview(self.rbuf)
        self.rpos = self.rend = 0
        self.next_id = 0
        self.hello: dict = {}

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def alive(self) -> bool:
        """False when the daemon closed the connection meanwhile (its idle
        timeout, a restart): nobody reads an idle connection, so it is
        checked before every request, and the request goes out on a fresh
        one instead of failing. A poll with no wait, not a peek: a peek on
        a socket with a timeout waits for data up to that timeout first."""
        if self.rend > self.rpos:
            return True
        if not self.poller.poll(0):
            return True
        # Readable between requests: the daemon's end (EOF) or a frame
        # nobody asked for; either way this stream is done.
        return False

    def send(self, op: int, rid: int, parts, fds=None) -> None:
        """Sends one frame whose body is parts; fds go with its first byte,
        in one sendmsg, as PUT_FD and GET_FD require."""
        n = sum(len(p) for p in parts)
        head = w.header(op, rid, n)
        if fds:
            first = head + b"".join(parts) if n <= 65536 else head
            rest = () if n <= 65536 else parts
            anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array("i", fds))]
            sent = self.sock.sendmsg([first], anc)
            if sent < len(first):
                self.sock.sendall(memoryview(first)[sent:])
            for p in rest:
                self.sock.sendall(p)
        elif n <= 65536:
            self.sock.sendall(head + b"".join(parts))
        else:
            self.sock.sendall(head)
            for p in parts:
                self.sock.sendall(p)

    def _fill(self) -> None:
        if self.rpos == self.rend:
            self.rpos = self.rend = 0
        elif self.rend == len(self.rbuf):
            n = self.rend - self.rpos
            self.rbuf[:n] = self.rbuf[self.rpos:self.rend]
            self.rpos, self.rend = 0, n
        got = self.sock.recv_into(self.rview[self.rend:])
        if got == 0:
            raise S4DConnectionError("connection to s4d lost: closed by the daemon")
        self.rend += got

    def read_exact(self, n: int) -> bytes | bytearray:
        if self.rend - self.rpos >= n:
            out = bytes(self.rview[self.rpos:self.rpos + n])
            self.rpos += n
            return out
        if n <= len(self.rbuf) // 2:
            while self.rend - self.rpos < n:
                self._fill()
            return self.read_exact(n)
        # Large: what is buffered, then straight into the result.
        out = bytearray(n)
        have = self.rend - self.rpos
        out[:have] = self.rview[self.rpos:self.rend]
        self.rpos = self.rend = 0
        mv = memoryview(out)
        while have < n:
            got = self.sock.recv_into(mv[have:])
            if got == 0:
                raise S4DConnectionError("connection to s4d lost: closed by the daemon mid-answer")
            have += got
        return out

    def recv(self, rid: int, op: int) -> tuple[int, bytes]:
        """Reads the next answer, which must be the one to request rid
        (the daemon answers in order)."""
        length, version, rop, status, flags, got_id = w.HEADER.unpack(self.read_exact(w.HEADER_SIZE))
        if version != w.VERSION or length < 16 or not flags & w.FLAG_RESPONSE:
            raise S4DConnectionError(f"connection to s4d lost: not a response frame (version {version}, length {length})")
        body = self.read_exact(length - 16)
        if rop == 0 and got_id == 0 and status != 0:
            # The daemon refuses the connection (LIMIT) and closes it.
            raise error_for(status, w.error_message(body))
        if got_id != rid or rop != op:
            raise S4DConnectionError(f"connection to s4d lost: answer {got_id} ({w.OP_NAMES.get(rop, rop)}) "
                                     f"where {rid} ({w.OP_NAMES.get(op, op)}) was due")
        return status, body

    def refusal(self) -> None:
        """Raises the refusal frame the daemon sent, if one is there to read."""
        try:
            self.sock.settimeout(0.2)
            length, _, op, status, _, rid = w.HEADER.unpack(self.read_exact(w.HEADER_SIZE))
            body = self.read_exact(max(length - 16, 0))
        except (OSError, S4DConnectionError):
            return
        if op == 0 and rid == 0 and status != 0:
            raise error_for(status, w.error_message(body))

    def say_hello(self, name: str) -> None:
        body = struct.pack("<IHH", w.HELLO_MAGIC, w.VERSION, w.VERSION) + w.pack_str(name, "client name")
        self.next_id += 1
        try:
            self.send(w.OP_HELLO, self.next_id, [body])
        except (BrokenPipeError, ConnectionResetError):
            # Refused before the hello went out: the daemon may have said
            # why (LIMIT) before closing.
            self.refusal()
            raise
        status, resp = self.recv(self.next_id, w.OP_HELLO)
        if status != 0:
            raise error_for(status, w.error_message(resp))
        self.hello = w.decode_hello(resp)
        if self.hello["page_size"] <= 0 or self.hello["max_batch_pages"] <= 0:
            raise MalformedError(f"HELLO announces unusable limits: {self.hello}")


class _Req:
    """One request of an exchange: its op, body and descriptors, and what
    to do with its answer."""
    __slots__ = ("op", "parts", "fds", "handle", "before", "on_error")

    def __init__(self, op, parts, handle=None, fds=None, before=None, on_error=None):
        self.op, self.parts, self.handle, self.fds, self.before = op, parts, handle, fds, before
        # on_error takes an error answer instead of its stopping the exchange.
        self.on_error = on_error
