//! The change feed the local index syncs from: what a backend answers when asked "what is in
//! this folder now, or what changed since this cursor". It is the one sync interface every
//! backend implements (Maildir by file names and directory mtimes, Graph by `messages/delta`,
//! IMAP by UIDVALIDITY/UIDNEXT and CONDSTORE), so the index never looks at which backend it
//! holds. Cursors are opaque strings a backend hands out and takes back; the index stores them
//! beside what it indexed and never reads them. A message's `version` is opaque too: it changes
//! whenever anything the index stores of the message changes (flags, folder, content), and the
//! index refetches a message exactly when its version differs from the stored one.

use super::model::{AttachmentMeta, MessageDetail};

/// One message as a change feed names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SyncItem {
    /// The backend id, as `get_message` takes it.
    pub(crate) id: String,
    /// Opaque; differs after any change the index must see (flags, content, folder).
    pub(crate) version: String,
}

/// What one call of [`super::MailStore::folder_changes`] says about a folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FolderDelta {
    /// Every message the folder holds now (this page of them, when `more`): the index diffs
    /// the whole inventory against what it holds for the folder, and removes the rest once the
    /// last page arrived.
    Inventory(Vec<SyncItem>),
    /// What changed since the cursor: messages new or changed, and ids gone from the folder
    /// (deleted, expunged or moved away). A backend that cannot name what went away (IMAP
    /// without QRESYNC) lists instead every id the folder holds now in `present` (no versions:
    /// cheap), and the index removes whatever it holds for the folder that is not listed.
    Changes {
        changed: Vec<SyncItem>,
        removed: Vec<String>,
        present: Option<Vec<String>>,
    },
    /// The cursor is no longer valid (Graph 410 / `syncStateNotFound`, a new IMAP
    /// UIDVALIDITY): the index drops the cursor and asks again without one.
    Reset,
}

/// One page of a folder's change feed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FolderSync {
    pub(crate) delta: FolderDelta,
    /// The cursor to pass next time. With `more`, the cursor of the next page (the index stores
    /// it, so a sync killed between pages resumes there); without, the cursor for the next
    /// sync. `None` with [`FolderDelta::Reset`].
    pub(crate) cursor: Option<String>,
    /// Another page follows: call again with `cursor` now.
    pub(crate) more: bool,
}

/// A message as the index ingests it: the detail every reader tool sees, and the decoded bytes
/// of the attachments whose text the index extracts (those the caller asked for, within its
/// byte cap; `None` for one that could not be read or was over the cap).
#[derive(Debug)]
pub(crate) struct IndexFetch {
    pub(crate) detail: MessageDetail,
    pub(crate) attachments: Vec<(AttachmentMeta, Option<Vec<u8>>)>,
}

/// Which attachments' bytes an index fetch carries: the caller's choice (the index wants those
/// with a text extractor), never more than `max_bytes` each, at most `max_count` per message.
#[derive(Clone, Copy)]
pub(crate) struct AttachmentWant {
    pub(crate) max_bytes: u64,
    pub(crate) max_count: usize,
    pub(crate) wants: fn(&AttachmentMeta) -> bool,
}

impl AttachmentWant {
    /// The attachments of `all` whose bytes to fetch, by position.
    pub(crate) fn pick(&self, all: &[AttachmentMeta]) -> Vec<usize> {
        all.iter()
            .enumerate()
            .filter(|(_, m)| !m.is_inline && m.size <= self.max_bytes && (self.wants)(m))
            .map(|(i, _)| i)
            .take(self.max_count)
            .collect()
    }
}
