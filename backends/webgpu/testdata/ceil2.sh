#!/bin/bash
# Issue 29 point 4, second call: four decompression sets (s4d, webgpu.test)
# against two (s4d-old, and dslots=2 inside BenchmarkDecompressParallel),
# the byte-for-byte suite on Dawn and wgpu-native, the ceilings again on
# Dawn, and the daemon old/new alternating with the cpu engine between.
cd "$(dirname "$0")/../.." || exit 1
C=${C:-.carry/wgsl} # made by make wgsl-carry; an s4d-old put there by hand
OUT=${OUT:-/tmp/s4d-ceil2}; mkdir -p "$OUT"; L=/tmp/ceil2-logs; mkdir -p $L
SUM=$OUT/summary.txt
. backends/webgpu/testdata/gpu-env.sh
export S4D_REQUIRE_WEBGPU=1
DAWN=$PWD/$C/libwebgpu_wrapper.so WGPU=$PWD/$C/libwgpu_native.so T=$PWD/$C/webgpu.test
say "$(nvidia-smi -L) cores $(nproc) $(date -u)"
(PYTHONPATH= timeout 60 python3 $C/dumppages.py /tmp/pages.bin) 2>&1 | tail -1 | tee -a $SUM
PG=; [ -s /tmp/pages.bin ] && PG=/tmp/pages.bin
TESTS='TestFeatures|TestLayout|TestKernelSums|TestConformance/lz4|TestConformance/empty|TestRatio|TestMultiRound|TestOverlappingBatches'
for run in dawn wgpu; do
  lib=$DAWN; B='DecompressParallel|Decompress64MiB$'; [ $run = wgpu ] && lib=$WGPU
  [ $run = dawn ] && B="$B|Ceiling"
  (cd backends/webgpu && S4D_WEBGPU_LIB=$lib timeout 45 $T -test.v -test.count=1 -test.run "$TESTS") > $L/suite-$run.log 2>&1
  say "== suite $run rc $?"; grep -E '^(--- FAIL|FAIL|ok|PASS)' $L/suite-$run.log | head -6 | tee -a $SUM
  (cd backends/webgpu && S4D_BENCH_PAGES=$PG S4D_WEBGPU_LIB=$lib timeout 50 $T -test.run XXX -test.bench "$B" -test.benchtime 10x) > $L/bench-$run.log 2>&1
  say "== bench $run rc $?"; grep -E '^(Benchmark|--- FAIL)' $L/bench-$run.log | sed -E 's/ +/ /g' | tee -a $SUM
done
daemon_run() { # name, binary, daemon flags...
  local name=$1 S=$2; shift 2
  rm -f /tmp/ceil.sock
  $S daemon --config /dev/null --socket /tmp/ceil.sock "$@" > $L/daemon-$name.log 2>&1 & local DP=$!
  for i in $(seq 300); do [ -S /tmp/ceil.sock ] && break; sleep 0.1; done
  for cl in 8 16; do
    timeout 30 $S bench --socket /tmp/ceil.sock --from-pid $HP --max-bytes 1G --clients $cl --batch 4096 --memfd --repeat 2 > $L/e2e-$name-$cl.log 2>&1
    say "== daemon $name clients $cl rc $?"; grep -E '^e2e' $L/e2e-$name-$cl.log | head -2 | tee -a $SUM
  done
  kill -TERM $DP; wait $DP
}
PYTHONPATH= python3 $C/holdpages.py heap > $L/holder.log 2>&1 & HP=$!
for i in $(seq 60); do grep -q ready $L/holder.log && break; sleep 1; done
NEW=$PWD/$C/s4d OLD=$PWD/$C/s4d-old
daemon_run old1 $OLD --backend webgpu --webgpu-lib $DAWN
daemon_run new1 $NEW --backend webgpu --webgpu-lib $DAWN
daemon_run cpu $NEW --backend cpu
daemon_run old2 $OLD --backend webgpu --webgpu-lib $DAWN
daemon_run new2 $NEW --backend webgpu --webgpu-lib $DAWN
kill $HP; wait $HP 2>/dev/null
tar -czf $OUT/logs.tar.gz -C $L .
say "done $(date -u)"
