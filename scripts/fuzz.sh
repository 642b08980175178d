#!/usr/bin/env bash
# libFuzzer over the parsers of untrusted input (Sources/dg-fuzz): the JSON parser, the ticket body validator, the
# cursor decoder and the report-parameter parser, each for FUZZ_SECONDS (default 60). Built with ASan in its own
# scratch folder. A crash stops the run and leaves the input under .build-fuzz/crashes/; copy it to
# Tests/Fuzz/regressions/TARGET/ (make test replays those) and fix the parser.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-${FUZZ_SECONDS:-60}}
echo "== fuzz: building the fuzzers (ASan + libFuzzer)"
swift build --scratch-path .build-fuzz -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING --product dg-fuzz 2>&1 | tail -n 1
rm -rf .build-fuzz/crashes; mkdir -p .build-fuzz/crashes
for target in json body cursor report; do
  corpus=.build-fuzz/corpus/$target
  mkdir -p "$corpus"
  echo "== fuzz: $target for ${seconds}s"
  DG_FUZZ_TARGET=$target .build-fuzz/debug/dg-fuzz -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix=".build-fuzz/crashes/$target-" "$corpus" "Tests/Fuzz/seeds/$target" 2>&1 |
    grep -E "^(#[0-9]+ *DONE|stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY|Fatal error|artifact_prefix|Test unit written)" || true
  if ls .build-fuzz/crashes/"$target"-* >/dev/null 2>&1; then
    echo "fuzz: $target crashed; inputs in .build-fuzz/crashes/" >&2
    exit 1
  fi
done
echo "fuzz: 4 targets ran ${seconds}s each without a crash"
