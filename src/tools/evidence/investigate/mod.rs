//! `investigate_documents`: which messages carry a given document (reference §5.9).
//!
//! Algorithm, per requested folder in request order: a deterministic listing of the newest
//! `maxMessagesPerFolder` messages within `maxPagesPerFolder` pages (the search engine with no
//! query, so its truncation evidence is reused); then, for *every* listed message (a `false`
//! has-attachments flag is not trusted: inline documents carry it), a metadata-only attachment
//! listing with the per-message caps; then signal matching on the message's metadata (subject,
//! the whole body, sender address and name, each ≤ 65,536 chars), on each attachment name (≤ 4,096 chars)
//! and — unless only `attachmentNames` were asked — on the text of each attachment
//! ([`ContentReader`]). Bodies, previews and attachment contents are never returned.
//!
//! Honesty invariant (issue 9): a folder is `COMPLETE` only when every attachment that could
//! hold a signal had its text searched in full. An attachment without an extractor (PDF, DOCX,
//! XLSX, ZIP, images, binaries), over `maxAttachmentInputBytes`, cut at `maxExtractedChars`,
//! failing, or beyond the call's deadline makes it `INCOMPLETE` (`ATTACHMENT_CONTENT_NOT_READ`),
//! and `coverage.attachmentContent` names those attachments, the reasons and what lifts each.
//! A message that already shows every content signal needs none of its attachments read.
//!
//! Classification: `CONFIRMED` when a requested proposal id occurs in an attachment name
//! (`PROPOSAL_ID_IN_ATTACHMENT_NAME`) or when an attachment name equals a requested one (full
//! name or name without extension) *and* an identity signal (proposal id, client, insurer)
//! occurs in the metadata (`REQUESTED_ATTACHMENT_NAME_MATCH`); any other match — a keyword, a
//! word match of a name, a signal in attachment text — is a `CANDIDATE_REVIEW`. The answer's
//! status is `CONFIRMED` if a returned match is confirmed, else `SEARCH_INCOMPLETE` if any
//! folder's coverage is not complete, else `CANDIDATE_REVIEW` when there are matches, else
//! `NOT_FOUND` — which therefore requires all three folders fully scanned, every attachment
//! listing complete and every attachment that could hold a signal read.
//!
//! Mailgate differences from the reference: attachment listings run a few at a time instead of
//! strictly one after another (§13.11), results keep discovery order either way; the body (not
//! only its preview), the sender's display name and attachment text are haystacks; names match
//! without extension or by words too; a backend answers one attachment listing in one page, so
//! `maxAttachmentPagesPerMessage` can never be the cap that is hit.
//!
//! Layout: this module runs the call (arguments, the folder scans, the status and the page of
//! matches); [`output`] holds the answer's types and its text line, [`listing`] chooses the
//! messages a folder scan reads and caps their attachment listings, [`matching`] turns one
//! message into evidence and a match, and [`attachments`] reads attachment text within the
//! call's budgets. Called by the read family's tool table through [`super`]'s re-export.

mod attachments;
mod listing;
mod matching;
mod output;

use std::sync::Arc;

use self::attachments::ContentReader;
use self::listing::{Listing, cap_listing, join_index, list_live};
use self::matching::{into_match, metadata_evidence};
use self::output::{
    Classification, ContentCoverageOut, FolderCoverageOut, FolderStatus, InvestigationCoverageOut,
    InvestigationLimitsOut, InvestigationMatchOut, InvestigationStatus, summary,
};
// `from_index` names the folder reasons; the tool table names the answer's type.
pub(super) use self::output::FolderReason;
pub(crate) use self::output::InvestigateOut;
use super::from_index::IndexView;
use super::push_once;
use super::signals::Signals;
use crate::backends::model::MessageSummary;
use crate::backends::{Backend, BackendError};
use crate::extract;
use crate::search::indexed::Mode;
use crate::tools::CallScope;
use crate::tools::args::{InvestigateArgs, InvestigationFolder};
use crate::tools::{ErrorCode, ToolError, ToolOutput, cursor};

/// Attachment listings in flight at once within one folder.
const LISTING_CONCURRENCY: usize = 4;

/// One call's folder scans: where they list messages, the caps, the signals and the reader
/// of attachment text they share.
struct FolderScan<'a, 'r> {
    backend: &'a Backend,
    mode: Mode,
    view: Option<IndexView<'a>>,
    limits: &'a InvestigationLimitsOut,
    set: &'a Signals,
    reader: &'a mut ContentReader<'r>,
    /// Each index-listed folder's `indexedThrough`.
    through: Vec<chrono::DateTime<chrono::Utc>>,
}

pub(crate) async fn investigate_documents(
    app: CallScope,
    args: InvestigateArgs,
) -> Result<ToolOutput, ToolError> {
    let resolved = app.resolve(&args.mailbox)?;
    let c = &args.criteria;
    // A continuation runs the investigation again and shows the matches after those shown.
    let request = serde_json::Value::from(format!("{c:?}"));
    let binding = cursor::Binding {
        signer: app.cursor_signer(),
        tool: "investigate_documents",
        alias: resolved.alias.as_str(),
        request: &request,
    };
    let from = binding.start(args.cursor.as_deref())?;
    let requested = c.signals();
    let set = Signals::new(&requested);
    // garde already demands one signal; a signal of punctuation only can never match, so a
    // "not found" for it would be a claim without evidence.
    if requested.is_empty() || !set.any_matchable() {
        return Err(ToolError::new(
            ErrorCode::InvalidArgument,
            "no signal contains a letter or a digit, so none could ever match",
        ));
    }
    let limits = InvestigationLimitsOut {
        max_pages_per_folder: c.max_pages_per_folder.unwrap_or(10),
        max_messages_per_folder: c.max_messages_per_folder.unwrap_or(100),
        max_attachment_pages_per_message: c.max_attachment_pages_per_message.unwrap_or(5),
        max_attachments_per_message: c.max_attachments_per_message.unwrap_or(50),
        max_results: c.max_results.unwrap_or(25),
    };
    let requested: Vec<InvestigationFolder> = c
        .folders
        .clone()
        .unwrap_or_else(|| InvestigationFolder::ALL.to_vec());

    let mut matches = Vec::new();
    let mut scanned = Vec::new();
    let mut reader = ContentReader {
        slots: Arc::clone(&app.extraction_slots),
        extractor: &app.extractor,
        max_input_bytes: app.config.limits.max_attachment_input_bytes,
        caps: extract::Caps::from_limits(&app.config.limits),
        deadline: crate::tools::call_deadline(crate::search::SEARCH_DEADLINE),
        coverage: ContentCoverageOut {
            searched: set.reads_content(),
            ..ContentCoverageOut::default()
        },
    };
    let (mode, index) =
        crate::tools::read::mode_of(&app, &resolved.granted, c.source.map(Mode::from)).await?;
    let view = match (mode, index) {
        (Mode::Index | Mode::Hybrid, Some(reader)) => Some(IndexView {
            reader,
            status: reader.status().await,
            max_staleness: chrono::Duration::from_std(app.indexes.max_staleness)
                .unwrap_or(chrono::Duration::MAX),
            now: chrono::Utc::now(),
        }),
        _ => None,
    };
    let source = view.as_ref().map(|_| match mode {
        Mode::Index => "index",
        _ => "hybrid",
    });
    let mut scan = FolderScan {
        backend: resolved.backend,
        mode,
        view,
        limits: &limits,
        set: &set,
        reader: &mut reader,
        through: Vec::new(),
    };
    for folder in requested {
        let coverage = scan_folder(&mut scan, folder, &mut matches).await;
        scanned.push((folder, coverage));
    }
    let indexed_through = scan
        .through
        .iter()
        .min()
        .map(|t| crate::tools::dates::iso_z(*t));
    let folders: Vec<FolderCoverageOut> = InvestigationFolder::ALL
        .iter()
        .map(|f| match scanned.iter().position(|(s, _)| s == f) {
            Some(i) => scanned.swap_remove(i).1,
            None => not_scanned(*f),
        })
        .collect();
    let complete = folders.iter().all(|f| f.status == FolderStatus::Complete);

    // Stable: confirmed first, otherwise discovery order.
    matches.sort_by_key(|m: &InvestigationMatchOut| m.classification != Classification::Confirmed);
    let total_matches = matches.len();
    // The status is the whole investigation's, whichever page of matches is shown: decided
    // from every match before the page is cut (issue 27: a continuation page holding none of
    // them said NOT_FOUND beside `totalMatches > 0`).
    let status = if matches
        .iter()
        .any(|m| m.classification == Classification::Confirmed)
    {
        InvestigationStatus::Confirmed
    } else if !complete {
        InvestigationStatus::SearchIncomplete
    } else if total_matches > 0 {
        InvestigationStatus::CandidateReview
    } else {
        InvestigationStatus::NotFound
    };
    let start = usize::try_from(from)
        .unwrap_or(usize::MAX)
        .min(total_matches);
    let mut matches = matches.split_off(start);
    matches.truncate(limits.max_results as usize);
    let shown_to = start + matches.len();
    let next_cursor = (shown_to < total_matches).then(|| binding.at(shown_to as u64));
    let out = InvestigateOut {
        mailbox: resolved.alias.to_string(),
        status,
        total_matches,
        matches_truncated: next_cursor.is_some(),
        matches,
        coverage: InvestigationCoverageOut {
            complete,
            folders,
            limits,
            attachment_content: reader.coverage,
        },
        source,
        indexed_through,
        next_cursor,
    };
    Ok(ToolOutput::untrusted(summary(&out, &set), out))
}

fn not_scanned(folder: InvestigationFolder) -> FolderCoverageOut {
    FolderCoverageOut {
        folder: folder.into(),
        status: FolderStatus::Incomplete,
        pages_scanned: 0,
        messages_scanned: 0,
        attachment_lists_attempted: 0,
        attachment_lists_completed: 0,
        attachment_pages_scanned: 0,
        attachment_contents_read: 0,
        attachment_contents_not_read: 0,
        reasons: vec![FolderReason::FolderNotScanned],
    }
}

async fn scan_folder(
    scan: &mut FolderScan<'_, '_>,
    folder: InvestigationFolder,
    matches: &mut Vec<InvestigationMatchOut>,
) -> FolderCoverageOut {
    let backend = scan.backend;
    let listed = match (scan.mode, &scan.view) {
        (Mode::Index, Some(view)) => {
            join_index(view, folder, scan.limits, scan.set, None, &mut scan.through).await
        }
        (Mode::Hybrid, Some(view)) => {
            let live = list_live(backend, folder, scan.limits).await;
            join_index(
                view,
                folder,
                scan.limits,
                scan.set,
                Some(live),
                &mut scan.through,
            )
            .await
        }
        _ => list_live(backend, folder, scan.limits).await,
    };
    let mut cov = FolderCoverageOut {
        reasons: listed.reasons,
        status: FolderStatus::Complete,
        pages_scanned: listed.pages,
        messages_scanned: listed.scanned,
        ..not_scanned(folder)
    };
    if listed.failed {
        cov.status = FolderStatus::Failed;
        return cov;
    }
    let limits = scan.limits;
    let set = scan.set;
    let messages: Vec<&(MessageSummary, bool)> = listed
        .messages
        .iter()
        .filter(|(m, _)| {
            let ok = !m.id.trim().is_empty();
            if !ok {
                push_once(&mut cov.reasons, FolderReason::MessageIdMissing);
            }
            ok
        })
        .collect();
    for chunk in messages.chunks(LISTING_CONCURRENCY) {
        // Summaries carry no body: one read of each message gives its body and its whole
        // attachment list (`MessageDetail`'s contract).
        let details: Vec<_> = chunk
            .iter()
            .map(|(m, _)| backend.get_message(&m.id))
            .collect();
        let details = futures::future::join_all(details).await;
        for (&(listed, from_index), detail) in chunk.iter().zip(details) {
            let (message, body, listing) = match detail {
                // A message the index listed that is gone since its sync is not in the
                // mailbox: nothing to match (a move is the next sync's, within staleness).
                Err(BackendError::NotFound) if *from_index => continue,
                // The index's summary may be older than the message: match what it is now.
                Ok(detail) if *from_index => {
                    let attachments = detail.summary.attachments.clone();
                    (
                        std::borrow::Cow::Owned(detail.summary),
                        Some(detail.body_text),
                        Ok(attachments),
                    )
                }
                Ok(detail) => (
                    std::borrow::Cow::Borrowed(listed),
                    Some(detail.body_text),
                    Ok(detail.summary.attachments),
                ),
                Err(error) => {
                    // Only the preview was matched: a signal in the rest is unproven.
                    push_once(&mut cov.reasons, FolderReason::MessageTextTruncated);
                    (std::borrow::Cow::Borrowed(listed), None, Err(error))
                }
            };
            let message: &MessageSummary = &message;
            if message.gap.is_some() {
                // A message not wholly read (too large, beyond the parser's limits) may hold
                // what the listing below cannot see.
                push_once(&mut cov.reasons, FolderReason::MessageTextTruncated);
            }
            cov.attachment_lists_attempted += 1;
            let listing = match listing {
                Ok(items) => {
                    cov.attachment_pages_scanned += 1;
                    cap_listing(items, limits, &mut cov.reasons)
                }
                Err(_) => {
                    push_once(&mut cov.reasons, FolderReason::AttachmentScanFailed);
                    Listing {
                        items: Vec::new(),
                        clean: false,
                        partial: true,
                    }
                }
            };
            if listing.clean {
                cov.attachment_lists_completed += 1;
            }
            let mut evidence =
                metadata_evidence(message, body.as_deref(), &listing, set, &mut cov.reasons);
            if set.reads_content() {
                let (read, not_read) = scan
                    .reader
                    .read_message(backend, folder, message, &listing, set, &mut evidence)
                    .await;
                cov.attachment_contents_read += read;
                cov.attachment_contents_not_read += not_read;
                if not_read > 0 {
                    push_once(&mut cov.reasons, FolderReason::AttachmentContentNotRead);
                }
            }
            if let Some(m) = into_match(folder, message, &listing, set, evidence) {
                matches.push(m);
            }
        }
    }
    cov.status = if cov.reasons.iter().any(|r| r.is_failure()) {
        FolderStatus::Failed
    } else if cov.reasons.is_empty() {
        FolderStatus::Complete
    } else {
        FolderStatus::Incomplete
    };
    cov
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::tools::testutil::{demo_app, message_id, operator};

    async fn investigate(app: &Arc<crate::tools::App>, args: Value) -> Result<Value, ToolError> {
        let args: InvestigateArgs = serde_json::from_value(args).expect("args parse");
        let out = investigate_documents(operator(app), args).await?;
        assert!(out.untrusted, "investigations are framed untrusted");
        Ok(out.structured)
    }

    fn strings(v: &Value) -> Vec<&str> {
        v.as_array()
            .expect("array")
            .iter()
            .map(|s| s.as_str().expect("string"))
            .collect()
    }

    fn folder_statuses(v: &Value) -> Vec<(String, String)> {
        v["coverage"]["folders"]
            .as_array()
            .expect("folders")
            .iter()
            .map(|f| {
                (
                    f["folder"].as_str().expect("folder").to_owned(),
                    f["status"].as_str().expect("status").to_owned(),
                )
            })
            .collect()
    }

    #[tokio::test]
    async fn finds_prop_1001_in_personal_confirmed_by_attachment_name() {
        let demo = demo_app();
        let out = investigate(
            &demo.app,
            json!({"mailbox": "personal", "criteria": {"proposalIds": ["PROP-1001"]}}),
        )
        .await
        .expect("answers");
        assert_eq!(out["status"], "CONFIRMED");
        let first = &out["matches"][0];
        assert_eq!(first["classification"], "CONFIRMED");
        assert_eq!(first["folder"], "inbox");
        assert_eq!(first["message"]["id"], message_id("orchard-1"));
        assert_eq!(
            strings(&first["confirmationReasons"]),
            ["PROPOSAL_ID_IN_ATTACHMENT_NAME"]
        );
        assert_eq!(
            strings(&first["matchedSignals"]["proposalIds"]),
            ["PROP-1001"]
        );
        // The thread's other messages mention the id in their subject only: candidates, after.
        let matches = out["matches"].as_array().expect("matches");
        assert!(matches.len() > 1);
        assert!(
            matches[1..]
                .iter()
                .all(|m| m["classification"] == "CANDIDATE_REVIEW")
        );
        assert_eq!(out["totalMatches"], matches.len());
        let text = out.to_string();
        assert!(!text.contains("bodyPreview") && !text.contains("\"body\""));
        // The DOCX and other PDFs of the inbox may hold the id too: their text is not read.
        assert_eq!(
            folder_statuses(&out),
            [
                ("inbox".into(), "INCOMPLETE".into()),
                ("sentitems".into(), "COMPLETE".into()),
                ("archive".into(), "COMPLETE".into())
            ]
        );
        assert_eq!(
            strings(&out["coverage"]["folders"][0]["reasons"]),
            ["ATTACHMENT_CONTENT_NOT_READ"]
        );
        assert_eq!(out["coverage"]["complete"], false);
    }

    #[tokio::test]
    async fn absent_signal_is_not_found_only_with_complete_coverage() {
        let demo = demo_app();
        // A name-only signal needs no attachment text: every listing complete proves absence.
        let full = investigate(
            &demo.app,
            json!({"mailbox": "personal", "criteria": {"attachmentNames": ["xylophone.pdf"]}}),
        )
        .await
        .expect("answers");
        assert_eq!(full["coverage"]["complete"], true);
        assert_eq!(full["status"], "NOT_FOUND");
        assert_eq!(full["totalMatches"], 0);
        assert_eq!(full["coverage"]["attachmentContent"]["searched"], false);
        let inbox = &full["coverage"]["folders"][0];
        assert_eq!(inbox["messagesScanned"], 42);
        assert_eq!(inbox["attachmentListsAttempted"], 42);
        assert_eq!(inbox["attachmentListsCompleted"], 42);

        // A keyword could sit in the inbox's PDF or DOCX, whose text is not read: no absence.
        let unread = investigate(
            &demo.app,
            json!({"mailbox": "personal", "criteria": {"keywords": ["xylophone"]}}),
        )
        .await
        .expect("answers");
        assert_eq!(unread["status"], "SEARCH_INCOMPLETE");
        assert_eq!(unread["coverage"]["complete"], false);
        let content = &unread["coverage"]["attachmentContent"];
        assert_eq!(content["searched"], true);
        assert!(content["read"].as_u64().expect("read") > 0);
        assert_eq!(
            content["notReadByReason"][0]["reason"], "UNSUPPORTED_FORMAT",
            "{content}"
        );

        let capped = investigate(
            &demo.app,
            json!({"mailbox": "personal",
                   "criteria": {"keywords": ["xylophone"], "maxMessagesPerFolder": 1}}),
        )
        .await
        .expect("answers");
        assert_eq!(capped["status"], "SEARCH_INCOMPLETE");
        assert_eq!(capped["coverage"]["complete"], false);
        assert_eq!(
            strings(&capped["coverage"]["folders"][0]["reasons"]),
            ["MESSAGE_SCAN_LIMIT_REACHED"]
        );
        assert_eq!(capped["coverage"]["folders"][0]["status"], "INCOMPLETE");

        let one_folder = investigate(
            &demo.app,
            json!({"mailbox": "personal",
                   "criteria": {"attachmentNames": ["xylophone"], "folders": ["archive", "inbox"]}}),
        )
        .await
        .expect("answers");
        assert_eq!(one_folder["status"], "SEARCH_INCOMPLETE");
        assert_eq!(
            folder_statuses(&one_folder),
            [
                ("inbox".into(), "COMPLETE".into()),
                ("sentitems".into(), "INCOMPLETE".into()),
                ("archive".into(), "COMPLETE".into())
            ]
        );
        assert_eq!(
            strings(&one_folder["coverage"]["folders"][1]["reasons"]),
            ["FOLDER_NOT_SCANNED"]
        );
    }

    #[tokio::test]
    async fn content_only_matches_are_candidates_never_confirmations() {
        let demo = demo_app();
        // PROP-3107 lives only inside the XLSX: its text is read, so the id is found there, as
        // a candidate (content alone never confirms).
        let inside = investigate(
            &demo.app,
            json!({"mailbox": "finance", "criteria": {"proposalIds": ["PROP-3107"]}}),
        )
        .await
        .expect("answers");
        assert_eq!(
            inside["matches"][0]["classification"], "CANDIDATE_REVIEW",
            "{inside}"
        );
        assert_eq!(inside["matches"][0]["message"]["id"], message_id("recon-3"));

        let keyword = investigate(
            &demo.app,
            json!({"mailbox": "finance", "criteria": {"keywords": ["premium-schedule-2026"]}}),
        )
        .await
        .expect("answers");
        // Other inbox PDFs are unread, so the match list is not known to be complete.
        assert_eq!(keyword["status"], "SEARCH_INCOMPLETE");
        assert_eq!(keyword["matches"][0]["classification"], "CANDIDATE_REVIEW");
        assert_eq!(
            keyword["matches"][0]["message"]["id"],
            message_id("recon-3")
        );
        // The message that shows the keyword needs no content reading of its own.
        let not_read = keyword["coverage"]["attachmentContent"]["notReadAttachments"]
            .as_array()
            .expect("array");
        assert!(
            not_read
                .iter()
                .all(|a| a["messageId"] != message_id("recon-3"))
        );
        assert!(
            keyword["matches"][0]["confirmationReasons"]
                .as_array()
                .expect("array")
                .is_empty()
        );
    }

    #[tokio::test]
    async fn exact_name_needs_identity_in_metadata_to_confirm() {
        let demo = demo_app();
        let name_only = investigate(
            &demo.app,
            json!({"mailbox": "personal",
                   "criteria": {"attachmentNames": ["prop-1001-ORCHARD-bakery.pdf"]}}),
        )
        .await
        .expect("answers");
        assert_eq!(name_only["status"], "CANDIDATE_REVIEW");
        assert_eq!(
            strings(&name_only["matches"][0]["matchedSignals"]["attachmentNames"]),
            ["prop-1001-ORCHARD-bakery.pdf"]
        );

        let with_client = investigate(
            &demo.app,
            json!({"mailbox": "personal",
                   "criteria": {"attachmentNames": ["PROP-1001-orchard-bakery.pdf"],
                                "clients": ["Orchard Bakery Ltd"]}}),
        )
        .await
        .expect("answers");
        assert_eq!(with_client["status"], "CONFIRMED");
        assert_eq!(
            strings(&with_client["matches"][0]["confirmationReasons"]),
            ["REQUESTED_ATTACHMENT_NAME_MATCH"]
        );
    }

    #[tokio::test]
    async fn max_results_cuts_after_sorting_confirmed_first() {
        let demo = demo_app();
        let out = investigate(
            &demo.app,
            json!({"mailbox": "personal",
                   "criteria": {"proposalIds": ["PROP-1001"], "maxResults": 1}}),
        )
        .await
        .expect("answers");
        assert_eq!(out["status"], "CONFIRMED");
        assert_eq!(out["matches"].as_array().expect("matches").len(), 1);
        assert_eq!(out["matches"][0]["classification"], "CONFIRMED");
        assert_eq!(out["matchesTruncated"], true);
        assert!(out["totalMatches"].as_u64().expect("n") > 1);
    }

    /// Issue 27: every page of an investigation carries the whole investigation's status, also
    /// a continuation that holds none of its matches (the mail changed between the pages).
    #[tokio::test]
    async fn every_page_keeps_the_status_of_the_whole_investigation() {
        let demo = demo_app();
        for (criteria, status) in [
            (
                json!({"attachmentNames": ["orchard bakery", "cover note"], "maxResults": 1}),
                "CANDIDATE_REVIEW",
            ),
            (
                json!({"proposalIds": ["PROP-1001"], "maxResults": 1}),
                "CONFIRMED",
            ),
        ] {
            let args = json!({"mailbox": "personal", "criteria": criteria});
            let first = investigate(&demo.app, args.clone()).await.expect("answers");
            assert_eq!(first["status"], status, "{first}");
            let total = first["totalMatches"].as_u64().expect("n");
            assert!(total > 1, "several pages: {first}");
            let mut next = args.clone();
            next["cursor"] = first["nextCursor"].clone();
            let second = investigate(&demo.app, next).await.expect("answers");
            assert_eq!(second["status"], status, "page 2: {second}");
            assert_eq!(second["totalMatches"], total);
            // A continuation past the last match: no match on the page, the status still the
            // investigation's.
            let parsed: InvestigateArgs = serde_json::from_value(args.clone()).expect("args");
            let request = Value::from(format!("{:?}", parsed.criteria));
            let operator = demo.operator();
            let past = cursor::Binding {
                signer: operator.cursor_signer(),
                tool: "investigate_documents",
                alias: "personal",
                request: &request,
            }
            .at(total);
            let mut beyond = args;
            beyond["cursor"] = json!(past);
            let empty = investigate(&demo.app, beyond).await.expect("answers");
            assert_eq!(empty["matches"], json!([]), "{empty}");
            assert_eq!(empty["totalMatches"], total);
            assert_eq!(
                empty["status"], status,
                "never NOT_FOUND beside matches: {empty}"
            );
        }
    }

    #[tokio::test]
    async fn a_missing_folder_fails_closed_and_unknown_alias_comes_first() {
        let demo = demo_app();
        // The read-only archive mailbox has no Sent folder: that folder cannot be shown empty.
        let out = investigate(
            &demo.app,
            json!({"mailbox": "archive", "criteria": {"keywords": ["xylophone"]}}),
        )
        .await
        .expect("answers");
        assert_eq!(out["status"], "SEARCH_INCOMPLETE");
        assert_eq!(out["coverage"]["folders"][1]["status"], "FAILED");
        assert_eq!(
            strings(&out["coverage"]["folders"][1]["reasons"]),
            ["MESSAGE_SCAN_FAILED"]
        );

        let err = investigate(
            &demo.app,
            json!({"mailbox": "nobody", "criteria": {"keywords": ["--"]}}),
        )
        .await
        .expect_err("refused");
        assert_eq!(err.code, ErrorCode::UnknownMailbox);
    }
}
