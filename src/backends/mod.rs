//! Mail backends behind one closed set of operations.
//!
//! A [`Backend`] is created at startup for exactly one mailbox and pinned to it: nothing can point
//! it at another mailbox afterwards. The set of backends is a closed enum (a sealed choice), so
//! adding one forces every operation to be wired for it. There is no delete operation anywhere in
//! this interface, at any gate setting.
//!
//! Everything a backend returns that came from a message is untrusted; the types here carry it
//! unbounded and the tool layer bounds and frames it.

pub(crate) mod maildir;
pub(crate) mod outbox;
pub(crate) mod smtp;

use chrono::{DateTime, Utc};

use crate::alias::Alias;
use crate::search::{Candidate, Page, ScanRequest, SearchSource};

/// Why a backend operation failed, in classes the tool boundary maps to stable codes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum BackendError {
    #[error("the requested item does not exist")]
    NotFound,
    #[error("the backend for this mailbox is not available in this build")]
    Unsupported(&'static str),
    #[error("the mailbox storage could not be read")]
    Io(#[source] std::io::Error),
    #[error("a server-side limit was exceeded")]
    TooLarge,
    #[error("the id is not one this mailbox issued")]
    BadId,
}

impl From<std::io::Error> for BackendError {
    fn from(err: std::io::Error) -> Self {
        if err.kind() == std::io::ErrorKind::NotFound {
            BackendError::NotFound
        } else {
            BackendError::Io(err)
        }
    }
}

/// One folder of a mailbox, flat; the tree is rebuilt from `parent_id`.
#[derive(Clone, Debug)]
pub(crate) struct FolderInfo {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) parent_id: Option<String>,
    pub(crate) total: u64,
    pub(crate) unread: u64,
}

/// Attachment metadata; `name` is sender-controlled.
#[derive(Clone, Debug)]
pub(crate) struct AttachmentMeta {
    pub(crate) id: String,
    pub(crate) name: Option<String>,
    pub(crate) content_type: String,
    pub(crate) size: u64,
    pub(crate) is_inline: bool,
}

/// A whole message as the reader tools see it.
#[derive(Clone, Debug)]
pub(crate) struct MessageDetail {
    pub(crate) summary: Candidate,
    pub(crate) to: Vec<crate::mime::Mailbox>,
    pub(crate) cc: Vec<crate::mime::Mailbox>,
    /// The message lists more To/Cc addresses than the parser keeps (`mime::MAX_ADDRESSES`).
    pub(crate) recipients_cut: bool,
    pub(crate) body_text: String,
    pub(crate) body_is_html: bool,
    pub(crate) internet_message_id: Option<String>,
    pub(crate) in_reply_to: Option<String>,
    /// The `References` chain, oldest first (for threading a reply).
    pub(crate) references: Vec<String>,
}

/// Counts of one folder over a bounded scan.
#[derive(Clone, Debug)]
pub(crate) struct FolderStats {
    pub(crate) folder: FolderInfo,
    pub(crate) with_attachments: u64,
    pub(crate) oldest: Option<DateTime<Utc>>,
    pub(crate) newest: Option<DateTime<Utc>>,
    pub(crate) messages_scanned: u64,
    /// Scanned messages that could not be read or wholly parsed: the attachment count does not
    /// cover them.
    pub(crate) messages_not_read: u64,
    pub(crate) pages_scanned: u32,
    pub(crate) truncated: bool,
}

/// The backend pinned to one mailbox.
pub(crate) enum Backend {
    Maildir(maildir::MaildirStore),
    /// A mailbox whose backend kind is configured but not built yet (Graph, IMAP): every call
    /// answers `UNSUPPORTED`, so the catalog and the allowlist still work.
    Unavailable {
        kind: &'static str,
    },
}

impl Backend {
    pub(crate) async fn list_folders(&self) -> Result<Vec<FolderInfo>, BackendError> {
        match self {
            Backend::Maildir(m) => m.list_folders().await,
            Backend::Unavailable { kind } => Err(BackendError::Unsupported(kind)),
        }
    }

    pub(crate) async fn folder_stats(
        &self,
        folder: &str,
        max_items: usize,
    ) -> Result<FolderStats, BackendError> {
        match self {
            Backend::Maildir(m) => m.folder_stats(folder, max_items).await,
            Backend::Unavailable { kind } => Err(BackendError::Unsupported(kind)),
        }
    }

    pub(crate) async fn get_message(&self, id: &str) -> Result<MessageDetail, BackendError> {
        match self {
            Backend::Maildir(m) => m.get_message(id).await,
            Backend::Unavailable { kind } => Err(BackendError::Unsupported(kind)),
        }
    }

    pub(crate) async fn list_attachments(
        &self,
        message_id: &str,
    ) -> Result<Vec<AttachmentMeta>, BackendError> {
        match self {
            Backend::Maildir(m) => m.list_attachments(message_id).await,
            Backend::Unavailable { kind } => Err(BackendError::Unsupported(kind)),
        }
    }

    /// The decoded bytes of one attachment; refused before decoding when the declared size is
    /// over `max_bytes`, and checked again on the decoded length.
    pub(crate) async fn attachment(
        &self,
        message_id: &str,
        attachment_id: &str,
        max_bytes: u64,
    ) -> Result<(AttachmentMeta, Vec<u8>), BackendError> {
        match self {
            Backend::Maildir(m) => m.attachment(message_id, attachment_id, max_bytes).await,
            Backend::Unavailable { kind } => Err(BackendError::Unsupported(kind)),
        }
    }
}

/// Writes (write gate only). Each takes ids this mailbox issued; none deletes anything, and no
/// delete method may ever be added here (catalog.md: no tool deletes, at any gate setting).
impl Backend {
    /// Appends a whole RFC 5322 message to `folder` (a well-known name such as `sentitems` or
    /// `drafts`, created when missing, or an existing folder id) with Maildir `flags` (letters of
    /// `DFPRST`; empty = unseen). Returns the new message's id.
    pub(crate) async fn append(
        &self,
        folder: &str,
        raw: &[u8],
        flags: &str,
    ) -> Result<String, BackendError> {
        match self {
            Backend::Maildir(m) => m.append(folder, raw, flags).await,
            Backend::Unavailable { kind } => Err(BackendError::Unsupported(kind)),
        }
    }

    /// Moves messages to an existing folder (well-known name or id; never created). `Err` is the
    /// whole call's failure (e.g. `NotFound` for the destination); otherwise one result per id,
    /// in order, holding the message's new id.
    pub(crate) async fn move_messages(
        &self,
        ids: &[String],
        destination: &str,
    ) -> Result<Vec<maildir::ItemResult<String>>, BackendError> {
        match self {
            Backend::Maildir(m) => m.move_messages(ids, destination).await,
            Backend::Unavailable { kind } => Err(BackendError::Unsupported(kind)),
        }
    }

    /// As [`Backend::move_messages`], leaving the sources in place; results hold the copies' ids.
    pub(crate) async fn copy_messages(
        &self,
        ids: &[String],
        destination: &str,
    ) -> Result<Vec<maildir::ItemResult<String>>, BackendError> {
        match self {
            Backend::Maildir(m) => m.copy_messages(ids, destination).await,
            Backend::Unavailable { kind } => Err(BackendError::Unsupported(kind)),
        }
    }

    /// Sets (`read = true`) or clears the read flag; ids are unchanged.
    pub(crate) async fn mark_messages(
        &self,
        ids: &[String],
        read: bool,
    ) -> Result<Vec<maildir::ItemResult<()>>, BackendError> {
        match self {
            Backend::Maildir(m) => m.mark_messages(ids, read).await,
            Backend::Unavailable { kind } => Err(BackendError::Unsupported(kind)),
        }
    }
}

impl SearchSource for Backend {
    async fn search(&self, req: &ScanRequest, query: &str) -> Result<Page, BackendError> {
        match self {
            Backend::Maildir(m) => m.scan(req, Some(query)).await,
            Backend::Unavailable { kind } => Err(BackendError::Unsupported(kind)),
        }
    }

    async fn list(&self, req: &ScanRequest) -> Result<Page, BackendError> {
        match self {
            Backend::Maildir(m) => m.scan(req, None).await,
            Backend::Unavailable { kind } => Err(BackendError::Unsupported(kind)),
        }
    }
}

/// Alias → backend, fixed at startup.
pub(crate) struct Registry {
    entries: Vec<(Alias, Backend)>,
}

impl Registry {
    pub(crate) fn new(entries: Vec<(Alias, Backend)>) -> Self {
        Self { entries }
    }

    pub(crate) fn get(&self, alias: &Alias) -> Option<&Backend> {
        self.entries
            .iter()
            .find(|(a, _)| a == alias)
            .map(|(_, b)| b)
    }
}
