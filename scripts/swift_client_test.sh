#!/usr/bin/env bash
# clients/swift against a live gateway: the gateway (debug build) on a fresh database with its embedded Desk
# emulator, then `swift build --build-tests` and `swift test` in clients/swift (its own package: it depends on
# nothing of the server's). ADMIN is the test cluster's admin connection string.
set -euo pipefail
cd "$(dirname "$0")/.."
admin=$1
port=${SWIFT_CLIENT_GATEWAY_PORT:-18350} desk_port=${SWIFT_CLIENT_EMULATOR_PORT:-19350}
. scripts/client_gateway.sh
start_client_gateway swift_client_test "$port" "$desk_port"
cd clients/swift
swift build --build-tests
DESK_GATEWAY_URL="http://127.0.0.1:$port" DESK_EMULATOR_URL="http://127.0.0.1:$desk_port" swift test --skip-build
