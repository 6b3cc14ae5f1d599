//! Fuzz entry points of the write and handoff families (compiled only under `cfg(fuzzing)`, as
//! all of [`crate::fuzzing`] is). Each forwards to the oracle-carrying function beside the code it checks (the send
//! family's target, `outbound_decide`, is the policy crate's: `mailgate_policy::fuzzing`):
//! - [`safe_name`]: attachment names → `SafeFileName`; always one safe component, and creating
//!   it inside a temp root touches nothing outside.
//! - [`download_plan`]: random sequences of hostile names and planted symlinks saved through the
//!   download root; nothing outside the root changes and nothing is overwritten.
//! - [`handoff_manifest`]: bytes → `handoff::Manifest::parse`; an accepted manifest is exactly
//!   its canonical serialisation, round-trips, and has exactly the eleven version-2 keys.
//! - [`handoff_id`]: strings → `HandoffId::parse`; accepts exactly `^oh_[A-Za-z0-9_-]{43}$`, and
//!   an accepted id is one safe path component.

/// See the module doc. `scratch` is a private directory the caller owns; each call rebuilds its
/// sandbox inside it.
pub fn safe_name(scratch: &std::path::Path, data: &[u8]) {
    crate::downloads::fuzz::safe_name(scratch, data);
}

/// See the module doc. `scratch` as for [`safe_name`].
pub fn download_plan(scratch: &std::path::Path, data: &[u8]) {
    crate::downloads::fuzz::download_plan(scratch, data);
}

/// See the module doc.
pub fn handoff_manifest(data: &[u8]) {
    crate::handoff::manifest::fuzz_manifest(data);
}

/// See the module doc.
pub fn handoff_id(data: &[u8]) {
    crate::handoff::id::fuzz_handoff_id(data);
}
