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
  # In the three parts make test runs (scripts/test.sh). The verdict is the sanitizer's: a report, or a test process
  # that did not finish, fails the run. A sanitized build is two to three times slower and holds freed memory, so the
  # suites' time and memory bounds (checked by make test) can fail here without a defect: they are listed, not fatal.
  . scripts/suites.sh
  log=".build-$sanitizer/suite.log"
  : > "$log"
  for part in "--skip $timed|ContentionTests" "--filter $timed" "--filter ContentionTests"; do
    # shellcheck disable=SC2086  # the part is two words on purpose
    DG_SANITIZER=$sanitizer TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" ASAN_OPTIONS="detect_leaks=0" \
      CONTENTION_SECONDS=${CONTENTION_SECONDS:-10} swift test --skip-build --sanitize="$sanitizer" \
      --scratch-path ".build-$sanitizer" $part 2>&1 | tee -a "$log" || true
  done
  if grep -qE "^(==[0-9]+==ERROR: AddressSanitizer|WARNING: ThreadSanitizer|SUMMARY: [A-Za-z]+Sanitizer)" "$log"; then
    echo "== sanitize=$sanitizer: the sanitizer reported an error (above)"
    exit 1
  fi
  if [ "$(grep -c "Test run with" "$log")" -ne 3 ]; then
    echo "== sanitize=$sanitizer: a test process did not finish (a crash?)"
    exit 1
  fi
  echo "== sanitize=$sanitizer: no sanitizer report; expectations that failed under its slowdown:"
  grep -E "Test .* recorded an issue" "$log" | cut -c1-200 || echo "   none"
  echo "== sanitize=$sanitizer: passed in $(( $(date +%s) - start ))s"
done
