# Sourced by the client tests: start_client_gateway NAME PORT DESK_PORT starts the gateway (debug build) on a fresh
# database NAME with its embedded Desk emulator, waits until it is ready, and stops it and drops the database when
# the script exits. ADMIN is the test cluster's admin connection string.
start_client_gateway() {
  local name=$1 port=$2 desk_port=$3
  client_database=$name
  psql "$admin" -qc "DROP DATABASE IF EXISTS $name WITH (FORCE)" -c "CREATE DATABASE $name" >/dev/null
  local log=.build/${name%_test}-gateway.log; log=${log//_/-}
  # A small rate-limit budget, so a client's 429 handling is reached in a few calls; previews may fetch pages on the
  # loopback address (the gateway's own, or one the test serves).
  DATABASE_URL="${admin/dbname=postgres/dbname=$name}" HOST=127.0.0.1 PORT=$port DESK_EMULATOR_PORT=$desk_port \
  DESK_EMULATOR_STATE=memory SYNC_INTERVAL_S=0 LOG_LEVEL=warning ASSETS_DIR="$PWD" \
  RATE_LIMIT_PER_MINUTE=600 RATE_LIMIT_BURST=40 LINK_PREVIEW_ALLOW_PRIVATE=true \
    .build/debug/desk-gateway serve >"$log" 2>&1 &
  client_gateway=$!
  trap 'kill -TERM $client_gateway 2>/dev/null; wait $client_gateway 2>/dev/null; psql "$admin" -qc "DROP DATABASE IF EXISTS $client_database WITH (FORCE)" >/dev/null' EXIT
  for _ in $(seq 1 600); do curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
  curl -fs "http://127.0.0.1:$port/readyz" >/dev/null || { echo "the gateway did not become ready"; cat "$log"; exit 1; }
}
