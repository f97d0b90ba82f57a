#!/bin/bash
# swapmatrix.sh [--boots N] [--only MEM/SMP/JOBS] [--out DIR]
# Issue 40's check that swap needs no valve, by hand (each boot takes
# minutes under TCG; not in CI): swapmem.sh with the README's commands and
# no tuning flags, a checksummed workload of twice the guest's RAM beside a
# forking loop, over 512 MiB and 1 GiB guests, 1, 2 and 4 vCPUs, one
# process and three at once, round after round until --boots boots (default
# 12: each configuration once). lockwatch prints every daemon thread's
# stack if the guest is still busy at 400 s, and a stalled boot fails at
# swapmem.sh's 900 s. One line per boot, then the consoles in --out.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
boots=12 only="" out=/tmp/s4d-swapmatrix
while [ $# -gt 0 ]; do
	case $1 in
	--boots) boots=${2:?}; shift 2;;
	--only) only=${2:?}; shift 2;;
	--out) out=${2:?}; shift 2;;
	-h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;;
	*) echo "swapmatrix.sh: unknown argument $1 (see --help)" >&2; exit 2;;
	esac
done
mkdir -p "$out"
configs=()
for mem in 512M 1G; do for smp in 1 2 4; do for jobs in 1 3; do configs+=("$mem/$smp/$jobs"); done; done; done
[ -z "$only" ] || configs=("$only")
# A 2x-RAM workload must fit in RAM plus the device.
size_for() { [ "$1" = 512M ] && echo 1G || echo 2G; }
field() { sed -n "s/.*tag=$2 .*\b$3=\([^ ]*\).*/\1/p" "$1" | head -n 1; }
printf "%-4s %-5s %-4s %-5s %9s %9s %5s %8s %16s %11s %10s %9s %s\n" boot mem vcpu procs zram_add s4d_add ok wall_s nomem/held/fail/lowMiB after_work after_idle after_del result
failed=0
for ((i = 0; i < boots; i++)); do
	c=${configs[i % ${#configs[@]}]}
	IFS=/ read -r mem smp jobs <<<"$c"
	log="$out/boot$i-$mem-$smp-$jobs.log"
	t0=$(date +%s)
	bash "$here/swapmem.sh" --mem "$mem" --smp "$smp" --size "$(size_for "$mem")" --x 2 --jobs "$jobs" --fork --log "$log" >/dev/null 2>&1
	rc=$?
	low=$(field "$log" s4d-counters reserve_low)
	wall=$(($(date +%s) - t0))
	res=passed
	ok=$(sed -n 's/.*kind=workload-total .*ok=\([01]\).*/\1/p' "$log" | head -n 1)
	if [ $rc -ne 0 ] || [ "$ok" != 1 ]; then res="FAILED rc=$rc"; failed=$((failed + 1)); fi
	grep -q "WATCH-TASK" "$log" && res="$res (stalled past 400 s: stacks in the console)"
	printf "%-4s %-5s %-4s %-5s %9s %9s %5s %8s %16s %11s %10s %9s %s\n" "$i" "$mem" "$smp" "$jobs" \
		"$(field "$log" zram-add delta_mib)" "$(field "$log" s4d-add delta_mib)" "${ok:--}" "$wall" "$(field "$log" s4d-counters nomem)/$(field "$log" s4d-counters held)/$(field "$log" s4d-counters held_failed)/$(( ${low:-0} >> 20 ))" \
		"$(field "$log" s4d-after-workload delta_vs_before_add_mib)" "$(field "$log" s4d-after-idle delta_vs_before_add_mib)" \
		"$(field "$log" s4d-del delta_vs_before_add_mib)" "$res"
done
echo "swapmatrix.sh: $((boots - failed)) of $boots boots passed; consoles in $out"
[ $failed -eq 0 ]
