//! The IMAP backend: one [`ImapStore`] per IMAP mailbox, pinned at startup to its account (the
//! block's server and login), with its own connection [`pool`] and rate limit. Sending goes
//! through the mailbox's `smtp` block (`backends::smtp`), and the Sent copy is APPENDed here.
//!
//! Reads open folders with `EXAMINE` (read-only: reading never changes `\Seen`) and fetch with
//! `BODY.PEEK`; writes open them with `SELECT`. Listings and searches are one `UID SEARCH`
//! (built by [`query`] from structured criteria) and `UID FETCH`es of the newest UIDs within the
//! scan window, in chunks that count as pages; whatever stops them early (window, pages,
//! deadline, a connection that dies mid-fetch) is reported in the [`Page`], never hidden. Ids
//! carry the folder's UIDVALIDITY ([`ids`]): an id from before the server reset a folder is
//! refused as outdated, never read as whichever message now holds its UID. Move needs the
//! server's MOVE capability and is never emulated with `\Deleted` + `EXPUNGE`; no operation
//! deletes anything. Every operation takes one token of the mailbox's rate limit first.

mod changes;
pub(crate) mod conn;
mod ids;
pub(crate) mod mutf7;
mod pool;
pub(crate) mod query;
mod session;
pub(crate) mod shield;
pub(crate) mod structure;
mod write;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_imap::types::{Fetch, Flag};
use chrono::{Days, Utc};

use self::conn::Endpoint;
pub(crate) use self::conn::{ImapSetupError, Login};
use self::ids::MessageRef;
use self::pool::{Conn, OpError, Pool, Repeat, with_conn};
use self::query::{Criteria, Key};
use self::session::Listed;
use super::changes::{AttachmentWant, FolderSync, IndexFetch};
use super::model::{
    Capabilities, ContentGap, FolderInfo, FolderSelector, FolderStats, ItemResult, MessageDetail,
    MessageSummary, MessageText, PREVIEW_CHARS, Page, ScanRequest, ScanStop, SearchKind, WellKnown,
    query_words,
};
use super::{AttachmentMeta, BackendError, MailStore, OPERATION_DEADLINE};
use crate::config::ServerSpec;
use crate::coordination::upstream::{AccountKey, AccountLimits, AccountPlan};
use crate::mime;

/// Messages one `UID FETCH` of summaries asks for (one page of a scan).
const PAGE_SIZE: usize = 100;
/// Messages one `UID FETCH` of whole messages asks for (a search's body reads).
const TEXT_BATCH: usize = 20;
/// Bytes of a message read at most to show or search it; beyond, the body may be cut and the
/// message says so. Attachments are fetched by part, never through this.
const MAX_MESSAGE_BYTES: u64 = 4 * 1024 * 1024;
/// Bytes of the body read for a listing's preview.
const PREVIEW_BYTES: usize = 2048;
/// How long a folder list is reused before LIST runs again.
const FOLDER_LIST_TTL: Duration = Duration::from_secs(60);

/// What a listing fetches per message: flags, arrival, size, structure (the attachment list)
/// and the few headers a summary shows — never the body.
const SUMMARY_ITEMS: &str = "(UID FLAGS INTERNALDATE RFC822.SIZE BODYSTRUCTURE \
     BODY.PEEK[HEADER.FIELDS (FROM SUBJECT DATE MESSAGE-ID)])";
/// What a preview needs: the headers that say how to decode the body, and its first bytes.
const PREVIEW_ITEMS: &str = "(UID BODY.PEEK[HEADER.FIELDS (MIME-VERSION CONTENT-TYPE \
     CONTENT-TRANSFER-ENCODING)] BODY.PEEK[TEXT]<0.2048>)";

/// The folder names tried, in order, when no folder carries the special-use attribute.
fn conventional_names(folder: WellKnown) -> &'static [&'static str] {
    match folder {
        WellKnown::Inbox => &["INBOX"],
        WellKnown::SentItems => &["Sent", "Sent Items", "Sent Messages", "INBOX.Sent"],
        WellKnown::Drafts => &["Drafts", "INBOX.Drafts"],
        WellKnown::Archive => &["Archive", "Archives", "INBOX.Archive"],
        WellKnown::JunkEmail => &["Junk", "Spam", "Junk E-mail", "INBOX.Junk"],
        WellKnown::DeletedItems => &["Trash", "Deleted Items", "Deleted Messages", "INBOX.Trash"],
    }
}

/// The IMAP store of one mailbox.
pub(crate) struct ImapStore {
    pool: Pool,
    /// The account's limits (its command budget and connection slots), shared by every alias
    /// that logs in as it.
    account: Arc<AccountLimits>,
    folders: Mutex<Option<(Instant, Arc<Vec<Listed>>)>>,
    /// Whether the change feed may use the server's CONDSTORE; off only in tests of the path
    /// every server supports.
    condstore_allowed: bool,
    /// UIDs per inventory page ([`changes::INVENTORY_PAGE`]; smaller only in tests).
    inventory_page: usize,
}

/// The account an `imap` block logs in as, and what a store needs of it.
pub(crate) fn account(spec: &ServerSpec, user: &str) -> (AccountKey, AccountPlan) {
    (
        AccountKey::imap(&spec.host, spec.port, user),
        AccountPlan {
            per_minute: Some(spec.imap_per_minute()),
            at_once: pool::MAX_CONNECTIONS,
        },
    )
}

impl ImapStore {
    /// The store for one `imap` block: `user` is the block's user name or the mailbox address,
    /// `login` the block's credential or the alias's delegated tokens, `ca_pem` its `caFile`'s
    /// contents. Nothing connects until the first call (a delegated alias that has not signed in
    /// yet fails its calls, not startup).
    pub(crate) fn new(
        spec: &ServerSpec,
        user: String,
        login: Login,
        ca_pem: Option<&[u8]>,
        account: Arc<AccountLimits>,
    ) -> Result<Self, ImapSetupError> {
        let endpoint = Endpoint::new(&spec.host, spec.port, spec.security, user, login, ca_pem)?;
        Ok(Self {
            pool: Pool::new(endpoint, Arc::clone(&account)),
            account,
            folders: Mutex::new(None),
            condstore_allowed: true,
            inventory_page: changes::INVENTORY_PAGE,
        })
    }

    /// The same store, with a change feed that ignores the server's CONDSTORE.
    #[cfg(test)]
    fn without_condstore(mut self) -> Self {
        self.condstore_allowed = false;
        self
    }

    /// The same store, with inventory pages of `uids` UIDs.
    #[cfg(test)]
    fn with_inventory_page(mut self, uids: usize) -> Self {
        self.inventory_page = uids.max(1);
        self
    }

    /// Takes one token of the account's budget, or says when one will be there.
    async fn admit(&self) -> Result<(), BackendError> {
        self.account
            .admit()
            .await
            .map_err(|wait| BackendError::Throttled {
                retry_after: Some(wait),
            })
    }

    fn deadline() -> Instant {
        Instant::now() + OPERATION_DEADLINE
    }

    /// The folder list, from the cache when fresh.
    async fn folders(&self, conn: &mut Conn, refresh: bool) -> Result<Arc<Vec<Listed>>, OpError> {
        if !refresh
            && let Ok(cache) = self.folders.lock()
            && let Some((at, list)) = cache.as_ref()
            && at.elapsed() < FOLDER_LIST_TTL
        {
            return Ok(Arc::clone(list));
        }
        let list = Arc::new(conn.list().await?);
        if let Ok(mut cache) = self.folders.lock() {
            *cache = Some((Instant::now(), Arc::clone(&list)));
        }
        Ok(list)
    }

    fn forget_folders(&self) {
        if let Ok(mut cache) = self.folders.lock() {
            *cache = None;
        }
    }

    /// The wire name of `selector`: an id names it directly; a well-known folder is the one
    /// with its special-use attribute, else the first conventional name that exists.
    async fn resolve(&self, conn: &mut Conn, selector: &FolderSelector) -> Result<String, OpError> {
        match selector {
            FolderSelector::Id(id) => Ok(ids::folder_name(id).map_err(|_| BackendError::NotFound)?),
            FolderSelector::WellKnown(WellKnown::Inbox) => Ok("INBOX".to_owned()),
            FolderSelector::WellKnown(folder) => {
                let list = self.folders(conn, false).await?;
                find_well_known(&list, *folder).ok_or(OpError::Backend(BackendError::NotFound))
            }
        }
    }

    /// Like `resolve`, but the folder must exist now (a write's destination).
    async fn existing(
        &self,
        conn: &mut Conn,
        selector: &FolderSelector,
    ) -> Result<String, OpError> {
        let wire = self.resolve(conn, selector).await?;
        for refresh in [false, true] {
            let list = self.folders(conn, refresh).await?;
            if list.iter().any(|f| f.wire == wire && f.selectable) {
                return Ok(wire);
            }
        }
        Err(OpError::Backend(BackendError::NotFound))
    }

    /// The wire name of a well-known folder, created under its first conventional name when
    /// the account has none (drafts and sent copies need a home).
    async fn ensure(&self, conn: &mut Conn, folder: WellKnown) -> Result<String, OpError> {
        match self.resolve(conn, &FolderSelector::WellKnown(folder)).await {
            Err(OpError::Backend(BackendError::NotFound)) => {}
            other => return other,
        }
        let name = conventional_names(folder)[0];
        match conn.session.create(name).await {
            Ok(()) | Err(async_imap::error::Error::No(_)) => {}
            Err(e) => return Err(OpError::Imap(e)),
        }
        self.forget_folders();
        self.existing(conn, &FolderSelector::WellKnown(folder))
            .await
    }

    /// Fills the previews of `items` (all of one folder) in one fetch. A failed preview leaves
    /// them empty: a preview is a convenience, and nothing is claimed from it.
    async fn previews(&self, conn: &mut Conn, items: &mut [MessageSummary]) -> Result<(), OpError> {
        let uids: Vec<u32> = {
            let mut uids: Vec<u32> = items
                .iter()
                .filter_map(|m| MessageRef::parse(&m.id).ok().map(|r| r.uid))
                .collect();
            uids.sort_unstable();
            uids.dedup();
            uids
        };
        let fetched = conn.fetch(&uids, PREVIEW_ITEMS).await?;
        let mut by_uid: BTreeMap<u32, String> = BTreeMap::new();
        for f in &fetched {
            let (Some(uid), Some(text)) = (f.uid, f.text()) else {
                continue;
            };
            let mut raw = f.header().unwrap_or_default().to_vec();
            raw.extend_from_slice(b"\r\n");
            raw.extend_from_slice(&text[..text.len().min(PREVIEW_BYTES)]);
            let parsed = mime::parse(&raw);
            by_uid.insert(uid, parsed.body_text.chars().take(PREVIEW_CHARS).collect());
        }
        for m in items {
            if let Some(preview) = MessageRef::parse(&m.id)
                .ok()
                .and_then(|r| by_uid.remove(&r.uid))
            {
                m.preview = preview;
            }
        }
        Ok(())
    }
}

/// The folder of `list` that is `folder`: by special-use attribute, else by conventional name.
fn find_well_known(list: &[Listed], folder: WellKnown) -> Option<String> {
    list.iter()
        .find(|f| f.selectable && f.special == Some(folder))
        .or_else(|| {
            conventional_names(folder).iter().find_map(|name| {
                list.iter()
                    .find(|f| f.selectable && f.wire.eq_ignore_ascii_case(name))
            })
        })
        .map(|f| f.wire.clone())
}

/// The server-side criteria of a scan: the query's words (each must appear: `TEXT`) and the
/// filters the protocol can express. A filter whose value cannot travel as a quoted string is
/// left to the engine, which re-applies every filter; a query word that cannot travel makes
/// the server search unusable (`Unsupported`), never looser.
fn criteria(req: &ScanRequest, query: Option<&str>) -> Result<Option<Criteria>, BackendError> {
    let mut keys = Vec::new();
    if let Some(query) = query {
        let words = query_words(query);
        if words.is_empty() {
            return Ok(None);
        }
        for word in words {
            let key = Key::Text(word);
            Criteria {
                keys: vec![key.clone()],
            }
            .to_arguments()
            .map_err(|_| BackendError::Unsupported("imap"))?;
            keys.push(key);
        }
    }
    let filters = &req.filters;
    // Dates are whole days in the server's idea of the message's time zone: widen by a day on
    // each side, and let the engine cut to the exact instant.
    if let Some(from) = filters.date_from {
        let day = from.date_naive();
        keys.push(Key::Since(
            day.checked_sub_days(Days::new(1)).unwrap_or(day),
        ));
    }
    if let Some(to) = filters.date_to {
        let day = to.date_naive();
        keys.push(Key::Before(
            day.checked_add_days(Days::new(2)).unwrap_or(day),
        ));
    }
    match filters.is_read {
        Some(true) => keys.push(Key::Seen),
        Some(false) => keys.push(Key::Unseen),
        None => {}
    }
    for key in [
        filters.sender.clone().map(Key::From),
        filters.subject.clone().map(Key::Subject),
    ]
    .into_iter()
    .flatten()
    {
        let usable = Criteria {
            keys: vec![key.clone()],
        }
        .to_arguments()
        .is_ok();
        if usable {
            keys.push(key);
        }
    }
    Ok(Some(Criteria { keys }))
}

/// Whether `f` carries the flag.
fn has_flag(f: &Fetch, wanted: &Flag<'_>) -> bool {
    f.flags().any(|flag| &flag == wanted)
}

/// A summary of a fetched message (`SUMMARY_ITEMS`, or a whole-message fetch); `None` without a
/// UID (not an answer we can name).
fn summary(
    folder: &str,
    uid_validity: u32,
    f: &Fetch,
    parsed: &mime::ParsedMessage,
) -> Option<MessageSummary> {
    let uid = f.uid?;
    let (attachments, structure_cut, name_cut) = match f.bodystructure() {
        Some(s) => {
            let found = structure::attachments(s);
            (
                found.parts.into_iter().map(|p| p.meta).collect::<Vec<_>>(),
                found.cut,
                found.name_cut,
            )
        }
        None => (Vec::new(), true, false),
    };
    let gap = if structure_cut {
        Some(ContentGap::Structure)
    } else if name_cut {
        Some(ContentGap::Header)
    } else {
        // From a whole-message fetch: a part no matcher reads or a cut body too.
        ContentGap::of(parsed.cuts)
    };
    Some(MessageSummary {
        id: MessageRef {
            folder: folder.to_owned(),
            uid_validity,
            uid,
        }
        .encode(),
        folder_id: ids::folder_id(folder),
        subject: parsed.subject.clone(),
        from: parsed.from.first().cloned(),
        received: f
            .internal_date()
            .map(|d| d.with_timezone(&Utc))
            .or(parsed.date),
        sent: parsed.date,
        is_read: has_flag(f, &Flag::Seen),
        is_flagged: has_flag(f, &Flag::Flagged),
        has_attachments: attachments.iter().any(|a| !a.is_inline),
        preview: String::new(),
        attachments,
        attachments_listed: !structure_cut,
        gap,
        categories: f
            .flags()
            .filter_map(|flag| session::keyword(&flag))
            .collect(),
    })
}

/// What a message read fetches: flags, arrival, size, structure and the message itself up to
/// [`MAX_MESSAGE_BYTES`] (`BODY.PEEK`: reading never sets `\Seen`).
fn message_items() -> String {
    format!("(UID FLAGS INTERNALDATE RFC822.SIZE BODYSTRUCTURE BODY.PEEK[]<0.{MAX_MESSAGE_BYTES}>)")
}

/// The detail of a message fetched with [`message_items`]; `None` without a UID.
fn detail(folder: &str, uid_validity: u32, f: &Fetch) -> Option<MessageDetail> {
    let parsed = mime::parse(f.body().unwrap_or_default());
    let mut summary = summary(folder, uid_validity, f, &parsed)?;
    summary.preview = parsed.body_text.chars().take(PREVIEW_CHARS).collect();
    if f.size.is_some_and(|s| u64::from(s) > MAX_MESSAGE_BYTES) {
        summary.gap = Some(ContentGap::Body);
    }
    Some(MessageDetail {
        summary,
        recipients_cut: parsed.cuts.addresses,
        to: parsed.to,
        cc: parsed.cc,
        body_text: parsed.body_text,
        body_is_html: parsed.body_is_html,
        internet_message_id: parsed.message_id,
        in_reply_to: parsed.in_reply_to,
        references: parsed.references,
    })
}

/// A message id's parts, checked against the folder as it is now.
fn current(m: &MessageRef, uid_validity: u32) -> Result<(), BackendError> {
    if m.uid_validity == uid_validity {
        Ok(())
    } else {
        Err(BackendError::Outdated)
    }
}

/// Message refs by folder wire name, each with its position in the request.
type Grouped = BTreeMap<String, Vec<(usize, MessageRef)>>;

/// A batched read's results by request position (`None`: not reached yet).
type Slots<T> = Vec<Option<Result<T, BackendError>>>;

/// A batched read's answers, one per requested id.
type Answers<T> = Vec<Result<T, BackendError>>;

impl ImapStore {
    /// The start of a batched read of `ids`: grouped by folder with refused ids failed, once
    /// the rate limit admits the call (else every id fails with the throttle).
    async fn batch_start<T>(&self, ids: &[String]) -> Result<(Grouped, Slots<T>), Answers<T>> {
        let (groups, refused) = by_folder(ids);
        let results: Slots<T> = refused.into_iter().map(|r| r.map(Err)).collect();
        match self.admit().await {
            Ok(()) => Ok((groups, results)),
            Err(e) => Err(results
                .into_iter()
                .map(|r| r.unwrap_or_else(|| Err(e.same_class())))
                .collect()),
        }
    }
}

/// Opens `folder` read-only: its UIDVALIDITY and the (position, uid) of `items` still of it,
/// failing the others — and all of them when the folder cannot be opened (`None`).
async fn open_current<T>(
    conn: &mut Conn,
    folder: &str,
    items: &[(usize, MessageRef)],
    results: &mut Slots<T>,
) -> Result<Option<(u32, Vec<(usize, u32)>)>, OpError> {
    let uid_validity = match conn.open(folder, false).await {
        Ok(v) => v,
        Err(OpError::Backend(e)) => {
            for (i, _) in items {
                results[*i] = Some(Err(e.same_class()));
            }
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let mut live = Vec::new();
    for (i, m) in items {
        match current(m, uid_validity) {
            Ok(()) => live.push((*i, m.uid)),
            Err(e) => results[*i] = Some(Err(e)),
        }
    }
    Ok(Some((uid_validity, live)))
}

/// A batched read's answers: a position never reached fails with the connection's fault, or
/// as timed out when the deadline stopped the batches.
fn batch_end<T>(
    results: Slots<T>,
    outcome: &Result<(), BackendError>,
) -> Vec<Result<T, BackendError>> {
    results
        .into_iter()
        .map(|r| match (r, outcome) {
            (Some(r), _) => r,
            (None, Err(e)) => Err(e.same_class()),
            (None, Ok(())) => Err(BackendError::Timeout),
        })
        .collect()
}

/// The ids of one request grouped by folder, each with its position in the request.
fn by_folder(ids: &[String]) -> (Grouped, Vec<Option<BackendError>>) {
    let mut groups = Grouped::new();
    let mut refused = Vec::with_capacity(ids.len());
    for (i, id) in ids.iter().enumerate() {
        match MessageRef::parse(id) {
            Ok(m) => {
                groups.entry(m.folder.clone()).or_default().push((i, m));
                refused.push(None);
            }
            Err(e) => refused.push(Some(e)),
        }
    }
    (groups, refused)
}

/// The attachments of message `m` by its BODYSTRUCTURE, its id checked against the folder as it
/// is now.
async fn attachment_parts(
    conn: &mut Conn,
    m: &MessageRef,
) -> Result<Vec<structure::PartInfo>, OpError> {
    let uid_validity = conn.open(&m.folder, false).await?;
    current(m, uid_validity)?;
    let fetched = conn.fetch(&[m.uid], "(UID BODYSTRUCTURE)").await?;
    let f = fetched
        .first()
        .ok_or(OpError::Backend(BackendError::NotFound))?;
    let s = f
        .bodystructure()
        .ok_or(OpError::Backend(BackendError::Malformed))?;
    Ok(structure::attachments(s).parts)
}

/// The starting results of a batch write: `BadId` for an id that did not parse, `NotFound` for
/// the rest until the server says otherwise (a message it does not report was not there).
fn unsettled<T>(refused: &[Option<BackendError>]) -> Vec<ItemResult<T>> {
    refused
        .iter()
        .map(|r| match r {
            Some(_) => Err(BackendError::BadId),
            None => Err(BackendError::NotFound),
        })
        .collect()
}

/// The UIDs of `items` whose ids name the folder as it is now (`uid_validity`), sorted and
/// deduplicated for one command; an outdated id's result becomes `Outdated`.
fn live_uids<T>(
    items: &[(usize, MessageRef)],
    uid_validity: u32,
    results: &mut [ItemResult<T>],
) -> Vec<u32> {
    let mut uids = Vec::new();
    for (i, m) in items {
        match current(m, uid_validity) {
            Ok(()) => uids.push(m.uid),
            Err(e) => results[*i] = Err(e),
        }
    }
    uids.sort_unstable();
    uids.dedup();
    uids
}

/// `BODY.PEEK[<section>]` for an attachment id (`2`, `1.2`); `BadId` for anything else.
fn section_path(id: &str) -> Result<Vec<u32>, BackendError> {
    if id.is_empty() || id.len() > 64 {
        return Err(BackendError::BadId);
    }
    id.split('.')
        .map(|n| {
            if n.is_empty() || n.starts_with('0') || !n.bytes().all(|b| b.is_ascii_digit()) {
                Err(BackendError::BadId)
            } else {
                n.parse::<u32>().map_err(|_| BackendError::BadId)
            }
        })
        .collect()
}

impl MailStore for ImapStore {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            search: SearchKind::RemoteRelevance,
            // A moved message gets a new UID in its new folder, hence a new id.
            ids_survive_move: false,
        }
    }

    async fn list_folders(&self) -> Result<Vec<FolderInfo>, BackendError> {
        self.admit().await?;
        with_conn!(self.pool, Self::deadline(), Repeat::Safe, |conn| {
            let list = self.folders(conn, true).await?;
            let mut folders = Vec::with_capacity(list.len());
            for f in list.iter().filter(|f| f.selectable) {
                let (total, unread) = match conn.status(&f.wire).await {
                    Ok(counts) => counts,
                    // Listed a moment ago, gone now: skip it rather than fail the list.
                    Err(OpError::Backend(BackendError::NotFound)) => continue,
                    Err(e) => return Err(e),
                };
                let (parent, leaf) = match &f.delimiter {
                    Some(d) if !d.is_empty() => match f.wire.rsplit_once(d.as_str()) {
                        Some((parent, leaf)) => (Some(parent), leaf),
                        None => (None, f.wire.as_str()),
                    },
                    _ => (None, f.wire.as_str()),
                };
                let name = if f.special == Some(WellKnown::Inbox) {
                    "Inbox".to_owned()
                } else {
                    mutf7::decode(leaf).unwrap_or_else(|| leaf.to_owned())
                };
                folders.push(FolderInfo {
                    id: ids::folder_id(&f.wire),
                    name,
                    parent_id: parent
                        .filter(|p| list.iter().any(|l| l.wire == *p))
                        .map(ids::folder_id),
                    total,
                    unread,
                });
            }
            Ok(folders)
        })
    }

    async fn folder_stats(
        &self,
        folder: &FolderSelector,
        max_items: usize,
    ) -> Result<FolderStats, BackendError> {
        self.admit().await?;
        let deadline = Self::deadline();
        with_conn!(self.pool, deadline, Repeat::Safe, |conn| {
            let wire = self.resolve(conn, folder).await?;
            let (total, unread) = conn.status(&wire).await?;
            conn.open(&wire, false).await?;
            let uids = conn.search(&Criteria::default()).await?;
            let newest: Vec<u32> = uids.iter().rev().take(max_items).copied().collect();
            let mut stats = FolderStats {
                folder: FolderInfo {
                    id: ids::folder_id(&wire),
                    name: mutf7::decode(&wire).unwrap_or_else(|| wire.clone()),
                    parent_id: None,
                    total,
                    unread,
                },
                with_attachments: 0,
                oldest: None,
                newest: None,
                messages_scanned: 0,
                messages_not_read: 0,
                pages_scanned: 0,
                truncated: uids.len() > newest.len(),
            };
            let mut ascending = newest;
            ascending.sort_unstable();
            for chunk in ascending.chunks(PAGE_SIZE) {
                if Instant::now() >= deadline {
                    stats.truncated = true;
                    break;
                }
                let fetched = conn
                    .fetch(chunk, "(UID INTERNALDATE BODYSTRUCTURE)")
                    .await?;
                stats.pages_scanned += 1;
                stats.messages_scanned += chunk.len() as u64;
                stats.messages_not_read += chunk.len().saturating_sub(fetched.len()) as u64;
                for f in &fetched {
                    match f.bodystructure() {
                        Some(s) => {
                            let found = structure::attachments(s);
                            if found.parts.iter().any(|p| !p.meta.is_inline) {
                                stats.with_attachments += 1;
                            }
                            if found.cut {
                                stats.messages_not_read += 1;
                            }
                        }
                        None => stats.messages_not_read += 1,
                    }
                    if let Some(at) = f.internal_date().map(|d| d.with_timezone(&Utc)) {
                        stats.oldest = Some(stats.oldest.map_or(at, |o| o.min(at)));
                        stats.newest = Some(stats.newest.map_or(at, |n| n.max(at)));
                    }
                }
            }
            Ok(stats)
        })
    }

    async fn scan(&self, req: &ScanRequest, query: Option<&str>) -> Result<Page, BackendError> {
        self.admit().await?;
        let Some(criteria) = criteria(req, query)? else {
            // No word to search for: nothing can match.
            return Ok(Page::default());
        };
        let deadline = req.budget.deadline;
        with_conn!(self.pool, deadline, Repeat::Safe, |conn| {
            let wire = self.resolve(conn, &req.folder).await?;
            let uid_validity = conn.open(&wire, false).await?;
            let uids = conn.search(&criteria).await?;
            let window = req.budget.max_items.max(1);
            let mut page = Page {
                page_size: Some(window.min(PAGE_SIZE)),
                ..Page::default()
            };
            // UIDs grow in the order messages arrived in the folder: the newest first.
            let mut newest: Vec<u32> = uids.iter().rev().take(window).copied().collect();
            let mut exhausted = uids.len() <= window;
            newest.sort_unstable_by(|a, b| b.cmp(a));
            for chunk in newest.chunks(PAGE_SIZE) {
                if Instant::now() >= deadline {
                    (page.timed_out, page.stop, exhausted) =
                        (true, Some(ScanStop::Deadline), false);
                    break;
                }
                if page.pages_scanned >= req.budget.max_pages {
                    (page.stop, exhausted) = (Some(ScanStop::Pages), false);
                    break;
                }
                let mut ascending = chunk.to_vec();
                ascending.sort_unstable();
                let fetched = match conn.fetch(&ascending, SUMMARY_ITEMS).await {
                    Ok(fetched) => fetched,
                    // Nothing examined yet: the scan itself failed.
                    Err(e) if page.pages_scanned == 0 => return Err(e),
                    Err(e) => {
                        conn.poisoned |= e.is_broken();
                        let e = e.into_backend();
                        let timed_out = matches!(e, BackendError::Timeout);
                        page.timed_out = timed_out;
                        page.stop = Some(if timed_out {
                            ScanStop::Deadline
                        } else {
                            ScanStop::Fault(e.fault())
                        });
                        exhausted = false;
                        break;
                    }
                };
                page.pages_scanned += 1;
                for f in &fetched {
                    page.examined += 1;
                    let parsed = mime::parse(f.header().unwrap_or_default());
                    match summary(&wire, uid_validity, f, &parsed) {
                        Some(s) => {
                            if let Some(gap) = s.gap {
                                page.gaps.add(gap);
                            }
                            if req.filters.matches(&s) {
                                page.matched += 1;
                                page.items.push(s);
                            }
                        }
                        None => page.gaps.add(ContentGap::Unreadable),
                    }
                }
            }
            if !exhausted && page.stop.is_none() {
                page.stop = Some(ScanStop::Window);
            }
            page.truncated = !exhausted;
            page.items.sort_by(|a, b| req.order.compare(a, b));
            page.items.truncate(req.keep);
            if !page.items.is_empty()
                && !conn.poisoned
                && let Err(e) = self.previews(conn, &mut page.items).await
            {
                conn.poisoned |= e.is_broken();
            }
            Ok(page)
        })
    }

    async fn get_message(&self, id: &str) -> Result<MessageDetail, BackendError> {
        let m = MessageRef::parse(id)?;
        self.admit().await?;
        with_conn!(self.pool, Self::deadline(), Repeat::Safe, |conn| {
            let uid_validity = conn.open(&m.folder, false).await?;
            current(&m, uid_validity)?;
            let fetched = conn.fetch(&[m.uid], &message_items()).await?;
            let f = fetched
                .first()
                .ok_or(OpError::Backend(BackendError::NotFound))?;
            detail(&m.folder, uid_validity, f).ok_or(OpError::Backend(BackendError::Malformed))
        })
    }

    /// The bodies of a search's candidates in batches of [`TEXT_BATCH`] per `UID FETCH`
    /// instead of a round trip each; one rate-limit token for the whole call.
    async fn texts(
        &self,
        wanted: &[&MessageSummary],
        deadline: Instant,
    ) -> Vec<Result<MessageText, BackendError>> {
        let ids: Vec<String> = wanted.iter().map(|m| m.id.clone()).collect();
        let (groups, mut results) = match self.batch_start::<MessageText>(&ids).await {
            Ok(started) => started,
            Err(refused) => return refused,
        };
        let outcome = with_conn!(self.pool, deadline, Repeat::Safe, |conn| {
            for (folder, items) in &groups {
                let Some((_, live)) = open_current(conn, folder, items, &mut results).await? else {
                    continue;
                };
                for batch in live.chunks(TEXT_BATCH) {
                    if Instant::now() >= deadline {
                        break;
                    }
                    let mut uids: Vec<u32> = batch.iter().map(|(_, u)| *u).collect();
                    uids.sort_unstable();
                    uids.dedup();
                    let fetched = conn
                        .fetch(
                            &uids,
                            &format!(
                                "(UID RFC822.SIZE BODYSTRUCTURE BODY.PEEK[]<0.{MAX_MESSAGE_BYTES}>)"
                            ),
                        )
                        .await?;
                    for (i, uid) in batch {
                        let Some(f) = fetched.iter().find(|f| f.uid == Some(*uid)) else {
                            results[*i] = Some(Err(BackendError::NotFound));
                            continue;
                        };
                        let parsed = mime::parse(f.body().unwrap_or_default());
                        let found = f.bodystructure().map(structure::attachments);
                        let whole = f.size.is_some_and(|s| u64::from(s) <= MAX_MESSAGE_BYTES);
                        results[*i] = Some(Ok(MessageText {
                            // As `detail` names them: bytes past the fetch bound are a cut
                            // body.
                            gap: if !whole {
                                Some(ContentGap::Body)
                            } else if found.as_ref().is_none_or(|s| s.cut) {
                                Some(ContentGap::Structure)
                            } else {
                                ContentGap::of(parsed.cuts)
                            },
                            body: parsed.body_text,
                            attachments: found
                                .map(|s| s.parts.into_iter().map(|p| p.meta).collect())
                                .unwrap_or_default(),
                        }));
                    }
                }
            }
            Ok(())
        });
        batch_end(results, &outcome)
    }

    fn keeps_categories(&self) -> bool {
        true
    }

    async fn categories(&self) -> Result<super::Categories, BackendError> {
        self.admit().await?;
        with_conn!(self.pool, Self::deadline(), Repeat::Safe, |conn| {
            Ok(super::Categories::Listed(conn.keywords().await?))
        })
    }

    async fn resolve_folder(&self, folder: &FolderSelector) -> Result<String, BackendError> {
        if let FolderSelector::Id(id) = folder {
            ids::folder_name(id)?;
        }
        self.admit().await?;
        with_conn!(self.pool, Self::deadline(), Repeat::Safe, |conn| {
            let wire = self.existing(conn, folder).await?;
            Ok(ids::folder_id(&wire))
        })
    }

    async fn folder_changes(
        &self,
        folder_id: &str,
        cursor: Option<&str>,
    ) -> Result<FolderSync, BackendError> {
        let wire = ids::folder_name(folder_id)?;
        self.admit().await?;
        with_conn!(self.pool, Self::deadline(), Repeat::Safe, |conn| {
            let how = changes::How {
                condstore: self.condstore_allowed && conn.caps.condstore,
                page: self.inventory_page,
            };
            changes::folder_changes(conn, &wire, cursor, how).await
        })
    }

    async fn index_fetch(
        &self,
        items: &[super::changes::SyncItem],
        want: AttachmentWant,
    ) -> Vec<Result<IndexFetch, BackendError>> {
        let ids: Vec<String> = items.iter().map(|i| i.id.clone()).collect();
        self.fetch_for_index(&ids, want).await
    }

    async fn list_attachments(
        &self,
        message_id: &str,
    ) -> Result<Vec<AttachmentMeta>, BackendError> {
        let m = MessageRef::parse(message_id)?;
        self.admit().await?;
        with_conn!(self.pool, Self::deadline(), Repeat::Safe, |conn| {
            Ok(attachment_parts(conn, &m)
                .await?
                .into_iter()
                .map(|p| p.meta)
                .collect())
        })
    }

    async fn attachment(
        &self,
        message_id: &str,
        attachment_id: &str,
        max_bytes: u64,
    ) -> Result<(AttachmentMeta, Vec<u8>), BackendError> {
        let m = MessageRef::parse(message_id)?;
        let path = section_path(attachment_id)?;
        self.admit().await?;
        with_conn!(self.pool, Self::deadline(), Repeat::Safe, |conn| {
            let part = attachment_parts(conn, &m)
                .await?
                .into_iter()
                .find(|p| p.meta.id == attachment_id)
                .ok_or(OpError::Backend(BackendError::NotFound))?;
            if part.meta.size > max_bytes {
                return Err(OpError::Backend(BackendError::TooLarge));
            }
            let fetched = conn
                .fetch(&[m.uid], &format!("(UID BODY.PEEK[{attachment_id}])"))
                .await?;
            let section = imap_proto::SectionPath::Part(path.clone(), None);
            let raw = fetched
                .first()
                .and_then(|f| f.section(&section))
                .ok_or(OpError::Backend(BackendError::Malformed))?;
            let bytes = structure::decode_part(raw, part.encoding)
                .ok_or(OpError::Backend(BackendError::Malformed))?;
            let bytes = structure::attachment_bytes(bytes, &part);
            if bytes.len() as u64 > max_bytes {
                return Err(OpError::Backend(BackendError::TooLarge));
            }
            let meta = AttachmentMeta {
                size: bytes.len() as u64,
                size_is_estimate: false,
                ..part.meta
            };
            Ok((meta, bytes))
        })
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
    use tokio::net::TcpListener;

    use super::*;
    use crate::config::Security;

    /// A store of `user` on a plain-text loopback server at `port`, logging in with `password`.
    pub(super) fn plain_store(port: u16, user: &str, password: &str) -> ImapStore {
        let spec = ServerSpec {
            host: "127.0.0.1".to_owned(),
            port,
            security: Security::Plain,
            username: None,
            password_env: Some("PW".to_owned()),
            oauth2_token_env: None,
            ca_file: None,
            rate_limit: None,
        };
        let login = Login::Static(crate::config::imap::ImapLogin::Password(
            crate::config::env::Env::from_pairs([("PW", password)])
                .secret("PW")
                .expect("set"),
        ));
        let (key, plan) = account(&spec, user);
        let limits = crate::coordination::upstream::UpstreamLimits::default().of(&key, plan);
        ImapStore::new(&spec, user.to_owned(), login, None, limits).expect("settings")
    }

    /// A scripted IMAP server on loopback: answers LOGIN, CAPABILITY and EXAMINE properly, then
    /// answers the first UID FETCH with one complete untagged FETCH line and closes the
    /// connection before the tagged completion.
    async fn server_that_ends_a_fetch_early() -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(async move {
                    let (read, mut write) = socket.into_split();
                    let mut lines = BufReader::new(read).lines();
                    write.write_all(b"* OK ready\r\n").await.ok();
                    while let Ok(Some(line)) = lines.next_line().await {
                        let (tag, command) = line.split_once(' ').unwrap_or((&line, ""));
                        let reply = if command.starts_with("LOGIN") {
                            format!("{tag} OK logged in\r\n")
                        } else if command.starts_with("CAPABILITY") {
                            format!("* CAPABILITY IMAP4rev1 MOVE UIDPLUS\r\n{tag} OK done\r\n")
                        } else if command.starts_with("EXAMINE") {
                            format!(
                                "* 3 EXISTS\r\n* OK [UIDVALIDITY 7] ok\r\n{tag} OK [READ-ONLY] done\r\n"
                            )
                        } else if command.starts_with("UID FETCH") {
                            // One complete answer, then the end of the stream: no tagged OK.
                            write
                                .write_all(b"* 1 FETCH (UID 5 FLAGS (\\Seen))\r\n")
                                .await
                                .ok();
                            return;
                        } else {
                            format!("{tag} BAD unexpected\r\n")
                        };
                        write.write_all(reply.as_bytes()).await.ok();
                    }
                });
            }
        });
        port
    }

    /// A connection that ends between two complete responses (async-imap then returns the
    /// answer so far as if complete) is a failure, never a message with an empty body.
    #[tokio::test]
    async fn an_answer_cut_between_responses_is_a_failure_not_a_short_answer() {
        let port = server_that_ends_a_fetch_early().await;
        let store = plain_store(port, "ops@example.org", "pw");
        let id = MessageRef {
            folder: "INBOX".to_owned(),
            uid_validity: 7,
            uid: 5,
        }
        .encode();
        assert!(
            matches!(store.get_message(&id).await, Err(BackendError::Unavailable)),
            "a cut answer must not read as a message"
        );
    }
}
