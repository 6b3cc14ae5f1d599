//! Raw message bytes → a one-message Maildir read through the real backend; oracles in
//! `mailgate::fuzzing::mime_maildir`.
#![no_main]

use std::sync::LazyLock;

/// One private scratch directory per fuzzer process. It is never removed (libFuzzer exits the
/// process without running destructors); scripts/fuzz.sh points TMPDIR into fuzz/target.
static SCRATCH: LazyLock<tempfile::TempDir> = LazyLock::new(|| {
    tempfile::Builder::new()
        .prefix("mailgate-fuzz-")
        .tempdir()
        .expect("invariant: a scratch directory can be created")
});

libfuzzer_sys::fuzz_target!(|data: &[u8]| mailgate::fuzzing::mime_maildir(SCRATCH.path(), data));
