#!/bin/sh
# Put the qemu-plugin.h of the installed QEMU into folder $1, from Debian's qemu source
# package (the plugin header is in no binary package). Adds a deb-src entry beside the
# system's deb entries when there is none. Used by `make qemu-plugin`.
set -e
mkdir -p "$1"
dest=$(cd "$1" && pwd)
if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
ver=$(dpkg-query -W -f='${source:Version}' qemu-user 2>/dev/null || true)
[ -n "$ver" ] || ver=$(dpkg-query -W -f='${source:Version}' qemu-system-arm)
if ! apt-cache showsrc qemu 2>/dev/null | grep -q '^Package: qemu'; then
  echo "adding deb-src entries for Debian's qemu source package"
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] && grep -q '^Types: deb$' "$f" || continue
    sed 's/^Types: deb$/Types: deb-src/' "$f" | $SUDO tee "/etc/apt/sources.list.d/aicc-src-$(basename "$f")" >/dev/null
  done
  if [ -f /etc/apt/sources.list ] && grep -q '^deb ' /etc/apt/sources.list; then
    sed -n 's/^deb /deb-src /p' /etc/apt/sources.list | $SUDO tee /etc/apt/sources.list.d/aicc-src.list >/dev/null
  fi
  $SUDO apt-get update -qq
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
apt-get source -qq --download-only "qemu=$ver" 2>/dev/null || apt-get source -qq --download-only qemu
tar -xJf qemu_*.orig.tar.xz --wildcards '*/include/qemu/qemu-plugin.h'
cp ./*/include/qemu/qemu-plugin.h "$dest/qemu-plugin.h"
echo "qemu-plugin.h of qemu $ver in $dest"
