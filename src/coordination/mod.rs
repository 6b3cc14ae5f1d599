//! What instances of mailgate must agree on, owned in one place of [`App`](crate::tools::App):
//! the cursor key ring ([`cursor_keys`]), so that a cursor issued by one instance (or before a
//! restart) continues on another; and the limits of each upstream account ([`upstream`], over
//! the token buckets of [`rate`]), planned by startup from the whole allowlist and held by the
//! backends, so every alias reaching one account shares them. Everything here has an
//! in-process form, used when nothing shared is configured, and behaves then exactly as a
//! single process always has.

pub(crate) mod cursor_keys;
pub(crate) mod rate;
pub(crate) mod upstream;

use std::path::Path;

pub(crate) use cursor_keys::{CursorKeys, KeyRingError};

/// The shared state of this instance.
#[derive(Debug)]
pub(crate) struct Coordination {
    /// The keys continuation cursors are signed and checked with.
    pub(crate) cursor_keys: CursorKeys,
}

impl Coordination {
    /// From the key ring file when one is configured (`MAILGATE_CURSOR_KEYS_FILE`), else the
    /// ring the shared database holds (read at startup, `from_database`), else keys of this
    /// process alone.
    pub(crate) fn open(
        cursor_keys_file: Option<&Path>,
        from_database: Option<CursorKeys>,
    ) -> Result<Self, KeyRingError> {
        let cursor_keys = match (cursor_keys_file, from_database) {
            (Some(path), _) => CursorKeys::load(path)?,
            (None, Some(keys)) => keys,
            (None, None) => CursorKeys::for_this_process(),
        };
        // Metadata only: how many keys and whether instances share them, never a key id.
        tracing::info!(
            keys = cursor_keys.len(),
            shared = cursor_keys.source() != cursor_keys::KeySource::Process,
            "cursor key ring"
        );
        Ok(Self { cursor_keys })
    }
}
