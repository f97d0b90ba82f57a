#!/bin/bash
# Issue 41: Tint's SPIR-V beside naga's on the GPU machine, one call. Made
# by `make vulkan-tint-carry`; run as `bash .carry/vktint/tint-run.sh`
# (summary.txt, nv.tar.gz and logs.tar.gz to $OUT):
# Each step can be left out (DUMP=0, TESTS=0, BENCH=0, DAEMON=0, DAWN_KERNELS=0);
# ROBUST_MODES="0 1" repeats the kernel benchmarks on a device with robust
# buffer access (S4D_VULKAN_ROBUST=1), SGS picks the compress modules
# (1: subgroups, 0: workgroup memory), ROWS the daemon rows (cpu tint naga
# tintrobust).
#  1. tintgen with Dawn on this GPU: Tint's modules as Dawn generates them
#     here, compared byte for byte with the committed ones (made on lavapipe),
#     and the toggles the device used;
#  2. the kernel tests (vk, both compilers' modules) and the Vulkan-runtime
#     tests of backends/webgpu with each compiler's modules;
#  3. the kernels alone: vk's BenchmarkCompress (both sets in one process),
#     webgpu's BenchmarkVulkanDecompress per set, and Dawn's own kernels
#     (BenchmarkKernel64MiB, BenchmarkDecompressKernel64MiB) for reference;
#  4. the daemon table of docs/benchmarks/2026-12-02-vulkan-runtime.md:
#     cpu, vulkan with Tint's modules, vulkan with naga's, PASSES times.
set -u
cd "$(dirname "$0")/../.." || exit 1
C=$PWD/.carry/vktint
OUT=${OUT:-/tmp/s4d-vktint}; mkdir -p "$OUT"
L=/tmp/vktint-logs; mkdir -p $L
SUM=$OUT/summary.txt
. backends/webgpu/testdata/gpu-env.sh
chmod +x "$C"/tintgen
export S4D_WEBGPU_LIB=$C/libwebgpu_wrapper.so
say "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) cores $(nproc) $(date -u)"

if [ "${DUMP:-1}" = 1 ]; then
	mkdir -p $L/nv
	timeout 60 "$C"/tintgen -asm -dawn bun-webgpu-linux-x64@0.1.7 "$C"/libwebgpu_wrapper.so $L/nv > $L/tintgen.log 2>&1
	say "== tintgen (Dawn) on this GPU rc $?"
	tee -a $SUM < $L/tintgen.log | cut -c1-300
	for f in compress compress_sg compress_exact decompress; do
		cmp $L/nv/$f.spv backends/vulkan/spirv/tint/$f.spv && say "$f.spv: identical to the committed module"
	done
	tar -czf $OUT/nv.tar.gz -C $L nv
fi
if [ "${TESTS:-1}" = 1 ]; then
	(cd backends/vulkan/vk && S4D_REQUIRE_VULKAN=1 S4D_VULKAN_KERNELS=1 S4D_VULKAN_ALL_KERNELS=1 timeout 120 "$C"/vk.test -test.v -test.count=${TCOUNT:-2}) > $L/vk-tests.log 2>&1
	say "== vk.test, every kernel of both sets rc $?"
	grep -E '^(--- |    --- |FAIL|ok|PASS)' $L/vk-tests.log | sort | uniq -c | tee -a $SUM
	for s in tint naga; do
		(cd backends/webgpu && S4D_VULKAN_SPIRV=$s S4D_REQUIRE_VULKAN=1 timeout 120 "$C"/webgpu.test -test.v -test.count=${TCOUNT:-2} \
			-test.run 'TestVulkan|TestAuto') > $L/webgpu-tests-$s.log 2>&1
		say "== webgpu.test Vulkan runtime, S4D_VULKAN_SPIRV=$s rc $?"
		grep -E '^(--- |FAIL|ok|PASS)' $L/webgpu-tests-$s.log | sort | uniq -c | tee -a $SUM
		grep -m1 'runtime vulkan' $L/webgpu-tests-$s.log | cut -c1-200 | tee -a $SUM
	done
fi
if [ "${BENCH:-1}" = 1 ]; then
	# A third set for vk's BenchmarkCompress where the carry has one: Tint's
	# modules under other toggles (tintgen -toggles), in $C/extra.
	[ -f "$C"/extra/compress.spv ] && export S4D_BENCH_SPV_DIR=$C/extra S4D_BENCH_SPV_NAME=${EXTRA_NAME:-extra}
	# ROBUST_MODES="0 1" runs the kernels again on a device with robust
	# buffer access (S4D_VULKAN_ROBUST=1).
	for rb in ${ROBUST_MODES:-0}; do
	for sg in ${SGS:-1 0}; do
		(cd backends/vulkan/vk && S4D_VULKAN_ROBUST=$rb S4D_BENCH_MIB=1024 S4D_BENCH_SG=$sg timeout 150 "$C"/vk.test -test.run XXX \
			-test.bench Compress -test.benchtime 3x -test.count 3) > $L/ceiling-sg$sg-rb$rb.log 2>&1
		say "== vk BenchmarkCompress S4D_BENCH_SG=$sg S4D_VULKAN_ROBUST=$rb (kernel alone, 4096-page batches, 4 in flight, 1 GiB) rc $?"
		grep -E '^Benchmark' $L/ceiling-sg$sg-rb$rb.log | sed -E 's/ +/ /g' | tee -a $SUM
	done
	for pass in 1 2; do
		for s in tint naga; do
			(cd backends/webgpu && S4D_VULKAN_ROBUST=$rb S4D_VULKAN_SPIRV=$s S4D_VULKAN_KERNELS=1 timeout 120 "$C"/webgpu.test -test.run XXX \
				-test.bench VulkanDecompress -test.benchtime 10x -test.count 1) > $L/vkdecomp-$s-$pass-rb$rb.log 2>&1
			say "== webgpu BenchmarkVulkanDecompress S4D_VULKAN_SPIRV=$s S4D_VULKAN_ROBUST=$rb pass $pass rc $?"
			grep -E '^Benchmark' $L/vkdecomp-$s-$pass-rb$rb.log | sed -E 's/ +/ /g' | tee -a $SUM
		done
	done
	done
	if [ "${DAWN_KERNELS:-1}" = 1 ]; then
		(cd backends/webgpu && timeout 120 "$C"/webgpu.test -test.run XXX -test.bench 'Kernel64MiB' -test.benchtime 10x -test.count 2) > $L/dawn-kernels.log 2>&1
		say "== Dawn's own kernels (webgpu.h runtime): BenchmarkKernel64MiB, BenchmarkDecompressKernel64MiB rc $?"
		grep -E '^Benchmark|webgpu_test.go' $L/dawn-kernels.log | sed -E 's/ +/ /g' | cut -c1-250 | tee -a $SUM
	fi
fi
if [ "${DAEMON:-1}" = 1 ]; then
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
	S4D=$C/s4d SOCK=/tmp/vktint.sock
	row() { # name, spirv set, robust (0/1), daemon flags...
		local name=$1 set=$2 rb=$3; shift 3
		rm -f $SOCK
		S4D_VULKAN_ROBUST=$rb S4D_VULKAN_SPIRV=$set $S4D daemon --config /dev/null --socket $SOCK "$@" > $L/daemon-$name.log 2>&1 &
		local D=$!
		for _ in $(seq 600); do $S4D ctl --socket $SOCK stats > /dev/null 2>&1 && break; sleep 0.1; done
		for r in $(seq ${RUNS:-2}); do
			timeout 120 $S4D bench --socket $SOCK --file /tmp/corpus --max-bytes 1G --clients 16 --batch 4096,16384 \
				--repeat 2 --memfd --json > $L/bench-$name-$r.json 2> $L/bench-$name-$r.err
			say "== $name run $r rc $?"
		done
		$S4D ctl --socket $SOCK stats > $L/stats-$name.txt 2>&1
		grep -E 'webgpu' $L/stats-$name.txt | head -2 | cut -c1-400 | tee -a $SUM
		kill -TERM $D; wait $D
	}
	for pass in $(seq ${PASSES:-2}); do
		# ROWS: cpu, tint, naga, tintrobust (Tint's modules, robust buffer access).
		for r in ${ROWS:-cpu tint naga}; do
			case $r in
			cpu) row cpu-$pass "" 0 --backend cpu ;;
			tint | naga) row $r-$pass $r 0 --backend webgpu --wgsl-runtime vulkan ;;
			tintrobust) row $r-$pass tint 1 --backend webgpu --wgsl-runtime vulkan ;;
			esac
		done
	done
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
fi
tar -czf $OUT/logs.tar.gz -C $L .
say "done $(date -u)"
