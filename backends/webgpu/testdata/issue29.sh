#!/bin/bash
# Issue 29 on the GPU machine, in one call (`make wgsl-carry`, then
# `bash .carry/wgsl/issue29.sh`): the feature lists and the conformance
# suite on Dawn and wgpu-native, the kernel benchmarks before/after (a
# webgpu-old.test in the carry is the "before"), and the daemon with each
# engine on the same pages of a live PyTorch process, with a CPU profile
# of the daemon. Results go to $OUT: summary.txt, logs.tar.gz, the
# profiles (prof-*-heap.pb, all of them in profiles.tar.gz).
cd "$(dirname "$0")/../.." || exit 1
C=.carry/wgsl
OUT=${OUT:-/tmp/s4d-wgsl}; mkdir -p "$OUT"; L=/tmp/wgsl-logs; mkdir -p $L
SUM=$OUT/summary.txt
. backends/webgpu/testdata/gpu-env.sh
export S4D_REQUIRE_WEBGPU=1
DAWN=$PWD/$C/libwebgpu_wrapper.so WGPU=$PWD/$C/libwgpu_native.so S=$PWD/$C/s4d
say "$(nvidia-smi -L) cores $(nproc) VK_DRIVER_FILES=$VK_DRIVER_FILES $(date -u)"

# 1. Features and the suite: Dawn (subgroups, then forced fallback) and
# wgpu-native. TestSameBytesAsPagelz4 is left out: the kernel may store
# other bytes than pagelz4 (any standard LZ4 block), which the fuzz and
# round-trip tests check.
TESTS='TestFeatures|TestPollSleep|TestSameBytesAsPagelz4|TestLayout|TestKernelSums|TestConformance/lz4|TestConformance/empty|TestRatio|TestMultiRound|TestSubgroupFallbackSame|TestSubgroupsWhereOffered|TestDeviceLost|TestOverlappingBatches|FuzzCompress|FuzzDecompress'
T=$PWD/$C/webgpu.test
# QUICK=1 (a short call): no fallback suite, no in-process benchmarks, the
# daemon on the "heap" process only.
runs="dawn dawn-nosg wgpu"; [ -n "$QUICK" ] && runs="dawn wgpu"
for run in $runs; do
  lib=$DAWN; ns=; [ $run = wgpu ] && lib=$WGPU; [ $run = dawn-nosg ] && ns=1
  (cd backends/webgpu && S4D_WEBGPU_LIB=$lib S4D_WEBGPU_NO_SUBGROUPS=$ns timeout 200 $T -test.v -test.count=1 -test.run "$TESTS") > $L/suite-$run.log 2>&1
  say "== suite $run rc $?"; grep -E '^(--- FAIL|FAIL|ok|PASS)' $L/suite-$run.log | head -10 | tee -a $SUM
  grep -E 'features of' $L/suite-$run.log | head -1 | tee -a $SUM
done

# 2. Kernel and in-process benchmarks, old and new alternating, on 64 MiB
# of a live PyTorch process (dumppages.py) and on the synthetic mix; then
# the new kernel at chain depths 1-6 (S4D_TUNE_BITS) for speed and ratio.
[ -z "$QUICK" ] && { [ -s /tmp/pages.bin ] || (PYTHONPATH= python3 $C/dumppages.py /tmp/pages.bin) 2>&1 | tail -2 | tee -a $SUM; }
B=${S4D_BENCH:-'Kernel64MiB/pages=16384/reps=8$|Compress64MiB$|CompressParallel64MiB$|Decompress64MiB$|DecompressKernel64MiB/lz4pages=[0-9]*/reps=8'}
bins="new"; [ -x $C/webgpu-old.test ] && bins="old new old new"
pagesets="live mixed"; [ -n "$QUICK" ] && pagesets=
for pages in $pagesets; do
  env=; [ $pages = live ] && env=S4D_BENCH_PAGES=/tmp/pages.bin
  for b in $bins; do
    tb=$PWD/$C/webgpu.test; [ $b = old ] && tb=$PWD/$C/webgpu-old.test
    (cd backends/webgpu && env $env S4D_WEBGPU_LIB=$DAWN timeout 150 $tb -test.run XXX -test.bench "$B" -test.benchtime ${BT:-10x}) > $L/bench-$pages-$b.log 2>&1
    say "== bench $pages $b (Dawn)"; grep -E '^Benchmark' $L/bench-$pages-$b.log | sed -E 's/ +/ /g' | tee -a $SUM
  done
  for dp in ${DEPTHS:-1 2 3 4 6}; do
    (cd backends/webgpu && env $env S4D_TUNE_BITS=$dp S4D_WEBGPU_LIB=$DAWN timeout 100 $T -test.run XXX -test.bench 'Kernel64MiB/pages=16384/reps=8$|Compress64MiB/webgpu' -test.benchtime 10x) > $L/depth-$pages-$dp.log 2>&1
    say "== depth $dp $pages"; grep -E '^Benchmark' $L/depth-$pages-$dp.log | sed -E 's/ +/ /g' | tee -a $SUM
  done
done

# 3. Through the daemon: 1 GiB of a live PyTorch process, memfd, 8 and 16
# clients, batches of 256 and 4096 pages; the engines one after another on
# the same pages (the holder stays up). Daemon CPU profile per engine.
# "heap": the kind of process issue 29's figures came from; "acts": one
# that keeps ~1.3 GiB of float activations (ratio ~1.25).
P=/tmp/wgsl-prof; mkdir -p $P
daemon_run() { # name, daemon flags...
  local name=$1; shift
  rm -f /tmp/wgsl.sock
  $S daemon --config /dev/null --socket /tmp/wgsl.sock --cpuprofile $P/prof-$name.pb "$@" > $L/daemon-$name.log 2>&1 & local DP=$!
  for i in $(seq 300); do [ -S /tmp/wgsl.sock ] && break; sleep 0.1; done
  grep -E 'msg=backend|serving' $L/daemon-$name.log | sed -E 's/^time=[^ ]+ //' | grep -v cuda | tee -a $SUM
  for cl in 8 16; do
    timeout 120 $S bench --socket /tmp/wgsl.sock --from-pid $HP --max-bytes 1G --clients $cl --batch 256,4096 --memfd --repeat 2 > $L/e2e-$name-$cl.log 2>&1
    say "== daemon $name clients $cl rc $?"; grep -E '^(MODE|e2e|inproc)' $L/e2e-$name-$cl.log | head -5 | tee -a $SUM
  done
  kill -TERM $DP; wait $DP
}
S0=$S
modes="heap acts"; [ -n "$QUICK" ] && modes=heap
for mode in $modes; do
  PYTHONPATH= python3 $C/holdpages.py $mode > $L/holder-$mode.log 2>&1 & HP=$!
  for i in $(seq 120); do grep -q ready $L/holder-$mode.log && break; sleep 1; done
  say "holder $mode: $(tail -2 $L/holder-$mode.log)"
  S=$S0
  daemon_run webgpu-$mode --backend webgpu --webgpu-lib $DAWN
  daemon_run cpu-$mode --backend cpu
  [ -x $C/s4d-old ] && S=$PWD/$C/s4d-old && daemon_run webgpu-old-$mode --backend webgpu --webgpu-lib $DAWN
  S=$S0
  if [ $mode = heap ]; then
    daemon_run auto-$mode --backend auto --webgpu-lib $DAWN --nvcomp-lib /nonexistent/libnvcomp.so
    [ -z "$QUICK" ] && daemon_run wgpu-$mode --backend webgpu --webgpu-lib $WGPU
  fi
  kill $HP; wait $HP 2>/dev/null
done
cp $P/prof-webgpu-heap.pb $P/prof-cpu-heap.pb $OUT/ 2>/dev/null
tar -czf $OUT/profiles.tar.gz -C $P .

tar -czf $OUT/logs.tar.gz -C $L .
say "done $(date -u)"
