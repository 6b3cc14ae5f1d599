#!/usr/bin/env bash
# The whole test suite, as the README documents and .ci/run calls it.
#   scripts/test.sh            lints, unit + integration + property tests, fuzz smoke (20 s/target)
#   FUZZ_SECONDS=0 scripts/test.sh   skip the fuzz smoke run (local quick runs)
set -euo pipefail
cd "$(dirname "$0")/.."

fuzz_seconds="${FUZZ_SECONDS:-20}"

echo "== format"
cargo fmt --all --check

echo "== clippy"
cargo clippy --locked --all-targets -- -D warnings

echo "== tests"
cargo test --locked --all-targets

if [ "$fuzz_seconds" != "0" ]; then
  echo "== fuzz smoke (${fuzz_seconds}s per target)"
  scripts/fuzz.sh "$fuzz_seconds"
fi
echo "== all checks passed"
