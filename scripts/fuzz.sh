#!/usr/bin/env bash
# Fuzz smoke run: build every cargo-fuzz target once, run each for SECONDS (default 20), fail on
# any crash, and print one summary line per target. Works unattended from a fresh clone on stable
# Rust (RUSTC_BOOTSTRAP=1 lets cargo-fuzz pass its -Z sanitizer flags; see fuzz/README.md).
#
# usage: scripts/fuzz.sh [SECONDS]
#   FUZZ_SANITIZER=none   build without AddressSanitizer (about twice as fast to build and run)
#   FUZZ_TARGETS="a b"    run only these targets (default: all, from `cargo fuzz list`)
#
# The committed seeds (fuzz/corpus/<target>/) and regressions (fuzz/regressions/<target>/) are
# read, never written: new inputs go to fuzz/target/corpus/<target>/, crashes to
# fuzz/artifacts/<target>/, logs to fuzz/target/logs/<target>.log (all git-ignored).
set -euo pipefail

seconds="${1:-20}"
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: $0 [SECONDS]  (a whole number of seconds per target)" >&2
    exit 2
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fuzz="$root/fuzz"
cd "$root"

# cargo-fuzz: the one on PATH if there is one, else a project-local copy under target/tools
# (installed once, never into ~/.cargo).
tools="$root/target/tools"
export PATH="$tools/bin:$PATH"
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing cargo-fuzz 0.13.2 into target/tools" >&2
    cargo install cargo-fuzz --locked --version 0.13.2 --root "$tools"
fi

export RUSTC_BOOTSTRAP=1
# Two cores in CI: keep the build to them (cargo fuzz build has no -j).
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
# The Maildir target's scratch directories land in a private folder of this run instead of
# /tmp (libFuzzer exits without removing them). Private, so that two concurrent runs never
# delete each other's scratch Maildir; removed when this script exits.
mkdir -p "$fuzz/target/tmp" "$fuzz/target/logs"
TMPDIR="$(mktemp -d "$fuzz/target/tmp/run.XXXXXX")"
export TMPDIR
trap 'rm -rf "$TMPDIR"' EXIT

sanitizer="${FUZZ_SANITIZER:-address}"
build=(--sanitizer "$sanitizer")

if [[ -n "${FUZZ_TARGETS:-}" ]]; then
    read -r -a targets <<<"$FUZZ_TARGETS"
else
    mapfile -t targets < <(cargo fuzz list)
fi
if [[ ${#targets[@]} -eq 0 ]]; then
    echo "fuzz.sh: no fuzz targets found" >&2
    exit 1
fi

echo "fuzz.sh: building all targets (sanitizer: $sanitizer); running: ${targets[*]}" >&2
cargo fuzz build "${build[@]}"

failed=()
summary=()
for target in "${targets[@]}"; do
    work="$fuzz/target/corpus/$target"
    log="$fuzz/target/logs/$target.log"
    mkdir -p "$work" "$fuzz/artifacts/$target"
    # libFuzzer writes new inputs to the first directory only; the rest are read-only seeds.
    corpora=("$work" "$fuzz/corpus/$target")
    if [[ -d "$fuzz/regressions/$target" ]]; then
        corpora+=("$fuzz/regressions/$target")
    fi
    args=(-max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1)
    if [[ -f "$fuzz/dicts/$target.dict" ]]; then
        args+=(-dict="$fuzz/dicts/$target.dict")
    fi

    start=$SECONDS
    status=ok
    if ! cargo fuzz run "${build[@]}" "$target" "${corpora[@]}" -- "${args[@]}" >"$log" 2>&1; then
        status=FAILED
        failed+=("$target")
    fi
    elapsed=$((SECONDS - start))
    # libFuzzer's final stats; on a crash, the last status line's "#N" count instead.
    runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
    if [[ -z "$runs" ]]; then
        runs="$(grep -oE '^#[0-9]+' "$log" | tail -n 1 | tr -d '#' || true)"
    fi
    line="$target: status=$status runs=${runs:-0} seconds=$elapsed"
    summary+=("$line")
    if [[ $status != ok ]]; then
        echo "---- $target: last lines of $log" >&2
        tail -n 40 "$log" >&2
        artifact="$(grep -oE 'Test unit written to [^ ]+' "$log" | tail -n 1 | cut -d' ' -f5 || true)"
        if [[ -n "$artifact" ]]; then
            echo "---- reproduce: RUSTC_BOOTSTRAP=1 cargo fuzz run $target $artifact" >&2
        fi
    fi
done

printf '%s\n' "${summary[@]}"
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "fuzz.sh: crashes in: ${failed[*]}" >&2
    exit 1
fi
