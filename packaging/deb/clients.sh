#!/bin/sh
# Builds the client packages beside s4d's own (called by `make deb`):
#   libs4d0      the C library (clients/c), soname libs4d.so.0
#   libs4d-dev   its header, the unversioned link and s4d.pc
#   python3-s4d  the Python package (clients/python)
# Usage: clients.sh VERSION ARCH COMMIT COMPRESS LIBRARY OUTDIR
# LIBRARY is the built bin/libs4d.so.0.
set -eu
version=$1 arch=$2 commit=$3 compress=$4 lib=$5 out=$6
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
maint=$(sed -n 's/^Maintainer: //p' packaging/deb/control.in)
date=$(date -u -R -d @"${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}")
stage=$out/deb-clients
rm -rf "$stage"

# docs PKG: the copyright and a native changelog, as s4d's own package has.
docs() {
	d=$stage/$1/usr/share/doc/$1
	install -d "$d"
	install -m 0644 packaging/deb/copyright "$d/copyright"
	printf '%s (%s) unstable; urgency=medium\n\n  * Built from commit %s.\n\n -- %s  %s\n' \
		"$1" "$version" "$commit" "$maint" "$date" | gzip -9n > "$d/changelog.gz"
}

# control PKG FIELDS...: writes DEBIAN/control (Installed-Size measured),
# md5sums, and builds the package.
build() {
	p=$1
	shift
	root=$stage/$p
	install -d "$root/DEBIAN"
	size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
	{
		printf 'Package: %s\nVersion: %s\n' "$p" "$version"
		printf 'Maintainer: %s\nInstalled-Size: %s\n' "$maint" "$size"
		printf 'Priority: optional\nHomepage: https://github.com/s4d-project/s4d\n'
		for f in "$@"; do printf '%s\n' "$f"; done
	} > "$root/DEBIAN/control"
	(cd "$root" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | sort -z | xargs -0 md5sum > DEBIAN/md5sums)
	chmod 0644 "$root"/DEBIAN/*
	[ ! -e "$root/DEBIAN/postinst" ] || chmod 0755 "$root/DEBIAN/postinst"
	[ ! -e "$root/DEBIAN/prerm" ] || chmod 0755 "$root/DEBIAN/prerm"
	arch_of=$(sed -n 's/^Architecture: //p' "$root/DEBIAN/control")
	dpkg-deb --root-owner-group -Z"$compress" --build "$root" "$out/${p}_${version}_${arch_of}.deb" >/dev/null
	echo "built $out/${p}_${version}_${arch_of}.deb"
}

desc_lib='client library of the s4d compressed page store
 libs4d speaks the protocol of s4d, a memory-compression daemon: it stores
 pages in the daemon and fetches them back over its Unix socket, or through
 memory shared with it (memfd) without copying them.'

# libs4d0
root=$stage/libs4d0
install -D -m 0644 "$lib" "$root/usr/lib/$multiarch/libs4d.so.0"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/lib/$multiarch/libs4d.so.0"
docs libs4d0
install -d "$root/DEBIAN"
echo "libs4d 0 libs4d0 (>= $version)" > "$root/DEBIAN/shlibs"
echo "activate-noawait ldconfig" > "$root/DEBIAN/triggers"
glibc=$(objdump -T "$root/usr/lib/$multiarch/libs4d.so.0" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -n 1)
build libs4d0 "Architecture: $arch" "Multi-Arch: same" "Section: libs" "Depends: libc6 (>= $glibc)" \
	"Description: $desc_lib"

# libs4d-dev
root=$stage/libs4d-dev
install -D -m 0644 clients/c/s4d.h "$root/usr/include/s4d.h"
install -d "$root/usr/lib/$multiarch/pkgconfig"
ln -s libs4d.so.0 "$root/usr/lib/$multiarch/libs4d.so"
printf '%s\n' "prefix=/usr" "libdir=\${prefix}/lib/$multiarch" "includedir=\${prefix}/include" '' \
	'Name: s4d' 'Description: client library of the s4d compressed page store' "Version: $version" \
	'Libs: -L${libdir} -ls4d' 'Cflags: -I${includedir}' > "$root/usr/lib/$multiarch/pkgconfig/s4d.pc"
chmod 0644 "$root/usr/lib/$multiarch/pkgconfig/s4d.pc"
docs libs4d-dev
build libs4d-dev "Architecture: $arch" "Multi-Arch: same" "Section: libdevel" "Depends: libs4d0 (= $version)" \
	"Description: client library of the s4d compressed page store (development files)
 libs4d speaks the protocol of s4d, a memory-compression daemon: it stores
 pages in the daemon and fetches them back over its Unix socket, or through
 memory shared with it (memfd) without copying them.
 .
 This package has the header s4d.h and the pkg-config file s4d.pc."

# python3-s4d: the modules, compiled at install time as Debian does.
root=$stage/python3-s4d
install -d "$root/usr/lib/python3/dist-packages/s4d"
install -m 0644 clients/python/s4d/*.py "$root/usr/lib/python3/dist-packages/s4d/"
docs python3-s4d
install -d "$root/DEBIAN"
cat > "$root/DEBIAN/postinst" <<'SH'
#!/bin/sh
set -e
if [ "$1" = configure ] && command -v py3compile >/dev/null 2>&1; then
	py3compile -p python3-s4d
fi
SH
cat > "$root/DEBIAN/prerm" <<'SH'
#!/bin/sh
set -e
if command -v py3clean >/dev/null 2>&1; then
	py3clean -p python3-s4d
else
	find /usr/lib/python3/dist-packages/s4d -name __pycache__ -type d -exec rm -rf {} + 2>/dev/null || true
fi
SH
build python3-s4d "Architecture: all" "Section: python" "Depends: python3 (>= 3.11)" "Suggests: python3-numpy, s4d" \
	"Description: Python client of the s4d compressed page store
 The s4d module speaks the protocol of s4d, a memory-compression daemon:
 it stores pages in the daemon and fetches them back, through memory shared
 with it (memfd) without copying them where it can, and parks NumPy arrays
 there with their dtype and shape. Pure Python, standard library only."
