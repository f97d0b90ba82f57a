#!/bin/bash
# Every GPU of the host (issue 31), on a GPU machine with no Go and no
# network. Expects in $CARRY (`make multigpu-carry`, then
# `bash .carry/multigpu/multi-gpu.sh` on the GPU machine):
# cuda.test and s4d-fault.xz built with -tags s4dfault (the router's fault
# injection: inert unless $S4D_FAULT_DIR is set), s4d.xz, the nvCOMP and
# lz4 wheels, Debian's zstd debs. Writes logs to $OUT:
#   suite.log   the cuda suite with every GPU visible (each device against
#               the CPU decoders, the same bytes on all, shared registration,
#               a GPU lost mid-batch), then the byte checks on each GPU alone
#   bench.log   s4d bench --memfd, as many clients as cores, against a
#               daemon on GPU 0 alone, on all GPUs, and --backend auto
#   stats.log   s4d ctl stats around each run (the split per device)
#   lost.log    a daemon on all GPUs that loses them one by one mid-bench
set -u
CARRY=${CARRY:-.carry/multigpu}
OUT=${OUT:-/tmp/s4d-mgpu}
mkdir -p "$OUT" /tmp/nvc /tmp/site /tmp/zstd /tmp/mg /tmp/mglogs
L=/tmp/mglogs # daemon logs and stats JSON: one logs.tar.gz in $OUT (8 files come back at most)
exec > >(tee "$OUT/run.log") 2>&1
nvidia-smi -L
nvidia-smi topo -m
for d in /sys/bus/pci/devices/*; do
	[ "$(cat $d/vendor)" = 0x10de ] && [ "$(cat $d/class)" = 0x030200 ] && echo "GPU $(basename $d) on NUMA node $(cat $d/numa_node)"
done
ls -d /sys/devices/system/node/node*
nproc
python3 -m zipfile -e "$CARRY"/nvidia_libnvcomp_*.whl /tmp/nvc && chmod +x /tmp/nvc/nvidia/libnvcomp/lib64/*.so*
export S4D_NVCOMP_LIB=/tmp/nvc/nvidia/libnvcomp/lib64/libnvcomp.so.6
/usr/bin/python3 -c 'import lz4.block' 2>/dev/null ||
	/usr/bin/python3 -m pip install -q --no-index --no-deps --target /tmp/site "$CARRY"/lz4-*.whl
export PYTHONPATH=/tmp/site
if ! command -v zstd >/dev/null; then
	for f in "$CARRY"/deb/*.deb; do dpkg -x "$f" /tmp/zstd; done
	export PATH=$PATH:/tmp/zstd/usr/bin LD_LIBRARY_PATH=/tmp/zstd/usr/lib/x86_64-linux-gnu
fi
xz -dc "$CARRY"/s4d.xz >/tmp/mg/s4d && xz -dc "$CARRY"/s4d-fault.xz >/tmp/mg/s4d-fault && chmod +x /tmp/mg/s4d /tmp/mg/s4d-fault
NGPU=$(nvidia-smi -L | grep -c '^GPU')
echo "GPUs: $NGPU"

# 1. The suite with every GPU, then the byte-for-byte checks on each alone.
{
	echo "== suite, all $NGPU GPUs visible"
	timeout 200 "$CARRY"/cuda.test -test.v -test.count=1 -test.timeout=190s 2>&1 | grep -v '^=== RUN' | tail -150
	for ((i = 1; i < NGPU; i++)); do
		echo "== GPU $i alone: byte checks against the CPU decoders"
		CUDA_VISIBLE_DEVICES=$i timeout 90 "$CARRY"/cuda.test -test.count=1 -test.timeout=80s \
			-test.run 'Conformance|LargeBatch|DecodeForeign|DecodeDamaged|OwnLZ4|PinnedMapping|PlaceIntoStore|WholeBatch' 2>&1 | tail -20
	done
} >"$OUT/suite.log" 2>&1
tail -40 "$OUT/suite.log"

# 2. A live process's pages: PyTorch tensors and a heap, as README's figures.
python3 -c '
import time, json
try:
    import torch
    w = [torch.nn.Linear(1024, 1024) for _ in range(16)]
    x = torch.randn(4096, 1024)
except ImportError:
    import random
    w = [bytes(random.getrandbits(8) for _ in range(1 << 20)) for _ in range(8)]
d = {str(i): [i, str(i) * 3, {"k": i}] for i in range(1200000)}
s = json.dumps(d)[:200_000_000]
print("ready", flush=True); time.sleep(900)' >$L/py.log 2>&1 &
PY=$!
for _ in $(seq 90); do grep -q ready $L/py.log 2>/dev/null && break; sleep 1; done
CLIENTS=${CLIENTS:-$(nproc)}
SOCK=/tmp/s4d-mgpu.sock
run() { # label, daemon args...
	local label=$1
	shift
	rm -f $SOCK
	"$@" --socket $SOCK --log-level info >$L/daemon-$label.log 2>&1 &
	local D=$!
	for _ in $(seq 240); do [ -S $SOCK ] && /tmp/mg/s4d ctl --socket $SOCK stats >/dev/null 2>&1 && break; sleep 0.5; done
	echo "== $label: $*" | tee -a "$OUT/bench.log" >>"$OUT/stats.log"
	/tmp/mg/s4d bench --socket $SOCK --memfd --from-pid $PY --max-bytes ${MAX_BYTES:-1G} --clients $CLIENTS \
		--batch ${BATCH:-256,4096} --repeat ${REPEAT:-2} 2>&1 | tee -a "$OUT/bench.log"
	/tmp/mg/s4d ctl --socket $SOCK stats | sed -n '/^BACKEND/,/^$/p' >>"$OUT/stats.log"
	/tmp/mg/s4d ctl --socket $SOCK stats --json >$L/stats-$label.json
	kill $D
	wait $D
}
run one-gpu /tmp/mg/s4d daemon --backend cuda --gpus 0
run all-gpus /tmp/mg/s4d daemon --backend cuda
run auto /tmp/mg/s4d daemon --backend auto
if [ "$NGPU" -gt 2 ]; then run two-gpus /tmp/mg/s4d daemon --backend cuda --gpus 0,1; fi
# Second runs of the two, for the spread.
run one-gpu-2 /tmp/mg/s4d daemon --backend cuda --gpus 0
run all-gpus-2 /tmp/mg/s4d daemon --backend cuda
cat "$OUT/stats.log"

# 3. GPUs lost one by one while clients store and read back pages (the
# bench checks every page it gets back); then the CPU carries on.
{
	F=/tmp/s4d-faults
	mkdir -p $F
	rm -f $SOCK
	S4D_FAULT_DIR=$F /tmp/mg/s4d-fault daemon --backend cuda --socket $SOCK --log-level info >$L/daemon-lost.log 2>&1 &
	D=$!
	for _ in $(seq 240); do [ -S $SOCK ] && /tmp/mg/s4d ctl --socket $SOCK stats >/dev/null 2>&1 && break; sleep 0.5; done
	for ((i = 0; i <= NGPU; i++)); do
		/tmp/mg/s4d bench --socket $SOCK --memfd --from-pid $PY --max-bytes 512M --clients 8 --batch 4096 --repeat 3 &
		B=$!
		sleep 3
		[ $i -lt $NGPU ] && touch $F/backend-cuda$i && echo "-- GPU $i lost"
		wait $B
		echo "bench rc $?"
	done
	/tmp/mg/s4d ctl --socket $SOCK stats | sed -n '/^BACKEND/,/^$/p'
	kill $D
	wait $D
	grep -c "backend failed" $L/daemon-lost.log
} >"$OUT/lost.log" 2>&1
cat "$OUT/lost.log"
kill $PY
grep -h calibrated $L/daemon-*.log | cut -c1-1200
tar czf "$OUT/logs.tar.gz" -C $L .
