#!/bin/bash
# The compress kernel alone, then beside a CPU load (the cpu engine in
# process, s4d bench --inproc, on the same corpus): does host load slow the
# GPU? Here: make vulkan-tint-carry, cp this into .carry/vktint/; there:
# bash .carry/vktint/contend-run.sh (IDLE=0, LOADS, WARM: seconds of load first).
set -u
cd "$(dirname "$0")/../.." || exit 1
C=$PWD/.carry/vktint
OUT=${OUT:-/tmp/s4d-cont}; mkdir -p "$OUT"; SUM=$OUT/summary.txt
. backends/webgpu/testdata/gpu-env.sh
export S4D_WEBGPU_LIB=$C/libwebgpu_wrapper.so
say "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) cores $(nproc) $(date -u)"
if [ ! -s /tmp/corpus ]; then
python3 -c '
import torch, time, json
w = [torch.nn.Linear(2048, 2048) for _ in range(48)]
x = torch.randn(16384, 2048)
d = {str(i): [i, str(i) * 3, {"k": i}] for i in range(400000)}
s = json.dumps(d)[:50_000_000]
print("ready", flush=True); time.sleep(900)' > /tmp/py.log 2>&1 &
PY=$!
for _ in $(seq 120); do grep -q ready /tmp/py.log 2>/dev/null && break; sleep 1; done
python3 clients/python/bench/dump_pid.py $PY $((1 << 30)) /tmp/corpus | tee -a $SUM
kill $PY
fi
kb() { # label
	(cd backends/vulkan/vk && S4D_VULKAN_SPIRV=tint S4D_BENCH_FILE=/tmp/corpus S4D_BENCH_HOSTOUT=1 S4D_BENCH_DEPTH=8 S4D_BENCH_MIB=1024 \
		S4D_BENCH_MEMFD=1 S4D_BENCH_SG=1 timeout 120 "$C"/vk.test -test.run XXX -test.bench 'Compress/tint/hostout' -test.benchtime 5x -test.count 3) > $OUT/kb-$1.log 2>&1
	say "== kernel alone? $1 rc $?"; grep -E '^Benchmark' $OUT/kb-$1.log | sed -E 's/ +/ /g' | tee -a $SUM
}
[ "${IDLE:-1}" = 1 ] && kb idle
for load in ${LOADS:-8 16}; do
	$C/s4d bench --inproc --backend cpu --codec lz4 --file /tmp/corpus --max-bytes 1G --clients $load --batch 4096 --repeat 40 > $OUT/load-$load.log 2>&1 &
	L=$!; sleep ${WARM:-6}
	say "load before: $(ps -o etime=,time= -p $L)"
	kb load$load
	say "load: $(ps -o etime=,time= -p $L) loadavg $(cat /proc/loadavg)"
	kill $L; wait $L 2>/dev/null
done
kb idle2
say "done $(date -u)"
