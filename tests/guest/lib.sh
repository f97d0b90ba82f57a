# lib.sh: functions for scripts run in the guest by run.sh (sourced first,
# busybox sh, `set -e` on). Result lines start with "S4D-RESULT " and are
# key=value, for tests/guest_test.go to parse.

# guest_load NAME [PARAM=VALUE...]: insmod a module of /lib/modules after
# the modules it depends on (modules/deps, made by mk/guest.mk).
guest_load() {
	local m=$1 d deps
	shift
	[ -d "/sys/module/$m" ] && return 0
	if [ ! -f "/lib/modules/$m.ko" ]; then
		echo "guest_load: no module $m in the guest (add it to GUEST_MODULES in mk/guest.mk)" >&2
		return 1
	fi
	deps=$(sed -n "s/^$m: *//p" /lib/modules/deps)
	for d in $deps; do guest_load "$d" || return; done
	insmod "/lib/modules/$m.ko" "$@"
}

# guest_uptime: seconds since boot (10 ms steps; enough for runs of seconds).
guest_uptime() { cut -d' ' -f1 /proc/uptime; }

# guest_vmstat KEY: one counter of /proc/vmstat.
guest_vmstat() { awk -v k="$1" '$1 == k { print $2 }' /proc/vmstat; }

# guest_zram_swap SIZE [ALGO]: a zram device of SIZE (disksize syntax, e.g.
# 1G) compressing with ALGO (default lz4), made swap and turned on; sets
# GUEST_ZRAM to the device. (Not for $(...): busybox sh drops set -e in a
# command substitution, so every step here checks its own status.)
guest_zram_swap() {
	local size=$1 algo=${2:-lz4} n
	guest_load zram || return
	n=$(cat /sys/class/zram-control/hot_add) || return
	echo "$algo" > "/sys/block/zram$n/comp_algorithm" || return
	echo "$size" > "/sys/block/zram$n/disksize" || return
	mkswap "/dev/zram$n" >/dev/null || return
	swapon "/dev/zram$n" || return
	GUEST_ZRAM=/dev/zram$n
}

# guest_zram_off DEV: swapoff (every page comes back in) and remove it.
guest_zram_off() {
	local n=${1#/dev/zram}
	swapoff "$1" || return
	echo 1 > "/sys/block/zram$n/reset" || return
	echo "$n" > /sys/class/zram-control/hot_remove
}

# guest_zram_stats DEV TAG: zram's own view (mm_stat): what it holds now
# (orig, compr, total) and the most memory it used since it was made (a
# workload that has exited holds nothing, so that is the figure to read).
guest_zram_stats() {
	local n=${1#/dev/zram}
	awk -v tag="$2" '{ printf "S4D-RESULT tag=%s kind=zram orig_mib=%.1f compr_mib=%.1f total_mib=%.1f used_max_mib=%.1f huge_pages=%d\n", tag, $1/1048576, $2/1048576, $3/1048576, $5/1048576, $8 }' \
		"/sys/block/zram$n/mm_stat"
}

# guest_measure TAG CMD [ARGS...]: run CMD with S4D_TAG=TAG and report its
# wall time and the swap traffic over it (pswpin/pswpout, 4 KiB pages),
# then return its exit status (set -e stops the script on a failure).
guest_measure() {
	local tag=$1 t0 i0 o0 t1 i1 o1 rc=0
	shift
	t0=$(guest_uptime); i0=$(guest_vmstat pswpin); o0=$(guest_vmstat pswpout)
	S4D_TAG=$tag "$@" || rc=$?
	t1=$(guest_uptime); i1=$(guest_vmstat pswpin); o1=$(guest_vmstat pswpout)
	awk -v tag="$tag" -v t="$t0 $t1" -v i="$i0 $i1" -v o="$o0 $o1" -v rc=$rc 'BEGIN {
		split(t, T); split(i, I); split(o, O); w = T[2] - T[1]; if (w <= 0) w = 0.01
		pin = I[2] - I[1]; pout = O[2] - O[1]
		printf "S4D-RESULT tag=%s kind=swap rc=%d wall_s=%.2f pswpin=%d pswpout=%d in_mib_s=%.1f out_mib_s=%.1f\n",
			tag, rc, w, pin, pout, pin * 4096 / 1048576 / w, pout * 4096 / 1048576 / w }'
	return $rc
}

# guest_workload TAG [ARGS...]: the standard checksummed workload, the same
# for every swap scenario so their times compare: S4D_WL_MIB MiB per
# process (default: twice the guest's RAM over S4D_WL_JOBS), S4D_WL_JOBS
# processes at once (default 1), S4D_WL_PASSES passes (default 1), swap-in
# latency sampled; extra ARGS go to the workload.
guest_workload() {
	local tag=$1 jobs=${S4D_WL_JOBS:-1} mib=${S4D_WL_MIB:-}
	shift
	if [ -z "$mib" ]; then
		mib=$(awk -v j="$jobs" '/^MemTotal/ { printf "%d", $2 * 2 / 1024 / j }' /proc/meminfo)
	fi
	guest_measure "$tag" workload -m "$mib" -j "$jobs" -p "${S4D_WL_PASSES:-1}" -l "$@"
}

# guest_swapoff_all: every swap device off (a scenario that failed midway
# must not leave its swap under the next one).
guest_swapoff_all() {
	local d
	for d in $(awk 'NR > 1 { print $1 }' /proc/swaps); do swapoff "$d" || true; done
}

# guest_scenario NAME LIMIT FILE: run the script FILE in its own session,
# killed with all its processes after LIMIT seconds, then turn every swap
# off; prints "S4D-RESULT tag=NAME kind=scenario rc=.. wall_s=.." and
# records a failure in GUEST_FAILED (the boot goes on to the next one, so
# the others' results still come).
guest_scenario() {
	local name=$1 limit=$2 file=$3 t0 t1 pid wd rc=0
	echo "S4D-SCENARIO-START name=$name limit_s=$limit"
	t0=$(guest_uptime)
	# setsid: the script leads its own process group, so the watchdog's
	# kill reaches what it started in the background too.
	setsid sh -ec ". /lib/s4d-guest.sh; . $file" &
	pid=$!
	setsid sh -c "sleep $limit; echo 'guest_scenario: $name killed after ${limit}s' >&2; kill -KILL -$pid" &
	wd=$!
	wait $pid || rc=$?
	kill -KILL -$wd 2>/dev/null || true
	wait $wd 2>/dev/null || true
	t1=$(guest_uptime)
	guest_swapoff_all
	echo "S4D-RESULT tag=$name kind=scenario rc=$rc wall_s=$(awk -v a=$t0 -v b=$t1 'BEGIN { printf "%.2f", b - a }')"
	[ $rc -eq 0 ] || GUEST_FAILED="$GUEST_FAILED $name"
	return 0
}
