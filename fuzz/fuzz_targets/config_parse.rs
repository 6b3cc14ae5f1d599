//! `plugin.json` bytes → `Config::from_json`; oracles in `mailgate::fuzzing::config_parse`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mailgate::fuzzing::config_parse(data));
