//! Oracles in `mailgate::fuzzing::write::safe_name` (see its module doc).
#![no_main]
// The macro's expansion reads RUST_LIBFUZZER_DEBUG_PATH with std::env and writes that file with
// std::fs (libfuzzer-sys's debug hook); nothing in this file calls either.
#![allow(
    clippy::disallowed_methods,
    reason = "inside libfuzzer_sys::fuzz_target! only"
)]

use std::sync::LazyLock;

/// One private scratch directory per fuzzer process, which the entry point rebuilds its sandbox
/// in on every input. It is never removed (libFuzzer exits the process without running
/// destructors); scripts/fuzz.sh points TMPDIR into fuzz/target.
static SCRATCH: LazyLock<tempfile::TempDir> = LazyLock::new(|| {
    tempfile::Builder::new()
        .prefix("mailgate-fuzz-")
        .tempdir()
        .expect("invariant: a scratch directory can be created")
});

libfuzzer_sys::fuzz_target!(|data: &[u8]| mailgate::fuzzing::write::safe_name(
    SCRATCH.path(),
    data
));
