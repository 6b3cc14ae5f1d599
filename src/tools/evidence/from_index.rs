//! `investigate_documents` through the local index (`source: "index" | "hybrid"`): which
//! messages of a folder the investigation must read, decided over the whole folder instead of
//! its newest `maxMessagesPerFolder`.
//!
//! The index answers a superset query ([`Clue`]): every message whose indexed fields could hold
//! a signal as the investigation matches it, every message whose content is not wholly indexed
//! (a content gap), and — when a signal can occur in attachment text — every message with an
//! attachment whose text the index lacks (no extractor, too large, failed, cut). The
//! investigation then reads those messages live and matches them as it matches any other, so
//! the index only ever rules messages *out*, and only those it holds whole. Absence proved this
//! way needs what an index search needs, decided by `index::reader::Coverage` (the one rule):
//! the folder's last sync round complete, nothing pending, and a sync within
//! `MAILGATE_INDEX_MAX_STALENESS`, else the folder's coverage names `INDEX_STALE` /
//! `INDEX_PARTIAL`; an index of another mailbox or another text analysis is not read at all
//! (`INDEX_UNAVAILABLE`, and the live listing, in hybrid, decides). Candidates beyond
//! `maxMessagesPerFolder` are not read (`MESSAGE_SCAN_LIMIT_REACHED`): signal matches come
//! first, newest first.

use chrono::{DateTime, Duration, Utc};

use super::investigate::FolderReason;
use super::push_once;
use super::signals::Signals;
use crate::backends::model::{FolderSelector, MessageSummary};
use crate::index::reader::{Doubt, IndexReader, Scope};
use crate::index::status::IndexStatus;
use crate::index::{CandidateQuery, Clue, IndexError};
use crate::tools::args::InvestigationFolder;

/// One call's view of an alias's index: the status as the call began (a sync committing
/// meanwhile cannot mix two states into one answer's freshness).
pub(super) struct IndexView<'a> {
    pub(super) reader: &'a IndexReader,
    pub(super) status: Result<IndexStatus, IndexError>,
    pub(super) max_staleness: Duration,
    pub(super) now: DateTime<Utc>,
}

/// The messages of one folder the index says to read.
pub(super) struct IndexListing {
    pub(super) messages: Vec<MessageSummary>,
    /// The folder's id in the index (for telling which live messages it holds).
    pub(super) folder_id: Option<String>,
    /// Messages the index holds for the folder (each read or ruled out).
    pub(super) in_scope: usize,
    /// Why the index cannot prove absence in this folder; empty when it can.
    pub(super) reasons: Vec<FolderReason>,
    /// The index could not be read for this folder at all.
    pub(super) failed: bool,
    pub(super) indexed_through: Option<DateTime<Utc>>,
}

impl IndexListing {
    fn failed() -> Self {
        Self {
            messages: Vec::new(),
            folder_id: None,
            in_scope: 0,
            reasons: vec![FolderReason::IndexUnavailable],
            failed: true,
            indexed_through: None,
        }
    }

    /// Whether the index's listing alone proves what it left out.
    pub(super) fn is_clean(&self) -> bool {
        !self.failed && self.reasons.is_empty()
    }
}

/// What the index says to read of `folder` for `set`, at most `limit` messages.
pub(super) async fn list(
    view: &IndexView<'_>,
    folder: InvestigationFolder,
    set: &Signals,
    limit: usize,
) -> IndexListing {
    let Ok(status) = &view.status else {
        return IndexListing::failed();
    };
    let Some(folder_id) = status.folder_for(&FolderSelector::parse(Some(folder.as_str()))) else {
        return IndexListing::failed();
    };
    let coverage = view.reader.coverage(
        status,
        Scope::Folder(Some(&folder_id)),
        view.max_staleness,
        view.now,
    );
    if !coverage.serves() {
        // Another mailbox's index, or another analysis's tokens: not a candidate list at all.
        return IndexListing::failed();
    }
    let index = view.reader.store();
    let mut reasons = Vec::new();
    for doubt in &coverage.doubts {
        match doubt {
            Doubt::Stale => push_once(&mut reasons, FolderReason::IndexStale),
            Doubt::Partial => push_once(&mut reasons, FolderReason::IndexPartial),
            Doubt::MailboxChanged | Doubt::RebuildNeeded => {
                push_once(&mut reasons, FolderReason::IndexUnavailable);
            }
        }
    }
    let mut signal_clues: Vec<Clue> = (0..set.len())
        .map(|i| Clue::Text(set.text(i).to_owned()))
        .collect();
    signal_clues.extend(set.names().map(|n| Clue::AttachmentName(n.to_owned())));
    let mut unread_clues = vec![Clue::Gap];
    if set.reads_content() {
        unread_clues.push(Clue::UnreadAttachments);
    }
    let mut messages: Vec<MessageSummary> = Vec::new();
    let mut in_scope = 0;
    for clues in [signal_clues, unread_clues] {
        let query = CandidateQuery {
            folder_id: folder_id.clone(),
            clues,
            // One more than there is room for, counting the messages already listed (which
            // may come again): telling "exactly full" from "cut".
            limit: limit + 1,
        };
        let hits = match index.candidates(&query).await {
            Ok(hits) => hits,
            Err(_) => return IndexListing::failed(),
        };
        in_scope = hits.in_scope;
        for (m, _) in hits.hits {
            if messages.iter().any(|k| k.id == m.id) {
                continue;
            }
            if messages.len() == limit {
                push_once(&mut reasons, FolderReason::MessageScanLimitReached);
                break;
            }
            messages.push(m);
        }
    }
    IndexListing {
        messages,
        folder_id: Some(folder_id),
        in_scope,
        reasons,
        failed: false,
        indexed_through: coverage.indexed_through,
    }
}
