#!/bin/bash
# speed.sh [--smp N] [--page-cluster N] [--mib M] [--trace] [--base REV]
#          [--gomaxprocs N] [--plain] [--log FILE]
# Swap speed in one guest boot (384 MiB, QEMU/TCG): the same workload on
# zram swap, on a ublk server with next to no store (tests/guest/nullublk:
# the floor of a ublk server's round trip in this guest) and on s4d swap,
# each with the same vm.page-cluster (--page-cluster, the kernel's default
# 3 if not given). --trace splits a swap-in's round trip
# through null and s4d with the kernel's tracepoints (ublktrace.sh).
# --base REV adds, before s4d, the s4d built from git revision REV (tag
# s4d-base): a change's before and after in one boot.
# --gomaxprocs N adds s4d with GOMAXPROCS=N; --plain adds s4d with its queue
# rings set up without SINGLE_ISSUER|DEFER_TASKRUN|COOP_TASKRUN.
# Prints the result lines, `s4d ctl swap --batches` (the daemon's own time
# per read call) and a table of each run against zram; the whole console
# goes to --log FILE (default /tmp/s4d-speed.log).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
smp=1 pc="" mib="" gmp="" plain="" trace="" base="" log=/tmp/s4d-speed.log
while [ $# -gt 0 ]; do
	case $1 in
	--smp) smp=${2:?}; shift 2;;
	--page-cluster) pc=${2:?}; shift 2;;
	--mib) mib=${2:?}; shift 2;;
	--gomaxprocs) gmp=${2:?}; shift 2;;
	--plain) plain=1; shift;;
	--trace) trace=1; shift;;
	--base) base=${2:?}; shift 2;;
	--log) log=${2:?}; shift 2;;
	-h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;;
	*) echo "usage: speed.sh [--smp N] [--page-cluster N] [--mib M] [--trace] [--base REV] [--gomaxprocs N] [--plain] [--log FILE]" >&2; exit 2;;
	esac
done
case $pc in ""|[0-9]) ;; *) echo "speed.sh: --page-cluster wants 0-9, got '$pc'" >&2; exit 2;; esac
tmp=$(mktemp -d /tmp/s4d-speed.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cc -static -O2 -Wall -Wextra -Werror -o "$tmp/workload" "$here/workload.c"
(cd "$here/../.." && go build "-ldflags=-s -w" -o "$tmp/s4d" ./cmd/s4d &&
	go build "-ldflags=-s -w" -o "$tmp/nullublk" ./tests/guest/nullublk)
bins=(--bin "$tmp/workload" --bin "$tmp/s4d" --bin "$tmp/nullublk")
# The native swap path loads liblz4 at run time (dlopen): ldd misses it.
lz4=/lib/x86_64-linux-gnu/liblz4.so.1
bins+=(--file "$(readlink -f $lz4):$lz4")
if [ -n "$base" ]; then
	mkdir "$tmp/base"
	(cd "$here/../.." && git archive "$base") | tar -x -C "$tmp/base"
	(cd "$tmp/base" && go build "-ldflags=-s -w" -o "$tmp/s4dbase" ./cmd/s4d)
	bins+=(--bin "$tmp/s4dbase")
fi
# s4d_swap TAG [BINARY]: the daemon serving swap under the workload.
s4d_run='
s4d=${2:-s4d}
ulimit -s 256
$s4d daemon --socket /run/s4d.sock >/tmp/s4d-$1.log 2>&1 &
daemon=$!
for i in $(seq 100); do [ -S /run/s4d.sock ] && break; sleep 0.1; done
export S4D_SOCKET=/run/s4d.sock
dev=$($s4d swap add --size 1G)
queue_cpus $1 $daemon
mkswap $dev >/dev/null; swapon -d $dev
traced $1
guest_workload $1
untraced
$s4d ctl swap --batches
swapoff $dev; $s4d swap del $dev
kill $daemon; wait $daemon || true
rm -f /run/s4d.sock
'
script="
set -e
. /lib/ublktrace.sh
${mib:+export S4D_WL_MIB=$mib}
${pc:+echo $pc > /proc/sys/vm/page-cluster}
gmp=$gmp plain=$plain trace=$trace base=$base
# The s4d binaries (~22 MiB each) are on the guest's tmpfs, which swaps:
# on nullublk's device their pages would be ones it keeps whole, more than
# it sets aside. On a ramfs they stay in RAM, alike for every run.
mkdir -p /ram; mount -t ramfs ramfs /ram
for b in s4d s4dbase; do [ ! -e /bin/\$b ] || mv /bin/\$b /ram/; done
export PATH=/ram:\$PATH
echo \"S4D-SPEED smp=\$(nproc) page_cluster=\$(cat /proc/sys/vm/page-cluster)\"
# queue_cpus TAG PID: the CPUs each swap queue thread may run on.
queue_cpus() { for t in /proc/\$2/task/*; do grep -q swapq \$t/comm && echo \"S4D-CPUS \$1 \$(cat \$t/comm) \$(awk '/Cpus_allowed_list/ {print \$2}' \$t/status)\"; done || true; }
traced() { tpid=; [ -z \"\$trace\" ] || { ublk_trace \$1 & tpid=\$!; }; }
# A trace cut short must not stay on under the next run.
untraced() { [ -z \"\$tpid\" ] || { kill \$tpid 2>/dev/null || true; wait \$tpid || true; echo 0 > /sys/kernel/tracing/tracing_on 2>/dev/null || true; }; }
guest_zram_swap 1G
guest_workload zram
guest_zram_off \"\$GUEST_ZRAM\"
guest_load ublk_drv
# 640M: its store sets a slot aside for every block (nullublk/main.go).
nullublk --tag null --size 640M >/tmp/null.out &
npid=\$!
for i in \$(seq 100); do [ -s /tmp/null.out ] && break; sleep 0.1; done
dev=\$(head -n 1 /tmp/null.out)
mkswap \$dev >/dev/null; swapon -d \$dev
queue_cpus null \$npid
traced null
guest_workload null
untraced
swapoff \$dev
kill -TERM \$npid; wait \$npid || true
cat /tmp/null.out
s4d_swap() { $s4d_run }
[ -z \"\$base\" ] || s4d_swap s4d-base s4dbase
s4d_swap s4d
if [ -n \"\$gmp\" ]; then export GOMAXPROCS=\$gmp; s4d_swap s4d-gomaxprocs\$gmp; unset GOMAXPROCS; fi
if [ -n \"\$plain\" ]; then
	export S4D_UBLK_PLAIN_RING=1
	s4d_swap s4d-plain
	unset S4D_UBLK_PLAIN_RING
fi
"
# zram and null take ~1 min each on an idle host, s4d ~1.5; twice that
# for the ublk servers without readahead (page-cluster 0).
limit=$((450 + 150 * (${base:+1}0 + ${gmp:+1}0 + ${plain:+1}0) / 10))
[ "$pc" != 0 ] || limit=$((limit * 2))
bash "$here/run.sh" --timeout $limit --mem 384M --smp "$smp" \
	"${bins[@]}" \
	--file "$here/ublktrace.sh:/lib/ublktrace.sh" --file "$here/ublktrace.awk:/lib/ublktrace.awk" \
	--log "$log" -- "$script" >/dev/null || rc=$?
grep -E '^S4D-(RESULT|SPEED|CPUS)|ublk|per read|serve' "$log" | grep -v '^\[' || true
# Each run against zram, from the workload and swap lines (process 0).
awk '/^S4D-RESULT/ {
	delete f; for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
	t = f["tag"]
	if (f["kind"] == "workload" && f["proc"] == 0) {
		if (!(t in seen)) { order[++n] = t; seen[t] = 1 }
		vin[t] = f["verify_in_mib_s"]; vout[t] = f["write_out_mib_s"]; vs[t] = f["verify_s"]
		p50[t] = f["swapin_p50_us"]; p99[t] = f["swapin_p99_us"]; flt[t] = f["majflt"]
	}
	if (f["kind"] == "swap") { wall[t] = f["wall_s"]; pin[t] = f["pswpin"] }
}
END {
	if (!("zram" in seen)) exit
	printf "%-18s %8s %8s %9s %7s %9s %7s %8s %8s %9s %8s\n", "run", "wall_s", "verify_s", "in_MiB/s", "in_x", "out_MiB/s", "out_x", "p50_us", "p99_us", "pswpin", "majflt"
	for (i = 1; i <= n; i++) {
		t = order[i]
		printf "%-18s %8s %8s %9s %7.2f %9s %7.2f %8s %8s %9s %8s\n", t, wall[t], vs[t], vin[t], vin[t] / (vin["zram"] + 1e-9),
			vout[t], vout[t] / (vout["zram"] + 1e-9), p50[t], p99[t], pin[t], flt[t]
	}
}' "$log"
exit ${rc:-0}
