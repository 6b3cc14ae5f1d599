//! Fuzzing entry points of the policy crate, compiled only under `cfg(fuzzing)` (cargo-fuzz sets
//! it for every crate), so no ordinary build ever sees them.
//!
//! Purpose: each `fuzz-policy/fuzz_targets/*.rs` is one line that calls a function here; this
//! crate's fuzz build (fuzz-policy/) compiles no network stack. Every entry point states an
//! oracle that is stronger than "does not panic" (style rule 14), and signals a violation by
//! panicking with a message that starts with `oracle:`; libFuzzer then saves the input under
//! `fuzz-policy/artifacts/<target>/`.
//! - [`config_parse`]: `plugin.json` bytes → `Config::from_json`.
//! - [`env_gates`]: a config selector byte plus `KEY=VALUE` lines → `Gates::resolve`, against a
//!   reference model.
//! - [`outbound_decide`]: recipient lists, domain allowlists and header values →
//!   `OutboundPolicy::decide`; never a permit for an unlisted domain, a local part with routing
//!   syntax or a header with a control character.
//!
//! Invariants: an entry point never touches the process environment or the disk; it is
//! deterministic for a given input.
//!
//! Who may call it: the fuzz targets in `fuzz-policy/` only.
//!
//! Layout: `config` and `gates` hold the two larger targets, re-exported here so each target
//! calls `mailgate_policy::fuzzing::<target>`.

mod config;
mod gates;

pub use config::config_parse;
pub use gates::env_gates;

// ----------------------------------------------------------------------------------------------
// outbound_decide
// ----------------------------------------------------------------------------------------------

/// See [`crate::outbound::fuzz_outbound`] (the oracle sits beside the code it checks, which
/// keeps its private helpers private).
pub fn outbound_decide(data: &[u8]) {
    crate::outbound::fuzz_outbound(data);
}
