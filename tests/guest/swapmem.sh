#!/bin/bash
# swapmem.sh [--mem 2G] [--smp 2] [--size 1G] [--x 1.3] [--jobs 1] [--fork] [--mem-limit M] [--log FILE]
# What a swap device costs in memory (issue 40), in one guest boot
# (QEMU/TCG, by hand: a boot takes minutes): MemAvailable and Mlocked
# around a zram device of --size (nothing written), then around
# `s4d swap add --size SIZE` with the defaults, then the checksummed workload
# of --x times the guest's RAM on that swap, in --jobs processes at once
# (every page checked; lockwatch beside it prints every daemon thread's
# stack at 400 s; --fork: a loop forking every 0.2 s beside), then after
# swapoff and after `s4d swap del` with the daemon still up. Prints the
# S4D-RESULT and MEM lines; the whole console goes to --log FILE (default
# /tmp/s4d-swapmem.log). The workload must fit in RAM plus the device's
# size: at --mem 2G --size 1G, --x 1.3 does; 1.75 does not (mmap fails).
# --mem-limit M: the guest gets a disk (ext2, mounted on /var/lib/s4d,
# the daemon's state directory) and the device is added with
# `--mem-limit M`: its coldest pages past M go to a file there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mem=2G smp=2 size=1G x=1.3 jobs=1 fork=0 limit="" log=/tmp/s4d-swapmem.log
while [ $# -gt 0 ]; do
	case $1 in
	--mem) mem=${2:?}; shift 2;;
	--smp) smp=${2:?}; shift 2;;
	--size) size=${2:?}; shift 2;;
	--x) x=${2:?}; shift 2;;
	--jobs) jobs=${2:?}; shift 2;;
	--fork) fork=1; shift;;
	--mem-limit) limit=${2:?}; shift 2;;
	--log) log=${2:?}; shift 2;;
	-h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;;
	*) echo "swapmem.sh: unknown argument $1 (see --help)" >&2; exit 2;;
	esac
done
tmp=$(mktemp -d /tmp/s4d-swapmem.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
(cd "$here/../.." && go build -ldflags="-s -w" -o "$tmp/s4d" ./cmd/s4d)
cc -static -O2 -o "$tmp/workload" "$here/workload.c"
cc -static -O2 -o "$tmp/lockwatch" "$here/lockwatch.c"
disk=()
if [ -n "$limit" ]; then
	truncate -s "$size" "$tmp/disk.img"
	truncate -s +64M "$tmp/disk.img"  # the file and ext2's own
	disk=(--disk "$tmp/disk.img")
fi
lz4=$(readlink -f "$(ldconfig -p | awk '/liblz4.so.1 .*x86-64/ { print $NF; exit }')")
"$here/run.sh" --bin "$tmp/s4d" --bin "$tmp/workload" --bin "$tmp/lockwatch" \
	--file "$lz4:/lib/x86_64-linux-gnu/liblz4.so.1" --mem "$mem" --smp "$smp" --timeout 900 ${disk[@]+"${disk[@]}"} -- "
SIZE=$size WLX=$x JOBS=$jobs FORK=$fork LIMIT=$limit
$(cat <<'SCRIPT'
guest_load ublk_drv
guest_load zram
if [ -n "$LIMIT" ]; then
	mke2fs -q /dev/nvme0n1
	mkdir -p /var/lib/s4d
	mount -t ext2 /dev/nvme0n1 /var/lib/s4d
fi
ma() { awk '/^MemAvailable/ { print int($2/1024) }' /proc/meminfo; }
ml() { awk '/^Mlocked/ { print int($2/1024) }' /proc/meminfo; }
echo "MEM boot avail=$(ma) mlocked=$(ml)"
a0=$(ma)
n=$(cat /sys/class/zram-control/hot_add)
echo lz4 > /sys/block/zram$n/comp_algorithm
echo $SIZE > /sys/block/zram$n/disksize
sleep 1; a1=$(ma)
echo "S4D-RESULT tag=zram-add size=$SIZE delta_mib=$((a1-a0))"
echo 1 > /sys/block/zram$n/reset; echo $n > /sys/class/zram-control/hot_remove
s4d daemon --socket /run/s4d.sock >/tmp/s4d.log 2>&1 &
daemon=$!
for i in $(seq 100); do [ -S /run/s4d.sock ] && break; sleep 0.1; done
export S4D_SOCKET=/run/s4d.sock
sleep 2
b0=$(ma); l0=$(ml)
dev=$(s4d swap add --size $SIZE ${LIMIT:+--mem-limit $LIMIT}) || { cat /tmp/s4d.log; exit 1; }
sleep 1
b1=$(ma); l1=$(ml)
echo "S4D-RESULT tag=s4d-add size=$SIZE delta_mib=$((b1-b0)) mlocked_before=$l0 mlocked_after=$l1"
grep -E "VmLck|VmRSS" /proc/$daemon/status
# Where the daemon's locked memory is: its largest locked mappings.
awk '/^[0-9a-f]+-[0-9a-f]+ / { m = $1 " " $NF } /^Locked:/ && $2 > 0 { print $2 " kB " m }' /proc/$daemon/smaps | sort -rn | head -12 | sed 's/^/LOCKED /'
mkswap $dev >/dev/null
swapon -d $dev  # discards: a slot freed by an exiting process frees its slab
lockwatch 15 400 $daemon &
watch=$!
forks=
if [ "$FORK" = 1 ]; then ( while :; do cat /proc/meminfo >/dev/null; sleep 0.2; done ) & forks=$!; fi
rc=0
S4D_WL_JOBS=$JOBS S4D_WL_MIB=$(awk -v x="$WLX" -v j="$JOBS" '/^MemTotal/ { printf "%d", $2 * x / 1024 / j }' /proc/meminfo) guest_workload s4d-swapmem || rc=$?
kill $watch $forks || true
s4d ctl swap || true
echo "S4D-RESULT tag=s4d-counters $(s4d ctl swap --json | tr -d ' \n' | grep -o '"\(reserve\|reserve_low\|nomem\|held\|held_failed\|errors\|pinned_queues\|streams\|compr\|total\|mem_limit\|bd_count\|bd_reads\|bd_writes\)":[0-9]*' | tr -d '"' | tr ':' '=' | tr '\n' ' ')"
b2=$(ma); l2=$(ml)
echo "MEM after-workload avail=$b2 mlocked=$l2"
echo "S4D-RESULT tag=s4d-after-workload delta_vs_before_add_mib=$((b2-b0)) mlocked=$l2"
sleep 45  # a reserve grown by the workload's burst shrinks back (swapio: shrinkAfter)
echo "S4D-RESULT tag=s4d-after-idle delta_vs_before_add_mib=$(( $(ma) - b0 )) mlocked=$(ml)"
swapoff $dev
echo "MEM after-swapoff avail=$(ma) mlocked=$(ml)"
s4d swap del $dev
sleep 1
b3=$(ma); l3=$(ml)
echo "S4D-RESULT tag=s4d-del avail=$b3 delta_vs_before_add_mib=$((b3-b0)) mlocked=$l3"
grep -E "VmLck|VmRSS" /proc/$daemon/status
kill $daemon; wait $daemon || true
exit $rc
SCRIPT
)" >"$log" 2>&1 || { rc=$?; grep -E "S4D-RESULT|^MEM " "$log"; echo "swapmem.sh: guest exit $rc, console in $log" >&2; exit $rc; }
grep -E "S4D-RESULT|^MEM |VmLck|^LOCKED " "$log"
