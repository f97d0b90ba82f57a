#!/bin/bash
# Runs the webgpu suite (subgroup kernel and the forced fallback) and the
# benchmarks on a GPU machine (NVIDIA, Vulkan loader carried as debs);
# logs go to $OUT.
cd "$(dirname "$0")/../.." || exit 1
C=.carry/webgpu  # filled by `make webgpu-carry`
OUT=${OUT:-/tmp/s4d-webgpu}; mkdir -p "$OUT"
. backends/webgpu/testdata/gpu-env.sh
ldconfig -p | grep -c libvulkan
echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-}"
/usr/bin/python3 -c 'import lz4.block; print("lz4", lz4.library_version_string())'
nvidia-smi -L; nproc; command -v zstd || echo "no zstd CLI"
# Dawn unless S4D_WEBGPU_LIB names another implementation, e.g.
# S4D_WEBGPU_LIB=$PWD/.carry/webgpu/libwgpu_native.so for wgpu-native.
export S4D_WEBGPU_LIB=${S4D_WEBGPU_LIB:-$PWD/$C/libwebgpu_wrapper.so} S4D_REQUIRE_WEBGPU=1
echo "S4D_WEBGPU_LIB=$S4D_WEBGPU_LIB"
[ -s /tmp/pages.bin ] || (PYTHONPATH= python3 $C/dumppages.py /tmp/pages.bin) 2>&1 | tail -3
T=$PWD/$C/webgpu.test
TESTS='TestLayout|TestConformance/lz4|TestConformance/empty|TestRatio|TestMultiRound|TestSubgroupFallbackSame|TestSubgroupsWhereOffered|TestDeviceLost|FuzzCompress|FuzzDecompress'
(cd backends/webgpu && $T -test.v -test.count=1 -test.run "$TESTS") > $OUT/test.log 2>&1
(cd backends/webgpu && S4D_WEBGPU_NO_SUBGROUPS=1 $T -test.v -test.count=1 -test.run "$TESTS") > $OUT/test-nosg.log 2>&1
for l in test test-nosg; do echo "== $l"; grep -E '^(--- |ok|FAIL|PASS)|webgpu_test' $OUT/$l.log | grep -v '^    --- PASS' | head -20; done
B=${S4D_BENCH:-.}
if [ -s /tmp/pages.bin ]; then
  (cd backends/webgpu && S4D_BENCH_PAGES=/tmp/pages.bin $T -test.run XXX -test.bench "$B" -test.benchtime ${BT:-20x}) 2>&1 | tee $OUT/bench-live.log | grep -E 'Benchmark|ok|FAIL'
fi
(cd backends/webgpu && $T -test.run XXX -test.bench "$B" -test.benchtime ${BT:-20x}) 2>&1 | tee $OUT/bench-mixed.log | grep -E 'Benchmark|ok|FAIL'
