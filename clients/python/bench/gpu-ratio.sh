#!/bin/bash
# The Python client against the Go client through a cuda daemon on a GPU
# host, in one call of the device tool, with nothing but what is carried
# (make pyratio-carry): a live PyTorch process's memory (1 GiB) as the
# pages, ratio.py's pairs, then the Python suite (PyTorch tests included)
# against the same daemon. Logs go to $OUT.
set -u
CARRY=${CARRY:-.carry/pyratio}
OUT=${OUT:-/tmp/pyratio}
MAX=${MAX_BYTES:-1G}
mkdir -p "$OUT" /tmp/nvc
xz -dkf "$CARRY"/s4d.xz && chmod +x "$CARRY"/s4d
python3 -m zipfile -e "$CARRY"/nvidia_libnvcomp_*.whl /tmp/nvc && chmod +x /tmp/nvc/nvidia/libnvcomp/lib64/*.so*
export S4D_NVCOMP_LIB=/tmp/nvc/nvidia/libnvcomp/lib64/libnvcomp.so.6
nvidia-smi -L
python3 -c '
import torch, time, json
w = [torch.nn.Linear(2048, 2048) for _ in range(48)]
x = torch.randn(16384, 2048)
d = {str(i): [i, str(i) * 3, {"k": i}] for i in range(400000)}
s = json.dumps(d)[:50_000_000]
print("ready", flush=True); time.sleep(900)' >"$OUT/py.log" 2>&1 &
PY=$!
for _ in $(seq 120); do grep -q ready "$OUT/py.log" 2>/dev/null && break; sleep 1; done
python3 clients/python/bench/dump_pid.py $PY $((1 << 30)) /tmp/corpus
kill $PY
SOCK=/tmp/s4d-ratio.sock
export S4D_SOCKET=$SOCK
"$CARRY"/s4d daemon --socket $SOCK --backend ${BACKEND:-auto} --socket-mode 0666 >"$OUT/daemon.log" 2>&1 &
D=$!
for _ in $(seq 120); do "$CARRY"/s4d ctl --socket $SOCK stats >/dev/null 2>&1 && break; sleep 0.5; done
"$CARRY"/s4d ctl --socket $SOCK stats | sed -n '/^BACKEND/,/^$/p'
for b in ${BATCHES:-4096 16384}; do
	python3 clients/python/bench/ratio.py --socket $SOCK --file /tmp/corpus --max-bytes $MAX --batch $b \
		--runs ${RUNS:-5} --s4d "$CARRY"/s4d 2>>"$OUT/ratio.err" | tee -a "$OUT/ratio.txt"
done
if [ "${SUITE:-1}" = 1 ]; then
	S4D_SOCKET=$SOCK S4D_BIN="$CARRY"/s4d PYTHONPATH=clients/python python3 -m unittest discover -v \
		-s clients/python/tests -t clients/python/tests >"$OUT/unittest.txt" 2>&1
	echo "python suite: exit $?"; tail -4 "$OUT/unittest.txt"
	grep -i "torch\|skip" "$OUT/unittest.txt" | head -20
fi
if [ "${GUIDE:-0}" = 1 ]; then
	# Every python block of the Python guide, each in a fresh interpreter.
	python3 - docs/guides/python.md >"$OUT/guide.txt" 2>&1 <<'PY'
import os, re, subprocess, sys
blocks = re.findall(r"```python\n(.*?)```", open(sys.argv[1]).read(), re.S)
env = dict(os.environ, PYTHONPATH="clients/python")
bad = 0
for i, b in enumerate(blocks):
    r = subprocess.run([sys.executable, "-c", b], env=env, capture_output=True, text=True, timeout=300)
    print(f"block {i}: exit {r.returncode}", r.stdout[-300:], r.stderr[-1500:])
    bad += r.returncode != 0
print(f"{len(blocks)} blocks, {bad} failed")
PY
	S4D_SOCKET=$SOCK; tail -3 "$OUT/guide.txt"
fi
kill $D; wait $D
tail -3 "$OUT/daemon.log"
