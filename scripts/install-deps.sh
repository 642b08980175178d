#!/usr/bin/env bash
# Installs what the gateway needs on Debian, only when something is missing (idempotent, quiet when all is there).
set -euo pipefail

# Installs the Debian packages given that are not installed yet.
install_missing() {
  local missing=()
  for p in "$@"; do
    # Installed means installed: a package removed but not purged still has a record ("deinstall ok config-files").
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  echo "installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  # RUNLEVEL=1 keeps the postgresql package from starting the system cluster; the gateway runs its own.
  RUNLEVEL=1 DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

install_missing libmicrohttpd-dev libpq-dev libcurl4-openssl-dev postgresql postgresql-contrib postgresql-client pkg-config wrk curl python3-pip

command -v swift >/dev/null || { echo "the Swift toolchain is not on PATH (swift 6.x is required)" >&2; exit 1; }

# podman (no daemon) and debootstrap for 'make image'.
if [ "${1:-}" = "--image" ]; then
  install_missing podman debootstrap uidmap fuse-overlayfs slirp4netns crun runc
  # catatonit: the pause process of the pods `podman kube play` makes for deploy/k8s.
  install_missing catatonit
  # podman-compose for the Compose file; the dnsname plugin lets its containers find each other by service name.
  install_missing podman-compose golang-github-containernetworking-plugin-dnsname
  exit 0
fi

# Contract checks and the browser used by 'make test'.
if [ "${1:-}" = "--test" ]; then
  # Headless Chromium and its WebDriver for the browser test: Debian's builds, nothing downloaded at run time.
  install_missing chromium chromium-driver
  # Prometheus (and promtool) for the alerts and the dashboard, against a live gateway.
  install_missing prometheus
  # pgbouncer for the transaction-pooling test (Debian's 1.18); tsc for the web client's type declarations.
  install_missing pgbouncer node-typescript
  # nginx, Caddy and openssl for docs/tls.md's proxies in front of live gateways (a certificate made by the test).
  install_missing nginx caddy openssl
  # The Android client's build and tests: a JDK, OkHttp 3, Android's own org.json, JUnit 4 (all Debian's jars).
  install_missing default-jdk-headless libokhttp-java libandroid-json-java junit4
  # Debian's Kotlin compiler (1.3) for the Android README's Kotlin example, compiled against the client.
  install_missing kotlin
  py=(python3 -m pip install -q --disable-pip-version-check)
  python3 -c "import openapi_spec_validator" 2>/dev/null || "${py[@]}" openapi-spec-validator ||
    "${py[@]}" --break-system-packages openapi-spec-validator
  python3 -c "import kubernetes_validate, yaml" 2>/dev/null || "${py[@]}" kubernetes-validate==1.37.0 PyYAML ||
    "${py[@]}" --break-system-packages kubernetes-validate==1.37.0 PyYAML
  python3 -c "import schemathesis" 2>/dev/null || "${py[@]}" schemathesis==4.32.5 ||
    "${py[@]}" --break-system-packages schemathesis==4.32.5
fi
