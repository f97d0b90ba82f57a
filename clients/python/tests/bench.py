"""Pages through a memfd buffer: bench.py FILE ITERATIONS stores the file's
pages (PUT_FD) and fetches them back (GET_FD) ITERATIONS times each and
prints "put GB/s get GB/s", then the same from and into a bytearray (one
copy each way through the client's scratch memfd). Run by
BenchmarkClientsMemfd in tests/."""

import sys
import time

import s4d


def main():
    path, iters = sys.argv[1], int(sys.argv[2])
    with s4d.Client() as c, open(path, "rb") as f:
        ps = c.page_size
        data = f.read()
        n = len(data) // ps
        buf, back = c.buffer(n * ps), c.buffer(n * ps)
        buf[:] = data[:n * ps]
        keys = range(n)
        t0 = time.perf_counter()
        for _ in range(iters):
            c.put("bench", keys, buf)
        t1 = time.perf_counter()
        for _ in range(iters):
            c.get_into("bench", keys, back)
        t2 = time.perf_counter()
        if back[:] != buf[:]:
            sys.exit("pages came back different")
        plain, into = bytearray(data[:n * ps]), bytearray(n * ps)
        t3 = time.perf_counter()
        for _ in range(iters):
            c.put("bench", keys, plain)
        t4 = time.perf_counter()
        for _ in range(iters):
            c.get_into("bench", keys, into)
        t5 = time.perf_counter()
        if into != plain:
            sys.exit("pages came back different")
        total = n * ps * iters
        print(" ".join(f"{total / t / 1e9:.3f}" for t in (t1 - t0, t2 - t1, t4 - t3, t5 - t4)))


if __name__ == "__main__":
    main()
