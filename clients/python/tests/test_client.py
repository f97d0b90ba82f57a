"""Tests of the s4d Python client against a real daemon.

S4D_SOCKET names a running daemon (socket mode 0666, so that other users
may connect); S4D_BIN the s4d binary, with which the tests that stop and
restart a daemon start their own. tests/pyclient_test.go sets both."""

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import s4d

SOCKET = os.environ.get("S4D_SOCKET", "")
BIN = os.environ.get("S4D_BIN", "")


def pages(n, ps, seed=1):
    """n pages that compress but differ from each other."""
    out = bytearray()
    for i in range(n):
        line = f"page {i} of seed {seed}: ".encode()
        out += (line * (ps // len(line) + 1))[:ps]
    return bytes(out)


class Daemon:
    """An s4d of the test's own, to stop, kill and start again."""

    def __init__(self, *args):
        self.dir = tempfile.mkdtemp(prefix="s4d-py-")
        self.socket = os.path.join(self.dir, "s4d.sock")
        self.args = args
        self.proc = None
        self.start()

    def start(self):
        self.log = open(os.path.join(self.dir, "log"), "ab")
        self.proc = subprocess.Popen([BIN, "daemon", "--socket", self.socket, *self.args],
                                     stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with s4d.Client(self.socket, timeout=2) as c:
                    c.hello()
                return
            except s4d.S4DConnectionError:
                time.sleep(0.05)
        raise RuntimeError("daemon did not start: " + open(os.path.join(self.dir, "log")).read())

    def stop(self):
        """SIGSTOP, returning once every thread of the daemon has stopped
        (the signal reaches them asynchronously)."""
        self.proc.send_signal(signal.SIGSTOP)
        task = f"/proc/{self.proc.pid}/task"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            states = []
            for t in os.listdir(task):
                try:
                    with open(f"{task}/{t}/stat") as f:
                        states.append(f.read().rsplit(")", 1)[1].split()[0])
                except OSError:
                    pass
            if states and all(s in "Tt" for s in states):
                return
            time.sleep(0.01)
        raise RuntimeError("the daemon did not stop")

    def kill(self):
        self.proc.send_signal(signal.SIGCONT)
        self.proc.kill()
        self.proc.wait()
        self.log.close()

    def close(self):
        if self.proc and self.proc.poll() is None:
            self.kill()
        subprocess.run(["rm", "-rf", self.dir])


@unittest.skipUnless(SOCKET, "S4D_SOCKET names no daemon")
class RoundTrips(unittest.TestCase):
    def setUp(self):
        self.c = s4d.Client(SOCKET)
        self.addCleanup(self.c.close)
        self.ps = self.c.page_size

    def test_socket_and_memfd_paths(self):
        # 3 pages go through the socket; 600 through the scratch memfd, in
        # several pipelined pieces.
        for n in (3, 600, 5000):
            data = pages(n, self.ps, seed=n)
            pool = f"py-rt-{n}"
            for src in (data, bytearray(data), memoryview(data)):
                self.c.put(pool, range(n), src)
                self.assertEqual(self.c.get(pool, range(n)), data)
            dst = bytearray(n * self.ps)
            self.c.get_into(pool, list(range(n)), dst)
            self.assertEqual(bytes(dst), data)

    def test_buffer_zero_copy(self):
        n = 300
        data = pages(n, self.ps, seed=7)
        with self.c.buffer(2 * n * self.ps) as buf:
            buf[n * self.ps:] = data
            # The second half, given as an offset and as a view of the buffer.
            self.c.put("py-buf", range(n), buf, offset=n * self.ps)
            self.assertEqual(self.c.get("py-buf", range(n)), data)
            mv = memoryview(buf)
            self.c.put("py-buf2", (k * 3 for k in range(n)), mv[n * self.ps:])
            got = mv[:n * self.ps]
            self.c.get_into("py-buf2", [k * 3 for k in range(n)], got)
            self.assertEqual(bytes(got), data)
            got.release()
            mv.release()
        info = self.c.pools()
        self.assertIn("py-buf", [p["name"] for p in info])

    def test_which_path_moves_the_pages(self):
        """A Buffer (or a view of one) goes by descriptor with no copy;
        small batches through the socket; large ones by one copy into the
        scratch memfd."""
        conn = self.c._connect()
        sent = []
        real = conn.send

        def spy(op, rid, parts, fds=None):
            sent.append((op, bool(fds), sum(len(p) for p in parts)))
            return real(op, rid, parts, fds)
        conn.send = spy
        n = 64
        data = pages(n, self.ps, seed=3)
        with self.c.buffer(n * self.ps) as buf:
            buf[:] = data
            self.c.put("py-path", range(n), buf)
            self.c.get_into("py-path", range(n), memoryview(buf)[:])
            self.assertEqual(sent, [(9, True, sent[0][2]), (10, True, sent[1][2])])
            self.assertLess(sent[0][2], 1024)  # keys only: no page in the frame
        sent.clear()
        self.c.put("py-path", range(2), data[:2 * self.ps])
        self.c.put("py-path", range(n), data)
        self.assertEqual([(op, fd) for op, fd, _ in sent], [(2, False), (9, True)])

    def test_batches_over_the_daemon_limit_are_split(self):
        n = self.c.hello()["max_batch_pages"] + 100
        data = bytes(n * self.ps)  # zero pages: cheap to store
        self.c.put("py-many", range(n), data)
        self.assertEqual(self.c.get("py-many", range(n)), data)
        self.assertEqual(self.c.delete("py-many", range(n)), n)

    def test_missing_keys(self):
        self.c.put("py-miss", [1, 2], pages(2, self.ps))
        with self.assertRaises(s4d.NotFoundError) as cm:
            self.c.get("py-miss", [1, 5, 2, 6])
        self.assertEqual(cm.exception.keys, [5, 6])
        self.assertEqual(cm.exception.statuses, [0, s4d.NOT_FOUND, 0, s4d.NOT_FOUND])
        got = self.c.get("py-miss", [5, 1], missing_ok=True)
        self.assertEqual(got, bytes(self.ps) + pages(2, self.ps)[:self.ps])
        # Missing pages read as zeros through the memfd path too.
        dst = bytearray(b"\xff" * (40 * self.ps))
        self.c.get_into("py-miss", range(40), dst, missing_ok=True)
        self.assertEqual(bytes(dst[:self.ps]), bytes(self.ps))
        self.assertEqual(bytes(dst[self.ps:3 * self.ps]), pages(2, self.ps))
        self.assertEqual(bytes(dst[3 * self.ps:]), bytes(37 * self.ps))
        # Through the socket, and by GET_FD straight into a Buffer: a
        # missing page's place is zeroed whatever it held.
        small = bytearray(b"\xff" * (3 * self.ps))
        self.c.get_into("py-miss", [1, 5, 2], small, missing_ok=True)
        self.assertEqual(bytes(small[self.ps:2 * self.ps]), bytes(self.ps))
        with self.c.buffer(3 * self.ps) as buf:
            buf[:] = b"\xff" * (3 * self.ps)
            self.c.get_into("py-miss", [1, 5, 2], buf, missing_ok=True)
            self.assertEqual(buf[self.ps:2 * self.ps], bytes(self.ps))
            self.assertEqual(buf[2 * self.ps:], pages(2, self.ps)[self.ps:])
        self.assertEqual(self.c.delete("py-miss", [1, 9]), 1)
        with self.assertRaises(s4d.NotFoundError):
            self.c.get("py-no-such-pool", [0])
        with self.assertRaises(s4d.NotFoundError):
            self.c.stats("py-no-such-pool")

    def test_daemon_errors_have_their_class(self):
        p = pages(2, self.ps)
        with self.assertRaises(s4d.BadPoolError):
            self.c.put("has space", [0], p[:self.ps])
        with self.assertRaises(s4d.BadPoolError):
            self.c.put("", [0], p[:self.ps])
        with self.assertRaises(s4d.DuplicateKeyError):
            self.c.put("py-dup", [3, 3], p)
        with self.assertRaises(s4d.MalformedError):
            self.c.set_pool_codec("py-codec", "gzip")
        with self.assertRaises(s4d.MalformedError):
            self.c.idle(min_age_ms=10**12)
        for e in (s4d.BadPoolError, s4d.NotFoundError, s4d.S4DConnectionError):
            self.assertTrue(issubclass(e, s4d.S4DError))
        # The connection stays usable after error answers.
        self.c.put("py-after", [0], p[:self.ps])

    def test_bad_input(self):
        ps = self.ps
        with self.assertRaises(ValueError):
            self.c.put("py-bad", [0, 1], bytes(ps + 1))       # not 2 pages
        with self.assertRaises(ValueError):
            self.c.put("py-bad", [0], bytes(2 * ps))          # 2 pages, 1 key
        with self.assertRaises(ValueError):
            self.c.get_into("py-bad", [0, 1], bytearray(ps))  # room for 1 page
        with self.assertRaises(ValueError):
            self.c.get_into("py-bad", [0], bytes(ps))         # read-only
        with self.assertRaises(TypeError):
            self.c.put("py-bad", [0], "not bytes" * 500)
        with self.assertRaises(ValueError):
            self.c.put("py-bad", [-1], bytes(ps))
        with self.assertRaises(ValueError):
            self.c.get("py-bad", [2**64])
        with self.assertRaises(TypeError):
            self.c.get("py-bad", [1.5])
        with self.assertRaises(TypeError):
            self.c.get("py-bad", "12")
        with self.assertRaises(ValueError):
            self.c.get("py-bad", [])
        with self.assertRaises(ValueError):
            self.c.put("py-bad", [0], bytes(ps), offset=ps)   # offset without a Buffer
        with self.c.buffer(ps) as buf:
            with self.assertRaises(ValueError):
                self.c.put("py-bad", [0, 1], buf)              # 2 pages in a 1-page buffer
        with self.assertRaises(ValueError):
            self.c.buffer(0)
        with self.assertRaises(ValueError):
            self.c.put("py-bad-é", [0], bytes(ps))
        with self.assertRaises(ValueError):
            self.c.recompress(idle=False, huge=False)
        # None of it broke the connection.
        self.c.put("py-bad", 0, bytes(ps))
        self.assertEqual(self.c.get("py-bad", 0), bytes(ps))

    def test_inspect_stats_and_maintenance(self):
        self.c.put("py-ins", [0, 1], bytes(self.ps) + pages(1, self.ps))
        info = self.c.inspect("py-ins", [0, 1, 2], with_data=True)
        self.assertEqual([i["status"] for i in info], [0, 0, s4d.NOT_FOUND])
        self.assertEqual(info[0]["class"], "zero")
        self.assertEqual(len(info[1]["data"]), info[1]["stored_size"])
        st = self.c.stats("py-ins")
        self.assertEqual([p["name"] for p in st["pools"]], ["py-ins"])
        self.assertEqual(st["pools"][0]["pages"], 2)
        self.assertIn("mm_stat", self.c.stats())
        idle = self.c.idle("py-ins", mark=True, list=5)
        self.assertEqual(idle["pools"][0]["idle_pages"], 2)
        r = self.c.recompress("py-ins", huge=True)
        self.assertIn("pages_tried", r)
        self.c.set_pool_codec("py-ins", "zstd")
        self.assertEqual([p.get("codec") for p in self.c.pools() if p["name"] == "py-ins"], ["zstd"])
        if os.getuid() == 0:
            with self.assertRaises(s4d.FailedError):  # no backing file
                self.c.writeback("all")
        self.assertIn("pages_moved", self.c.compact())

    def test_pipeline(self):
        ps = self.ps
        p = self.c.pipeline()
        for i in range(300):  # more than the window: answers are read while sending
            p.put("py-pipe", [i], bytes([i % 256]) * ps)
        p.get("py-pipe", [7, 8]).get("py-pipe", [99999]).delete("py-pipe", [5, 77777])
        p.put("bad pool", [1], bytes(ps)).get("py-pipe", [9])
        self.assertEqual(len(p), 305)
        r = p.execute()
        self.assertEqual(len(p), 0)
        self.assertEqual(r[:300], [None] * 300)
        self.assertEqual(r[300], bytes([7]) * ps + bytes([8]) * ps)
        self.assertIsInstance(r[301], s4d.NotFoundError)
        self.assertEqual(r[302], 1)
        self.assertIsInstance(r[303], s4d.BadPoolError)
        self.assertEqual(r[304], bytes([9]) * ps)  # after an error, the rest still ran
        with self.assertRaises(s4d.BadPoolError):
            self.c.pipeline().put("bad pool", [1], bytes(ps)).execute(raise_first=True)
        with self.assertRaises(ValueError):
            self.c.pipeline().put("py-pipe", [1], bytes(ps - 1))

    def test_threads_share_a_client(self):
        errs = []

        def work(t):
            try:
                # Small batches through the socket, large ones through the
                # client's one scratch memfd.
                n = 20 if t % 2 else 3000
                data = pages(n, self.ps, seed=100 + t)
                for _ in range(5):
                    self.c.put(f"py-thr-{t}", range(n), data)
                    if self.c.get(f"py-thr-{t}", range(n)) != data:
                        errs.append(f"thread {t}: wrong pages")
            except Exception as e:  # reported below
                errs.append(repr(e))
        ts = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(errs, [])

    def test_fork(self):
        """A child of fork dials its own connection: parent and child then
        call at the same time, neither reading the other's answers."""
        a, b = pages(1, self.ps, seed=1), pages(1, self.ps, seed=2)
        self.c.put("py-fork", [0, 1], a + b)
        pid = os.fork()
        if pid == 0:
            ok = False
            try:
                ok = all(self.c.get("py-fork", [1]) == b for _ in range(300))
            finally:
                os._exit(0 if ok else 1)
        try:
            for _ in range(300):
                self.assertEqual(self.c.get("py-fork", [0]), a)
        finally:
            _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0)

    def test_close_and_context_manager(self):
        with s4d.Client(SOCKET) as c:
            c.put("py-cm", [0], bytes(self.ps))
        # Used again after close: it dials again.
        self.assertEqual(c.get("py-cm", [0]), bytes(self.ps))
        c.close()
        c.close()

    def test_socket_from_environment(self):
        old = os.environ.get("S4D_SOCKET")
        os.environ["S4D_SOCKET"] = SOCKET
        try:
            self.assertEqual(s4d.Client().socket, SOCKET)
        finally:
            if old is None:
                del os.environ["S4D_SOCKET"]
            else:
                os.environ["S4D_SOCKET"] = old
        self.assertEqual(s4d.Client("/x").socket, "/x")


class Unreachable(unittest.TestCase):
    def test_no_daemon(self):
        d = tempfile.mkdtemp()
        with self.assertRaises(s4d.S4DConnectionError) as cm:
            s4d.Client(os.path.join(d, "none.sock")).stats()
        self.assertIn("s4d daemon --socket", str(cm.exception))
        with self.assertRaises(s4d.S4DConnectionError) as cm:
            s4d.Client(d).stats()
        self.assertIn("directory", str(cm.exception))
        os.rmdir(d)


@unittest.skipUnless(BIN, "S4D_BIN names no s4d binary")
class DaemonGoesAway(unittest.TestCase):
    def test_restart_mid_call(self):
        d = Daemon()
        self.addCleanup(d.close)
        c = s4d.Client(d.socket, timeout=20)
        self.addCleanup(c.close)
        ps = c.page_size
        data = pages(2000, ps)
        c.put("py-restart", range(2000), data)
        # Stopped, the daemon cannot answer: the GET is surely in flight
        # (or finds the connection gone) when it is killed.
        d.stop()
        out = []

        def call():
            try:
                out.append(c.get("py-restart", range(2000)))
            except Exception as e:
                out.append(e)
        t = threading.Thread(target=call)
        t.start()
        time.sleep(0.3)
        d.kill()
        t.join(10)
        self.assertFalse(t.is_alive())
        self.assertIsInstance(out[0], s4d.S4DConnectionError)
        d.start()
        # A new daemon, a new connection: the pool is gone.
        with self.assertRaises(s4d.NotFoundError):
            c.get("py-restart", [0])
        c.put("py-restart", range(2000), data)
        self.assertEqual(c.get("py-restart", range(2000)), data)

    def test_timeout_then_reconnect(self):
        d = Daemon()
        self.addCleanup(d.close)
        c = s4d.Client(d.socket, timeout=0.5)
        self.addCleanup(c.close)
        c.put("py-slow", [0], bytes(c.page_size))
        d.stop()
        t0 = time.monotonic()
        with self.assertRaises(s4d.S4DTimeout):
            c.get("py-slow", [0])
        self.assertLess(time.monotonic() - t0, 5)
        d.proc.send_signal(signal.SIGCONT)
        self.assertEqual(c.get("py-slow", [0]), bytes(c.page_size))

    def test_idle_connection_closed_by_daemon(self):
        d = Daemon("--idle-timeout", "500ms")
        self.addCleanup(d.close)
        c = s4d.Client(d.socket)
        self.addCleanup(c.close)
        c.put("py-idle", [0], bytes(c.page_size))
        time.sleep(1.5)
        self.assertEqual(c.get("py-idle", [0]), bytes(c.page_size))

    def test_idle_open_connection(self):
        # A connection the daemon keeps open, idle for a second: the next
        # call must not wait for the client's timeout (a liveness peek once
        # waited the whole timeout, 30 s by default, after 0.5 s of idle).
        # tests/idle_test.go holds every client to 50 ms of the call back
        # to back; this only catches a stall.
        d = Daemon()
        self.addCleanup(d.close)
        c = s4d.Client(d.socket, timeout=5)
        self.addCleanup(c.close)
        c.put("py-idle-open", [0], bytes(c.page_size))
        time.sleep(1.0)
        t0 = time.monotonic()
        self.assertEqual(c.get("py-idle-open", [0]), bytes(c.page_size))
        self.assertLess(time.monotonic() - t0, 2.5)

    def test_connection_limit(self):
        d = Daemon("--max-connections", "1")
        self.addCleanup(d.close)
        a = s4d.Client(d.socket)
        self.addCleanup(a.close)
        deadline = time.monotonic() + 10
        while True:  # the start-up probe's slot may not be free yet
            try:
                a.hello()
                break
            except (s4d.LimitError, s4d.S4DConnectionError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        b = s4d.Client(d.socket)
        with self.assertRaises(s4d.LimitError) as cm:
            b.stats()
        self.assertIn("connections", str(cm.exception))
        a.close()
        deadline = time.monotonic() + 10
        while True:
            try:
                b.stats()
                break
            except s4d.LimitError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        b.close()


try:
    import numpy
except ImportError:
    numpy = None


@unittest.skipUnless(SOCKET, "S4D_SOCKET names no daemon")
class Park(unittest.TestCase):
    def setUp(self):
        self.c = s4d.Client(SOCKET)
        self.addCleanup(self.c.close)
        self.ps = self.c.page_size

    def test_buffer_objects(self):
        import array
        for n in (0, 1, 511, 512, 513, 30000):
            a = array.array("d", (i * 0.25 - 3 for i in range(n)))
            h = self.c.park(f"py-arr-{n}", a)
            self.assertEqual(h.nbytes, 8 * n)
            got = h.restore(keep=True)
            self.assertEqual(bytes(got), a.tobytes())
            if numpy is None:
                self.assertEqual((got.format, got.shape), ("d", (n,)))
            else:
                self.assertEqual((got.dtype, got.shape), (numpy.dtype("d"), (n,)))
            self.assertEqual(bytes(self.c.restore(f"py-arr-{n}")), a.tobytes())
            with self.assertRaises(s4d.NotFoundError):
                self.c.restore(f"py-arr-{n}")

    def test_replaced_by_a_smaller_array(self):
        self.c.park("py-shrink", bytes(range(256)) * 100)
        self.c.park("py-shrink", b"abc")
        self.assertEqual(bytes(self.c.restore("py-shrink", keep=True)), b"abc")
        # Only the header and one page remain.
        st = self.c.stats("park:py-shrink")
        self.assertEqual(st["pools"][0]["pages"], 2)

    def test_bad_input(self):
        with self.assertRaises(ValueError):
            self.c.park("", b"x")
        with self.assertRaises(TypeError):
            self.c.park("py-bad-park", object())
        with self.assertRaises(s4d.BadPoolError):
            self.c.park("has space", b"x")
        self.c.put("park:py-not-parked", [0], bytes(self.ps))
        with self.assertRaises(s4d.MalformedError):
            self.c.restore("py-not-parked")
        with self.assertRaises(s4d.NotFoundError):
            self.c.restore("py-never-parked")

    def test_restore_in_another_process(self):
        import array
        a = array.array("i", range(100000))
        self.c.park("py-other-proc", a)
        code = ("import s4d, sys, hashlib; c = s4d.Client(sys.argv[1]); r = c.restore('py-other-proc');"
                "print(hashlib.sha256(bytes(r)).hexdigest(), tuple(r.shape))")
        r = subprocess.run([sys.executable, "-c", code, SOCKET], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(s4d.__file__))))
        self.assertEqual(r.returncode, 0, r.stderr)
        import hashlib
        self.assertEqual(r.stdout.split()[0], hashlib.sha256(a.tobytes()).hexdigest())

    @unittest.skipIf(numpy is None, "NumPy is not importable")
    def test_numpy(self):
        np = numpy
        cases = [np.arange(3 * 5 * 7, dtype=np.float32).reshape(3, 5, 7),
                 np.arange(40000, dtype=np.int64).reshape(200, 200)[::3, 1::2],  # not contiguous
                 np.array([1 + 2j, 3 - 4j], dtype=">c16"),
                 np.zeros((0, 4), dtype=np.uint16),
                 np.array(7.5),
                 np.zeros(3, dtype=[("a", "<i4"), ("b", "<f8", (2,))])]
        cases[-1]["a"] = [1, 2, 3]
        for i, x in enumerate(cases):
            h = self.c.park(f"py-np-{i}", x)
            y = h.restore()
            self.assertEqual((y.dtype, y.shape), (x.dtype, x.shape), i)
            self.assertEqual(y.tobytes(), np.ascontiguousarray(x).tobytes(), i)
        with self.assertRaises(TypeError):
            self.c.park("py-np-obj", np.array([object()]))
        # An array in a client buffer is parked without a copy; get_into
        # fills a NumPy array in place.
        with self.c.buffer(64 * self.ps) as buf:
            v = np.frombuffer(buf, dtype=np.float64)
            v[:] = np.linspace(0, 1, v.size)
            self.c.park("py-np-buf", v)
            self.assertTrue((self.c.restore("py-np-buf") == v).all())
            self.c.put("py-np-pages", range(64), v)
            w = np.empty_like(v)
            self.c.get_into("py-np-pages", range(64), w)
            self.assertTrue((w == v).all())
            del v

    def test_restore_into_out(self):
        import array
        a = array.array("d", (i * 0.5 for i in range(5000)))
        self.c.park("py-out", a)
        out = array.array("d", bytes(len(a) * 8))
        self.assertIs(self.c.restore("py-out", keep=True, out=out), out)
        self.assertEqual(out, a)
        with self.assertRaises(ValueError):
            self.c.restore("py-out", keep=True, out=bytearray(8))
        if numpy is not None:
            x = numpy.arange(12, dtype=numpy.float32).reshape(3, 4)
            self.c.park("py-out-np", x)
            y = numpy.zeros((3, 4), dtype=numpy.float32)
            self.assertIs(self.c.restore("py-out-np", keep=True, out=y), y)
            self.assertTrue((x == y).all())
            with self.assertRaises(ValueError):  # another shape
                self.c.restore("py-out-np", keep=True, out=numpy.zeros((4, 3), dtype=numpy.float32))

    def test_header_format(self):
        from s4d import park as p
        self.c.park("py-hdr", b"abc")
        meta = p.parse_header(self.c.get("park:py-hdr", [0]), "py-hdr")
        self.assertEqual(meta["v"], p.FORMAT)
        # A header of format 1 (no "v") is still read.
        old = {k: v for k, v in meta.items() if k != "v"}
        self.c.put("park:py-hdr", [0], p.header_page(old, self.ps))
        self.assertEqual(bytes(self.c.restore("py-hdr", keep=True)), b"abc")
        # A newer format is refused, saying what to do.
        self.c.put("park:py-hdr", [0], p.header_page(dict(meta, v=p.FORMAT + 1), self.ps))
        with self.assertRaises(s4d.MalformedError) as cm:
            self.c.restore("py-hdr")
        self.assertIn("newer s4d client", str(cm.exception))
        self.assertIn("upgrade", str(cm.exception))


@unittest.skipUnless(SOCKET, "S4D_SOCKET names no daemon")
class Keys(unittest.TestCase):
    """Keys as ranges, arrays and lists go on the wire alike; statuses
    are checked in bulk and a failure still names its keys."""

    def setUp(self):
        self.c = s4d.Client(SOCKET, batch_pages=7)
        self.addCleanup(self.c.close)
        self.ps = self.c.page_size

    def test_forms_of_keys(self):
        import array
        data = pages(40, self.ps)
        forms = [range(100, 140), range(139, 99, -1), list(range(100, 140)), array.array("L", range(100, 140))]
        if numpy is not None:
            forms += [numpy.arange(100, 140, dtype=numpy.int32), numpy.arange(100, 140, dtype=numpy.uint64)]
        for keys in forms:
            self.c.put("py-keys", keys, data)
            self.assertEqual(self.c.get("py-keys", keys), data, type(keys))
            self.assertEqual(self.c.delete("py-keys", keys), 40)
        with self.assertRaises(ValueError):
            self.c.put("py-keys", range(-1, 1), pages(2, self.ps))
        with self.assertRaises(ValueError):
            self.c.get("py-keys", range(5, 5))
        if numpy is not None:
            with self.assertRaises(ValueError):
                self.c.get("py-keys", numpy.array([3, -1]))
            with self.assertRaises(TypeError):
                self.c.get("py-keys", numpy.array([1.0, 2.0]))

    def test_failures_name_their_keys(self):
        self.c.put("py-keys-miss", range(0, 30, 2), pages(15, self.ps))
        with self.assertRaises(s4d.NotFoundError) as cm:
            self.c.get("py-keys-miss", range(30))
        self.assertEqual(cm.exception.keys, list(range(1, 30, 2)))
        got = self.c.get("py-keys-miss", range(30), missing_ok=True)
        want = pages(15, self.ps)
        for i in range(30):
            page = got[i * self.ps:(i + 1) * self.ps]
            self.assertEqual(page, bytes(self.ps) if i % 2 else want[i // 2 * self.ps:(i // 2 + 1) * self.ps])
        self.assertEqual(self.c.delete("py-keys-miss", range(30)), 15)


CHILD = r"""
import sys, s4d
c = s4d.Client(sys.argv[1])
if sys.argv[2] == "put":
    c.put("py-alice", [0], bytes(c.page_size))
    print("ok")
else:
    for name, f in [("get", lambda: c.get("py-alice", [0])),
                    ("put", lambda: c.put("py-alice", [0], bytes(c.page_size))),
                    ("delete", lambda: c.delete("py-alice", [0])),
                    ("inspect", lambda: c.inspect("py-alice", [0])),
                    ("stats", lambda: c.stats("py-alice"))]:
        try:
            f()
            print(name, "allowed")
        except s4d.PermissionDeniedError:
            print(name, "refused")
    print("pools", [p["name"] for p in c.pools()])
"""


@unittest.skipUnless(SOCKET and os.getuid() == 0, "needs root to run clients as other users")
class OtherUsers(unittest.TestCase):
    def run_as(self, uid, what):
        env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(s4d.__file__)),
                   PYTHONDONTWRITEBYTECODE="1")
        # An interpreter other users may run (a root's pyenv is not one).
        py = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        r = subprocess.run([py, "-c", CHILD, SOCKET, what], user=uid, group=uid,
                           env=env, cwd="/", capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_another_users_pool(self):
        self.assertEqual(self.run_as(4242, "put").strip(), "ok")
        out = self.run_as(4343, "try")
        for op in ("get", "put", "delete", "inspect", "stats"):
            self.assertIn(f"{op} refused", out)
        self.assertIn("pools []", out)
        # Root sees it.
        with s4d.Client(SOCKET) as c:
            self.assertEqual(c.get("py-alice", [0]), bytes(c.page_size))


if __name__ == "__main__":
    unittest.main()
