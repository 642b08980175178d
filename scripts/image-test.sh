#!/usr/bin/env bash
# make image-test: the image (already built by make image) against a private PostgreSQL reachable over TCP, then
# deploy/compose.yaml as written, with podman-compose, then deploy/systemd's unit under systemd in a container, then
# deploy/k8s's ConfigMap and Deployment with podman kube play.
set -euo pipefail
cd "$(dirname "$0")/.."
url=$(scripts/test-postgres.sh start .build/image-test-pg 25438)
trap 'scripts/test-postgres.sh stop .build/image-test-pg' EXIT
python3 scripts/image_test.py "$url"
python3 scripts/compose_test.py
python3 scripts/systemd_test.py "$url"
python3 scripts/kube_test.py "$url"
