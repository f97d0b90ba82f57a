#!/bin/sh
# Adds Debian's <codename>-backports suite (Mesa >= 25, QEMU 10, valkey 8 come
# from there), reusing the URI of the machine's own Debian source so a mirror
# or snapshot keeps being used. Does nothing off Debian or when already added.
# S4D_BACKPORTS_LIST and S4D_APT_SOURCES let a test point it elsewhere.
set -e
. /etc/os-release
[ "$ID" = debian ] || exit 0
list=${S4D_BACKPORTS_LIST:-/etc/apt/sources.list.d/s4d-backports.sources}
src=${S4D_APT_SOURCES:-/etc/apt}
[ -f "$list" ] && exit 0
uri=$(awk '/^URIs:/ {print $2; exit}' "$src/sources.list.d/debian.sources" 2>/dev/null || true)
[ -n "$uri" ] || uri=$(awk '$1=="deb" && $0 !~ /security/ {print $2; exit}' "$src/sources.list" 2>/dev/null || true)
[ -n "$uri" ] || uri=http://deb.debian.org/debian
printf 'Types: deb\nURIs: %s\nSuites: %s-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
	"$uri" "$VERSION_CODENAME" >"$list"
echo "added $VERSION_CODENAME-backports from $uri"
