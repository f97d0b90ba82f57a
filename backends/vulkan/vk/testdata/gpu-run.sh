#!/bin/bash
# The vk package on the GPU machine, one call: its tests (both compress
# kernels, exact bytes against pagelz4) and BenchmarkCompress over 1 GiB,
# plain and subgroup kernels. Made by `make vulkan-carry`; run as
#   bash .carry/vulkan/gpu-run.sh     (logs under $OUT)
cd "$(dirname "$0")/../.." || exit 1
C=$PWD/.carry/vulkan
OUT=${OUT:-/tmp/s4d-vulkan}; mkdir -p "$OUT"
for f in "$C"/debs/*.deb; do dpkg -x "$f" /; done; ldconfig
for j in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json; do
	[ -f $j ] && export VK_DRIVER_FILES=$j && break
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc
cd backends/vulkan/vk || exit 1
S4D_REQUIRE_VULKAN=1 S4D_VULKAN_ALL_KERNELS=1 "$C"/vk.test -test.v -test.count=${TCOUNT:-4} 2>&1 | tee "$OUT/test.log" | grep -E '^(---|    ---|ok|FAIL|PASS)|_test.go'
for sg in 0 1; do
	S4D_BENCH_MIB=${MIB:-1024} S4D_BENCH_SG=$sg "$C"/vk.test -test.run XXX -test.bench Compress -test.benchtime ${BT:-5x} -test.count ${COUNT:-3} 2>&1 | tee "$OUT/bench-sg$sg.log" | grep -E 'Benchmark|ok|FAIL|_test.go'
done
