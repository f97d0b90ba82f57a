#!/usr/bin/env bash
# Boots systemd as PID 1 of a new PID namespace, chrooted into a throw-away
# overlay of /, in a private mount namespace: nothing of the host changes.
# Usage: boot.sh DIR   (DIR empty; prints systemd's host PID on stdout, then
# keeps running until that systemd is killed). Files under DIR/inject are
# copied over the overlay's root before boot.
set -euo pipefail
dir=$1
exec unshare --mount --propagation private bash -s "$dir" <<'INNER'
set -euo pipefail
dir=$1
mkdir -p "$dir/t"
mount -t tmpfs -o size=2g tmpfs "$dir/t"
t=$dir/t
mkdir -p "$t/lower" "$t/upper" "$t/work" "$t/root"
mount --bind / "$t/lower"
mount -t overlay overlay -o "lowerdir=$t/lower,upperdir=$t/upper,workdir=$t/work" "$t/root"
mount --rbind /dev "$t/root/dev"
mount --rbind /sys "$t/root/sys"
if [ -d "$dir/inject" ]; then cp -a "$dir/inject/." "$t/root/"; fi
# Keep the host's /tmp out of reach of the guest's tmpfiles cleanup.
mount -t tmpfs tmpfs "$t/root/tmp"
mount -t tmpfs tmpfs "$t/root/run"
exec unshare --pid --fork --kill-child bash -c '
  mount -t proc proc "$1/proc"
  exec chroot "$1" env container=s4d-test /lib/systemd/systemd --system --unit=multi-user.target --log-target=console --show-status=no
' _ "$t/root"
INNER
