# ublktrace.sh: sourced in the guest by speed.sh's script (busybox sh).
# ublk_trace TAG [SECONDS]: splits a swap-in's round trip through a ublk
# server with the kernel's tracepoints. It waits until the swap-ins of a
# verify phase start (pswpin up by 2000 pages), records SECONDS (default 3)
# of block_rq_issue/block_rq_complete and the server's io_uring_enter
# entries and exits and the user page faults, and prints, per READ
# request, the median and mean of
#   fault:  the faulting process's fault -> issue (swap readahead: the new
#           pages allocated, with any reclaim that takes, the bios built)
#   wake:   issue -> the server's wait returns (ublk hands the request to
#           io_uring, task work, the queue thread scheduled)
#   serve:  that return -> the server's commit enters the kernel (user space)
#   done:   the commit -> the request completes (ublk ends it in the block
#           layer)
#   back:   the completion -> the faulting task on the CPU again
# as "S4D-RESULT tag=TAG kind=trace ...". Without tracefs or the events it says so and
# returns 0: the measurement is extra, never a failure.
ublk_trace() {
	local tag=$1 secs=${2:-3} tr=/sys/kernel/tracing i0 e
	local evs='block/block_rq_issue block/block_rq_complete syscalls/sys_enter_io_uring_enter syscalls/sys_exit_io_uring_enter exceptions/page_fault_user sched/sched_switch'
	[ -d $tr/events ] || mount -t tracefs nodev $tr 2>/dev/null || true
	for e in $evs; do
		if [ ! -e $tr/events/$e/enable ]; then
			echo "S4D-RESULT tag=$tag kind=trace unavailable=$(basename $e)"
			return 0
		fi
	done
	# The buffer now, before the workload leaves no memory for it.
	echo 0 > $tr/tracing_on
	echo > $tr/trace
	if ! echo 2048 > $tr/buffer_size_kb; then
		echo "S4D-RESULT tag=$tag kind=trace unavailable=buffer"
		return 0
	fi
	i0=$(guest_vmstat pswpin)
	while [ $(($(guest_vmstat pswpin) - i0)) -lt 2000 ]; do sleep 0.5; done
	for e in $evs; do
		echo 1 > $tr/events/$e/enable
	done
	echo 1 > $tr/tracing_on
	sleep "$secs"
	echo 0 > $tr/tracing_on
	for e in $evs; do
		echo 0 > $tr/events/$e/enable
	done
	awk -v tag="$tag" -f /lib/ublktrace.awk $tr/trace
	echo > $tr/trace
}
