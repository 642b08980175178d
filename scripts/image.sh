#!/usr/bin/env bash
# make image: builds deploy/Dockerfile with podman, without a daemon or a registry. The runtime base is a minimal
# Debian bookworm made here with debootstrap (imported once as localhost/debian-bookworm-minbase:2); the binaries are
# this machine's release build (the one `make build` makes), stripped, with one copy of the Swift runtime libraries
# they load (deploy/swift-runtime.sh), copied in through the Dockerfile's `prebuilt` target. Prints the image's size.
# IMAGE names the result (desk-gateway:latest).
set -euo pipefail
cd "$(dirname "$0")/.."
image=${IMAGE:-desk-gateway:latest}
# The tag changes with what the base holds, so a machine that imported an older one makes it anew.
base=localhost/debian-bookworm-minbase:2
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
podman=(podman --cgroup-manager=cgroupfs)

if ! "${podman[@]}" image exists "$base"; then
  echo "== runtime base: debootstrap --variant=minbase bookworm"
  rootfs=.image/rootfs
  rm -rf "$rootfs"; mkdir -p "$rootfs"
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >/dev/null
  # What a base image carries no need for: the downloaded packages (31 MB), apt lists, docs, man pages, locales but
  # C, logs.
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin \
         "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* \
         "$rootfs"/usr/share/info/* "$rootfs"/var/log/*.log
  find "$rootfs"/usr/share/locale -mindepth 1 -maxdepth 1 ! -name 'C*' -exec rm -rf {} + 2>/dev/null || true
  tar -C "$rootfs" -c . | "${podman[@]}" import --change 'CMD ["/bin/bash"]' - "$base" >/dev/null
  rm -rf "$rootfs"
fi

echo "== binaries: release build and the Swift runtime libraries it loads"
swift build -c release --product desk-gateway
swift build -c release --product desk-emulator
out=.image/out
rm -rf "$out"
install -D -s .build/release/desk-gateway "$out/usr/local/bin/desk-gateway"
install -D -s .build/release/desk-emulator "$out/usr/local/bin/desk-emulator"
deploy/swift-runtime.sh "$out" .build/release/desk-gateway .build/release/desk-emulator
mkdir -p "$out/usr/share/desk-gateway"
cp -r sql "$out/usr/share/desk-gateway/sql"
cp openapi.yaml "$out/usr/share/desk-gateway/openapi.yaml"

echo "== image: podman build -f deploy/Dockerfile"
"${podman[@]}" build --network=host --isolation=chroot --format docker --target prebuilt --build-arg RUNTIME_IMAGE="$base" \
  -f deploy/Dockerfile -t "$image" . >/dev/null
size=$("${podman[@]}" image inspect --format '{{.Size}}' "$image")
echo "built $image: $((size / 1000000)) MB"
