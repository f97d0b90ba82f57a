#!/bin/bash
# Issue 41's spike on the GPU machine, one call: the Vulkan loader from the
# carried debs, the probe over 1 GiB, and for the link's ceiling the same
# copies through CUDA from a registered sealed memfd (what the cuda engine
# does). Made by `make vkprobe-carry`; run as
#   bash .carry/vkprobe/gpu-run.sh     (logs under $OUT)
cd "$(dirname "$0")/../.." || exit 1
C=.carry/vkprobe
OUT=${OUT:-/tmp/s4d-vkprobe}; mkdir -p "$OUT"
for f in "$C"/debs/*.deb; do dpkg -x "$f" /; done; ldconfig
for j in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json; do
	[ -f $j ] && export VK_DRIVER_FILES=$j && break
done
echo "VK_DRIVER_FILES=${VK_DRIVER_FILES:-}"
nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader
uname -r; nproc
"$C"/vkprobe -s "${SIZE_MIB:-1024}" -r "${REPS:-5}" 2>&1 | tee "$OUT/vkprobe.log"
echo "vkprobe exit ${PIPESTATUS[0]}"
PYTHONUNBUFFERED=1 python3 "$C"/cudaref.py 2>&1 | tee "$OUT/cudaref.log"
