#!/usr/bin/env bash
# The whole Swift test suite under AddressSanitizer (and, when asked, ThreadSanitizer), each in its own scratch
# folder, against one private PostgreSQL (as make test). Usage: scripts/sanitize.sh [address|thread]...
# ThreadSanitizer is not run by default: with Swift 6.3 on Linux it reports every access guarded by
# Synchronization.Mutex as a race (the lock's futex calls are invisible to it; a ten-line program with one Mutex and
# four threads shows the same report and the right result), so its output is noise until the toolchain annotates it.
set -euo pipefail
cd "$(dirname "$0")/.."
sanitizers=("$@")
[ ${#sanitizers[@]} -gt 0 ] || sanitizers=(address)
pg_dir=.build/test-pg-sanitize
pg_port=${TEST_PG_PORT:-25437}
trap 'scripts/test-postgres.sh stop "$pg_dir"' EXIT
TEST_DATABASE_URL=$(scripts/test-postgres.sh start "$pg_dir" "$pg_port")
export TEST_DATABASE_URL
for sanitizer in "${sanitizers[@]}"; do
  echo "== sanitize=$sanitizer: building"
  start=$(date +%s)
  swift build --build-tests --sanitize="$sanitizer" --scratch-path ".build-$sanitizer" 2>&1 | tail -n 1
  echo "== sanitize=$sanitizer: running the suite"
  # TSan reports go to stderr and fail the run (halt_on_error); ASan stops at the first error anyway.
  # DG_SANITIZER doubles the few time and memory bounds the tests assert (a sanitized build is slower and keeps freed
  # memory in quarantine); it loosens nothing else.
  DG_SANITIZER=$sanitizer TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" ASAN_OPTIONS="detect_leaks=0" \
    swift test --skip-build --sanitize="$sanitizer" --scratch-path ".build-$sanitizer"
  echo "== sanitize=$sanitizer: passed in $(( $(date +%s) - start ))s"
done
