#!/bin/bash
# Runs the CUDA backend's tests and benchmarks on a GPU machine that has
# nvcc but no Go toolchain and no network. Expects, in $CARRY (default
# .carry/cuda, from make cuda-carry): cuda.test, the nvidia-libnvcomp
# wheel, the lz4 wheel for the reference decoder, and Debian's zstd debs.
# Writes the fresh PTX and the logs to $OUT.
set -u
CARRY=${CARRY:-.carry/cuda}
OUT=${OUT:-/tmp/s4d-gpu}
mkdir -p "$OUT" /tmp/nvc /tmp/site /tmp/zstd
nvidia-smi -L
python3 -m zipfile -e "$CARRY"/nvidia_libnvcomp_*.whl /tmp/nvc && chmod +x /tmp/nvc/nvidia/libnvcomp/lib64/*.so*
export S4D_NVCOMP_LIB=/tmp/nvc/nvidia/libnvcomp/lib64/libnvcomp.so.6
# The conformance suite's reference decoders: C liblz4 through python's lz4
# (run by /usr/bin/python3) and the zstd command.
/usr/bin/python3 -c 'import lz4.block' 2>/dev/null ||
	/usr/bin/python3 -m pip install -q --no-index --no-deps --target /tmp/site "$CARRY"/lz4-*.whl
export PYTHONPATH=/tmp/site
if ! command -v zstd >/dev/null; then
	for f in "$CARRY"/deb/*.deb; do dpkg -x "$f" /tmp/zstd; done
	export PATH=$PATH:/tmp/zstd/usr/bin LD_LIBRARY_PATH=/tmp/zstd/usr/lib/x86_64-linux-gnu
fi
nvcc -ptx -arch=compute_75 -O3 -o "$OUT/s4d.ptx" ptx/s4d.cu || exit 1
export S4D_CUDA_PTX=$OUT/s4d.ptx
"$CARRY"/cuda.test -test.v -test.count=1 -test.timeout=240s ${TESTS:+-test.run "$TESTS"} 2>&1 | tee "$OUT/test.log"
[ -n "${BENCH:-}" ] || exit 0
# A live process to snapshot: a Python interpreter holding PyTorch tensors
# and an ordinary heap of dicts and strings.
python3 -c '
import torch, time, json
w = [torch.nn.Linear(1024, 1024) for _ in range(16)]
x = torch.randn(4096, 1024)
d = {str(i): [i, str(i) * 3, {"k": i}] for i in range(400000)}
s = json.dumps(d)[:50_000_000]
print("ready", flush=True); time.sleep(600)' >"$OUT/py.log" 2>&1 &
PY=$!
for _ in $(seq 60); do grep -q ready "$OUT/py.log" 2>/dev/null && break; sleep 1; done
# SLOT_MIBS: slot sizes to compare (S4D_CUDA_SLOT_MIB), default the built-in.
for mib in ${SLOT_MIBS:-0}; do
	echo "slot MiB: $mib (0: default)"
	S4D_CUDA_SLOT_MIB=$mib S4D_BENCH_PID=$PY "$CARRY"/cuda.test -test.v -test.run XXX -test.bench "$BENCH" \
		-test.benchtime "${BENCHTIME:-20x}" 2>&1
done | tee "$OUT/bench.log"
kill $PY
