//! The server's side of an alias's index: opened read-only at startup when the operator has
//! synced the alias (never created by the server), and searched as a [`SearchSource`] whose
//! search reads every indexed message of the scope (`ExhaustiveLocal`), so the search engine's
//! own rules decide what an answer may claim. What the index cannot vouch for is added here:
//! how fresh it is ([`Freshness`]), from `status.json` as the last sync left it.

use std::time::Instant;

use cap_std::fs::Dir;
use chrono::{DateTime, Duration, Utc};

use super::status::{self, IndexStatus};
use super::tantivy_index::TantivyIndex;
use super::{IndexError, IndexQuery, TextIndex};
use crate::alias::Alias;
use crate::backends::BackendError;
use crate::backends::model::{
    AttachmentMeta, Capabilities, FolderSelector, Gaps, MessageSummary, MessageText, Page,
    ScanRequest, SearchKind, WellKnown,
};
use crate::search::SearchSource;

/// One alias's index as the server reads it.
pub(crate) struct IndexReader {
    alias_dir: Dir,
    index: TantivyIndex,
}

impl IndexReader {
    /// Opens the index of `alias` under `<state>/index`, `Ok(None)` when the operator never
    /// synced it (or purged it).
    pub(crate) fn open(state: &Dir, alias: &Alias) -> Result<Option<Self>, IndexError> {
        let root = match super::layout::open_root(state, false) {
            Ok(root) => root,
            Err(IndexError::Missing) => return Ok(None),
            Err(e) => return Err(e),
        };
        let alias_dir = match super::layout::open_alias(&root, alias, false) {
            Ok(dir) => dir,
            Err(IndexError::Missing) => return Ok(None),
            Err(e) => return Err(e),
        };
        let text = match super::layout::open_part(&alias_dir, super::layout::TEXT, false) {
            Ok(dir) => dir,
            Err(IndexError::Missing) => return Ok(None),
            Err(e) => return Err(e),
        };
        match TantivyIndex::open(super::capdir::CapDirectory::new(text), false) {
            Ok(index) => Ok(Some(Self { alias_dir, index })),
            Err(IndexError::Missing) => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub(crate) fn status(&self) -> Result<IndexStatus, IndexError> {
        status::read(&self.alias_dir)?.ok_or(IndexError::Missing)
    }

    pub(crate) fn index(&self) -> &TantivyIndex {
        &self.index
    }
}

/// How far an index answer can be trusted for absence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Freshness {
    /// When the scope was last wholly synced.
    pub(crate) indexed_through: Option<DateTime<Utc>>,
    /// Older than the staleness bound.
    pub(crate) stale: bool,
    /// A folder of the scope is mid-round, has pending messages, or was never synced.
    pub(crate) partial: bool,
}

impl Freshness {
    /// The freshness of `folder` (a folder id; `None`: every folder) in `status`, against
    /// `max_staleness` at `now`.
    pub(crate) fn of(
        status: &IndexStatus,
        folder: Option<&str>,
        max_staleness: Duration,
        now: DateTime<Utc>,
    ) -> Self {
        let (through, partial) = match folder {
            Some(id) => match status.folder(id) {
                Some(f) => (f.through, !f.complete || f.pending > 0),
                None => (None, true),
            },
            None => (
                status.indexed_through(),
                status
                    .folders
                    .values()
                    .any(|f| !f.complete || f.pending > 0),
            ),
        };
        Freshness {
            indexed_through: through,
            stale: through.is_none_or(|t| now - t > max_staleness),
            partial: partial || through.is_none(),
        }
    }
}

/// The index as a search source for one search: the reader and the status read when the
/// search began (so a sync committing meanwhile cannot mix two states into one answer's
/// freshness).
pub(crate) struct IndexSource<'a> {
    pub(crate) reader: &'a IndexReader,
    pub(crate) status: IndexStatus,
}

impl IndexSource<'_> {
    /// The folder id a selector names in this index (as the backend resolved it at sync).
    pub(crate) fn folder_id(&self, folder: &FolderSelector) -> Result<String, BackendError> {
        match folder {
            FolderSelector::WellKnown(name) => {
                let label = match name {
                    WellKnown::Inbox => "inbox",
                    WellKnown::SentItems => "sentitems",
                    WellKnown::Drafts => "drafts",
                    WellKnown::Archive => "archive",
                    WellKnown::JunkEmail => "junkemail",
                    WellKnown::DeletedItems => "deleteditems",
                };
                self.status
                    .well_known
                    .get(label)
                    .cloned()
                    .ok_or(BackendError::NotFound)
            }
            FolderSelector::Id(id) => {
                if self.status.folders.contains_key(id) {
                    return Ok(id.clone());
                }
                self.status
                    .folders
                    .keys()
                    .find(|k| k.eq_ignore_ascii_case(id))
                    .cloned()
                    .ok_or(BackendError::NotFound)
            }
        }
    }
}

fn store_error(e: IndexError) -> BackendError {
    BackendError::Io(std::io::Error::other(e.to_string()))
}

impl SearchSource for IndexSource<'_> {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            search: SearchKind::ExhaustiveLocal,
            ids_survive_move: false,
        }
    }

    async fn scan(&self, req: &ScanRequest, query: Option<&str>) -> Result<Page, BackendError> {
        let folder = self.folder_id(&req.folder)?;
        let q = IndexQuery {
            folder_id: Some(folder),
            words: query.map(|q| vec![q.to_owned()]).unwrap_or_default(),
            filters: req.filters.clone(),
            limit: req.keep,
            order: if query.is_some() {
                None
            } else {
                Some(req.order)
            },
        };
        let reader = self.reader;
        // A search of the index takes milliseconds: run inline rather than hop threads.
        let hits = reader.index.search(&q).map_err(store_error)?;
        let mut gaps = Gaps::default();
        for (gap, n) in &hits.gaps {
            for _ in 0..*n {
                gaps.add(*gap);
            }
        }
        Ok(Page {
            items: hits.hits.into_iter().map(|(m, _)| m).collect(),
            matched: hits.matched,
            pages_scanned: 1,
            truncated: false,
            timed_out: false,
            gaps,
            stop: None,
            examined: hits.in_scope,
            folder_total: Some(hits.in_scope),
            page_size: None,
        })
    }

    async fn texts(
        &self,
        wanted: &[&MessageSummary],
        _deadline: Instant,
    ) -> Vec<Result<MessageText, BackendError>> {
        // The index matched bodies itself: the engine never asks an exhaustive source for
        // texts. Answer honestly if it ever does.
        wanted
            .iter()
            .map(|_| Err(BackendError::Unsupported("index texts")))
            .collect()
    }

    async fn attachments(&self, id: &str) -> Result<Vec<AttachmentMeta>, BackendError> {
        match self.reader.index.summary(id).map_err(store_error)? {
            Some(m) => Ok(m.attachments),
            None => Err(BackendError::NotFound),
        }
    }
}
