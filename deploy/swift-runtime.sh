#!/bin/sh
# Copies the Swift runtime libraries that the given binaries load (directly or through each other) into
# DEST/usr/lib/swift/linux, stripped, with an ld.so.conf.d entry for them. The image's two binaries then share one
# copy of the runtime and Foundation's ICU data instead of each linking its own (--static-swift-stdlib).
# Used by deploy/Dockerfile's source stage and by scripts/image.sh. Usage: swift-runtime.sh DEST BINARY...
set -eu
dest=$1
shift
lib="$dest/usr/lib/swift/linux"
mkdir -p "$lib" "$dest/etc/ld.so.conf.d"
libraries=$(ldd "$@" | awk '$2 == "=>" && $3 ~ /\/lib\/swift\/linux\// { print $3 }' | sort -u)
[ -n "$libraries" ] || { echo "swift-runtime.sh: $* load no Swift runtime library (built with --static-swift-stdlib?)" >&2; exit 1; }
for so in $libraries; do
  install -m 644 "$so" "$lib/"
  strip --strip-unneeded "$lib/$(basename "$so")"
done
echo /usr/lib/swift/linux > "$dest/etc/ld.so.conf.d/swift.conf"
