//! A config selector byte plus `KEY=VALUE` lines → `Gates::resolve`, checked against a reference
//! model; oracles in `mailgate::fuzzing::env_gates`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mailgate::fuzzing::env_gates(data));
