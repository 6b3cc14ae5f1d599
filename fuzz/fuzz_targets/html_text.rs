//! Arbitrary bytes → the HTML renderer (`mime::html::to_text`) at three bounds, on a
//! worker-sized stack; oracles (bounded, script-free) in `mailgate::fuzzing::html_text`.
#![no_main]
// The macro's expansion reads RUST_LIBFUZZER_DEBUG_PATH with std::env and writes that file with
// std::fs (libfuzzer-sys's debug hook); nothing in this file calls either.
#![allow(
    clippy::disallowed_methods,
    reason = "inside libfuzzer_sys::fuzz_target! only"
)]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mailgate::fuzzing::html_text(data));
