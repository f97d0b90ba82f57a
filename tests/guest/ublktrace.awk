# ublktrace.awk: reads /sys/kernel/tracing/trace (block_rq_issue,
# block_rq_complete, sys_enter/sys_exit_io_uring_enter) and splits each
# READ request's time from issue to completion at the server's wait
# returning and its commit entering the kernel, and the time from the
# faulting task's last fault to the issue (see ublktrace.sh). -v tag.
#
# A request is given to the first wait of a server thread that returns
# after it was issued; the commit that thread enters next answers it.
# With one queue this pairing is exact; with several it may give a request
# to another queue's wake (then its wake time is a lower bound).

function ts(   i) {
	for (i = 1; i <= NF; i++)
		if ($i ~ /^[0-9]+\.[0-9]+:$/) { base = i; return substr($i, 1, length($i) - 1) + 0 }
	return -1
}
# sector of a block event: the field before "+"
function sector(   i) {
	for (i = base + 1; i < NF; i++) if ($(i + 1) == "+") return $i
	return ""
}
function add(k, us,   b) {
	n[k]++; sum[k] += us
	b = int(us / 10); if (b > 5000) b = 5000
	h[k, b]++
}
function p50(k,   b, c) {
	c = 0
	for (b = 0; b <= 5000; b++) { c += h[k, b]; if (c * 2 >= n[k]) return b * 10 + 5 }
	return -1
}
{
	t = ts(); if (t < 0) next
	ev = $(base + 1)
	tid = $1; sub(/.*-/, "", tid)
	if (ev == "block_rq_issue:" || ev == "block_rq_complete:") {
		if ($(base + 3) !~ /R/ || $(base + 3) ~ /F/) next
		s = sector()
		if (ev == "block_rq_issue:") {
			issue[s] = t; wait_for[s] = 1; by[s] = tid
			# issued in the faulting task's own context: its last fault
			if (tid in lastfault) add("fault", (t - lastfault[tid]) * 1e6)
			delete lastfault[tid]
			next
		}
		if (!(s in issue)) next
		if ((s in commit) && (s in wake)) {
			add("wake", (wake[s] - issue[s]) * 1e6)
			add("serve", (commit[s] - wake[s]) * 1e6)
			add("done", (t - commit[s]) * 1e6)
			add("total", (t - issue[s]) * 1e6)
			if (by[s] != "0") back[by[s]] = t
		} else unpaired++
		delete issue[s]; delete wake[s]; delete commit[s]; delete wait_for[s]; delete by[s]
		next
	}
	if (ev == "page_fault_user:") { lastfault[tid] = t; next }
	if (ev == "sched_switch:") {
		# the task whose read completed, back on a CPU
		for (i = base + 1; i <= NF; i++) if ($i ~ /^next_pid=/) {
			p = substr($i, 10)
			if (p in back) { add("back", (t - back[p]) * 1e6); delete back[p] }
		}
		next
	}
	if (ev ~ /^sys_io_uring_enter\(/) {
		mc = ""
		for (i = base + 1; i <= NF; i++) if ($i == "min_complete:") { mc = $(i + 1); break }
		waiting[tid] = (mc !~ /^(0x)?0*,?$/)
		if (!waiting[tid]) {
			# a commit (min_complete 0): it answers what this thread woke for
			for (s in woke) if (woke[s] == tid) { commit[s] = t; delete woke[s] }
		}
		next
	}
	if (ev == "sys_io_uring_enter" && waiting[tid]) {
		waiting[tid] = 0
		for (s in wait_for) if (issue[s] < t) { wake[s] = t; woke[s] = tid; delete wait_for[s] }
	}
}
END {
	printf "S4D-RESULT tag=%s kind=trace reads=%d unpaired=%d", tag, n["total"], unpaired
	split("fault wake serve done back total", ks, " ")
	for (j = 1; j <= 6; j++) {
		k = ks[j]
		printf " %s_p50_us=%d %s_mean_us=%.0f", k, p50(k), k, n[k] ? sum[k] / n[k] : 0
	}
	printf "\n"
}
