#!/bin/bash
# Measures recompression on the pages of a live process: snapshots its
# writable private memory (/proc/PID/mem: root, or the process's owner),
# PUTs it into a fresh daemon, marks every page idle, recompresses, and
# checks every page comes back identical.
#   cold/measure.sh PID [MAX_MIB] [BACKEND]   (S4D: the binary, default bin/s4d)
set -eu
PID=$1 MAX=${2:-256} BACKEND=${3:-cpu} S4D=${S4D:-bin/s4d}
DIR=$(mktemp -d)
trap 'kill ${D:-} 2>/dev/null; rm -rf $DIR' EXIT
python3 - "$PID" "$DIR/snap" $((MAX << 20)) <<'PY'
import sys
pid, out, cap = int(sys.argv[1]), open(sys.argv[2], 'wb'), int(sys.argv[3])
tot = 0
with open(f'/proc/{pid}/maps') as maps, open(f'/proc/{pid}/mem', 'rb', 0) as mem:
    for line in maps:
        span, perm = line.split()[:2]
        if 'w' not in perm or 'p' not in perm:
            continue
        lo, hi = (int(x, 16) for x in span.split('-'))
        try:
            mem.seek(lo)
            b = mem.read(min(hi - lo, cap - tot))
        except (OSError, ValueError, OverflowError):
            continue
        out.write(b)
        tot += len(b)
        if tot >= cap:
            break
PY
N=$(($(stat -c %s $DIR/snap) / 4096))
export S4D_SOCKET=$DIR/s.sock
$S4D daemon --backend "$BACKEND" >$DIR/log 2>&1 &
D=$!
for _ in $(seq 100); do $S4D ctl stats >/dev/null 2>&1 && break; sleep 0.2; done
$S4D ctl --timeout 10m put --pool p --file $DIR/snap >/dev/null
$S4D ctl stats --output data,compr,ratio,pages,zero-pages,huge-pages
$S4D ctl idle --mark >/dev/null
$S4D ctl --timeout 30m recompress --idle 0
$S4D ctl stats --output data,compr,ratio --noheadings
$S4D ctl --timeout 10m get --pool p --keys 0-$((N - 1)) --out $DIR/back
cmp $DIR/back <(head -c $((N * 4096)) $DIR/snap) && echo "every page back identical ($N pages)"
