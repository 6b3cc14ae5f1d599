//! Local attachment handoffs (security.md §4): private bundles a program on this machine can take
//! an attachment from without its bytes passing through the model.
//!
//! Layout, under the fixed root `<state folder>/handoffs` (0700, owned by the user running
//! mailgate; the caller never names a path):
//!
//! ```text
//! handoffs/
//!   .lock                  0600, flock(2)ed to serialise commits and removals; never deleted
//!   .key                   0600, 32 random bytes sealing every manifest (see `key`); created once
//!                          by the server under the lock, never deleted, never in a bundle
//!   oh_<43 chars>/         0700, one bundle, named by its random id
//!     payload.bin          0600, the decoded attachment bytes
//!     manifest.json        0600, written last: the commit marker (see `manifest`)
//! ```
//!
//! A bundle without `manifest.json` is invisible to every reader and is removed by the sweep at
//! startup and by `mailgate handoff prune`, unless the process writing it still holds its lock.
//! Every read revalidates the whole bundle (directory and file modes, regular files not
//! symlinks, link count, owner, exact entry set, manifest shape, the manifest's MAC under the
//! store key, size, SHA-256). The MAC is what makes a consistent edit (new payload, new `sha256`
//! and `size`) detectable: the program `mailgate handoff path` hands a bundle folder to can write
//! that folder but not read `.key`, so it cannot produce a bundle mailgate will serve.
//!
//! Who may call it: `startup` opens the [`store::HandoffStore`] when the handoff gate is open; the
//! handoff tools and `create_draft` use it; the `mailgate handoff` CLI opens it without creating
//! anything. Nothing here returns a path or payload bytes to a tool caller, except
//! [`store::HandoffStore::read_payload`], which feeds a draft attachment inside the mailbox.

pub(crate) mod id;
pub(crate) mod key;
pub(crate) mod manifest;
pub(crate) mod store;

pub(crate) use id::{HandoffId, HandoffRequest};
pub(crate) use manifest::Manifest;
pub(crate) use store::{HandoffStore, StoreLimits};

/// Which quota a create would break.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Quota {
    /// `maxHandoffAttachmentBytes`
    AttachmentBytes,
    /// `maxHandoffStoreBytes`
    StoreBytes,
    /// `maxHandoffStoreEntries`
    StoreEntries,
}

impl Quota {
    pub(crate) fn key(self) -> &'static str {
        match self {
            Quota::AttachmentBytes => "maxHandoffAttachmentBytes",
            Quota::StoreBytes => "maxHandoffStoreBytes",
            Quota::StoreEntries => "maxHandoffStoreEntries",
        }
    }
}

/// Why a handoff operation failed. `Corrupt` carries a fixed description of the broken rule (for
/// logs and `mailgate handoff verify`), never content or a path.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum HandoffError {
    #[error("no such handoff")]
    NotFound,
    #[error("the handoff expired")]
    Expired,
    #[error("the bundle is corrupt: {0}")]
    Corrupt(&'static str),
    #[error("the idempotency key was used for a different request")]
    IdempotencyMismatch,
    #[error("{} would be exceeded", .0.key())]
    QuotaExceeded(Quota),
    #[error("the handoff store is locked by another process")]
    Busy,
    #[error("the handoff store could not be written or read ({0})")]
    Storage(std::io::ErrorKind),
}

impl From<std::io::Error> for HandoffError {
    fn from(e: std::io::Error) -> Self {
        HandoffError::Storage(e.kind())
    }
}

// The crash points are parsed from the environment by `config`, which names no handoff type
// (handoff depends on config, not the reverse; issue 10, clean layering).
pub(crate) use crate::config::CrashPoint;

/// The file whose lock holds the creates parked at [`CrashPoint::HoldBeforeLock`].
pub(crate) const RELEASE: &str = ".test-release";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crash_points_parse_by_name_only() {
        for point in CrashPoint::ALL {
            assert_eq!(CrashPoint::parse(point.name()), Some(point));
        }
        for bad in ["", "after_payload", "AFTER_PAYLOAD_TEMP", " before_commit"] {
            assert_eq!(CrashPoint::parse(bad), None, "{bad:?}");
        }
    }
}
