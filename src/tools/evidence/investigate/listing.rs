//! Which messages and attachments a folder scan of `investigate_documents` reads: the live
//! listing of the folder's newest `maxMessagesPerFolder` messages, the local index's candidates
//! (alone, or joined with the live listing in hybrid mode), and the per-message attachment cap.
//!
//! Invariant: a listing that cannot prove absence in its folder says why (its
//! [`FolderReason`]s), and an attachment listing that was capped, failed or holds an invalid
//! name is not `clean`; the folder scan in [`super`], the only caller, turns both into coverage.

use crate::backends::model::MessageSummary;
use crate::backends::{AttachmentMeta, Backend};
use crate::search::{SearchPlan, SearchStatus, engine};
use crate::tools::args::InvestigationFolder;
use crate::tools::evidence::from_index::{self, IndexView};
use crate::tools::evidence::push_once;
use crate::tools::evidence::signals::Signals;
use crate::tools::output;

use super::output::{FolderReason, InvestigationLimitsOut};

/// One attachment listing after the per-message caps.
pub(super) struct Listing {
    pub(super) items: Vec<AttachmentMeta>,
    /// Succeeded, not capped, all names valid.
    pub(super) clean: bool,
    /// Capped or failed: the message may have more attachments than `items`.
    pub(super) partial: bool,
}

/// The messages a folder's investigation reads, and what their listing proves.
pub(super) struct Listed {
    /// Each with whether it came from the index (its summary may be older than the message,
    /// which may also be gone).
    pub(super) messages: Vec<(MessageSummary, bool)>,
    pub(super) pages: u32,
    pub(super) scanned: usize,
    /// Why the listing cannot prove absence in the folder; empty when it can.
    pub(super) reasons: Vec<FolderReason>,
    pub(super) failed: bool,
}

/// The newest `maxMessagesPerFolder` messages of the folder, live.
pub(super) async fn list_live(
    backend: &Backend,
    folder: InvestigationFolder,
    limits: &InvestigationLimitsOut,
) -> Listed {
    let per_folder = limits.max_messages_per_folder.max(1) as usize;
    let plan = SearchPlan::newest(
        folder.as_str(),
        per_folder,
        limits.max_pages_per_folder,
        crate::tools::call_deadline(crate::search::SEARCH_DEADLINE),
        // The investigation reads the documents each message carries.
        true,
    );
    let outcome = engine::run(backend, &plan).await;
    let mut reasons = Vec::new();
    let failed = matches!(
        outcome.status,
        SearchStatus::SearchFailed | SearchStatus::SearchUntrusted
    );
    if failed {
        push_once(&mut reasons, FolderReason::MessageScanFailed);
    }
    if !failed && (outcome.status == SearchStatus::SearchIncomplete || outcome.truncated) {
        push_once(&mut reasons, FolderReason::MessageScanLimitReached);
    }
    Listed {
        pages: outcome.pages_scanned,
        scanned: outcome.messages.len(),
        messages: if failed {
            Vec::new()
        } else {
            outcome.messages.into_iter().map(|m| (m, false)).collect()
        },
        reasons,
        failed,
    }
}

/// The index's candidates of the folder; with `live` (hybrid), joined with the live listing:
/// a clean index rules out what it holds whole, so of the live listing only the messages it
/// does not hold yet (newer than its sync) are read too; an index that cannot prove absence
/// leaves the proof to the live listing, whose messages are all read.
pub(super) async fn join_index(
    view: &IndexView<'_>,
    folder: InvestigationFolder,
    limits: &InvestigationLimitsOut,
    set: &Signals,
    live: Option<Listed>,
    through: &mut Vec<chrono::DateTime<chrono::Utc>>,
) -> Listed {
    let per_folder = limits.max_messages_per_folder.max(1) as usize;
    let index = from_index::list(view, folder, set, per_folder).await;
    through.extend(index.indexed_through);
    let clean = index.is_clean();
    let mut joined = Listed {
        messages: Vec::new(),
        pages: 0,
        scanned: index.in_scope,
        reasons: index.reasons,
        failed: index.failed,
    };
    let from_index = index.messages.into_iter().map(|m| (m, true));
    let Some(live) = live else {
        joined.messages = from_index.collect();
        return joined;
    };
    joined.pages = live.pages;
    joined.scanned = joined.scanned.max(live.scanned);
    // Which live messages the index holds, in one lookup (only a clean index rules any out).
    // A failed lookup holds nothing: every live message is read.
    let mut held = std::collections::HashSet::new();
    if let (true, Some(folder)) = (clean, index.folder_id.as_deref()) {
        let ids: Vec<&str> = live.messages.iter().map(|(m, _)| m.id.as_str()).collect();
        if let Ok(found) = view.reader.store().summaries_in(folder, &ids).await {
            held.extend(found.into_iter().flatten().map(|m| m.id));
        }
    }
    let mut messages: Vec<(MessageSummary, bool)> = Vec::new();
    for (m, origin) in live.messages {
        if !clean || !held.contains(&m.id) {
            messages.push((m, origin));
        }
    }
    for (m, origin) in from_index {
        if !messages.iter().any(|(k, _)| k.id == m.id) {
            messages.push((m, origin));
        }
    }
    joined.messages = messages;
    if clean {
        joined.reasons.clear();
        joined.failed = false;
    } else if live.reasons.is_empty() {
        // The live listing covered the folder.
        joined.reasons.clear();
        joined.failed = false;
    } else {
        let mut reasons = live.reasons;
        for r in joined.reasons {
            push_once(&mut reasons, r);
        }
        joined.reasons = reasons;
        joined.failed = live.failed && joined.failed;
    }
    joined
}

/// Applies `maxAttachmentsPerMessage` and records invalid or long names.
pub(super) fn cap_listing(
    mut items: Vec<AttachmentMeta>,
    limits: &InvestigationLimitsOut,
    reasons: &mut Vec<FolderReason>,
) -> Listing {
    let cap = limits.max_attachments_per_message.max(1) as usize;
    let capped = items.len() > cap;
    if capped {
        items.truncate(cap);
        push_once(reasons, FolderReason::AttachmentScanLimitReached);
    }
    let mut clean = !capped;
    for a in &items {
        match a.name.as_deref() {
            None => {
                push_once(reasons, FolderReason::AttachmentNameInvalid);
                clean = false;
            }
            Some(n) if n.trim().is_empty() => {
                push_once(reasons, FolderReason::AttachmentNameInvalid);
                clean = false;
            }
            Some(n) if n.chars().count() > output::ATTACHMENT_NAME_CHARS => {
                push_once(reasons, FolderReason::AttachmentNameTruncated);
            }
            Some(_) => {}
        }
    }
    Listing {
        items,
        clean,
        partial: capped,
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    // Fixtures shared with the matching tests (`super::super::matching`).
    pub(in super::super) fn meta(id: &str, name: Option<&str>) -> AttachmentMeta {
        AttachmentMeta {
            id: id.into(),
            name: name.map(str::to_owned),
            content_type: "application/pdf".into(),
            size: 10,
            size_is_estimate: false,
            is_inline: false,
        }
    }

    pub(in super::super) fn limits(max_attachments: u32) -> InvestigationLimitsOut {
        InvestigationLimitsOut {
            max_pages_per_folder: 10,
            max_messages_per_folder: 100,
            max_attachment_pages_per_message: 5,
            max_attachments_per_message: max_attachments,
            max_results: 25,
        }
    }

    #[test]
    fn capped_listing_and_bad_names_are_recorded() {
        let mut reasons = Vec::new();
        let items = vec![
            meta("a", Some("a.pdf")),
            meta("b", Some("b.pdf")),
            meta("c", None),
        ];
        let l = cap_listing(items, &limits(2), &mut reasons);
        assert_eq!(l.items.len(), 2);
        assert!(!l.clean && l.partial);
        assert_eq!(reasons, [FolderReason::AttachmentScanLimitReached]);

        let mut reasons = Vec::new();
        let long = "n".repeat(301);
        let items = vec![
            meta("a", None),
            meta("b", Some("  ")),
            meta("c", Some(&long)),
        ];
        let l = cap_listing(items, &limits(50), &mut reasons);
        assert!(!l.clean && !l.partial);
        assert_eq!(
            reasons,
            [
                FolderReason::AttachmentNameInvalid,
                FolderReason::AttachmentNameTruncated
            ]
        );
        // A long but valid name keeps the listing clean (it was matched in full).
        let mut reasons = Vec::new();
        assert!(cap_listing(vec![meta("c", Some(&long))], &limits(50), &mut reasons).clean);
    }
}
