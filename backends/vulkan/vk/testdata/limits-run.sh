#!/bin/bash
# Where the Vulkan runtime's daemon PUT and GET lose time (2026-12-03,
# docs/benchmarks/2026-12-03-vulkan-limits.md), one call on the GPU machine.
# Here: make vulkan-tint-carry, then cp this script into .carry/vktint/;
# there: bash .carry/vktint/limits-run.sh (summary.txt, logs.tar.gz to $OUT).
#  1. the kernels alone (vk BenchmarkCompress on corpus.Mixed and on the
#     daemon's corpus, webgpu BenchmarkVulkanDecompress);
#  2. the daemon table (ROWS: cpu, vk: vulkan with the default slots,
#     vkold / vkalt: the same with s4d-old / s4d-alt, other builds
#     carried beside; dawn: the webgpu.h runtime; auto: --wgsl-runtime's default; vkstage: every batch staged (no import); vkdevin / vkhostin: GET's blocks parsed in device memory (the default on a discrete GPU) / in host memory; autonc / autoncold: --backend auto with CUDA hidden, this build / s4d-old; vk4 /
#     vk8: with 4 / SLOTS compress slots, DSLOTS decompression slots for
#     vk8; vkprof / cpuprof: with --cpuprofile), PASSES times, each row
#     its own daemon with S4D_VULKAN_PROF=1: the runtime's per-stage
#     profile is read from `s4d ctl stats` before and after every bench
#     call and the difference kept beside the call's figures;
#  3. the profiled calls: one batch size each, --repeat 1 (CLEAN=1: only
#     calls of 1 and of 3 repeats per batch size, whose difference is the
#     steady state without the import of the client's fresh mapping).
set -u
cd "$(dirname "$0")/../.." || exit 1
C=$PWD/.carry/vktint
OUT=${OUT:-/tmp/s4d-vklim}; mkdir -p "$OUT"
L=/tmp/vklim-logs; mkdir -p $L
SUM=$OUT/summary.txt
. backends/webgpu/testdata/gpu-env.sh
say "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) cores $(nproc) $(date -u)"
# Where the GPU sits: NUMA nodes and its PCIe link (PUT's GPU time in the
# daemon against the kernel alone).
BUS=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader | head -1 | tr 'A-F' 'a-f' | sed 's/^0000//')
say "numa nodes: $(ls -d /sys/devices/system/node/node* 2>/dev/null | wc -l); gpu $BUS numa_node $(cat /sys/bus/pci/devices/*$BUS/numa_node 2>/dev/null); $(lscpu | grep -E '^(Socket|NUMA node)' | tr -s ' \n' ' ')"
say "pcie: $(nvidia-smi --query-gpu=pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current --format=csv,noheader)"
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
if [ "${BENCH:-1}" = 1 ]; then
	# The compress kernel alone on corpus.Mixed and on the daemon's corpus,
	# 4 and 8 batches in flight, writing to device memory (then copied) or
	# straight into host memory as the engine does (hostout).
	# OLD=1: vk-old.test (an older build, carried beside) in the same call.
	# MEMFDS="0 1": the pages in anonymous memory, then in a shared memfd.
	say "THP $(cat /sys/kernel/mm/transparent_hugepage/enabled) shmem $(cat /sys/kernel/mm/transparent_hugepage/shmem_enabled 2>&1)"
	# COMPRESS=0 skips these; DTESTS names the webgpu.test builds whose
	# decompress kernel runs (webgpu-ch16 ...: other chunk sizes, carried).
	[ "${COMPRESS:-1}" = 1 ] && for f in ${FILES:-mixed corpus}; do for dp in ${DEPTHS:-4 8}; do for t in vk $([ "${OLD:-0}" = 1 ] && echo vk-old); do for mf in ${MEMFDS:-0}; do
		file=; [ $f = corpus ] && file=/tmp/corpus
		(cd backends/vulkan/vk && S4D_VULKAN_SPIRV=tint S4D_BENCH_FILE=$file S4D_BENCH_HOSTOUT=1 S4D_BENCH_DEPTH=$dp S4D_BENCH_MIB=1024 \
			S4D_BENCH_MEMFD=$mf S4D_BENCH_SG=1 timeout 120 "$C"/$t.test -test.run XXX -test.bench Compress -test.benchtime 3x -test.count 2) > $L/ceiling-$t-$f-$dp-$mf.log 2>&1
		say "== $t BenchmarkCompress pages $f, depth $dp, memfd $mf (kernel alone, 4096-page batches, 1 GiB) rc $?"
		grep -E '^Benchmark' $L/ceiling-$t-$f-$dp-$mf.log | sed -E 's/ +/ /g' | tee -a $SUM
	done; done; done; done
	# FROMIDLE=1: the compress kernel alone, one 1 GiB pass at a time after
	# a second of idle, against its steady passes (clocks rising from idle).
	[ "${FROMIDLE:-0}" = 1 ] && for k in 1 2 3 4 5; do
		sleep 1
		(cd backends/vulkan/vk && S4D_VULKAN_SPIRV=tint S4D_BENCH_FILE=/tmp/corpus S4D_BENCH_HOSTOUT=1 S4D_BENCH_DEPTH=8 S4D_BENCH_MIB=1024 \
			S4D_BENCH_MEMFD=1 S4D_BENCH_SG=1 timeout 120 "$C"/vk.test -test.run XXX -test.bench 'Compress/tint/hostout' -test.benchtime 1x -test.count 1) > $L/fromidle-$k.log 2>&1
		say "== kernel alone, one pass after 1 s idle ($k) rc $?"; grep -E '^Benchmark' $L/fromidle-$k.log | sed -E 's/ +/ /g' | tee -a $SUM
	done
	for t in ${DTESTS:-webgpu}; do
		(cd backends/webgpu && S4D_VULKAN_KERNELS=1 timeout 120 "$C"/$t.test -test.run XXX \
			-test.bench VulkanDecompress -test.benchtime 10x -test.count 2) > $L/vkdecomp-$t.log 2>&1
		say "== $t BenchmarkVulkanDecompress rc $?"
		grep -E '^Benchmark' $L/vkdecomp-$t.log | sed -E 's/ +/ /g' | tee -a $SUM
	done
fi
# SUBMIT=1: what a submission costs (vk BenchmarkSubmit), with no other
# imports and with IMPORTS of 16 MiB (the store's slabs, say).
[ "${SUBMIT:-0}" = 1 ] && for im in 0 ${IMPORTS:-64}; do
	(cd backends/vulkan/vk && S4D_BENCH_IMPORTS=$im timeout 120 "$C"/vk.test -test.run XXX -test.bench Submit -test.benchtime 20000x -test.count 2) > $L/submit-$im.log 2>&1
	say "== vk BenchmarkSubmit, $im imports rc $?"; grep -E '^Benchmark' $L/submit-$im.log | sed -E 's/ +/ /g' | tee -a $SUM
done
S4D=$C/s4d SOCK=/tmp/vklim.sock
snap() { $S4D ctl --socket $SOCK stats 2>&1 | grep -o 'prof{[^}]*}' | head -1 > $L/$1.prof; }
bench() { # name, batches, repeat
	snap $1.before
	# CALLCLOCKS=1: the SM clock every 20 ms during this call alone.
	local CP=
	if [ "${CALLCLOCKS:-0}" = 1 ]; then
		nvidia-smi --query-gpu=clocks.sm,utilization.gpu --format=csv,noheader,nounits -lms 20 > $L/ck-$1.csv 2>&1 &
		CP=$!
	fi
	timeout 120 $S4D bench --socket $SOCK --file /tmp/corpus --max-bytes 1G --clients 16 --batch $2 \
		--repeat $3 --memfd --json > $L/bench-$1.json 2> $L/bench-$1.err
	local rc=$? ck=
	if [ -n "$CP" ]; then
		kill $CP; wait $CP 2>/dev/null
		ck=$(awk -F', *' '$2 > 0 { n++; s += $1; if ($1 < 1500) lo++ } END { printf "; busy samples %d, SM MHz mean %.0f, under 1500: %d", n, n ? s / n : 0, lo }' $L/ck-$1.csv)
	fi
	say "== $1 rc $rc$ck"
	snap $1.after
}
row() { # name, env..., -- daemon flags...
	local name=$1; shift
	local envs=()
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	rm -f $SOCK
	# CLOCKS=1: the GPU's SM clock and load every 20 ms while the row runs.
	local CK=
	if [ "${CLOCKS:-0}" = 1 ]; then
		nvidia-smi --query-gpu=clocks.sm,utilization.gpu,power.draw --format=csv,noheader,nounits -lms 20 > $L/clocks-$name.csv 2>&1 &
		CK=$!
	fi
	local bin=$S4D
	case $name in vkold* | autoncold*) bin=$C/s4d-old ;; vkalt*) bin=$C/s4d-alt ;; esac
	env S4D_VULKAN_PROF=1 "${envs[@]}" $bin daemon --config /dev/null --socket $SOCK "$@" > $L/daemon-$name.log 2>&1 &
	local D=$!
	for _ in $(seq 600); do $S4D ctl --socket $SOCK stats > /dev/null 2>&1 && break; sleep 0.1; done
	if [ "${STEADY:-0}" = 1 ]; then
		# The SM clock in a steady PUT/GET: a warm-up call (imports, slots),
		# then one call of REPEATS repeats sampled every 10 ms; the summary
		# keeps the samples of its second half (past the first repeat's import).
		bench $name-warm 4096 1
		nvidia-smi --query-gpu=clocks.sm,utilization.gpu --format=csv,noheader,nounits -lms 10 > $L/steady-$name.csv 2>&1 &
		local SK=$!
		bench $name-steady 4096 ${REPEATS:-8}
		kill $SK; wait $SK 2>/dev/null
		local n=$(wc -l < $L/steady-$name.csv)
		say "steady clocks $name, last $((n / 2)) of $n samples: $(tail -n $((n / 2)) $L/steady-$name.csv | awk -F', *' '{ n++; s += $1; if ($2 > 0) b++; c[int($1 / 200) * 200]++ } END { printf "SM MHz mean %.0f, samples with load %d;", s / n, b; for (k in c) printf " %d+:%d", k, c[k] }')"
	elif [ "${CLEAN:-0}" = 1 ]; then
		# Steady state: a call of 1 repeat and one of 3 per batch size;
		# each call's first repeat imports its fresh memfd, so the
		# difference of the two profiles is 2 repeats without an import.
		for b in 4096 16384; do for r in 1 3; do bench $name-c$b-r$r $b $r; done; done
	else
		for r in $(seq ${RUNS:-2}); do bench $name-std$r 4096,16384 2; done
		for b in 4096 16384; do for r in 1 2; do bench $name-b$b-$r $b 1; done; done
	fi
	$S4D ctl --socket $SOCK stats > $L/stats-$name.txt 2>&1
	grep -E '^(webgpu|cpu) ' $L/stats-$name.txt | head -2 | cut -c1-600 | tee -a $SUM
	# The daemon's memory beside its speed: peak and current resident set.
	say "mem $name $(grep -E 'VmHWM|VmRSS' /proc/$D/status | tr -s ' \t\n' ' ')"
	if [ "${IDLE_WAIT:-0}" != 0 ]; then # and once idle (the Vulkan slots' sweep)
		sleep $IDLE_WAIT
		say "mem $name after ${IDLE_WAIT}s idle $(grep -E 'VmRSS' /proc/$D/status | tr -s ' \t\n' ' ') $($S4D ctl --socket $SOCK stats 2>&1 | grep -o 'slot buffers [^)]*)')"
	fi
	kill -TERM $D; wait $D
	if [ -n "$CK" ]; then
		kill $CK; wait $CK 2>/dev/null
		# SM clock (MHz) over the samples with the GPU busy (load > 0).
		say "clocks $name: $(awk -F', *' '$2 > 0 { n++; s += $1; if (!m || $1 < m) m = $1; if ($1 > x) x = $1; c[int($1 / 200) * 200]++ } END { printf "busy samples %d, SM MHz mean %.0f min %d max %d;", n, n ? s / n : 0, m, x; for (k in c) printf " %d+:%d", k, c[k] }' $L/clocks-$name.csv)"
	fi
}
for pass in $(seq ${PASSES:-2}); do
	for r in ${ROWS:-cpu vk vk4}; do
		case $r in
		cpu) row cpu-$pass -- --backend cpu ;;
		vk) row vk-$pass -- --backend webgpu --wgsl-runtime vulkan ;;
		dawn) row dawn-$pass -- --backend webgpu --wgsl-runtime webgpu ;;
		auto) row auto-$pass -- --backend webgpu ;;
		vkold) row vkold-$pass -- --backend webgpu --wgsl-runtime vulkan ;;
		vkalt) row vkalt-$pass -- --backend webgpu --wgsl-runtime vulkan ;;
		vkdevin) row vkdevin-$pass S4D_VULKAN_DEVIN=1 -- --backend webgpu --wgsl-runtime vulkan ;;
		vkhostin) row vkhostin-$pass S4D_VULKAN_DEVIN=0 -- --backend webgpu --wgsl-runtime vulkan ;;
		vknogather) row vknogather-$pass S4D_VULKAN_NO_GATHER=1 -- --backend webgpu --wgsl-runtime vulkan ;;
		vkd16) row vkd16-$pass S4D_VULKAN_DSLOTS=16 -- --backend webgpu --wgsl-runtime vulkan ;;
		# vkserial: submissions as before 2026-12-04 (one lock, recording under it).
		vkserial) row vkserial-$pass S4D_VULKAN_SUBMIT=serial -- --backend webgpu --wgsl-runtime vulkan ;;
		vks*) row $r-$pass S4D_VULKAN_GATHER_SHARE=${r#vks} -- --backend webgpu --wgsl-runtime vulkan ;;
		# autonc / autoncold: --backend auto with CUDA hidden, as on a GPU without
		# it (the router picks among webgpu and cpu), this build / s4d-old.
		autonc) row autonc-$pass CUDA_VISIBLE_DEVICES= -- --backend auto ;;
		autoncold) row autoncold-$pass CUDA_VISIBLE_DEVICES= -- --backend auto ;;
		vkstage) row vkstage-$pass S4D_VULKAN_NO_IMPORT=1 -- --backend webgpu --wgsl-runtime vulkan ;;
		vk4) row vk4-$pass S4D_VULKAN_SLOTS=4 -- --backend webgpu --wgsl-runtime vulkan ;;
		vk8) row vk8-$pass S4D_VULKAN_SLOTS=${SLOTS:-8} S4D_VULKAN_DSLOTS=${DSLOTS:-8} -- --backend webgpu --wgsl-runtime vulkan ;;
		vkprof) row vkprof-$pass -- --backend webgpu --wgsl-runtime vulkan --cpuprofile $OUT/cpu-vk-$pass.pprof ;;
		cpuprof) row cpuprof-$pass -- --backend cpu --cpuprofile $OUT/cpu-cpu-$pass.pprof ;;
		esac
	done
done
python3 - $L <<'PY' | tee -a $SUM
import json, sys, glob, re, os
L = sys.argv[1]
def prof(path):
    try:
        s = open(path).read()
    except OSError:
        return {}
    out = {}
    for part in re.findall(r'(put|get|import|submit): ([^;}]*)', s):
        for k, v in re.findall(r'(\w+)=([\d.]+)', part[1]):
            out[part[0] + "." + k] = float(v)
    return out
for f in sorted(glob.glob(L + "/bench-*.json")):
    name = os.path.basename(f)[6:-5]
    try:
        r = json.load(open(f))
    except Exception as e:
        print(name, "unreadable:", e); continue
    for x in r.get("results", []):
        print(name, x["batch_pages"], "put %.2f get %.2f cpu %.3f/%.3f ratio %.2f put_s %.4f get_s %.4f" % (
            x["put_gb_per_s"], x["get_gb_per_s"], x["put_cpu_s_per_gb"], x["get_cpu_s_per_gb"], x["ratio"],
            x.get("put_seconds", 0), x.get("get_seconds", 0)))
    a, b = prof(L + "/" + name + ".before.prof"), prof(L + "/" + name + ".after.prof")
    if b:
        d = {k: b[k] - a.get(k, 0) for k in b if not k.endswith("maxflight")}
        d.update({k: b[k] for k in b if k.endswith("maxflight")})
        print("  prof", " ".join("%s=%g" % (k, round(v, 1)) for k, v in sorted(d.items())))
PY
tar -czf $OUT/logs.tar.gz -C $L .
say "done $(date -u)"
