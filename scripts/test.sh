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

echo "== test dependencies"
# aiosmtpd is the real SMTP server the send tests start on loopback (tests/it/send.rs); the
# test fails, rather than skips, without it. Installing is a no-op when it is already present.
if ! python3 -c "import aiosmtpd" 2>/dev/null; then
  python3 -m pip install --quiet --disable-pip-version-check aiosmtpd
fi

echo "== tests"
cargo test --locked --all-targets
# --all-targets leaves out doctests; they hold the compile_fail proof that a send permit cannot
# be forged or cloned outside policy::outbound.
cargo test --locked --doc

if [ "$fuzz_seconds" != "0" ]; then
  echo "== fuzz smoke (${fuzz_seconds}s per target)"
  scripts/fuzz.sh "$fuzz_seconds"
fi
echo "== all checks passed"
