#!/usr/bin/env bash
# clients/swift against a live gateway: the gateway (debug build) on a fresh database with its embedded Desk
# emulator, then `swift build --build-tests` and `swift test` in clients/swift (its own package: it depends on
# nothing of the server's). ADMIN is the test cluster's admin connection string.
set -euo pipefail
cd "$(dirname "$0")/.."
admin=$1
port=${SWIFT_CLIENT_GATEWAY_PORT:-18350} desk_port=${SWIFT_CLIENT_EMULATOR_PORT:-19350}
database=swift_client_test
psql "$admin" -qc "DROP DATABASE IF EXISTS $database WITH (FORCE)" -c "CREATE DATABASE $database" >/dev/null
log=.build/swift-client-gateway.log
# A small rate-limit budget, so the client's 429 handling is reached in a few calls; previews may fetch the
# gateway's own pages on the loopback address.
DATABASE_URL="${admin/dbname=postgres/dbname=$database}" HOST=127.0.0.1 PORT=$port DESK_EMULATOR_PORT=$desk_port \
DESK_EMULATOR_STATE=memory SYNC_INTERVAL_S=0 LOG_LEVEL=warning ASSETS_DIR="$PWD" \
RATE_LIMIT_PER_MINUTE=600 RATE_LIMIT_BURST=40 LINK_PREVIEW_ALLOW_PRIVATE=true \
  .build/debug/desk-gateway serve >"$log" 2>&1 &
gateway=$!
trap 'kill -TERM $gateway 2>/dev/null; wait $gateway 2>/dev/null; psql "$admin" -qc "DROP DATABASE IF EXISTS $database WITH (FORCE)" >/dev/null' EXIT
for _ in $(seq 1 600); do curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
curl -fs "http://127.0.0.1:$port/readyz" >/dev/null || { echo "the gateway did not become ready"; cat "$log"; exit 1; }
cd clients/swift
swift build --build-tests
DESK_GATEWAY_URL="http://127.0.0.1:$port" DESK_EMULATOR_URL="http://127.0.0.1:$desk_port" swift test --skip-build
