#!/bin/bash
# speed.sh [--smp N] [--mib M]: swap speed in one guest boot, the same
# workload on zram swap, on s4d swap with the queue rings' io_uring flags
# (SINGLE_ISSUER|DEFER_TASKRUN|COOP_TASKRUN) and on s4d swap with plain
# rings (S4D_UBLK_PLAIN_RING=1), each with the same vm.page-cluster; with
# --gomaxprocs N, right after zram, once more with the flags and
# GOMAXPROCS=N (--no-plain leaves the plain rings' run out, for a shorter
# boot). Prints
# the S4D-RESULT lines (wall time, swap-in/out MiB/s, swap-in latency) and
# `s4d ctl swap --batches` (the daemon's own time per read call); the whole
# console goes to --log FILE (default /tmp/s4d-speed.log).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
smp=1 mib="" gmp="" noplain="" log=/tmp/s4d-speed.log
while [ $# -gt 0 ]; do
	case $1 in
	--smp) smp=${2:?}; shift 2;;
	--mib) mib=${2:?}; shift 2;;
	--gomaxprocs) gmp=${2:?}; shift 2;;
	--no-plain) noplain=1; shift;;
	--log) log=${2:?}; shift 2;;
	*) echo "usage: speed.sh [--smp N] [--mib M] [--gomaxprocs N] [--no-plain] [--log FILE]" >&2; exit 2;;
	esac
done
tmp=$(mktemp -d /tmp/s4d-speed.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cc -static -O2 -Wall -Wextra -Werror -o "$tmp/workload" "$here/workload.c"
(cd "$here/../.." && go build "-ldflags=-s -w" -o "$tmp/s4d" ./cmd/s4d)
s4d_run='
ulimit -s 256
s4d daemon --socket /run/s4d.sock >/tmp/s4d-$1.log 2>&1 &
daemon=$!
for i in $(seq 100); do [ -S /run/s4d.sock ] && break; sleep 0.1; done
export S4D_SOCKET=/run/s4d.sock
dev=$(s4d swap add --size 1G --depth 32 --reserve 16M)
mkswap $dev >/dev/null; swapon -d $dev
guest_workload $1
s4d ctl swap --batches
swapoff $dev; s4d swap del $dev
kill $daemon; wait $daemon || true
rm -f /run/s4d.sock
'
script="
set -e
${mib:+export S4D_WL_MIB=$mib}
gmp=$gmp
noplain=$noplain
echo \"S4D-SPEED smp=\$(nproc) page_cluster=\$(cat /proc/sys/vm/page-cluster)\"
guest_zram_swap 1G
guest_workload zram
guest_zram_off \"\$GUEST_ZRAM\"
guest_load ublk_drv
s4d_swap() { $s4d_run }
# The queue thread returns from its wait in a system call and needs a P:
# with GOMAXPROCS=1 (one vCPU) it may wait for another goroutine's slice.
if [ -n \"\$gmp\" ]; then export GOMAXPROCS=\$gmp; s4d_swap s4d-gomaxprocs\$gmp; unset GOMAXPROCS; fi
s4d_swap s4d-flags
if [ -z \"\$noplain\" ]; then
	export S4D_UBLK_PLAIN_RING=1
	s4d_swap s4d-plain
	unset S4D_UBLK_PLAIN_RING
fi
"
bash "$here/run.sh" --timeout 590 --mem 384M --smp "$smp" \
	--bin "$tmp/workload" --bin "$tmp/s4d" --log "$log" -- "$script" >/dev/null || rc=$?
grep -E '^S4D-(RESULT|SPEED)|ublk|per read|serve' "$log" | grep -v '^\[' || true
exit ${rc:-0}
