"""The Python client's idle probe (tests/idle_test.go): each line "call" on
stdin makes the same call (PUT one page, GET it back, STATS) on one Client
that lives for the whole run, and prints its duration in microseconds."""

import sys
import time

import s4d

PAGE = bytes(range(256)) * 16


def main():
    c = s4d.Client(sys.argv[1], timeout=5)
    for line in sys.stdin:
        if line.strip() != "call":
            break
        t = time.perf_counter()
        try:
            c.put("idle", [1], PAGE)
            if c.get("idle", [1]) != PAGE:
                raise RuntimeError("the page came back different")
            c.stats("idle")
        except Exception as e:  # reported to the test, which fails
            print(f"error: {type(e).__name__}: {e}", flush=True)
            continue
        print(int((time.perf_counter() - t) * 1e6), flush=True)


if __name__ == "__main__":
    main()
