#!/bin/bash
# Issue 41 step 2 on the GPU machine, one call (made by `make
# vulkan-runtime-carry`; run as `bash .carry/vkrt/vulkan-runtime.sh`):
# the Vulkan runtime's tests with Vulkan required, the kernel's ceiling
# (vk's BenchmarkCompress), then the daemon over 1 GiB of a live PyTorch
# process's memory with the cpu engine, the WGSL engine on the Vulkan
# runtime and the cuda engine, each daemon alone, RUNS bench calls each
# (--repeat 2 inside), in the order cpu vulkan cuda, twice. The JSON of
# every bench call and the logs go to $OUT.
set -u
cd "$(dirname "$0")/../.." || exit 1
C=$PWD/.carry/vkrt
OUT=${OUT:-/tmp/s4d-vkrt}; mkdir -p "$OUT" /tmp/nvc
L=/tmp/vkrt-logs; mkdir -p $L
SUM=$OUT/summary.txt
. backends/webgpu/testdata/gpu-env.sh
python3 -m zipfile -e "$C"/nvidia_libnvcomp_*.whl /tmp/nvc && chmod +x /tmp/nvc/nvidia/libnvcomp/lib64/*.so*
export S4D_NVCOMP_LIB=$(ls /tmp/nvc/nvidia/libnvcomp/lib64/libnvcomp.so.* | head -1)
say "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) cores $(nproc) $(date -u)"

if [ "${PROBE:-1}" = 1 ]; then
	(cd backends/vulkan/vk && S4D_VULKAN_IMPORT_PROBE=1 timeout 60 "$C"/vk.test -test.run TestImportKinds -test.v) > $L/probe.log 2>&1
	say "== which host memory the driver imports rc $?"
	grep -E 'import_test' $L/probe.log | cut -c1-160 | tee -a $SUM
fi
if [ "${TESTS:-1}" = 1 ]; then
	(cd backends/webgpu && S4D_REQUIRE_VULKAN=1 timeout 150 "$C"/webgpu.test -test.v -test.count=${TCOUNT:-3} \
		-test.run 'TestVulkan|TestAuto') > $L/tests.log 2>&1
	say "== webgpu.test Vulkan runtime rc $?"
	grep -E '^(--- |FAIL|ok|PASS)' $L/tests.log | sort | uniq -c | tee -a $SUM
	grep -m2 'runtime vulkan' $L/tests.log | tee -a $SUM
	(cd backends/all && S4D_WGSL_RUNTIME=vulkan timeout 90 "$C"/all.test -test.run FuzzDifferential -test.v) > $L/fuzz.log 2>&1
	say "== FuzzDifferential (seed corpus) with S4D_WGSL_RUNTIME=vulkan rc $?"
	grep -E 'engine |^(--- |ok|PASS|FAIL)' $L/fuzz.log | tee -a $SUM
fi
if [ "${CEIL:-1}" = 1 ]; then
	(cd backends/vulkan/vk && S4D_BENCH_MIB=1024 S4D_BENCH_SG=1 timeout 120 "$C"/vk.test -test.run XXX \
		-test.bench Compress -test.benchtime 3x -test.count 2) > $L/ceiling.log 2>&1
	say "== vk BenchmarkCompress (kernel alone, 4096-page batches, 4 in flight) rc $?"
	grep -E '^Benchmark' $L/ceiling.log | sed -E 's/ +/ /g' | tee -a $SUM
fi

# The corpus: 1 GiB of a live PyTorch process (as clients/python/bench/gpu-ratio.sh).
python3 -c '
import torch, time, json
w = [torch.nn.Linear(2048, 2048) for _ in range(48)]
x = torch.randn(16384, 2048)
d = {str(i): [i, str(i) * 3, {"k": i}] for i in range(400000)}
s = json.dumps(d)[:50_000_000]
print("ready", flush=True); time.sleep(900)' > $L/py.log 2>&1 &
PY=$!
for _ in $(seq 120); do grep -q ready $L/py.log 2>/dev/null && break; sleep 1; done
python3 clients/python/bench/dump_pid.py $PY $((1 << 30)) /tmp/corpus | tee -a $SUM
kill $PY

S4D=$C/s4d SOCK=/tmp/vkrt.sock
row() { # name, runs, daemon flags...
	local name=$1 runs=$2; shift 2
	rm -f $SOCK
	$S4D daemon --config /dev/null --socket $SOCK "$@" > $L/daemon-$name.log 2>&1 &
	local D=$!
	for _ in $(seq 600); do $S4D ctl --socket $SOCK stats > /dev/null 2>&1 && break; sleep 0.1; done
	for r in $(seq $runs); do
		timeout 120 $S4D bench --socket $SOCK --file /tmp/corpus --max-bytes 1G --clients 16 --batch 4096,16384 \
			--repeat 2 --memfd --json > $L/bench-$name-$r.json 2> $L/bench-$name-$r.err
		say "== $name run $r rc $?"
	done
	$S4D ctl --socket $SOCK stats > $L/stats-$name.txt 2>&1
	grep -E 'webgpu|cuda' $L/stats-$name.txt | head -4 | cut -c1-400 | tee -a $SUM
	kill -TERM $D; wait $D
}
RUNS=${RUNS:-2}
for pass in $(seq ${PASSES:-2}); do
	row cpu-$pass $RUNS --backend cpu
	row vulkan-$pass $RUNS --backend webgpu --wgsl-runtime vulkan
	row cuda-$pass $RUNS --backend cuda
done
grep -h -iE 'backend.*webgpu' $L/daemon-vulkan-1.log | head -2 | cut -c1-600 | tee -a $SUM
# One line per bench call and batch size: GB/s, daemon core-s/GB, ratio.
python3 - $L/bench-*.json <<'PY' | tee -a $SUM
import json, sys
for f in sorted(sys.argv[1:]):
    try:
        r = json.load(open(f))
    except Exception as e:
        print(f, "unreadable:", e); continue
    for x in r.get("results", []):
        print(f.split("/")[-1][6:-5], x["batch_pages"], "put %.2f get %.2f cpu %.3f/%.3f ratio %.2f" % (
            x["put_gb_per_s"], x["get_gb_per_s"], x["put_cpu_s_per_gb"], x["get_cpu_s_per_gb"], x["ratio"]))
PY
tar -czf $OUT/logs.tar.gz -C $L .
say "done $(date -u)"
