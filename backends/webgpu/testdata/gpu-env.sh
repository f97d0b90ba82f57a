# Sourced by the GPU-machine scripts beside it (no Go, no network there),
# with C (the carry folder) set: unpacks what the carry holds (xz'd
# binaries, Debian's Vulkan loader, Python wheels), points the loader at
# NVIDIA's Vulkan driver and defines say (a line to the console and to
# $SUM when set).
say() { if [ -n "${SUM:-}" ]; then echo "$@" | tee -a "$SUM"; else echo "$@"; fi; }
for f in "$C"/*.xz; do [ -e "$f" ] && xz -d -f "$f"; done
chmod +x "$C"/*.test "$C"/s4d* 2>/dev/null
for f in "$C"/debs/*.deb; do dpkg -x "$f" /; done; ldconfig
for j in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json /etc/vulkan/icd.d/nvidia_icd.json; do
	[ -f $j ] && export VK_DRIVER_FILES=$j && break
done
[ -x /usr/bin/python3 ] || ln -s "$(command -v python3)" /usr/bin/python3
/usr/bin/python3 -m pip install -q --no-index --no-deps --target /tmp/site "$C"/whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site
