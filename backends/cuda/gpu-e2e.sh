#!/bin/bash
# Measures the daemon end to end on a GPU machine without Go or network:
# starts bin/s4d from $CARRY (make cuda-carry) with the cuda backend, snapshots
# a live Python process holding PyTorch tensors and a heap of dicts, and
# drives the daemon with s4d bench, pages handed over in memfds, next to the
# cpu engine in the bench process on the same pages. Logs go to $OUT.
set -u
CARRY=${CARRY:-.carry/cuda}
OUT=${OUT:-/tmp/s4d-gpu}
CLIENTS=${CLIENTS:-4}  # a list runs each in turn
BATCH=${BATCH:-4096,16384}
BACKEND=${BACKEND:-auto}
mkdir -p "$OUT" /tmp/nvc
nvidia-smi -L
python3 -m zipfile -e "$CARRY"/nvidia_libnvcomp_*.whl /tmp/nvc && chmod +x /tmp/nvc/nvidia/libnvcomp/lib64/*.so*
export S4D_NVCOMP_LIB=/tmp/nvc/nvidia/libnvcomp/lib64/libnvcomp.so.6
# PY: a process already running to snapshot; else one is started.
if [ -z "${PY:-}" ]; then
	python3 -c '
import torch, time, json
w = [torch.nn.Linear(1024, 1024) for _ in range(16)]
x = torch.randn(4096, 1024)
d = {str(i): [i, str(i) * 3, {"k": i}] for i in range(400000)}
s = json.dumps(d)[:50_000_000]
print("ready", flush=True); time.sleep(600)' >"$OUT/py.log" 2>&1 &
	PY=$!
	OWNPY=1
	for _ in $(seq 60); do grep -q ready "$OUT/py.log" 2>/dev/null && break; sleep 1; done
fi
# STAGES=1: first the engine as the daemon runs it, in the bench process
# (--inproc --store), with its stage breakdown in $OUT/stages.json.
if [ -n "${STAGES:-}" ]; then
	"$CARRY"/s4d bench --inproc --store --backend cuda --codec lz4 --from-pid $PY --max-bytes ${MAX_BYTES:-256M} \
		--clients ${CLIENTS%% *} --batch $BATCH --repeat ${REPEAT:-2} --json >"$OUT/stages.json" 2>>"$OUT/bench.log"
fi
SOCK=/tmp/s4d-e2e.sock
"$CARRY"/s4d daemon --socket $SOCK --backend "$BACKEND" --log-level info ${PROFILE:+--cpuprofile "$OUT/daemon.prof"} ${DAEMON_ARGS:-} >"$OUT/daemon.log" 2>&1 &
D=$!
for _ in $(seq 120); do [ -S $SOCK ] && "$CARRY"/s4d ctl --socket $SOCK stats >/dev/null 2>&1 && break; sleep 0.5; done
"$CARRY"/s4d ctl --socket $SOCK stats | sed -n '/^BACKEND/,/^$/p'
for mode in ${MODES:---memfd}; do
	[ "$mode" = copy ] && mode=
	for clients in $CLIENTS; do
		"$CARRY"/s4d bench --socket $SOCK --from-pid $PY --max-bytes ${MAX_BYTES:-256M} --clients $clients \
			--batch $BATCH --repeat ${REPEAT:-2} $mode 2>&1 | tee -a "$OUT/bench.log"
	done
done
"$CARRY"/s4d ctl --socket $SOCK stats | sed -n '/^BACKEND/,/^$/p'
kill $D
[ -n "${OWNPY:-}" ] && kill $PY
wait $D
tail -5 "$OUT/daemon.log"
