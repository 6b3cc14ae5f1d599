//! Bytes → an OAuth authorization server's token, device and discovery answers; oracles in
//! `mailgate::fuzzing::oauth_wire`.
#![no_main]
// The macro's expansion reads RUST_LIBFUZZER_DEBUG_PATH with std::env and writes that file with
// std::fs (libfuzzer-sys's debug hook); nothing in this file calls either.
#![allow(
    clippy::disallowed_methods,
    reason = "inside libfuzzer_sys::fuzz_target! only"
)]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mailgate::fuzzing::oauth_wire(data));
