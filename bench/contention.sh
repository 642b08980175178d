#!/usr/bin/env bash
# The contention scenario of the ratings: 24 workers on 24 shared tickets (close, reopen, CSAT request, rating,
# decline, listing at random) through the gateway and the Desk emulator over HTTP for CONTENTION_SECONDS (180),
# then PostgreSQL's deadlock count, every answer against Desk's, every rating's agent (ContentionTests; make test runs
# it for 10 s). Prints the test's figures line.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --build-tests
pg_dir=.build/contention-pg
trap 'scripts/test-postgres.sh stop "$pg_dir"' EXIT
TEST_DATABASE_URL=$(scripts/test-postgres.sh start "$pg_dir" "${CONTENTION_PG_PORT:-25436}")
export TEST_DATABASE_URL
CONTENTION_SECONDS=${CONTENTION_SECONDS:-180} swift test --skip-build --filter ContentionTests 2>&1 | tee .build/contention.log \
  | grep -E "contention:|✔|✘|passed|failed"
