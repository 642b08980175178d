#!/usr/bin/env bash
# make image-source: deploy/Dockerfile's default target, the one `docker build` and `docker compose up --build` use,
# built from source inside a Swift image and then put through the same checks as the image of `make image`
# (scripts/image_test.py). No registry is reachable here, so the Swift image is a stand-in
# (scripts/standin/swift.Dockerfile) with this machine's toolchain and package mirror mounted into the build.
# Needs `make image` first (its runtime base). IMAGE names the result (desk-gateway:source).
set -euo pipefail
cd "$(dirname "$0")/.."
image=${IMAGE:-desk-gateway:source}
base=localhost/debian-bookworm-minbase:2
standin=localhost/swift-standin:bookworm
podman=(podman --cgroup-manager=cgroupfs)

toolchain=$(dirname "$(dirname "$(dirname "$(readlink -f "$(command -v swift)")")")")
mounts=(-v "$toolchain:$toolchain:ro")
# A machine that reads github.com from a local mirror (git's url.*.insteadOf) lends it to the build.
mirror=$(git config --get-regexp '^url\..*\.insteadof$' 'https://github.com/' | sed -n 's/^url\.\(.*\)\/\.insteadof .*/\1/p' | head -1)
[ -n "$mirror" ] && [ -d "$mirror" ] && mounts+=(-v "$mirror:$mirror:ro") || mirror=""

echo "== Swift image stand-in (toolchain $toolchain${mirror:+, package mirror $mirror})"
"${podman[@]}" build --network=host --isolation=chroot --build-arg BASE="$base" --build-arg TOOLCHAIN="$toolchain" \
  --build-arg MIRROR="$mirror" -f scripts/standin/swift.Dockerfile -t "$standin" . >/dev/null

echo "== image: podman build -f deploy/Dockerfile (default target: built from source)"
"${podman[@]}" build --network=host --isolation=chroot --format docker "${mounts[@]}" --build-arg SWIFT_IMAGE="$standin" \
  --build-arg RUNTIME_IMAGE="$base" -f deploy/Dockerfile -t "$image" . >/dev/null
size=$("${podman[@]}" image inspect --format '{{.Size}}' "$image")
echo "built $image: $((size / 1000000)) MB"

url=$(scripts/test-postgres.sh start .build/image-source-pg 25441)
trap 'scripts/test-postgres.sh stop .build/image-source-pg' EXIT
IMAGE=$image IMAGE_TEST_PORT=18385 python3 scripts/image_test.py "$url"
