#!/bin/bash
# run.sh: boot the guest kernel (make deps-guest) under QEMU/TCG with an
# initramfs of busybox, the given binaries (and the libraries ldd lists)
# and the modules, run a script in it as root, print the console, and exit
# with the script's exit status. The guest always powers off: the script's
# end, a panic (panic=-1, -no-reboot) or the host-side time bound ends it.
#
#   tests/guest/run.sh [--bin PATH]... [--file SRC:DST]... [--mem 256M] [--smp 1]
#                      [--timeout SEC] [--log FILE] [--keep DIR] [--disk FILE] -- 'script'
#
# In the script: busybox, /bin/NAME for each --bin, the functions of
# tests/guest/lib.sh (sourced first), `set -e` on. Exit status: the
# script's; 124 when the time bound killed the guest; 125 when the guest
# ended without reporting (a crash, a panic); 2 on bad arguments or a
# missing kernel (the message names the remedy). --disk FILE: FILE (raw)
# is the guest's /dev/nvme0n1 (NVMe is built into the kernel), storage
# that takes no guest RAM, e.g. a swap daemon's backing file.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
kdir=${S4D_GUEST_DIR:-/var/cache/s4d-guest}
mem=256M smp=1 timeout=150 log="" keep="" script="" append=""
bins=() files=() disk=()

die() { echo "run.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case "$1" in
	--bin) [ $# -ge 2 ] || die "--bin needs a path"; bins+=("$2"); shift 2;;
	--file) [ $# -ge 2 ] || die "--file needs SRC:DST"; files+=("$2"); shift 2;;
	--mem) mem=${2:?}; shift 2;;
	--smp) smp=${2:?}; shift 2;;
	--timeout) timeout=${2:?}; shift 2;;
	--log) log=${2:?}; shift 2;;
	--keep) keep=${2:?}; shift 2;;
	--disk) [ -f "${2:-}" ] || die "--disk wants an existing file, got '${2:-}'"
		disk=(-drive "file=$2,if=none,id=disk0,format=raw,cache=unsafe" -device nvme,drive=disk0,serial=s4d); shift 2;;
	--append) append=${2:?}; shift 2;;
	--kernel-dir) kdir=${2:?}; shift 2;;
	--script) script=$(cat "${2:?}"); shift 2;;
	--) shift; script=${1:-}; shift || true; [ $# -eq 0 ] || die "one script after --, quoted";;
	-h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0;;
	*) die "unknown argument '$1' (see --help)";;
	esac
done
[ -n "$script" ] || die "no script: give it after -- or with --script FILE"
[[ "$timeout" =~ ^[0-9]+$ ]] && [ "$timeout" -gt 0 ] || die "--timeout wants whole seconds, got '$timeout'"
[[ "$smp" =~ ^[0-9]+$ ]] || die "--smp wants a number, got '$smp'"

qemu=$(command -v qemu-system-x86_64 || true)
[ -n "$qemu" ] || die "qemu-system-x86_64 not found: run 'make deps-guest' (as root)"
[ -f "$kdir/vmlinuz" ] && [ -f "$kdir/modules/deps" ] || die "no guest kernel in $kdir: run 'make deps-guest' (as root)"
bb=""
for c in /bin/busybox /usr/bin/busybox; do
	# The guest has no libc of its own: only a static busybox will do.
	if [ -x "$c" ] && ! ldd "$c" >/dev/null 2>&1; then bb=$c; break; fi
done
[ -n "$bb" ] || die "no static busybox: run 'make deps-guest' (installs busybox-static)"
command -v cpio >/dev/null || die "cpio not found: run 'make deps-guest'"

work=$(mktemp -d /tmp/s4d-guest.XXXXXX)
cleanup() { [ -n "$keep" ] && { rm -rf "$keep"; cp -a "$work" "$keep"; }; rm -rf "$work"; }
trap cleanup EXIT
root=$work/root
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,lib/modules,proc,sys,dev,tmp,run,etc,root}
cp "$bb" "$root/bin/busybox"

# copy_with_libs puts a binary at DST and, if it is dynamic, every library
# ldd lists (and the loader) at its own path, so it runs as on the host.
copy_with_libs() {
	local src=$1 dst=$2 lib
	[ -f "$src" ] || die "no such file: $src"
	install -D -m 0755 "$src" "$root$dst"
	if ldd "$src" >/dev/null 2>&1; then
		for lib in $(ldd "$src" | awk '/=> \// { print $3 } /^[ \t]*\// { print $1 }'); do
			[ -e "$root$lib" ] || install -D -m 0755 "$(readlink -f "$lib")" "$root$lib"
		done
	fi
}
for b in ${bins[@]+"${bins[@]}"}; do copy_with_libs "$b" "/bin/$(basename "$b")"; done
for f in ${files[@]+"${files[@]}"}; do
	src=${f%%:*} dst=${f#*:}
	[ "$src" != "$f" ] && [ "${dst#/}" != "$dst" ] || die "--file wants SRC:/absolute/DST, got '$f'"
	[ -e "$src" ] || die "no such file: $src"
	mkdir -p "$(dirname "$root$dst")"; cp -a "$src" "$root$dst"
done
cp "$kdir"/modules/*.ko "$kdir"/modules/deps "$root/lib/modules/"
cp "$here/lib.sh" "$root/lib/s4d-guest.sh"
printf '%s\n' "$script" > "$root/scenario.sh"
echo 'root:x:0:0:root:/root:/bin/sh' > "$root/etc/passwd"
echo 'root:x:0:' > "$root/etc/group"

# init runs the script in a child shell (an `exit` in it must not end PID
# 1) and reports its status with a marker line the host looks for.
cat > "$root/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tmpfs tmpfs /run
hostname s4d-guest
export PATH=/bin:/sbin:/usr/bin:/usr/sbin HOME=/root
echo "S4D-GUEST-BOOTED uptime=$(cut -d' ' -f1 /proc/uptime) kernel=$(uname -r) mem_kib=$(awk '/^MemTotal/ {print $2}' /proc/meminfo)"
sh -ec '. /lib/s4d-guest.sh; . /scenario.sh' </dev/null
rc=$?
echo "S4D-GUEST-EXIT=$rc uptime=$(cut -d' ' -f1 /proc/uptime)"
sync
# Let the serial line drain before the power goes.
sleep 0.2
poweroff -f
EOF
chmod 0755 "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet) > "$work/initrd"

out=$work/console
echo "S4D-HOST qemu-start initrd_kib=$(( $(stat -c %s "$work/initrd") / 1024 ))"
set +e
# No KVM: guests fail under it on these machines. -nodefaults: no VGA, no
# NIC; the serial line is the only device the guest needs. sed -u, not tr:
# lines must reach a reader as they come (the test times the boot by them).
timeout -k 5 "$timeout" "$qemu" -accel tcg -cpu max -m "$mem" -smp "$smp" \
	-nodefaults -no-user-config -display none -serial stdio -no-reboot \
	-kernel "$kdir/vmlinuz" -initrd "$work/initrd" ${disk[@]+"${disk[@]}"} \
	-append "console=ttyS0 panic=-1 loglevel=4 rdinit=/init $append" \
	</dev/null 2>&1 | sed -u 's/\r$//' | tee "$out"
qrc=${PIPESTATUS[0]}
set -e
[ -z "$log" ] || cp "$out" "$log"
if [ "$qrc" -eq 124 ] || [ "$qrc" -eq 137 ]; then
	echo "run.sh: guest killed after ${timeout}s (--timeout)" >&2
	exit 124
fi
rc=$(sed -n 's/^S4D-GUEST-EXIT=\([0-9]*\).*/\1/p' "$out" | tail -n 1)
if [ -z "$rc" ]; then
	echo "run.sh: the guest ended without reporting (qemu exit $qrc): a crash or panic, see the console above" >&2
	exit 125
fi
exit "$rc"
