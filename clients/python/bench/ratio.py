"""One Python client against the Go client, through the same daemon, on the
same pages and batch size: prints each pair's GB/s as medians of alternating
runs, and Python's ratio to Go.

    python3 clients/python/bench/ratio.py --socket S --file CORPUS [--max-bytes 1G]
        [--batch 4096] [--runs 5] [--s4d bin/s4d]

Pairs (each run does every one, Go then Python, so load drifts alike):
  buffer   client.buffer() put / get_into   vs  s4d bench --memfd
  numpy    a NumPy array put / get_into     vs  s4d bench (pages through the socket)
  park     park / restore(out=) of a float32 array vs  s4d bench (same bytes)
  park-new park / restore into a new array  vs  s4d bench (the new array's
           memory is allocated and faulted in within the restore)
Each run's figure is the fastest of --repeat (3) for both clients, as s4d
bench's --repeat keeps its fastest; medians are over --runs (5). Every Python
destination is pre-faulted, as Go's are; every GET is checked byte for byte. s4d bench sends one request at a time per client; the
Python client keeps up to four in flight."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import numpy as np  # noqa: E402

import s4d  # noqa: E402


def size(s: str) -> int:
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(s[:-1]) * mult[s[-1].upper()]) if s[-1].upper() in mult else int(s)


def go_run(a, memfd: bool) -> tuple[float, float]:
    cmd = [a.s4d, "bench", "--socket", a.socket, "--file", a.file, "--max-bytes", str(a.nbytes),
           "--clients", "1", "--batch", str(a.batch), "--repeat", str(a.repeat), "--json"] + (["--memfd"] if memfd else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    r = json.loads(out)["results"][0]
    return r["put_gb_per_s"], r["get_gb_per_s"]


def timed(f, check=None, reset=None, repeat=1) -> float:
    """The fastest of repeat runs of f, each followed by check and reset."""
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
        if check:
            check()
        if reset:
            reset()
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--socket", default=s4d.default_socket())
    p.add_argument("--file", required=True)
    p.add_argument("--max-bytes", default="1G")
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--repeat", type=int, default=3,
                   help="each run's figure, Go's (s4d bench --repeat) and Python's alike, is the fastest of this many")
    p.add_argument("--s4d", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../bin/s4d"))
    a = p.parse_args()
    c = s4d.Client(a.socket, batch_pages=a.batch, timeout=300)
    ps = c.page_size
    with open(a.file, "rb") as f:
        data = f.read(size(a.max_bytes))
    n = len(data) // ps
    a.nbytes = n * ps
    keys = range(n)
    buf, back = c.buffer(a.nbytes), c.buffer(a.nbytes)
    buf[:] = data[:a.nbytes]
    back[:] = bytes(a.nbytes)  # pre-faulted
    arr = np.frombuffer(data[:a.nbytes], dtype=np.uint8).copy()
    into = np.ones_like(arr)
    f32 = arr.view(np.float32).reshape(-1, 1024)
    res = {k: {"go": ([], []), "py": ([], [])} for k in ("buffer", "numpy", "park", "park-new")}
    f32back = np.ones_like(f32)

    def add(pair, who, put_s, get_s):
        res[pair][who][0].append(a.nbytes / put_s / 1e9)
        res[pair][who][1].append(a.nbytes / get_s / 1e9)

    def same(got, want, what):
        if not np.array_equal(np.frombuffer(got, dtype=np.uint8), np.frombuffer(want, dtype=np.uint8)):
            sys.exit(f"{what}: the pages came back different")

    R = a.repeat
    for r in range(a.runs):
        gp, gg = go_run(a, memfd=True)
        res["buffer"]["go"][0].append(gp), res["buffer"]["go"][1].append(gg)
        pt = timed(lambda: c.put("ratio", keys, buf), repeat=R)
        gt = timed(lambda: c.get_into("ratio", keys, back), lambda: same(back, buf, "buffer"), repeat=R)
        c.delete("ratio", keys)
        add("buffer", "py", pt, gt)

        gp, gg = go_run(a, memfd=False)
        for pair in ("numpy", "park", "park-new"):
            res[pair]["go"][0].append(gp), res[pair]["go"][1].append(gg)
        pt = timed(lambda: c.put("ratio", keys, arr), repeat=R)
        gt = timed(lambda: c.get_into("ratio", keys, into), lambda: same(into, arr, "numpy"),
                   lambda: into.fill(1), repeat=R)
        c.delete("ratio", keys)
        add("numpy", "py", pt, gt)

        # restore deletes what it read: each repeat parks again first.
        pts, gts = [], []
        for _ in range(R):
            pts.append(timed(lambda: c.park("ratio", f32)))
            gts.append(timed(lambda: c.restore("ratio", out=f32back), lambda: same(f32back, f32, "park"),
                             lambda: f32back.fill(1)))
        add("park", "py", min(pts), min(gts))
        got = []
        pts, gts = [], []
        for _ in range(R):
            pts.append(timed(lambda: c.park("ratio", f32)))
            gts.append(timed(lambda: got.append(c.restore("ratio")), lambda: same(got[0], f32, "park-new"),
                             got.clear))
        add("park-new", "py", min(pts), min(gts))
        print(f"run {r + 1}/{a.runs} done", file=sys.stderr)

    print(f"{n} pages ({a.nbytes >> 20} MiB) of {a.file}, batch {a.batch} pages, one client, "
          f"medians of {a.runs} alternating runs (each the fastest of {a.repeat}), daemon {c.hello()['server']} at {a.socket}")
    print(f"{'pair':8} {'Go PUT':>8} {'Py PUT':>8} {'ratio':>6}   {'Go GET':>8} {'Py GET':>8} {'ratio':>6}")
    for pair, v in res.items():
        gp, gg = statistics.median(v["go"][0]), statistics.median(v["go"][1])
        pp, pg = statistics.median(v["py"][0]), statistics.median(v["py"][1])
        print(f"{pair:8} {gp:8.2f} {pp:8.2f} {pp / gp:5.2f}x   {gg:8.2f} {pg:8.2f} {pg / gg:5.2f}x")


if __name__ == "__main__":
    main()
