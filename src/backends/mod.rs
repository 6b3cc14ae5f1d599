//! Mail backends behind one seam.
//!
//! A backend is created at startup for exactly one mailbox and pinned to it: nothing can point
//! it at another mailbox afterwards. Each backend is a module here implementing [`MailStore`]
//! (reads) and [`MailWrite`] (writes) over the neutral [`model`]; [`Backend`] is the closed set
//! of them, and its one delegating macro (`on_backend!`) is the only code that names the
//! variants — including [`NotBuilt`], the one place a configured but unbuilt backend kind turns
//! into `Unsupported`. Reads are open to every holder of a [`Backend`]; writes are reachable only
//! through a [`Writer`] or a [`SentFolder`], handles the [`Registry`] hands out for the mailboxes
//! startup granted them (write gate open and the alias not narrowed to read; the send gate's
//! sending mailbox). There is no delete operation anywhere in this interface, at any gate
//! setting. Every operation but a scan (which has its own budget) runs under
//! [`OPERATION_DEADLINE`].

pub(crate) mod bearer;
pub(crate) mod changes;
pub(crate) mod error;
pub(crate) mod graph;
pub(crate) mod imap;
pub(crate) mod maildir;
pub(crate) mod model;
pub(crate) mod outbox;
pub(crate) mod sending;
pub(crate) mod smtp;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

pub(crate) use error::BackendError;
pub(crate) use model::{
    AttachmentMeta, Capabilities, Categories, Contact, FolderInfo, FolderSelector, FolderStats,
    ItemResult, MessageDetail, MessageSummary, MessageText, Page, ScanRequest,
};
use model::{Flags, WellKnown};

use crate::alias::Alias;
use crate::caller::GrantedAlias;
use crate::config::{BackendSpec, MailboxEntry};
use crate::coordination::upstream::{AccountKey, AccountPlan, UpstreamLimits};
use crate::path_guard;

/// Per-message reads one caller runs at once (bodies, attachment lists) when a backend has no
/// batch form for them.
pub(crate) const FETCHES_AT_ONCE: usize = 4;

/// How long one backend operation other than a scan may take before it is a
/// [`BackendError::Timeout`].
pub(crate) const OPERATION_DEADLINE: Duration = Duration::from_secs(30);

/// The read operations every backend implements.
pub(crate) trait MailStore: Sync {
    fn capabilities(&self) -> Capabilities;

    fn list_folders(&self) -> impl Future<Output = Result<Vec<FolderInfo>, BackendError>> + Send;

    /// Counts of one folder, reading at most `max_items` messages.
    fn folder_stats(
        &self,
        folder: &FolderSelector,
        max_items: usize,
    ) -> impl Future<Output = Result<FolderStats, BackendError>> + Send;

    /// A listing (no `query`) or the backend's own search for `query`, under the request's
    /// filters, budget and keep count.
    fn scan(
        &self,
        req: &ScanRequest,
        query: Option<&str>,
    ) -> impl Future<Output = Result<Page, BackendError>> + Send;

    fn get_message(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<MessageDetail, BackendError>> + Send;

    /// The text of each message of `wanted` (its summary says whether it has attachments), in
    /// order, one result per message; a message not read by `deadline` is `Timeout`. The
    /// default reads them one by one, [`FETCHES_AT_ONCE`] at a time; a remote backend may batch.
    fn texts(
        &self,
        wanted: &[&MessageSummary],
        deadline: std::time::Instant,
    ) -> impl Future<Output = Vec<Result<MessageText, BackendError>>> + Send {
        use futures::StreamExt as _;
        let deadline = tokio::time::Instant::from_std(deadline);
        futures::stream::iter(wanted.iter().map(|m| m.id.clone()))
            .map(move |id| async move {
                match tokio::time::timeout_at(deadline, self.get_message(&id)).await {
                    Ok(Ok(m)) => Ok(MessageText {
                        // The detail's summary names what of the message its body lacks.
                        gap: m.summary.gap,
                        body: m.body_text,
                        attachments: m.summary.attachments,
                    }),
                    Ok(Err(e)) => Err(e),
                    Err(_) => Err(BackendError::Timeout),
                }
            })
            .buffered(FETCHES_AT_ONCE)
            .collect::<Vec<_>>()
    }

    fn list_attachments(
        &self,
        message_id: &str,
    ) -> impl Future<Output = Result<Vec<AttachmentMeta>, BackendError>> + Send;

    /// Whether messages carry categories a search can filter on (`Filters::categories`).
    fn keeps_categories(&self) -> bool {
        false
    }

    /// The mailbox's categories. The default: none (Maildir keeps no labels).
    fn categories(&self) -> impl Future<Output = Result<Categories, BackendError>> + Send {
        async {
            Ok(Categories::Unsupported(
                "this kind of mailbox keeps no categories",
            ))
        }
    }

    /// The mailbox's own address book: at most `limit` entries matching `query` (a name or
    /// address fragment; all when `None`). `Ok(None)` when the backend has no address book:
    /// the caller then derives correspondents from recent headers.
    fn address_book(
        &self,
        query: Option<&str>,
        limit: usize,
    ) -> impl Future<Output = Result<Option<Vec<Contact>>, BackendError>> + Send {
        let _ = (query, limit);
        async { Ok(None) }
    }

    /// The id of the folder a selector names (a well-known name resolved the backend's way),
    /// as listings' `folder_id` carry it; `NotFound` when the mailbox has no such folder. The
    /// index maps a search's folder with it.
    fn resolve_folder(
        &self,
        folder: &FolderSelector,
    ) -> impl Future<Output = Result<String, BackendError>> + Send {
        let _ = folder;
        async { Err(BackendError::Unsupported("index sync")) }
    }

    /// One page of a folder's change feed since `cursor` (none: from scratch). See
    /// [`changes`]. The default answers `Unsupported`: such a backend cannot be indexed.
    fn folder_changes(
        &self,
        folder_id: &str,
        cursor: Option<&str>,
    ) -> impl Future<Output = Result<changes::FolderSync, BackendError>> + Send {
        let _ = (folder_id, cursor);
        async { Err(BackendError::Unsupported("index sync")) }
    }

    /// The messages of `items` (as the change feed named them, versions included) as the
    /// index ingests them, one result per item, in order, each with the bytes of the
    /// attachments `want` picks. The default reads each message and attachment with the reader
    /// operations, [`FETCHES_AT_ONCE`] at a time; a backend that can read a message once for
    /// both, or find it faster by its version, overrides it.
    fn index_fetch(
        &self,
        items: &[changes::SyncItem],
        want: changes::AttachmentWant,
    ) -> impl Future<Output = Vec<Result<changes::IndexFetch, BackendError>>> + Send {
        use futures::StreamExt as _;
        futures::stream::iter(items.iter().map(|i| i.id.clone()))
            .map(move |id| async move {
                let detail = self.get_message(&id).await?;
                let mut attachments = Vec::new();
                let picked = want.pick(&detail.summary.attachments);
                for (i, meta) in detail.summary.attachments.iter().enumerate() {
                    let bytes = if picked.contains(&i) {
                        self.attachment(&id, &meta.id, want.max_bytes)
                            .await
                            .ok()
                            .map(|(_, b)| b)
                    } else {
                        None
                    };
                    attachments.push((meta.clone(), bytes));
                }
                Ok(changes::IndexFetch {
                    detail,
                    attachments,
                })
            })
            .buffered(FETCHES_AT_ONCE)
            .collect::<Vec<_>>()
    }

    /// The decoded bytes of one attachment; refused before download when the declared size is
    /// over `max_bytes`, and checked again on the decoded length.
    fn attachment(
        &self,
        message_id: &str,
        attachment_id: &str,
        max_bytes: u64,
    ) -> impl Future<Output = Result<(AttachmentMeta, Vec<u8>), BackendError>> + Send;
}

/// The write operations. Visible to the backend modules only: the rest of the crate writes
/// through [`Writer`] and [`SentFolder`]. No delete method may ever be added here (catalog.md: no
/// tool deletes, at any gate setting).
pub(in crate::backends) trait MailWrite: MailStore {
    /// Stores a whole RFC 5322 message in a well-known folder (created when missing) with
    /// `flags`; returns the new message's id.
    fn append(
        &self,
        folder: WellKnown,
        raw: &[u8],
        flags: Flags,
    ) -> impl Future<Output = Result<String, BackendError>> + Send;

    /// Moves messages to an existing folder (never created). `Err` is the whole call's failure
    /// (e.g. `NotFound` for the destination); otherwise one result per id, in order, holding
    /// the message's new id.
    fn move_messages(
        &self,
        ids: &[String],
        destination: &FolderSelector,
    ) -> impl Future<Output = Result<Vec<ItemResult<String>>, BackendError>> + Send;

    /// As `move_messages`, leaving the sources in place; results hold the copies' ids.
    fn copy_messages(
        &self,
        ids: &[String],
        destination: &FolderSelector,
    ) -> impl Future<Output = Result<Vec<ItemResult<String>>, BackendError>> + Send;

    /// Sets (`read = true`) or clears the read flag; ids are unchanged.
    fn mark_messages(
        &self,
        ids: &[String],
        read: bool,
    ) -> impl Future<Output = Result<Vec<ItemResult<()>>, BackendError>> + Send;
}

/// A mailbox whose backend kind is configured but not built in this version (IMAP):
/// every operation answers `Unsupported` naming the kind, so the catalog and the allowlist still
/// work.
pub(crate) struct NotBuilt {
    kind: &'static str,
}

impl NotBuilt {
    fn refuse<T>(&self) -> Result<T, BackendError> {
        Err(BackendError::Unsupported(self.kind))
    }
}

impl MailStore for NotBuilt {
    async fn categories(&self) -> Result<Categories, BackendError> {
        self.refuse()
    }

    async fn address_book(
        &self,
        _: Option<&str>,
        _: usize,
    ) -> Result<Option<Vec<Contact>>, BackendError> {
        self.refuse()
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            search: model::SearchKind::ListingOnly,
            ids_survive_move: false,
        }
    }
    async fn list_folders(&self) -> Result<Vec<FolderInfo>, BackendError> {
        self.refuse()
    }
    async fn folder_stats(
        &self,
        _: &FolderSelector,
        _: usize,
    ) -> Result<FolderStats, BackendError> {
        self.refuse()
    }
    async fn scan(&self, _: &ScanRequest, _: Option<&str>) -> Result<Page, BackendError> {
        self.refuse()
    }
    async fn get_message(&self, _: &str) -> Result<MessageDetail, BackendError> {
        self.refuse()
    }
    async fn list_attachments(&self, _: &str) -> Result<Vec<AttachmentMeta>, BackendError> {
        self.refuse()
    }
    async fn attachment(
        &self,
        _: &str,
        _: &str,
        _: u64,
    ) -> Result<(AttachmentMeta, Vec<u8>), BackendError> {
        self.refuse()
    }
}

impl MailWrite for NotBuilt {
    async fn append(&self, _: WellKnown, _: &[u8], _: Flags) -> Result<String, BackendError> {
        self.refuse()
    }
    async fn move_messages(
        &self,
        _: &[String],
        _: &FolderSelector,
    ) -> Result<Vec<ItemResult<String>>, BackendError> {
        self.refuse()
    }
    async fn copy_messages(
        &self,
        _: &[String],
        _: &FolderSelector,
    ) -> Result<Vec<ItemResult<String>>, BackendError> {
        self.refuse()
    }
    async fn mark_messages(
        &self,
        _: &[String],
        _: bool,
    ) -> Result<Vec<ItemResult<()>>, BackendError> {
        self.refuse()
    }
}

/// The backend pinned to one mailbox. Adding a backend adds a variant here and an arm to
/// `on_backend!`; nothing else in the crate names the variants.
pub(crate) enum Backend {
    Maildir(maildir::MaildirStore),
    Graph(graph::GraphStore),
    Imap(Box<imap::ImapStore>),
    NotBuilt(NotBuilt),
}

/// Runs `$body` with `$b` bound to the backend inside `$self` — the one match over the variants.
macro_rules! on_backend {
    ($self:expr, $b:ident => $body:expr) => {
        match $self {
            Backend::Maildir($b) => $body,
            Backend::Graph($b) => $body,
            Backend::Imap($b) => $body,
            Backend::NotBuilt($b) => $body,
        }
    };
}

/// Why a mailbox's backend could not be opened at startup.
#[derive(Debug)]
pub(crate) enum OpenError {
    /// The Maildir root is not an openable directory.
    Maildir(std::io::Error),
    /// An `imap` block's settings are unusable (the text names the setting, never a secret).
    Imap(String),
}

/// Largest `caFile` accepted (a PEM bundle of a few certificates).
const MAX_CA_FILE_BYTES: u64 = 1024 * 1024;

/// The contents of a server block's `caFile` (`role`: "imap" or "smtp"), which must pass the
/// trusted-file checks (the user's own, not writable by others) like plugin.json.
pub(crate) fn ca_file(
    spec: &crate::config::ServerSpec,
    role: &str,
) -> Result<Option<Vec<u8>>, String> {
    let Some(path) = &spec.ca_file else {
        return Ok(None);
    };
    path_guard::read_optional_trusted_file(path, MAX_CA_FILE_BYTES)
        .map_err(|e| format!("the {role} caFile is refused: {e}"))?
        .ok_or_else(|| format!("the {role} caFile does not exist"))
        .map(Some)
}

/// `fut` under [`OPERATION_DEADLINE`].
async fn bounded<T>(fut: impl Future<Output = Result<T, BackendError>>) -> Result<T, BackendError> {
    tokio::time::timeout(OPERATION_DEADLINE, fut)
        .await
        .unwrap_or(Err(BackendError::Timeout))
}

/// The user name an `imap` block logs in as: its `username`, else the mailbox address.
fn imap_user(entry: &MailboxEntry, imap: &crate::config::ServerSpec) -> String {
    imap.username
        .clone()
        .unwrap_or_else(|| entry.address.as_str().to_owned())
}

impl Backend {
    /// Opens the backend a mailbox's config block names, pinned to its address; a Maildir root
    /// must be an openable directory and an IMAP block's settings must be usable (startup
    /// refuses the config otherwise). `graph` is the Graph client of this mailbox (the
    /// process's app-only one, or for a mailbox with `backend.auth` its own delegated one),
    /// present whenever startup could build it; `imap_login` the block's resolved IMAP
    /// credential (every IMAP mailbox without `backend.auth`); `delegated` the alias's token
    /// source (every mailbox with `backend.auth`). It takes its account's limits from `limits`
    /// (shared with every other alias of the same account).
    pub(crate) fn open(
        entry: &MailboxEntry,
        graph: Option<&Arc<graph::client::GraphClient>>,
        imap_login: Option<&crate::config::imap::ImapLogin>,
        delegated: Option<&bearer::DelegatedBearer>,
        limits: &UpstreamLimits,
    ) -> Result<Self, OpenError> {
        Ok(match (&entry.backend, graph) {
            (BackendSpec::Maildir { path, .. }, _) => Backend::Maildir(maildir::MaildirStore::new(
                path_guard::open_dir(path).map_err(OpenError::Maildir)?,
            )),
            (BackendSpec::Graph { .. }, Some(client)) => {
                let (key, plan) = graph::account(entry.address.as_str());
                Backend::Graph(graph::GraphStore::new(
                    Arc::clone(client),
                    entry.address.as_str(),
                    limits.of(&key, plan),
                ))
            }
            (BackendSpec::Graph { .. }, None) => Backend::NotBuilt(NotBuilt { kind: "graph" }),
            (BackendSpec::Imap { imap, auth, .. }, _) => {
                let login = match (auth, delegated, imap_login) {
                    (Some(spec), Some(tokens), _) => imap::Login::Delegated {
                        tokens: tokens.clone(),
                        mechanism: spec.mechanism(),
                    },
                    (Some(_), None, _) => {
                        return Err(OpenError::Imap(
                            "its delegated sign-in (backend.auth) was not set up".to_owned(),
                        ));
                    }
                    (None, _, Some(login)) => imap::Login::Static(login.clone()),
                    (None, _, None) => {
                        return Err(OpenError::Imap(
                            "its credential was not resolved".to_owned(),
                        ));
                    }
                };
                let ca = ca_file(imap, "imap").map_err(OpenError::Imap)?;
                let user = imap_user(entry, imap);
                let (key, plan) = imap::account(imap, &user);
                Backend::Imap(Box::new(
                    imap::ImapStore::new(imap, user, login, ca.as_deref(), limits.of(&key, plan))
                        .map_err(|e| OpenError::Imap(e.to_string()))?,
                ))
            }
        })
    }

    /// The upstream account `entry` reaches and what its backend needs of it; `None` for a
    /// local Maildir. Startup plans every account's limits from these before opening any
    /// backend.
    pub(crate) fn account_of(entry: &MailboxEntry) -> Option<(AccountKey, AccountPlan)> {
        match &entry.backend {
            BackendSpec::Maildir { .. } => None,
            BackendSpec::Graph { .. } => Some(graph::account(entry.address.as_str())),
            BackendSpec::Imap { imap, .. } => Some(imap::account(imap, &imap_user(entry, imap))),
        }
    }

    /// `Err(Unsupported(kind))` when this mailbox's backend is not built, so a caller can say
    /// why before planning work, without looking at variants.
    pub(crate) fn ensure_built(&self) -> Result<(), BackendError> {
        match self {
            Backend::NotBuilt(b) => b.refuse(),
            _ => Ok(()),
        }
    }

    pub(crate) fn capabilities(&self) -> Capabilities {
        on_backend!(self, b => b.capabilities())
    }

    pub(crate) async fn list_folders(&self) -> Result<Vec<FolderInfo>, BackendError> {
        bounded(async { on_backend!(self, b => b.list_folders().await) }).await
    }

    pub(crate) async fn folder_stats(
        &self,
        folder: &FolderSelector,
        max_items: usize,
    ) -> Result<FolderStats, BackendError> {
        bounded(async { on_backend!(self, b => b.folder_stats(folder, max_items).await) }).await
    }

    /// See [`MailStore::scan`]; bounded by the request's own budget, not
    /// [`OPERATION_DEADLINE`].
    pub(crate) async fn scan(
        &self,
        req: &ScanRequest,
        query: Option<&str>,
    ) -> Result<Page, BackendError> {
        on_backend!(self, b => b.scan(req, query).await)
    }

    pub(crate) async fn get_message(&self, id: &str) -> Result<MessageDetail, BackendError> {
        bounded(async { on_backend!(self, b => b.get_message(id).await) }).await
    }

    pub(crate) async fn list_attachments(
        &self,
        message_id: &str,
    ) -> Result<Vec<AttachmentMeta>, BackendError> {
        bounded(async { on_backend!(self, b => b.list_attachments(message_id).await) }).await
    }

    /// See [`MailStore::texts`]; bounded by `deadline`, not [`OPERATION_DEADLINE`].
    pub(crate) async fn texts(
        &self,
        wanted: &[&MessageSummary],
        deadline: std::time::Instant,
    ) -> Vec<Result<MessageText, BackendError>> {
        on_backend!(self, b => b.texts(wanted, deadline).await)
    }

    pub(crate) async fn attachment(
        &self,
        message_id: &str,
        attachment_id: &str,
        max_bytes: u64,
    ) -> Result<(AttachmentMeta, Vec<u8>), BackendError> {
        bounded(async {
            on_backend!(self, b => b.attachment(message_id, attachment_id, max_bytes).await)
        })
        .await
    }

    pub(crate) fn keeps_categories(&self) -> bool {
        on_backend!(self, b => b.keeps_categories())
    }

    pub(crate) async fn categories(&self) -> Result<Categories, BackendError> {
        bounded(async { on_backend!(self, b => b.categories().await) }).await
    }

    pub(crate) async fn address_book(
        &self,
        query: Option<&str>,
        limit: usize,
    ) -> Result<Option<Vec<Contact>>, BackendError> {
        bounded(async { on_backend!(self, b => b.address_book(query, limit).await) }).await
    }

    pub(crate) async fn resolve_folder(
        &self,
        folder: &FolderSelector,
    ) -> Result<String, BackendError> {
        bounded(async { on_backend!(self, b => b.resolve_folder(folder).await) }).await
    }

    /// See [`MailStore::folder_changes`]; one page, under [`OPERATION_DEADLINE`].
    pub(crate) async fn folder_changes(
        &self,
        folder_id: &str,
        cursor: Option<&str>,
    ) -> Result<changes::FolderSync, BackendError> {
        bounded(async { on_backend!(self, b => b.folder_changes(folder_id, cursor).await) }).await
    }

    /// See [`MailStore::index_fetch`]; each message under [`OPERATION_DEADLINE`] as a whole
    /// batch is not (the caller sizes its batches).
    pub(crate) async fn index_fetch(
        &self,
        items: &[changes::SyncItem],
        want: changes::AttachmentWant,
    ) -> Vec<Result<changes::IndexFetch, BackendError>> {
        on_backend!(self, b => b.index_fetch(items, want).await)
    }

    // Writes: private to this module; reached through `Writer` and `SentFolder`.

    async fn append(
        &self,
        folder: WellKnown,
        raw: &[u8],
        flags: Flags,
    ) -> Result<String, BackendError> {
        bounded(async { on_backend!(self, b => b.append(folder, raw, flags).await) }).await
    }

    async fn move_messages(
        &self,
        ids: &[String],
        destination: &FolderSelector,
    ) -> Result<Vec<ItemResult<String>>, BackendError> {
        bounded(async { on_backend!(self, b => b.move_messages(ids, destination).await) }).await
    }

    async fn copy_messages(
        &self,
        ids: &[String],
        destination: &FolderSelector,
    ) -> Result<Vec<ItemResult<String>>, BackendError> {
        bounded(async { on_backend!(self, b => b.copy_messages(ids, destination).await) }).await
    }

    async fn mark_messages(
        &self,
        ids: &[String],
        read: bool,
    ) -> Result<Vec<ItemResult<()>>, BackendError> {
        bounded(async { on_backend!(self, b => b.mark_messages(ids, read).await) }).await
    }
}

/// The write operations of one mailbox. Only [`Registry::writer`] makes one, for a mailbox
/// startup granted writes to.
pub(crate) struct Writer<'a> {
    backend: &'a Backend,
}

impl Writer<'_> {
    /// Whether a moved message keeps its id in this mailbox (see [`Capabilities`]).
    pub(crate) fn ids_survive_move(&self) -> bool {
        self.backend.capabilities().ids_survive_move
    }

    /// Stores a draft (flags: seen, draft) in the drafts folder, created when missing.
    pub(crate) async fn create_draft(&self, raw: &[u8]) -> Result<String, BackendError> {
        let flags = Flags {
            seen: true,
            draft: true,
        };
        self.backend.append(WellKnown::Drafts, raw, flags).await
    }

    pub(crate) async fn move_messages(
        &self,
        ids: &[String],
        destination: &FolderSelector,
    ) -> Result<Vec<ItemResult<String>>, BackendError> {
        self.backend.move_messages(ids, destination).await
    }

    pub(crate) async fn copy_messages(
        &self,
        ids: &[String],
        destination: &FolderSelector,
    ) -> Result<Vec<ItemResult<String>>, BackendError> {
        self.backend.copy_messages(ids, destination).await
    }

    pub(crate) async fn mark_messages(
        &self,
        ids: &[String],
        read: bool,
    ) -> Result<Vec<ItemResult<()>>, BackendError> {
        self.backend.mark_messages(ids, read).await
    }
}

/// Files the copy of a sent message in the sending mailbox's Sent folder, for transports that
/// do not file it themselves ([`sending::Transport::files_sent_copy`]). Only
/// [`Registry::sent_folder`] makes one, for the send gate's sending mailbox.
pub(crate) struct SentFolder<'a> {
    backend: &'a Backend,
}

impl SentFolder<'_> {
    pub(crate) async fn file(&self, raw: &[u8]) -> Result<String, BackendError> {
        let flags = Flags {
            seen: true,
            draft: false,
        };
        self.backend.append(WellKnown::SentItems, raw, flags).await
    }
}

/// What startup granted one mailbox beyond reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Grants {
    /// The write gate is open and the alias is not narrowed to read.
    pub(crate) write: bool,
    /// This is the send gate's sending mailbox: sent copies may be filed in it.
    pub(crate) file_sent: bool,
}

struct Mailbox {
    alias: Alias,
    backend: Backend,
    grants: Grants,
}

/// Alias → backend and grants, fixed at startup.
pub(crate) struct Registry {
    entries: Vec<Mailbox>,
}

impl Registry {
    pub(crate) fn new(entries: Vec<(Alias, Backend, Grants)>) -> Self {
        Self {
            entries: entries
                .into_iter()
                .map(|(alias, backend, grants)| Mailbox {
                    alias,
                    backend,
                    grants,
                })
                .collect(),
        }
    }

    fn entry(&self, alias: &Alias) -> Option<&Mailbox> {
        self.entries.iter().find(|m| &m.alias == alias)
    }

    /// The backend of a mailbox the caller was granted: a [`GrantedAlias`] is the only key
    /// (`caller`), so no code reaches a mailbox its caller may not.
    pub(crate) fn get(&self, alias: &GrantedAlias) -> Option<&Backend> {
        self.entry(alias.alias()).map(|m| &m.backend)
    }

    /// The write handle of `alias`; `None` unless startup granted it writes.
    pub(crate) fn writer(&self, alias: &GrantedAlias) -> Option<Writer<'_>> {
        self.entry(alias.alias())
            .filter(|m| m.grants.write)
            .map(|m| Writer {
                backend: &m.backend,
            })
    }

    /// The Sent-copy handle of `alias`; `None` unless it is the sending mailbox.
    pub(crate) fn sent_folder(&self, alias: &GrantedAlias) -> Option<SentFolder<'_>> {
        self.entry(alias.alias())
            .filter(|m| m.grants.file_sent)
            .map(|m| SentFolder {
                backend: &m.backend,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes are reachable only through the handles, and the registry hands a handle out only
    /// for what startup granted the alias.
    #[tokio::test]
    async fn handles_follow_the_grants_startup_gave() {
        let alias = |name: &str| Alias::parse(name).expect("alias");
        let granted =
            |name: &str| crate::caller::test_grant(&alias(name), crate::config::Access::Full);
        let not_built = || Backend::NotBuilt(NotBuilt { kind: "graph" });
        let registry = Registry::new(vec![
            (alias("reader"), not_built(), Grants::default()),
            (
                alias("writer"),
                not_built(),
                Grants {
                    write: true,
                    file_sent: false,
                },
            ),
            (
                alias("sender"),
                not_built(),
                Grants {
                    write: false,
                    file_sent: true,
                },
            ),
        ]);
        assert!(registry.writer(&granted("reader")).is_none());
        assert!(registry.sent_folder(&granted("reader")).is_none());
        assert!(registry.writer(&granted("sender")).is_none());
        assert!(registry.sent_folder(&granted("writer")).is_none());
        assert!(registry.writer(&granted("nobody")).is_none());
        let writer = registry.writer(&granted("writer")).expect("granted");
        // The one place an unbuilt kind is refused answers through the handle too.
        assert!(matches!(
            writer.create_draft(b"x").await,
            Err(BackendError::Unsupported("graph"))
        ));
        let sent = registry.sent_folder(&granted("sender")).expect("granted");
        assert!(matches!(
            sent.file(b"x").await,
            Err(BackendError::Unsupported("graph"))
        ));
        assert!(matches!(
            registry
                .get(&granted("reader"))
                .expect("listed")
                .ensure_built(),
            Err(BackendError::Unsupported("graph"))
        ));
    }
}
