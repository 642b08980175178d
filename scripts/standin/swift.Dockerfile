# A stand-in for the official swift:6.x-bookworm image, for building deploy/Dockerfile's default target where no
# registry is reachable (scripts/image-source.sh): the packages that image carries, on the debootstrap base. The
# toolchain (TOOLCHAIN) and a local package mirror (MIRROR, if the machine has one) are not copied in: the build
# mounts them at the same paths (podman build -v). Test only.
ARG BASE=localhost/debian-bookworm-minbase:2
FROM ${BASE}
ARG TOOLCHAIN=/opt/swift
ARG MIRROR=
RUN apt-get update \
 && apt-get install -y --no-install-recommends binutils git gnupg2 libc6-dev libcurl4-openssl-dev libedit2 libgcc-12-dev \
      libpython3-dev libsqlite3-0 libstdc++-12-dev libxml2-dev libncurses-dev libz3-dev pkg-config tzdata zlib1g-dev \
      ca-certificates \
 && apt-get clean && rm -rf /var/lib/apt/lists/* \
 && if [ -n "$MIRROR" ]; then git config --system "url.$MIRROR/.insteadOf" https://github.com/; fi
ENV PATH=${TOOLCHAIN}/usr/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
