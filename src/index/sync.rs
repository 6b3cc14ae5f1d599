//! Incremental sync of one alias: for each folder the backend lists, read its change feed
//! (`backends::changes`) from the stored cursor, fetch what is new or changed, remove what is
//! gone, commit the index, then record the versions and the cursor. The order makes it
//! resumable: a sync killed at any point leaves the last committed index (consistent, answering
//! as of its commit) and state no newer than it, so the next sync refetches at most one
//! commit's worth of messages and replaces them by key, never duplicating one. A folder is
//! `complete` only once a round of its feed ended with every listed message indexed; anything
//! else keeps it partial, and a partial or stale folder never yields `NOT_FOUND`.
//!
//! A folder's position (cursor) advances only with a commit that holds every message of the
//! page it ends: a sync stopped mid-page (a signal, a pause) commits what it fetched and leaves
//! the position where the page began, so the next sync lists the page again and fetches only
//! what is not indexed at its version yet. The interrupted folder is left partial; a folder
//! the sync never reached stays as it was.
//!
//! An index is bound to the mailbox it was synced from and to the text analysis that built it
//! (both recorded in `status.json`): [`WriteStore::open_local`] refuses an index of another
//! mailbox ([`Opened::MailboxChanged`](super::store::Opened::MailboxChanged), until `index
//! rebuild`), and starts one built by another analysis over in place
//! ([`Rebuild`](super::store::Rebuild)).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;

use super::state::{FolderCursor, StateBatch};
use super::status::{self, FolderStatus};
use super::store::WriteStore;
use super::{IndexError, IndexedMessage};
use crate::backends::changes::{AttachmentWant, FolderDelta, IndexFetch, SyncItem};
use crate::backends::model::{AttachmentMeta, FolderSelector, WellKnown};
use crate::backends::{Backend, BackendError};
use crate::embed::Semantic;
use crate::extract::pipeline::{Pipeline, Wait};
use crate::extract::{self, Caps, Extractor, Job};

/// Messages fetched from the backend per call (held in memory at once, attachments included).
const FETCH_BATCH: usize = 256;
/// Messages indexed between commits (each commit is a durable point to resume from).
const COMMIT_EVERY: usize = 5_000;
/// Longest time between commits.
const COMMIT_INTERVAL: Duration = Duration::from_secs(10);
/// Resets one folder may answer in one sync before the sync gives it up (a backend that
/// resets forever must not loop).
const MAX_RESETS: usize = 2;
/// Attachments whose text is extracted per message, and their byte cap.
const ATTACHMENTS_PER_MESSAGE: usize = 8;

/// How attachment text is read: through the extraction worker under its caps.
pub(crate) struct Extraction {
    pub(crate) extractor: Extractor,
    pub(crate) caps: Caps,
    pub(crate) max_bytes: u64,
    pub(crate) slots: Arc<tokio::sync::Semaphore>,
}

/// Progress of one alias's sync, for the operator's display.
#[derive(Clone, Debug, Default)]
pub(crate) struct Progress {
    pub(crate) folder: String,
    /// Messages indexed or removed so far in this sync.
    pub(crate) done: u64,
    /// Messages this sync knows it has to index or remove (grows as feeds are read).
    pub(crate) total: u64,
}

/// What one sync did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SyncReport {
    pub(crate) indexed: u64,
    pub(crate) removed: u64,
    /// Listed but not fetched: pending for the next sync.
    pub(crate) failed: u64,
    pub(crate) folders: usize,
    /// Folders whose feed could not be read (their index part stays as it was, partial).
    pub(crate) folders_failed: usize,
    /// Every folder's round ended with nothing pending.
    pub(crate) complete: bool,
    /// Stopped early (pause, interrupt): resumable.
    pub(crate) stopped: bool,
    /// Stopped because the delegated sign-in must be renewed (`mailgate auth login ALIAS`).
    pub(crate) sign_in_required: bool,
}

/// Crash and interrupt tests only (debug builds): a point where the sync announces itself on
/// stderr ("holding for a crash test") and waits until it is asked to stop (a signal, a pause)
/// or killed, so a test can act at a known point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HoldPoint {
    /// After the n-th batch of fetched messages is in the writer, before it is committed.
    Fetched(u32),
    /// After the n-th index commit that holds messages (indexed or removed), before the sync
    /// state records it (the worst moment).
    Committed(u32),
    /// After the n-th folder's status is written, before the next folder starts.
    Folder(u32),
}

impl HoldPoint {
    /// `fetch:N`, `commit:N`, `folder:N`, or a bare `N` (`commit:N`).
    pub(crate) fn parse(raw: &str) -> Option<Self> {
        let raw = raw.trim();
        let (kind, n) = raw.split_once(':').unwrap_or(("commit", raw));
        let n: u32 = n.parse().ok().filter(|n| *n > 0)?;
        match kind {
            "fetch" => Some(HoldPoint::Fetched(n)),
            "commit" => Some(HoldPoint::Committed(n)),
            "folder" => Some(HoldPoint::Folder(n)),
            _ => None,
        }
    }
}

/// What a sync needs besides the store and the backend.
pub(crate) struct SyncOptions<'a> {
    /// The backend's kind, recorded in the status (`maildir`, `graph`, `imap`).
    pub(crate) backend_kind: &'static str,
    /// The identity of the mailbox the alias names now (`status::mailbox_identity`).
    pub(crate) mailbox: &'a str,
    pub(crate) extraction: Option<&'a Extraction>,
    /// The embeddings endpoint, when semantic recall is on.
    pub(crate) semantic: Option<&'a Semantic>,
    pub(crate) progress: &'a (dyn Fn(&Progress) + Sync),
    /// Asked between steps: `true` stops the sync at the next durable point.
    pub(crate) stop: &'a (dyn Fn() -> bool + Sync),
    /// Crash and interrupt tests only (debug builds).
    pub(crate) hold: Option<HoldPoint>,
}

/// Work of the current commit not yet recorded in the state.
#[derive(Default)]
struct Uncommitted {
    batch: StateBatch,
    since: Option<Instant>,
    count: usize,
}

struct Run<'a> {
    target: &'a mut WriteStore,
    /// The endpoint failed during this sync: stop asking it (its vectors are filled later).
    semantic_down: bool,
    backend: &'a Backend,
    opts: &'a SyncOptions<'a>,
    progress: Progress,
    report: SyncReport,
    commits: u32,
    /// Batches of fetched messages put into the writer so far (for [`HoldPoint::Fetched`]).
    batches: u32,
    /// Folders recorded so far (for [`HoldPoint::Folder`]).
    folders_done: u32,
}

/// Syncs one alias. Errors are only those that stop the whole sync (the index or state cannot
/// be written, the folder list cannot be read); a folder whose feed fails is counted and left
/// partial.
pub(crate) async fn sync_alias(
    target: &mut WriteStore,
    backend: &Backend,
    opts: &SyncOptions<'_>,
) -> Result<SyncReport, IndexError> {
    let mut status = target.status().await?.unwrap_or_default();
    if status.paused {
        return Ok(SyncReport {
            stopped: true,
            ..SyncReport::default()
        });
    }
    status.version = status::VERSION;
    status.backend = opts.backend_kind.to_owned();
    // `WriteStore::open_local` refused another mailbox's index and rebuilt another analysis's: what
    // this sync adds is this mailbox's, as this analysis reads it.
    status.mailbox = Some(opts.mailbox.to_owned());
    status.analyzer = Some(crate::text::ANALYZER_VERSION);
    status.syncing = true;
    status.last_sync_started = Some(Utc::now());
    target.write_status(&status).await?;

    let folders = match backend.list_folders().await {
        Ok(folders) => folders,
        // Not an index fault: the sync stops for this alias and its status says why.
        Err(BackendError::AuthRequired(_)) => {
            status.syncing = false;
            status.sign_in_required = true;
            target.write_status(&status).await?;
            return Ok(SyncReport {
                sign_in_required: true,
                ..SyncReport::default()
            });
        }
        Err(e) => {
            return Err(IndexError::Store(format!(
                "the folder list could not be read ({e})"
            )));
        }
    };
    status.sign_in_required = false;
    let mut well_known = std::collections::BTreeMap::new();
    // The well-known folders, recorded for searches that name them.
    for (name, label) in WellKnown::ALL.map(|w| (w, w.label())) {
        if let Ok(id) = backend
            .resolve_folder(&FolderSelector::WellKnown(name))
            .await
        {
            well_known.insert(label.to_owned(), id);
        }
    }
    status.well_known = well_known;

    let mut run = Run {
        target,
        semantic_down: false,
        backend,
        opts,
        progress: Progress::default(),
        commits: 0,
        batches: 0,
        folders_done: 0,
        report: SyncReport {
            folders: folders.len(),
            complete: true,
            ..SyncReport::default()
        },
    };
    let listed: HashSet<String> = folders.iter().map(|f| f.id.clone()).collect();
    for folder in &folders {
        if (run.opts.stop)() {
            run.report.stopped = true;
            run.report.complete = false;
            break;
        }
        let started = Utc::now();
        let mut outcome = run.folder(&folder.id).await;
        if outcome.is_ok()
            && let Err(e) = run.fill_vectors(&folder.id).await
        {
            outcome = Err(e);
        }
        let previous = status.folders.get(&folder.id).cloned().unwrap_or_default();
        let versions = run.target.versions(&folder.id).await?.len() as u64;
        let pending = run.target.pending(&folder.id).await?.len() as u64;
        let complete = matches!(outcome, Ok(true)) && pending == 0;
        if !complete {
            run.report.complete = false;
        }
        match outcome {
            Err(FolderFail::Backend) => run.report.folders_failed += 1,
            Err(FolderFail::SignInRequired) => {
                run.report.folders_failed += 1;
                run.report.sign_in_required = true;
            }
            Err(FolderFail::Index(e)) => return Err(e),
            Ok(_) => {}
        }
        status.folders.insert(
            folder.id.clone(),
            FolderStatus {
                complete,
                through: if complete {
                    Some(started)
                } else {
                    previous.through
                },
                messages: versions,
                pending,
            },
        );
        run.target.write_status(&status).await?;
        run.folders_done += 1;
        run.hold(HoldPoint::Folder(run.folders_done)).await;
        if run.report.stopped || run.report.sign_in_required {
            break;
        }
    }
    if run.report.sign_in_required {
        run.report.complete = false;
        status.sign_in_required = true;
    }
    // Folders gone from the mailbox: their messages leave the index.
    if !run.report.stopped && !run.report.sign_in_required {
        for gone in run.target.folders().await? {
            if listed.contains(&gone) {
                continue;
            }
            let ids: Vec<String> = run.target.versions(&gone).await?.into_keys().collect();
            for id in &ids {
                run.target.remove(&gone, id)?;
            }
            let removed = StateBatch {
                folder: gone.clone(),
                removed: ids.clone(),
                ..StateBatch::default()
            };
            run.target.commit(&removed, std::future::ready(())).await?;
            run.target.drop_folder(&gone).await?;
            run.report.removed += ids.len() as u64;
            status.folders.remove(&gone);
        }
    }
    status.semantic = run.target.vectors().is_some();
    status.vectors_pending = match run.target.vectors() {
        Some(store) => {
            let mut missing = 0;
            for folder in run.target.folders().await? {
                let known = run.target.versions(&folder).await?;
                missing += known
                    .keys()
                    .filter(|id| !store.contains(&super::doc_key(&folder, id)))
                    .count() as u64;
            }
            missing
        }
        None => 0,
    };
    status.syncing = run.report.stopped && !run.report.sign_in_required;
    status.last_sync_finished = Some(Utc::now());
    run.target.write_status(&status).await?;
    Ok(run.report)
}

enum FolderFail {
    /// The backend's feed or fetch failed: the folder stays partial, the sync goes on.
    Backend,
    /// The delegated sign-in must be renewed: no folder can be read, the sync stops.
    SignInRequired,
    Index(IndexError),
}

impl From<IndexError> for FolderFail {
    fn from(e: IndexError) -> Self {
        FolderFail::Index(e)
    }
}

impl Run<'_> {
    /// Syncs one folder; `Ok(true)` when a round of its feed ended.
    async fn folder(&mut self, folder: &str) -> Result<bool, FolderFail> {
        self.progress.folder = folder.to_owned();
        let mut known = self.target.versions(folder).await?;
        // Messages a failed fetch left pending are fetched again with the next page.
        let mut retry: Vec<SyncItem> = self
            .target
            .pending(folder)
            .await?
            .into_iter()
            .map(|(id, version)| SyncItem { id, version })
            .collect();
        let mut resets = 0;
        loop {
            if (self.opts.stop)() {
                self.report.stopped = true;
                return Ok(false);
            }
            let position = self.target.cursor(folder).await?;
            let page = match self
                .backend
                .folder_changes(folder, position.cursor.as_deref())
                .await
            {
                Ok(page) => page,
                Err(BackendError::AuthRequired(_)) => return Err(FolderFail::SignInRequired),
                Err(e) => {
                    tracing::warn!(error = %e, "index sync: a folder's change feed failed");
                    return Err(FolderFail::Backend);
                }
            };
            let mut work = Uncommitted::default();
            work.batch.folder = folder.to_owned();
            match page.delta {
                FolderDelta::Reset => {
                    resets += 1;
                    if resets > MAX_RESETS {
                        return Err(FolderFail::Backend);
                    }
                    work.batch.cursor = Some(FolderCursor::default());
                    work.batch.clear_seen = true;
                    self.target.record(&work.batch).await?;
                    continue;
                }
                FolderDelta::Inventory(items) => {
                    let page_ids: Vec<String> = items.iter().map(|i| i.id.clone()).collect();
                    let mut fetch: Vec<SyncItem> = items
                        .into_iter()
                        .filter(|i| known.get(&i.id) != Some(&i.version))
                        .collect();
                    fetch.append(&mut retry);
                    if !self.fetch_all(folder, fetch, &mut known, &mut work).await? {
                        return self.stop_mid_page(&mut work).await;
                    }
                    if page.more {
                        work.batch.seen = page_ids;
                        work.batch.cursor = Some(FolderCursor {
                            cursor: page.cursor,
                            in_inventory: true,
                        });
                    } else {
                        let mut seen = if position.in_inventory {
                            self.target.seen(folder).await?
                        } else {
                            HashSet::new()
                        };
                        seen.extend(page_ids);
                        let gone: Vec<String> = known
                            .keys()
                            .filter(|id| !seen.contains(*id))
                            .cloned()
                            .collect();
                        self.remove_all(folder, gone, &mut known, &mut work)?;
                        work.batch.cursor = Some(FolderCursor {
                            cursor: page.cursor,
                            in_inventory: false,
                        });
                        work.batch.clear_seen = true;
                    }
                }
                FolderDelta::Changes {
                    changed,
                    removed,
                    present,
                } => {
                    let mut fetch: Vec<SyncItem> = changed
                        .into_iter()
                        .filter(|i| known.get(&i.id) != Some(&i.version))
                        .collect();
                    fetch.append(&mut retry);
                    let mut gone = removed;
                    if let Some(present) = present {
                        let present: HashSet<String> = present.into_iter().collect();
                        gone.extend(known.keys().filter(|id| !present.contains(*id)).cloned());
                    }
                    // A message that left and came back in one page is fetched, not removed.
                    let fetching: HashSet<&str> = fetch.iter().map(|i| i.id.as_str()).collect();
                    gone.retain(|id| !fetching.contains(id.as_str()));
                    if !self.fetch_all(folder, fetch, &mut known, &mut work).await? {
                        return self.stop_mid_page(&mut work).await;
                    }
                    self.remove_all(folder, gone, &mut known, &mut work)?;
                    work.batch.cursor = Some(FolderCursor {
                        cursor: page.cursor,
                        in_inventory: position.in_inventory && page.more,
                    });
                }
            }
            self.commit(&mut work).await?;
            if !page.more {
                return Ok(true);
            }
        }
    }

    /// A stop asked for in the middle of a page: what was fetched is committed and recorded
    /// with its versions, but not the page's cursor (nor its removals, nor the ids it listed),
    /// so the folder's position stays where the page began. The next sync asks for the page
    /// again and fetches only what is not indexed at its version yet. The folder is partial.
    async fn stop_mid_page(&mut self, work: &mut Uncommitted) -> Result<bool, FolderFail> {
        work.batch.cursor = None;
        work.batch.seen.clear();
        work.batch.clear_seen = false;
        self.commit(work).await?;
        self.report.stopped = true;
        Ok(false)
    }

    fn remove_all(
        &mut self,
        folder: &str,
        gone: Vec<String>,
        known: &mut HashMap<String, String>,
        work: &mut Uncommitted,
    ) -> Result<(), IndexError> {
        self.progress.total += gone.len() as u64;
        for id in gone {
            self.target.remove(folder, &id)?;
            known.remove(&id);
            work.batch.removed.push(id);
            self.report.removed += 1;
            self.progress.done += 1;
        }
        (self.opts.progress)(&self.progress);
        Ok(())
    }

    async fn fetch_all(
        &mut self,
        folder: &str,
        items: Vec<SyncItem>,
        known: &mut HashMap<String, String>,
        work: &mut Uncommitted,
    ) -> Result<bool, FolderFail> {
        self.progress.total += items.len() as u64;
        (self.opts.progress)(&self.progress);
        for chunk in items.chunks(FETCH_BATCH) {
            if (self.opts.stop)() {
                self.report.stopped = true;
                return Ok(false);
            }
            let want = AttachmentWant {
                max_bytes: self.opts.extraction.map_or(0, |x| x.max_bytes),
                max_count: if self.opts.extraction.is_some() {
                    ATTACHMENTS_PER_MESSAGE
                } else {
                    0
                },
                wants: extractable,
            };
            let fetched = self.backend.index_fetch(chunk, want).await;
            let mut passages: Vec<(String, Vec<String>)> = Vec::new();
            let mut stopped = false;
            for (item, result) in chunk.iter().zip(fetched) {
                // Reading attachments can take long: a stop is heard between messages, and
                // what is not put yet is simply not recorded (the next sync fetches it).
                if (self.opts.stop)() {
                    stopped = true;
                    break;
                }
                match result {
                    Ok(fetch) => {
                        let message = self.indexed(folder, fetch).await;
                        self.target.put(&message)?;
                        if self.target.vectors().is_some() {
                            passages.push((
                                super::doc_key(folder, &item.id),
                                crate::embed::chunk::chunks(
                                    message.summary.subject.as_deref().unwrap_or(""),
                                    &message.body,
                                ),
                            ));
                        }
                        known.insert(item.id.clone(), item.version.clone());
                        work.batch
                            .indexed
                            .push((item.id.clone(), item.version.clone()));
                        self.report.indexed += 1;
                        work.count += 1;
                    }
                    // Gone between the listing and the fetch: the next round lists it no more.
                    Err(BackendError::NotFound) => {
                        self.target.remove(folder, &item.id)?;
                        known.remove(&item.id);
                        work.batch.removed.push(item.id.clone());
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "index sync: a message could not be fetched");
                        if matches!(e, BackendError::AuthRequired(_)) {
                            self.report.sign_in_required = true;
                            stopped = true;
                        }
                        work.batch
                            .pending
                            .push((item.id.clone(), item.version.clone()));
                        self.report.failed += 1;
                    }
                }
                self.progress.done += 1;
            }
            self.batches += 1;
            self.hold(HoldPoint::Fetched(self.batches)).await;
            if stopped || (self.opts.stop)() {
                // Vectors of what was put are filled by a later sync's fill pass.
                self.report.stopped = true;
                return Ok(false);
            }
            self.embed(passages).await?;
            (self.opts.progress)(&self.progress);
            let since = *work.since.get_or_insert_with(Instant::now);
            if work.count >= COMMIT_EVERY || since.elapsed() >= COMMIT_INTERVAL {
                self.commit(work).await?;
            }
        }
        Ok(true)
    }

    /// Embeds the passages of freshly indexed messages and keeps their vectors. An endpoint
    /// that fails leaves them without vectors (the fill pass retries at the end of the sync)
    /// and is not asked again during this sync.
    async fn embed(&mut self, passages: Vec<(String, Vec<String>)>) -> Result<(), IndexError> {
        let (Some(semantic), false) = (self.opts.semantic, self.semantic_down) else {
            return Ok(());
        };
        if passages.is_empty() || self.target.vectors().is_none() {
            return Ok(());
        }
        let flat: Vec<String> = passages
            .iter()
            .flat_map(|(_, p)| p.iter().cloned())
            .collect();
        match semantic.embedder.embed_passages(&flat).await {
            Ok(vectors) => {
                if let Some(store) = self.target.vectors_mut() {
                    // Another vector size: the model behind the endpoint's name changed. The
                    // older vectors are stale (dropped; the fill pass embeds them again); a
                    // second change in one sync is an endpoint that keeps changing: asked no
                    // more this sync (issue 27).
                    let stale = vectors
                        .first()
                        .map_or(0, |v| store.adopt_dimension(v.len()));
                    if stale > 0 {
                        tracing::warn!(
                            stale,
                            "index sync: the vector size changed; older vectors are embedded again"
                        );
                        self.semantic_down |= store.restarts() > 1;
                    }
                    let mut vectors = vectors.into_iter();
                    for (key, p) in passages {
                        let mine: Vec<Vec<f32>> = vectors.by_ref().take(p.len()).collect();
                        // A refused vector costs that message its vector (filled later), never
                        // the sync's text half.
                        if let Err(e) = store.upsert(&key, mine) {
                            tracing::warn!(
                                error = %e,
                                "index sync: a message's vectors were refused; filled later"
                            );
                        }
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "index sync: the embeddings endpoint failed; vectors are filled later");
                self.semantic_down = true;
            }
        }
        Ok(())
    }

    /// Gives every indexed message of `folder` that has no vector one: the messages the
    /// endpoint could not embed when they were indexed (it was down), or all of them when
    /// semantic recall was turned on after they were indexed. Refetches their text. When the
    /// vector size changed meanwhile (every older vector dropped), every folder's.
    async fn fill_vectors(&mut self, folder: &str) -> Result<(), FolderFail> {
        let mut folders = vec![folder.to_owned()];
        while let Some(folder) = folders.pop() {
            self.fill_folder_vectors(&folder).await?;
            if self.target.vectors_mut().is_some_and(|v| v.take_refill()) && !self.semantic_down {
                folders = self.target.folders().await?;
            }
        }
        Ok(())
    }

    /// [`Run::fill_vectors`] of one folder.
    async fn fill_folder_vectors(&mut self, folder: &str) -> Result<(), FolderFail> {
        if self.opts.semantic.is_none() || self.semantic_down {
            return Ok(());
        }
        let known = self.target.versions(folder).await?;
        let Some(store) = self.target.vectors() else {
            return Ok(());
        };
        let missing: Vec<SyncItem> = known
            .into_iter()
            .filter(|(id, _)| !store.contains(&super::doc_key(folder, id)))
            .map(|(id, version)| SyncItem { id, version })
            .collect();
        let want = AttachmentWant {
            max_bytes: 0,
            max_count: 0,
            wants: extractable,
        };
        for chunk in missing.chunks(FETCH_BATCH) {
            if (self.opts.stop)() || self.semantic_down {
                break;
            }
            let fetched = self.backend.index_fetch(chunk, want).await;
            let passages: Vec<(String, Vec<String>)> = chunk
                .iter()
                .zip(fetched)
                .filter_map(|(item, r)| {
                    let fetch = r.ok()?;
                    Some((
                        super::doc_key(folder, &item.id),
                        crate::embed::chunk::chunks(
                            fetch.detail.summary.subject.as_deref().unwrap_or(""),
                            &fetch.detail.body_text,
                        ),
                    ))
                })
                .collect();
            self.embed(passages).await?;
            self.target.commit_vectors().await?;
        }
        Ok(())
    }

    /// Commits the index, then records in the state what the commit holds (keeping the
    /// page's cursor for the commit that ends the page).
    async fn commit(&mut self, work: &mut Uncommitted) -> Result<(), IndexError> {
        // The worst moment to die: the index holds the commit, the state does not know it.
        let holds = !work.batch.indexed.is_empty() || !work.batch.removed.is_empty();
        if holds {
            self.commits += 1;
        }
        let (opts, at) = (self.opts, HoldPoint::Committed(self.commits));
        let between = async move {
            if holds {
                hold(opts, at).await;
            }
        };
        self.target.commit(&work.batch, between).await?;
        let folder = std::mem::take(&mut work.batch.folder);
        work.batch = StateBatch {
            folder,
            ..StateBatch::default()
        };
        work.since = None;
        work.count = 0;
        Ok(())
    }

    async fn hold(&self, at: HoldPoint) {
        hold(self.opts, at).await;
    }

    async fn indexed(&self, folder: &str, fetch: IndexFetch) -> IndexedMessage {
        let IndexFetch {
            detail,
            attachments,
        } = fetch;
        let mut summary = detail.summary;
        // The key is the folder the feed listed it in, whatever the backend says.
        summary.folder_id = folder.to_owned();
        summary.attachments_listed = true;
        let mut recipients = Vec::new();
        for m in detail.to.iter().chain(&detail.cc) {
            recipients.extend(m.name.clone());
            recipients.extend(m.address.clone());
        }
        let mut thread_ids: Vec<String> = detail.internet_message_id.iter().cloned().collect();
        thread_ids.extend(detail.in_reply_to.iter().cloned());
        thread_ids.extend(detail.references.iter().cloned());
        let (attachment_text, read) = self.attachment_text(&attachments).await;
        // Whole when every listed attachment's text is in: the investigation reads a message
        // itself when it is not, so a cut here never becomes a claim of absence.
        let attachments_whole = summary
            .attachments
            .iter()
            .all(|a| read.iter().any(|id| *id == a.id));
        IndexedMessage {
            summary,
            internet_message_id: detail.internet_message_id,
            thread_ids,
            recipients,
            body: detail.body_text,
            attachment_text,
            attachments_whole,
        }
    }

    /// The text of the fetched attachments, through the extraction pipeline (one whose text
    /// cannot be read adds nothing, and the pipeline's reason is logged), and the ids of those
    /// whose text it holds whole.
    async fn attachment_text<'a>(
        &self,
        attachments: &'a [(AttachmentMeta, Option<Vec<u8>>)],
    ) -> (String, Vec<&'a str>) {
        let mut text = String::new();
        let mut whole = Vec::new();
        let Some(x) = self.opts.extraction else {
            return (text, whole);
        };
        let pipeline = Pipeline::new(&x.extractor, &x.slots, x.caps);
        for (meta, bytes) in attachments {
            let Some(bytes) = bytes else { continue };
            if meta.is_inline || !extractable(meta) {
                continue;
            }
            // The sync has no caller waiting on one answer: it queues for a slot.
            let job = Job::Text {
                name: meta.name.clone(),
                content_type: meta.content_type.clone(),
            };
            match pipeline.text(Wait::Forever, job, bytes.clone()).await {
                Ok(extracted) => {
                    text.push_str(&extracted.text);
                    text.push('\n');
                    if !extracted.truncated && extracted.unread_parts == 0 {
                        whole.push(meta.id.as_str());
                    } else {
                        tracing::debug!(
                            truncated = extracted.truncated,
                            unread_parts = extracted.unread_parts,
                            "index sync: an attachment's text is in the index only in part"
                        );
                    }
                }
                // Not whole, so the message is not `attachments_whole`: the investigation
                // reads it itself rather than trusting the index's silence.
                Err(why) => {
                    tracing::debug!(
                        reason = %why,
                        "index sync: an attachment's text is not in the index"
                    );
                }
            }
        }
        (text, whole)
    }
}

/// At the test hook's point (debug builds only set one), says so on stderr and waits until the
/// sync is asked to stop; the test signals or kills the process meanwhile.
async fn hold(opts: &SyncOptions<'_>, at: HoldPoint) {
    if opts.hold != Some(at) {
        return;
    }
    tracing::warn!(point = ?at, "index sync: holding for a crash test");
    while !(opts.stop)() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Attachments whose text the index extracts: every format with a text extractor but archives
/// (an archive's entries are the document tools' business).
fn extractable(meta: &AttachmentMeta) -> bool {
    let format = extract::detect(meta.name.as_deref(), &meta.content_type, &[]);
    format.has_extractor() && format != extract::Format::Zip
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hold_points_parse_and_refuse_anything_else() {
        assert_eq!(HoldPoint::parse("3"), Some(HoldPoint::Committed(3)));
        assert_eq!(HoldPoint::parse("commit:1"), Some(HoldPoint::Committed(1)));
        assert_eq!(HoldPoint::parse("fetch:2"), Some(HoldPoint::Fetched(2)));
        assert_eq!(HoldPoint::parse(" folder:1 "), Some(HoldPoint::Folder(1)));
        for bad in ["", "0", "fetch:0", "fetch:", "later:1", "fetch:x", "-1"] {
            assert_eq!(HoldPoint::parse(bad), None, "{bad}");
        }
    }
}
