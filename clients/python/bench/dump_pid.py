"""dump_pid.py PID BYTES FILE: the whole pages of a live process's writable
private memory (what a compressed store would be handed), up to BYTES, into
FILE: the corpus ratio.py and `s4d bench --file` read."""

import sys


def main():
    pid, limit, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    got = 0
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem, open(path, "wb") as out:
        for line in maps:
            f = line.split()
            if f[1] != "rw-p" or got >= limit:
                continue
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            hi = min(hi, lo + limit - got)
            try:
                mem.seek(lo)
                data = mem.read(hi - lo)
            except OSError:
                continue
            out.write(data)
            got += len(data)
    print(f"{got} bytes of process {pid} in {path}")


if __name__ == "__main__":
    main()
