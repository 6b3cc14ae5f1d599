#!/usr/bin/env bash
# Fuzz smoke run: build every cargo-fuzz target once, run each for SECONDS (default 20), fail on
# any crash, and print one summary line per target. Works unattended from a fresh clone on stable
# Rust (RUSTC_BOOTSTRAP=1 lets cargo-fuzz pass its -Z sanitizer flags; see fuzz/README.md).
#
# There are two fuzz projects: fuzz-policy/ (config, gates, outbound: the policy crate alone, no
# network stack, a short build) and fuzz/ (MIME, Maildir, downloads, handoffs: the whole mailgate
# crate). Each is built once, the policy one first.
#
# usage: scripts/fuzz.sh [SECONDS]
#   SECONDS               per target (default 20)
#   FUZZ_TOTAL_SECONDS=N  instead of SECONDS: N seconds for the whole run, divided evenly
#                         across the targets run, at least FUZZ_MIN_SECONDS (default 2) each,
#                         so adding a target does not lengthen the smoke run (scripts/test.sh)
#   FUZZ_SANITIZER=none   build without AddressSanitizer (about twice as fast to build and run)
#   FUZZ_TARGETS="a b"    run only these targets (default: all, from `cargo fuzz list`)
#   FUZZ_CODEGEN_UNITS=N  codegen units per crate (cargo-fuzz forces 1 otherwise: the fastest
#                         fuzzing, the slowest build)
#   FUZZ_DEV=1            build without optimisation (cargo fuzz --dev): a build in well under
#                         half the time, slower runs; what the smoke run in scripts/test.sh uses
#   FUZZ_SCRATCH=DIR      where the targets' scratch directories go (default /dev/shm when it
#                         is a tmpfs, else fuzz/target/tmp; one private folder per run)
#   FUZZ_SLOW_EXECS=N     flag a target under N inputs per second as SLOW in the summary
#                         (default 1000, 0 for none; a flag only, never a failure)
#   FUZZ_TRACE_COMPARES=0 build without comparison tracing (cargo fuzz --no-trace-compares):
#                         a tenth to four fifths more inputs per second, weaker guidance
#                         towards magic values (fuzz/README.md, "Speed")
#
# The committed seeds (<project>/corpus/<target>/) and regressions (<project>/regressions/
# <target>/) are read, never written: new inputs go to <project>/target/corpus/<target>/,
# crashes to <project>/artifacts/<target>/, logs to <project>/target/logs/<target>.log (all
# git-ignored). Each summary line gives the target's inputs per second (execs/s).
set -euo pipefail

usage() {
    echo "usage: $0 [SECONDS]  (a whole number of seconds per target)" >&2
    echo "   or: FUZZ_TOTAL_SECONDS=N $0  (N seconds for the whole run)" >&2
    exit 2
}
whole() { [[ "$1" =~ ^[1-9][0-9]*$ ]]; }
total="${FUZZ_TOTAL_SECONDS:-}"
min_seconds="${FUZZ_MIN_SECONDS:-2}"
slow_execs="${FUZZ_SLOW_EXECS:-1000}"
[[ "$slow_execs" =~ ^[0-9]+$ ]] || usage
if [[ -n "$total" ]]; then
    if [[ $# -gt 0 ]] || ! whole "$total" || ! whole "$min_seconds"; then
        usage
    fi
else
    seconds="${1:-20}"
    whole "$seconds" || usage
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fuzz="$root/fuzz"
# Policy first: its build is short, so a policy crash shows before the long build starts.
projects=(fuzz-policy fuzz)
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
# The targets' scratch directories (the Maildir, the index, the download sandboxes) land in a
# private folder of this run instead of /tmp (libFuzzer exits without removing them). Private,
# so that two concurrent runs never delete each other's; removed when this script exits. In RAM
# when /dev/shm is a tmpfs (FUZZ_SCRATCH=DIR to choose): safe_name and download_plan rebuild a
# sandbox per input and ran 3.7 times as many inputs a second there as on ext4.
scratch="${FUZZ_SCRATCH:-}"
if [[ -z "$scratch" ]]; then
    scratch="$fuzz/target/tmp"
    if [[ -d /dev/shm && -w /dev/shm && "$(stat -f -c %T /dev/shm 2>/dev/null)" == tmpfs ]]; then
        scratch=/dev/shm
    fi
fi
mkdir -p "$scratch" "$fuzz/target/logs"
TMPDIR="$(mktemp -d "$scratch/mailgate-fuzz-run.XXXXXX")"
export TMPDIR
trap 'rm -rf "$TMPDIR"' EXIT

sanitizer="${FUZZ_SANITIZER:-address}"
# Both projects build into one target directory: the crates they share with the same features
# (53 of the policy build's 92 units: serde_json, cap-std, rustix, idna, …) are compiled once per
# run. One directory per build flavour (fuzz/target for ASan, fuzz/target/sanitizer-none for
# none, …-no-trace-compares without comparison tracing): the flags differ, so sharing one would
# rebuild every crate on each switch (16 min for ASan).
build=(--sanitizer "$sanitizer")
replay_flags=""
flavour=""
if [[ "$sanitizer" != address ]]; then
    flavour="sanitizer-$sanitizer"
fi
# Comparison tracing (cargo-fuzz's default) feeds libFuzzer's table of compared values, which
# guides mutations towards magic numbers; every compare in the instrumented code becomes a call,
# and in the byte-scanning parsers (mail-parser, html5ever) those calls took a third of the time.
if [[ "${FUZZ_TRACE_COMPARES:-1}" == 0 ]]; then
    build+=(--no-trace-compares)
    replay_flags+=" --no-trace-compares"
    flavour="${flavour:+$flavour-}no-trace-compares"
fi
target_dir="$fuzz/target${flavour:+/$flavour}"
build+=(--target-dir "$target_dir")
if [[ -n "${FUZZ_CODEGEN_UNITS:-}" ]]; then
    build+=(--codegen-units "$FUZZ_CODEGEN_UNITS")
fi
profile_dir=release
if [[ "${FUZZ_DEV:-0}" == 1 ]]; then
    build+=(--dev)
    profile_dir=debug
    replay_flags+=" --dev"
fi
# The targets run straight from their binaries once built: `cargo fuzz run` would check the
# build again before each one (a second and a half per target, half the smoke run's fuzzing).
bin_dir="$target_dir/$(rustc -vV | sed -n 's/^host: //p')/$profile_dir"
if [[ "$sanitizer" == address ]]; then
    # what `cargo fuzz run` sets for an ASan build
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_odr_violation=0"
fi

# Every target as "project target", in project order.
declare -A project_of=()
all=()
for project in "${projects[@]}"; do
    while read -r target; do
        project_of[$target]="$project"
        all+=("$target")
    done < <(cargo fuzz list --fuzz-dir "$root/$project")
done
if [[ -n "${FUZZ_TARGETS:-}" ]]; then
    read -r -a targets <<<"$FUZZ_TARGETS"
    for target in "${targets[@]}"; do
        if [[ -z "${project_of[$target]:-}" ]]; then
            echo "fuzz.sh: no fuzz target named $target (targets: ${all[*]})" >&2
            exit 2
        fi
    done
else
    targets=("${all[@]}")
fi
if [[ ${#targets[@]} -eq 0 ]]; then
    echo "fuzz.sh: no fuzz targets found" >&2
    exit 1
fi
if [[ -n "$total" ]]; then
    seconds=$((total / ${#targets[@]}))
    if [[ $seconds -lt $min_seconds ]]; then
        seconds=$min_seconds
    fi
fi

echo "fuzz.sh: sanitizer $sanitizer, ${seconds} s per target; running: ${targets[*]}" >&2
builds=()
for project in "${projects[@]}"; do
    needed=false
    for target in "${targets[@]}"; do
        if [[ ${project_of[$target]} == "$project" ]]; then
            needed=true
        fi
    done
    if $needed; then
        start=$SECONDS
        echo "fuzz.sh: building $project/" >&2
        cargo fuzz build --fuzz-dir "$root/$project" "${build[@]}"
        builds+=("build $project/: seconds=$((SECONDS - start))")
    fi
done

failed=()
slow=()
summary=()
for target in "${targets[@]}"; do
    project="${project_of[$target]}"
    dir="$root/$project"
    work="$dir/target/corpus/$target"
    log="$dir/target/logs/$target.log"
    mkdir -p "$work" "$dir/artifacts/$target" "$dir/target/logs"
    # libFuzzer writes new inputs to the first directory only; the rest are read-only seeds.
    corpora=("$work" "$dir/corpus/$target")
    if [[ -d "$dir/regressions/$target" ]]; then
        corpora+=("$dir/regressions/$target")
    fi
    args=(-artifact_prefix="$dir/artifacts/$target/" -max_total_time="$seconds" -timeout=20
        -rss_limit_mb=2048 -print_final_stats=1)
    if [[ -f "$dir/dicts/$target.dict" ]]; then
        args+=(-dict="$dir/dicts/$target.dict")
    fi

    start=$SECONDS
    status=ok
    if ! "$bin_dir/$target" "${args[@]}" "${corpora[@]}" >"$log" 2>&1; then
        status=FAILED
        failed+=("$target")
    fi
    elapsed=$((SECONDS - start))
    # libFuzzer's final stats; on a crash, the last status line's "#N" count instead.
    runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
    if [[ -z "$runs" ]]; then
        runs="$(grep -oE '^#[0-9]+' "$log" | tail -n 1 | tr -d '#' || true)"
    fi
    # Inputs per second: libFuzzer's own average (its whole run, the seeds included), else runs
    # over the wall-clock seconds.
    rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)"
    if [[ -z "$rate" ]]; then
        rate=$((${runs:-0} / (elapsed > 0 ? elapsed : 1)))
    fi
    line="$target: status=$status runs=${runs:-0} seconds=$elapsed execs/s=$rate"
    if [[ $rate -lt $slow_execs ]]; then
        line+=" SLOW"
        slow+=("$target")
    fi
    summary+=("$line")
    if [[ $status != ok ]]; then
        echo "---- $target: last lines of $log" >&2
        tail -n 40 "$log" >&2
        artifact="$(grep -oE 'Test unit written to [^ ]+' "$log" | tail -n 1 | cut -d' ' -f5 || true)"
        if [[ -n "$artifact" ]]; then
            echo "---- reproduce: RUSTC_BOOTSTRAP=1 cargo fuzz run --fuzz-dir $project" \
                "--sanitizer $sanitizer --target-dir ${target_dir#"$root"/}${replay_flags} $target" \
                "$artifact" >&2
        fi
    fi
done

printf '%s\n' "${builds[@]}" "${summary[@]}"
if [[ ${#slow[@]} -gt 0 ]]; then
    # Not a failure: a slow target still ran, but it tests little per second (fuzz/README.md).
    echo "fuzz.sh: SLOW (under $slow_execs execs/s, $profile_dir build, sanitizer $sanitizer):" \
        "${slow[*]}" >&2
fi
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "fuzz.sh: crashes in: ${failed[*]}" >&2
    exit 1
fi
