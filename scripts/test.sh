#!/usr/bin/env bash
# The whole test suite against real components: one private PostgreSQL for the run (each suite makes its own
# database in it), the real HTTP server on ports below the ephemeral range, and the OpenAPI document validated.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== building (debug, with tests)"
mkdir -p .build
swift build --build-tests 2>&1 | tee .build/build-tests.log
# A warning in the project's own code once hid a test whose waits never ran (`try await await(1)` awaited the literal
# 1, "integer literal is unused"): none is let through. A clean clone compiles every file, so CI sees them all.
if grep -E "^$PWD/(Sources|Tests)/[^:]*:[0-9]+:[0-9]+: warning: " .build/build-tests.log; then
  echo "warnings in the project's code (above): fix them"
  exit 1
fi

pg_dir=.build/test-pg-run
pg_port=${TEST_PG_PORT:-25434}
trap 'scripts/test-postgres.sh stop "$pg_dir"' EXIT
echo "== starting the test PostgreSQL on port $pg_port"
TEST_DATABASE_URL=$(scripts/test-postgres.sh start "$pg_dir" "$pg_port")
export TEST_DATABASE_URL

echo "== checking the documents (links, anchors, README length)"
python3 scripts/check_docs.py
echo "== validating openapi.yaml"
python3 -m openapi_spec_validator openapi.yaml
python3 scripts/check_openapi_examples.py

echo "== running the test suite"
# The suites with time bounds and the contention scenario run apart (scripts/suites.sh says why).
. scripts/suites.sh
swift test --skip-build --skip "$timed|ContentionTests"

echo "== the suites with time bounds, by themselves"
swift test --skip-build --filter "$timed"

echo "== contention: 24 workers on 24 shared tickets, alone (CONTENTION_SECONDS, 10 here; make contention runs 180)"
CONTENTION_SECONDS=${CONTENTION_SECONDS:-10} swift test --skip-build --filter ContentionTests

echo "== contract: schemathesis against a live gateway"
scripts/contract.sh "$TEST_DATABASE_URL"

echo "== deployment files"
python3 deploy/validate.py

echo "== alerts: promtool unit tests, then the alerts and the dashboard against a real Prometheus scraping a gateway"
python3 deploy/prometheus/render.py --check
promtool check rules deploy/prometheus/alerts.yml
promtool test rules deploy/prometheus/alerts_test.yml
python3 scripts/prometheus_test.py "$TEST_DATABASE_URL"

echo "== scale-out: three gateway processes, one PostgreSQL, one Desk emulator"
python3 scripts/scale_out.py "$TEST_DATABASE_URL"

echo "== browser: the web client's demo in headless Chromium from another origin, and a refused origin"
python3 scripts/browser_test.py "$TEST_DATABASE_URL"

echo "== web client as a package: its package.json, and a strict TypeScript consumer of its declarations (tsc)"
python3 -c "import json; p = json.load(open('clients/web/package.json')); assert p['type'] == 'module' and p['types'] == p['exports']['.']['types'] == './desk-gateway.d.ts', p"
tsc -p clients/web/test/tsconfig.json

echo "== the documents' examples: docs/api.md's JavaScript (tsc), the clients' Swift and Kotlin, every desk-gateway command"
python3 scripts/check_doc_examples.py

echo "== Swift client: clients/swift built and tested (swift test) against a live gateway and its Desk emulator"
scripts/swift_client_test.sh "$TEST_DATABASE_URL"

echo "== Android client: clients/android compiled for Java 8 against OkHttp 3 and Android's org.json, JUnit against a live gateway"
scripts/android_client_test.sh "$TEST_DATABASE_URL"

echo "== report page: sign-in, summary, filters, drill-down and CSV in headless Chromium, numbers against the JSON API"
python3 scripts/report_page_test.py "$TEST_DATABASE_URL"

echo "== proxies: docs/tls.md's nginx block and Caddyfile in front of two gateways (TLS, HTTP/2, gzip, forwarded addresses)"
python3 scripts/proxy_test.py "$TEST_DATABASE_URL"

echo "== pgbouncer: two gateways through a transaction-pooling pgbouncer, a journey and a report"
python3 scripts/pgbouncer_test.py "$TEST_DATABASE_URL"

echo "== read replica: reports from a pg_basebackup standby, lag and outage fall back to the primary"
python3 scripts/replica_test.py "$TEST_DATABASE_URL"

echo "== restarts: the gateway and its embedded Desk emulator stopped and started on the same data, then another Desk"
python3 scripts/restart_test.py

echo "== abuse: one address flooding connections, another still served; SIGTERM with stalled previews in flight"
python3 scripts/abuse_test.py "$TEST_DATABASE_URL"

echo "== fuzz regressions: every input that once broke a parser, replayed"
for target in json body cursor report; do
  .build/debug/dg-fuzz "$target" $(find "Tests/Fuzz/regressions/$target" -type f ! -name README)
done

echo "== fuzz: 60 s per parser"
scripts/fuzz.sh "${FUZZ_SECONDS:-60}"

if [ "${IMAGE_TEST:-1}" != 0 ]; then
  echo "== image: deploy/Dockerfile built with podman, run read-only against PostgreSQL; deploy/compose.yaml with podman-compose"
  scripts/image.sh
  scripts/image-test.sh
  echo "== image from source: the Dockerfile's default target, built in a Swift image (a local stand-in), the same checks"
  scripts/image-source.sh
fi
