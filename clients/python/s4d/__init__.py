"""s4d: a client for the s4d compressed page store (ipc/PROTOCOL.md).

    import s4d
    with s4d.Client() as c:             # $S4D_SOCKET, else /run/s4d/s4d.sock
        buf = c.buffer(64 * c.page_size)    # shared with the daemon: no copies
        buf[:5] = b"hello"
        c.put("demo", range(64), buf)
        c.get_into("demo", range(64), buf)
"""

from .buffer import Buffer
from .client import Client, Pipeline
from .park import Parked
from ._conn import DEFAULT_SOCKET, default_socket
from .errors import *  # noqa: F401,F403  (the exception classes and status codes)
from .errors import S4DError, S4DConnectionError, S4DTimeout, status_name

__version__ = "0.1.0"
__all__ = ["Client", "Pipeline", "Buffer", "Parked", "DEFAULT_SOCKET", "default_socket", "S4DError", "S4DConnectionError",
           "S4DTimeout", "status_name", "MalformedError", "VersionError", "UnknownOpError",
           "PageSizeError", "EmptyBatchError", "DuplicateKeyError", "NotFoundError",
           "PermissionDeniedError", "NoSpaceError", "TooLargeError", "BadPoolError", "InternalError",
           "ShuttingDownError", "FailedError", "CorruptError", "LimitError", "BusyError"]
