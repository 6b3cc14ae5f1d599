//! Incremental sync of one alias: for each folder the backend lists, read its change feed
//! (`backends::changes`) from the stored cursor, fetch what is new or changed, remove what is
//! gone, commit the index, then record the versions and the cursor. The order makes it
//! resumable: a sync killed at any point leaves the last committed index (consistent, answering
//! as of its commit) and state no newer than it, so the next sync refetches at most one
//! commit's worth of messages and replaces them by key, never duplicating one. A folder is
//! `complete` only once a round of its feed ended with every listed message indexed; anything
//! else keeps it partial, and a partial or stale folder never yields `NOT_FOUND`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cap_std::fs::Dir;
use chrono::Utc;

use super::state::{FolderCursor, StateBatch, SyncState};
use super::status::{self, FolderStatus, IndexStatus};
use super::tantivy_index::{TantivyIndex, TantivyWriter};
use super::{IndexError, IndexedMessage, TextIndexWriter};
use crate::backends::changes::{AttachmentWant, FolderDelta, IndexFetch, SyncItem};
use crate::backends::model::{AttachmentMeta, FolderSelector, WellKnown};
use crate::backends::{Backend, BackendError};
use crate::embed::Semantic;
use crate::embed::vectors::VectorStore;
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
}

/// The index of one alias opened for writing: the sync process's side.
pub(crate) struct SyncTarget {
    alias_dir: Dir,
    writer: TantivyWriter,
    state: SyncState,
    backend_kind: &'static str,
    /// The vectors, when an embeddings endpoint is configured for this sync.
    vectors: Option<VectorStore>,
    /// The endpoint failed during this sync: stop asking it (its vectors are filled later).
    semantic_down: bool,
}

impl SyncTarget {
    /// Opens (creating) the index and sync state of an alias folder; another sync holding them
    /// is [`IndexError::Busy`].
    pub(crate) fn open(
        alias_dir: Dir,
        backend_kind: &'static str,
        semantic_model: Option<&str>,
    ) -> Result<Self, IndexError> {
        let state = SyncState::open(&alias_dir)?;
        let text = super::layout::open_part(&alias_dir, super::layout::TEXT, true)?;
        let index = TantivyIndex::open(super::capdir::CapDirectory::new(text), true)?;
        let writer = index.writer()?;
        let vectors = match semantic_model {
            Some(model) => {
                let dir = super::layout::open_part(&alias_dir, super::layout::VECTORS, true)?;
                Some(VectorStore::open(dir, model).map_err(|e| IndexError::Store(e.to_string()))?)
            }
            None => None,
        };
        Ok(Self {
            alias_dir,
            writer,
            state,
            backend_kind,
            vectors,
            semantic_down: false,
        })
    }

    fn forget_vectors(&mut self, folder: &str, id: &str) {
        if let Some(v) = &mut self.vectors {
            v.remove(&super::doc_key(folder, id));
        }
    }

    fn commit_vectors(&mut self) -> Result<(), IndexError> {
        match &mut self.vectors {
            Some(v) => v.commit().map_err(|e| IndexError::Store(e.to_string())),
            None => Ok(()),
        }
    }
}

/// What a sync needs besides the target and the backend.
pub(crate) struct SyncOptions<'a> {
    pub(crate) extraction: Option<&'a Extraction>,
    /// The embeddings endpoint, when semantic recall is on.
    pub(crate) semantic: Option<&'a Semantic>,
    pub(crate) progress: &'a (dyn Fn(&Progress) + Sync),
    /// Asked between steps: `true` stops the sync at the next durable point.
    pub(crate) stop: &'a (dyn Fn() -> bool + Sync),
    /// Crash tests only (debug builds): after this many commits, announce it on stderr and
    /// hang, so the test can `kill -9` the process at a known point.
    pub(crate) hold_after_commits: Option<u32>,
}

/// Work of the current commit not yet recorded in the state.
#[derive(Default)]
struct Uncommitted {
    batch: StateBatch,
    since: Option<Instant>,
    count: usize,
}

struct Run<'a> {
    target: &'a mut SyncTarget,
    backend: &'a Backend,
    opts: &'a SyncOptions<'a>,
    progress: Progress,
    report: SyncReport,
    commits: u32,
}

/// Syncs one alias. Errors are only those that stop the whole sync (the index or state cannot
/// be written, the folder list cannot be read); a folder whose feed fails is counted and left
/// partial.
pub(crate) async fn sync_alias(
    target: &mut SyncTarget,
    backend: &Backend,
    opts: &SyncOptions<'_>,
) -> Result<SyncReport, IndexError> {
    let mut status = status::read(&target.alias_dir)?.unwrap_or_default();
    if status.paused {
        return Ok(SyncReport {
            stopped: true,
            ..SyncReport::default()
        });
    }
    status.version = status::VERSION;
    status.backend = target.backend_kind.to_owned();
    status.syncing = true;
    status.last_sync_started = Some(Utc::now());
    status::write(&target.alias_dir, &status)?;

    let folders = backend
        .list_folders()
        .await
        .map_err(|e| IndexError::Store(format!("the folder list could not be read ({e})")))?;
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
        backend,
        opts,
        progress: Progress::default(),
        commits: 0,
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
        let versions = run.target.state.versions(&folder.id)?.len() as u64;
        let pending = run.target.state.pending(&folder.id)?.len() as u64;
        let complete = matches!(outcome, Ok(true)) && pending == 0;
        if !complete {
            run.report.complete = false;
        }
        match outcome {
            Err(FolderFail::Backend) => run.report.folders_failed += 1,
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
        status::write(&run.target.alias_dir, &status)?;
        if run.report.stopped {
            break;
        }
    }
    // Folders gone from the mailbox: their messages leave the index.
    if !run.report.stopped {
        for gone in run.target.state.folders()? {
            if listed.contains(&gone) {
                continue;
            }
            let ids: Vec<String> = run.target.state.versions(&gone)?.into_keys().collect();
            for id in &ids {
                run.target.writer.remove(&gone, id)?;
                run.target.forget_vectors(&gone, id);
            }
            run.target.writer.commit()?;
            run.target.commit_vectors()?;
            run.target.state.drop_folder(&gone)?;
            run.report.removed += ids.len() as u64;
            status.folders.remove(&gone);
        }
    }
    status.semantic = run.target.vectors.is_some();
    status.vectors_pending = match &run.target.vectors {
        Some(store) => {
            let mut missing = 0;
            for folder in run.target.state.folders()? {
                let known = run.target.state.versions(&folder)?;
                missing += known
                    .keys()
                    .filter(|id| !store.contains(&super::doc_key(&folder, id)))
                    .count() as u64;
            }
            missing
        }
        None => 0,
    };
    status.syncing = run.report.stopped;
    status.last_sync_finished = Some(Utc::now());
    status::write(&run.target.alias_dir, &status)?;
    Ok(run.report)
}

enum FolderFail {
    /// The backend's feed or fetch failed: the folder stays partial, the sync goes on.
    Backend,
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
        let mut known = self.target.state.versions(folder)?;
        // Messages a failed fetch left pending are fetched again with the next page.
        let mut retry: Vec<SyncItem> = self
            .target
            .state
            .pending(folder)?
            .into_iter()
            .map(|(id, version)| SyncItem { id, version })
            .collect();
        let mut resets = 0;
        loop {
            if (self.opts.stop)() {
                self.report.stopped = true;
                return Ok(false);
            }
            let position = self.target.state.cursor(folder)?;
            let page = match self
                .backend
                .folder_changes(folder, position.cursor.as_deref())
                .await
            {
                Ok(page) => page,
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
                    self.target.state.apply(&work.batch)?;
                    continue;
                }
                FolderDelta::Inventory(items) => {
                    let page_ids: Vec<String> = items.iter().map(|i| i.id.clone()).collect();
                    let mut fetch: Vec<SyncItem> = items
                        .into_iter()
                        .filter(|i| known.get(&i.id) != Some(&i.version))
                        .collect();
                    fetch.append(&mut retry);
                    self.fetch_all(folder, fetch, &mut known, &mut work).await?;
                    if page.more {
                        work.batch.seen = page_ids;
                        work.batch.cursor = Some(FolderCursor {
                            cursor: page.cursor,
                            in_inventory: true,
                        });
                    } else {
                        let mut seen = if position.in_inventory {
                            self.target.state.seen(folder)?
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
                    self.fetch_all(folder, fetch, &mut known, &mut work).await?;
                    self.remove_all(folder, gone, &mut known, &mut work)?;
                    work.batch.cursor = Some(FolderCursor {
                        cursor: page.cursor,
                        in_inventory: position.in_inventory && page.more,
                    });
                }
            }
            self.commit(&mut work)?;
            if !page.more {
                return Ok(true);
            }
        }
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
            self.target.writer.remove(folder, &id)?;
            self.target.forget_vectors(folder, &id);
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
    ) -> Result<(), FolderFail> {
        self.progress.total += items.len() as u64;
        (self.opts.progress)(&self.progress);
        for chunk in items.chunks(FETCH_BATCH) {
            if (self.opts.stop)() {
                self.report.stopped = true;
                break;
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
            for (item, result) in chunk.iter().zip(fetched) {
                match result {
                    Ok(fetch) => {
                        let message = self.indexed(folder, fetch).await;
                        self.target.writer.put(&message)?;
                        if self.target.vectors.is_some() {
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
                        self.target.writer.remove(folder, &item.id)?;
                        self.target.forget_vectors(folder, &item.id);
                        known.remove(&item.id);
                        work.batch.removed.push(item.id.clone());
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "index sync: a message could not be fetched");
                        work.batch
                            .pending
                            .push((item.id.clone(), item.version.clone()));
                        self.report.failed += 1;
                    }
                }
                self.progress.done += 1;
            }
            self.embed(passages).await?;
            (self.opts.progress)(&self.progress);
            let since = *work.since.get_or_insert_with(Instant::now);
            if work.count >= COMMIT_EVERY || since.elapsed() >= COMMIT_INTERVAL {
                self.commit(work)?;
            }
        }
        Ok(())
    }

    /// Embeds the passages of freshly indexed messages and keeps their vectors. An endpoint
    /// that fails leaves them without vectors (the fill pass retries at the end of the sync)
    /// and is not asked again during this sync.
    async fn embed(&mut self, passages: Vec<(String, Vec<String>)>) -> Result<(), IndexError> {
        let (Some(semantic), false) = (self.opts.semantic, self.target.semantic_down) else {
            return Ok(());
        };
        if passages.is_empty() || self.target.vectors.is_none() {
            return Ok(());
        }
        let flat: Vec<String> = passages
            .iter()
            .flat_map(|(_, p)| p.iter().cloned())
            .collect();
        match semantic.embedder.embed_passages(&flat).await {
            Ok(vectors) => {
                let mut vectors = vectors.into_iter();
                if let Some(store) = &mut self.target.vectors {
                    for (key, p) in passages {
                        let mine: Vec<Vec<f32>> = vectors.by_ref().take(p.len()).collect();
                        store
                            .upsert(&key, mine)
                            .map_err(|e| IndexError::Store(e.to_string()))?;
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "index sync: the embeddings endpoint failed; vectors are filled later");
                self.target.semantic_down = true;
            }
        }
        Ok(())
    }

    /// Gives every indexed message of `folder` that has no vector one: the messages the
    /// endpoint could not embed when they were indexed (it was down), or all of them when
    /// semantic recall was turned on after they were indexed. Refetches their text.
    async fn fill_vectors(&mut self, folder: &str) -> Result<(), FolderFail> {
        if self.opts.semantic.is_none() || self.target.semantic_down {
            return Ok(());
        }
        let Some(store) = &self.target.vectors else {
            return Ok(());
        };
        let known = self.target.state.versions(folder)?;
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
            if (self.opts.stop)() || self.target.semantic_down {
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
            self.target.commit_vectors()?;
        }
        Ok(())
    }

    /// Commits the index, then records in the state what the commit holds (keeping the
    /// page's cursor for the commit that ends the page).
    fn commit(&mut self, work: &mut Uncommitted) -> Result<(), IndexError> {
        self.target.writer.commit()?;
        self.target.commit_vectors()?;
        self.commits += 1;
        // The worst moment to die: the index holds the commit, the state does not know it.
        if self.opts.hold_after_commits == Some(self.commits) {
            tracing::warn!(
                commits = self.commits,
                "index sync: holding for a crash test"
            );
            loop {
                std::thread::park();
            }
        }
        self.target.state.apply(&work.batch)?;
        let folder = std::mem::take(&mut work.batch.folder);
        work.batch = StateBatch {
            folder,
            ..StateBatch::default()
        };
        work.since = None;
        work.count = 0;
        Ok(())
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

    /// The text of the fetched attachments, through the extraction worker (one whose text
    /// cannot be read adds nothing), and the ids of those whose text it holds whole.
    async fn attachment_text<'a>(
        &self,
        attachments: &'a [(AttachmentMeta, Option<Vec<u8>>)],
    ) -> (String, Vec<&'a str>) {
        let mut text = String::new();
        let mut whole = Vec::new();
        let Some(x) = self.opts.extraction else {
            return (text, whole);
        };
        for (meta, bytes) in attachments {
            let Some(bytes) = bytes else { continue };
            if meta.is_inline || !extractable(meta) {
                continue;
            }
            let Ok(slot) = Arc::clone(&x.slots).acquire_owned().await else {
                continue;
            };
            let job = Job::Text {
                name: meta.name.clone(),
                content_type: meta.content_type.clone(),
            };
            if let Ok(extract::Answer::Text(extracted)) =
                x.extractor.run(slot, job, bytes.clone(), x.caps).await
            {
                text.push_str(&extracted.text);
                text.push('\n');
                if !extracted.truncated && extracted.unread_parts == 0 {
                    whole.push(meta.id.as_str());
                }
            }
        }
        (text, whole)
    }
}

/// Attachments whose text the index extracts: every format with a text extractor but archives
/// (an archive's entries are the document tools' business).
fn extractable(meta: &AttachmentMeta) -> bool {
    let format = extract::detect(meta.name.as_deref(), &meta.content_type, &[]);
    format.has_extractor() && format != extract::Format::Zip
}

/// Writes `paused` into an alias's status (creating a status when none exists yet).
pub(crate) fn set_paused(alias_dir: &Dir, paused: bool) -> Result<(), IndexError> {
    let mut status: IndexStatus = status::read(alias_dir)?.unwrap_or_default();
    status.version = status::VERSION;
    status.paused = paused;
    status::write(alias_dir, &status)
}
