//! `investigate_documents`: which messages carry a given document (reference §5.9).
//!
//! Algorithm, per requested folder in request order: a deterministic listing of the newest
//! `maxMessagesPerFolder` messages within `maxPagesPerFolder` pages (the search engine with no
//! query, so its truncation evidence is reused); then, for *every* listed message (a `false`
//! has-attachments flag is not trusted: inline documents carry it), a metadata-only attachment
//! listing with the per-message caps; then signal matching on the message's metadata (subject,
//! body, sender address and name, each ≤ 65,536 chars), on each attachment name (≤ 4,096 chars)
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

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;

use super::from_index::IndexView;
use super::signals::{self, Haystack, NameMatch, Signals};
use super::{MatchedSignalsOut, NameMatchOut, any_kind, from_index, push_once, union};
use crate::backends::model::{ContentGap, MessageSummary};
use crate::backends::{AttachmentMeta, Backend, BackendError};
use crate::extract::pipeline::{self, NotRead, Pipeline, Wait};
use crate::extract::{self, Extracted};
use crate::index::TextIndex as _;
use crate::search::indexed::Mode;
use crate::search::{SearchPlan, SearchStatus, engine};
use crate::tools::args::{InvestigateArgs, InvestigationFolder};
use crate::tools::output::{self, AddressOut, bounded};
use crate::tools::{App, ErrorCode, ToolError, ToolOutput, cursor};

/// Longest metadata field (Unicode scalar values) that is matched.
const MAX_FIELD_CHARS: usize = 65_536;
/// Attachment listings in flight at once within one folder.
const LISTING_CONCURRENCY: usize = 4;
/// Attachments shown per message (reference §4.2).
const SHOWN_ATTACHMENTS: usize = output::SUMMARY_ATTACHMENTS;
/// Attachments not read that the answer names one by one (the rest are counted).
const SHOWN_NOT_READ: usize = 10;
/// Characters of a not-read attachment's name in the answer.
const NOT_READ_NAME_CHARS: usize = 100;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub(crate) enum InvestigationStatus {
    /// At least one returned match is confirmed (even if coverage is incomplete).
    Confirmed,
    /// Complete coverage, only unconfirmed matches.
    CandidateReview,
    /// No confirmed match and some folder was not completely scanned: absence is not shown.
    SearchIncomplete,
    /// Complete coverage of all three folders and no match.
    NotFound,
}

impl InvestigationStatus {
    fn as_str(self) -> &'static str {
        match self {
            InvestigationStatus::Confirmed => "CONFIRMED",
            InvestigationStatus::CandidateReview => "CANDIDATE_REVIEW",
            InvestigationStatus::SearchIncomplete => "SEARCH_INCOMPLETE",
            InvestigationStatus::NotFound => "NOT_FOUND",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub(crate) enum Classification {
    Confirmed,
    CandidateReview,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub(crate) enum InvestigationConfirmation {
    /// A requested proposal id occurs in one of the message's attachment names.
    ProposalIdInAttachmentName,
    /// An attachment name equals a requested one and an identity signal occurs in the
    /// message's metadata (not only in attachment names).
    RequestedAttachmentNameMatch,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum FolderName {
    Inbox,
    Sentitems,
    Archive,
}

impl From<InvestigationFolder> for FolderName {
    fn from(f: InvestigationFolder) -> Self {
        match f {
            InvestigationFolder::Inbox => FolderName::Inbox,
            InvestigationFolder::Sentitems => FolderName::Sentitems,
            InvestigationFolder::Archive => FolderName::Archive,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub(crate) enum FolderStatus {
    Complete,
    Incomplete,
    Failed,
}

/// Why a folder's coverage is not complete (stable codes, reference §5.9).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub(crate) enum FolderReason {
    FolderNotScanned,
    MessageScanFailed,
    MessageScanLimitReached,
    MessageIdMissing,
    MessageTextTruncated,
    AttachmentScanFailed,
    AttachmentScanLimitReached,
    AttachmentNameInvalid,
    AttachmentNameTruncated,
    // An attachment's text could not be (wholly) searched: see `coverage.attachmentContent`.
    // (Variants carry `//` comments: a `///` turns the schema's plain enum into a larger oneOf.)
    AttachmentContentNotRead,
    // The local index (source index/hybrid) is older than MAILGATE_INDEX_MAX_STALENESS, or its
    // last sync of the folder did not finish, or it could not be read: what it left out is
    // unproven (the operator runs `mailgate index sync`).
    IndexStale,
    IndexPartial,
    IndexUnavailable,
}

impl FolderReason {
    fn is_failure(self) -> bool {
        matches!(
            self,
            FolderReason::MessageScanFailed
                | FolderReason::AttachmentScanFailed
                | FolderReason::IndexUnavailable
        )
    }
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InvestigationAttachmentOut {
    pub(crate) id: String,
    /// Sender-controlled, at most 300 characters (plus `...`); matching used the full name.
    pub(crate) name: String,
    pub(crate) name_truncated: bool,
    pub(crate) content_type: String,
    pub(crate) size: u64,
    pub(crate) is_inline: bool,
}

/// A message of a match: metadata only (no body, no preview).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InvestigationMessageOut {
    pub(crate) id: String,
    pub(crate) folder_id: String,
    pub(crate) subject: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) from: Option<AddressOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) received_date_time: Option<String>,
    pub(crate) is_read: bool,
    pub(crate) has_attachments: bool,
    /// Attachments in the (possibly capped) listing, inline ones included.
    pub(crate) attachment_count: usize,
    /// At most 30.
    pub(crate) attachments: Vec<InvestigationAttachmentOut>,
    /// More attachments exist than are shown, or the listing was capped or failed.
    pub(crate) attachment_names_truncated: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InvestigationMatchOut {
    pub(crate) folder: FolderName,
    pub(crate) classification: Classification,
    pub(crate) message: InvestigationMessageOut,
    pub(crate) matched_signals: MatchedSignalsOut,
    pub(crate) confirmation_reasons: Vec<InvestigationConfirmation>,
    // How requested attachment names matched; absent when none did.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) name_matches: Vec<NameMatchOut>,
    // Attachments whose extracted text holds a signal; absent when none does.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) content_match_attachment_ids: Vec<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FolderCoverageOut {
    pub(crate) folder: FolderName,
    pub(crate) status: FolderStatus,
    pub(crate) pages_scanned: u32,
    pub(crate) messages_scanned: usize,
    pub(crate) attachment_lists_attempted: usize,
    /// Listings that succeeded, were not capped and held only valid names.
    pub(crate) attachment_lists_completed: usize,
    pub(crate) attachment_pages_scanned: u32,
    // Attachments whose text was searched in full, and those that could hold a signal but
    // were not (wholly) searched.
    pub(crate) attachment_contents_read: usize,
    pub(crate) attachment_contents_not_read: usize,
    /// Deduplicated, in the order first met.
    pub(crate) reasons: Vec<FolderReason>,
}

/// Why an attachment's text was not (wholly) searched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub(crate) enum ContentReason {
    UnsupportedFormat,
    AttachmentTooLarge,
    DownloadFailed,
    ExtractionFailed,
    ExtractionTimeout,
    ExtractionTruncated,
    // An attached message's own attachments, or an archive's entries that were not read.
    NestedPartsNotRead,
    // A cap stopped the extraction (archive/container limits, the worker's memory or CPU).
    ExtractionLimit,
    // The document or archive entry is encrypted.
    Encrypted,
    // The call's content-reading deadline passed.
    DeadlineExceeded,
}

impl ContentReason {
    /// What would lift it, for the answer.
    fn lift(self) -> &'static str {
        match self {
            ContentReason::UnsupportedFormat => {
                "no text extractor for this format (images, binaries, legacy office files, \
                 archives in archives); no setting lifts it: check these attachments yourself"
            }
            ContentReason::ExtractionLimit => {
                "a cap stopped the extraction: raise maxZipEntries/maxZipUncompressedBytes \
                 (archives) or maxContainerEntries/maxContainerUncompressedBytes (DOCX, XLSX); \
                 the worker's memory and CPU limits are fixed"
            }
            ContentReason::Encrypted => {
                "encrypted: read a ZIP entry with its password through get_attachment_content"
            }
            ContentReason::AttachmentTooLarge => "over maxAttachmentInputBytes: raise that limit",
            ContentReason::DownloadFailed => "could not be read from the message: retry",
            ContentReason::ExtractionFailed => {
                "malformed file: open it with get_attachment_content"
            }
            ContentReason::ExtractionTimeout => "extraction ran past 30 s: retry",
            ContentReason::ExtractionTruncated => {
                "text beyond maxExtractedChars was not searched: raise that limit"
            }
            ContentReason::NestedPartsNotRead => {
                "an attached message's own attachments, or archive entries that are encrypted, \
                 nested or without text, were not read: check them with get_attachment_content"
            }
            ContentReason::DeadlineExceeded => {
                "content reading stopped at its 20 s deadline: narrow folders or \
                 maxMessagesPerFolder"
            }
        }
    }
}

/// One attachment whose text was not (wholly) searched.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NotReadAttachmentOut {
    pub(crate) folder: FolderName,
    pub(crate) message_id: String,
    pub(crate) attachment_id: String,
    // Sender-controlled, at most 100 characters (plus `...`).
    pub(crate) name: String,
    // The detected format (`pdf`, `xlsx`, `unknown`, …).
    pub(crate) format: &'static str,
    pub(crate) reason: ContentReason,
}

/// Not-read attachments per reason.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NotReadReasonOut {
    pub(crate) reason: ContentReason,
    pub(crate) count: usize,
    pub(crate) formats: Vec<&'static str>,
    // What would lift it.
    pub(crate) lift: &'static str,
}

/// Attachment text search (beyond the reference, which matches names only).
#[derive(Debug, Default, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ContentCoverageOut {
    // `searched`: some signal can occur in text (every kind but `attachmentNames`); when false
    // no attachment needed reading. `notRead`: attachments that could hold a signal but were
    // not (wholly) read, so absence is not shown; the first 10 are listed.
    pub(crate) searched: bool,
    pub(crate) read: usize,
    pub(crate) not_read: usize,
    pub(crate) not_read_by_reason: Vec<NotReadReasonOut>,
    pub(crate) not_read_attachments: Vec<NotReadAttachmentOut>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InvestigationLimitsOut {
    pub(crate) max_pages_per_folder: u32,
    pub(crate) max_messages_per_folder: u32,
    pub(crate) max_attachment_pages_per_message: u32,
    pub(crate) max_attachments_per_message: u32,
    pub(crate) max_results: u32,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InvestigationCoverageOut {
    /// Every folder's status is COMPLETE.
    pub(crate) complete: bool,
    /// inbox, sentitems, archive — always all three, in this order.
    pub(crate) folders: Vec<FolderCoverageOut>,
    pub(crate) limits: InvestigationLimitsOut,
    pub(crate) attachment_content: ContentCoverageOut,
}

/// The answer of `investigate_documents`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InvestigateOut {
    pub(crate) mailbox: String,
    pub(crate) status: InvestigationStatus,
    /// Matches found before the `maxResults` cut.
    pub(crate) total_matches: usize,
    pub(crate) matches_truncated: bool,
    /// Confirmed matches first, otherwise in discovery order.
    pub(crate) matches: Vec<InvestigationMatchOut>,
    pub(crate) coverage: InvestigationCoverageOut,
    /// `index` or `hybrid` when the local index chose the messages read (absent: live).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) source: Option<&'static str>,
    /// Index and hybrid answers: when the scanned folders were last wholly synced (ISO-8601).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) indexed_through: Option<String>,
    /// More matches than `maxResults`: pass as `cursor` for the next ones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) next_cursor: Option<String>,
}

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
    app: Arc<App>,
    args: InvestigateArgs,
) -> Result<ToolOutput, ToolError> {
    let resolved = app.resolve(&args.mailbox)?;
    let c = &args.criteria;
    // A continuation runs the investigation again and shows the matches after those shown.
    let request = serde_json::Value::from(format!("{c:?}"));
    let binding = cursor::Binding {
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
        crate::tools::read::mode_of(&app, &resolved.alias, c.source.map(Mode::from))?;
    let view = match (mode, index) {
        (Mode::Index | Mode::Hybrid, Some(reader)) => Some(IndexView {
            reader,
            status: reader.status(),
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

/// The serialized name of a unit enum value (the stable code the JSON carries).
fn code<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    }
}

/// The text line: the status, and when coverage is incomplete, which folders and which
/// attachments were not read and what would lift it.
fn summary(out: &InvestigateOut, set: &Signals) -> String {
    let mut line = format!(
        "Mailbox {}: {}, {} match(es) of {}; coverage {}",
        out.mailbox,
        out.status.as_str(),
        out.matches.len(),
        out.total_matches,
        if out.coverage.complete {
            "complete"
        } else {
            "incomplete, absence not shown"
        }
    );
    let folders: Vec<String> = out
        .coverage
        .folders
        .iter()
        .filter(|f| f.status != FolderStatus::Complete)
        .map(|f| {
            let reasons: Vec<String> = f.reasons.iter().map(code).collect();
            format!("{} {}", code(&f.folder), reasons.join("+"))
        })
        .collect();
    if !folders.is_empty() {
        line.push_str(&format!(" ({})", folders.join(", ")));
    }
    let content = &out.coverage.attachment_content;
    if content.searched {
        line.push_str(&format!(
            "; attachment text searched in {}, not read in {}",
            content.read, content.not_read
        ));
        for r in &content.not_read_by_reason {
            line.push_str(&format!(
                "; {} {} ({}): {}",
                r.count,
                code(&r.reason),
                r.formats.join("/"),
                r.lift
            ));
        }
    } else {
        line.push_str("; attachment text not needed (attachmentNames only)");
    }
    if set.has_names() {
        line.push_str(
            "; attachmentNames match case-insensitively the full name or the name without \
             extension (may confirm), or their words in order (candidate only)",
        );
    }
    if out.next_cursor.is_some() {
        line.push_str("; more matches follow: pass nextCursor as cursor");
    }
    line.push('.');
    line
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

/// One attachment listing after the per-message caps.
struct Listing {
    items: Vec<AttachmentMeta>,
    /// Succeeded, not capped, all names valid.
    clean: bool,
    /// Capped or failed: the message may have more attachments than `items`.
    partial: bool,
}

/// The messages a folder's investigation reads, and what their listing proves.
struct Listed {
    /// Each with whether it came from the index (its summary may be older than the message,
    /// which may also be gone).
    messages: Vec<(MessageSummary, bool)>,
    pages: u32,
    scanned: usize,
    /// Why the listing cannot prove absence in the folder; empty when it can.
    reasons: Vec<FolderReason>,
    failed: bool,
}

/// The newest `maxMessagesPerFolder` messages of the folder, live.
async fn list_live(
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
fn join_index(
    view: &IndexView<'_>,
    folder: InvestigationFolder,
    limits: &InvestigationLimitsOut,
    set: &Signals,
    live: Option<Listed>,
    through: &mut Vec<chrono::DateTime<chrono::Utc>>,
) -> Listed {
    let per_folder = limits.max_messages_per_folder.max(1) as usize;
    let index = from_index::list(view, folder, set, per_folder);
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
    let mut messages: Vec<(MessageSummary, bool)> = Vec::new();
    for (m, origin) in live.messages {
        let held = index
            .folder_id
            .as_deref()
            .is_some_and(|f| matches!(view.reader.index().summary_in(f, &m.id), Ok(Some(_))));
        if !clean || !held {
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

async fn scan_folder(
    scan: &mut FolderScan<'_, '_>,
    folder: InvestigationFolder,
    matches: &mut Vec<InvestigationMatchOut>,
) -> FolderCoverageOut {
    let backend = scan.backend;
    let listed = match (scan.mode, &scan.view) {
        (Mode::Index, Some(view)) => {
            join_index(view, folder, scan.limits, scan.set, None, &mut scan.through)
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

/// Applies `maxAttachmentsPerMessage` and records invalid or long names.
fn cap_listing(
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

/// What one message holds of the signals, by where it was found.
struct MessageEvidence {
    in_meta: Vec<bool>,
    in_names: Vec<bool>,
    in_content: Vec<bool>,
    /// (requested name, attachment id, how), each requested name once (strongest first met).
    names: Vec<(String, String, NameMatch)>,
    content_ids: Vec<String>,
}

impl MessageEvidence {
    fn found(&self) -> Vec<bool> {
        union(&union(&self.in_meta, &self.in_names), &self.in_content)
    }
}

/// Matches one message's metadata and attachment names (no content).
fn metadata_evidence(
    message: &MessageSummary,
    body: Option<&str>,
    listing: &Listing,
    set: &Signals,
    reasons: &mut Vec<FolderReason>,
) -> MessageEvidence {
    let mut in_meta = set.none_found();
    let from = message.from.as_ref();
    // The body (fetched per message; a backend flags a body it cut as a gap) is searched
    // rather than only its preview: a signal in a body the preview cuts off is present all the
    // same.
    let body_cut = message.gap == Some(ContentGap::Body);
    let body = body.unwrap_or(message.preview.as_str());
    let fields = [
        (message.subject.as_deref(), false),
        (Some(body), body_cut),
        (from.and_then(|f| f.address.as_deref()), false),
        (from.and_then(|f| f.name.as_deref()), false),
    ];
    for (field, already_cut) in fields {
        let Some(field) = field else { continue };
        let (prefix, cut) = signals::prefix_chars(field, MAX_FIELD_CHARS);
        if cut {
            push_once(reasons, FolderReason::MessageTextTruncated);
        }
        set.scan(&Haystack::new(prefix, cut || already_cut), &mut in_meta);
    }
    let mut in_names = set.none_found();
    let mut names: Vec<(String, String, NameMatch)> = Vec::new();
    for a in &listing.items {
        let Some(name) = a.name.as_deref().filter(|n| !n.trim().is_empty()) else {
            continue;
        };
        let (hay, _) = Haystack::bounded(name, signals::MAX_NAME_CHARS);
        set.scan(&hay, &mut in_names);
        for (requested, how) in set.match_names(name) {
            match names.iter_mut().find(|(r, _, _)| r == requested) {
                Some(entry) if how.is_equality() && !entry.2.is_equality() => {
                    *entry = (requested.to_owned(), a.id.clone(), how);
                }
                Some(_) => {}
                None => names.push((requested.to_owned(), a.id.clone(), how)),
            }
        }
    }
    MessageEvidence {
        in_content: set.none_found(),
        in_meta,
        in_names,
        names,
        content_ids: Vec::new(),
    }
}

/// Matches one message on its metadata and names; `None` when no signal occurs in it.
#[cfg(test)]
fn match_message(
    folder: InvestigationFolder,
    message: &MessageSummary,
    listing: &Listing,
    set: &Signals,
    reasons: &mut Vec<FolderReason>,
) -> Option<InvestigationMatchOut> {
    let evidence = metadata_evidence(message, None, listing, set, reasons);
    into_match(folder, message, listing, set, evidence)
}

/// The match of one message from its evidence; `None` when no signal occurs in it.
fn into_match(
    folder: InvestigationFolder,
    message: &MessageSummary,
    listing: &Listing,
    set: &Signals,
    ev: MessageEvidence,
) -> Option<InvestigationMatchOut> {
    let names: Vec<&str> = ev.names.iter().map(|(r, _, _)| r.as_str()).collect();
    let matched = MatchedSignalsOut::collect(set, &ev.found(), &names);
    if matched.is_empty() {
        return None;
    }
    let mut confirmations = Vec::new();
    if any_kind(set, &ev.in_names, |k| k == signals::Kind::ProposalId) {
        confirmations.push(InvestigationConfirmation::ProposalIdInAttachmentName);
    }
    // Only equality (full name or name without extension) may confirm, never a word match.
    let equal = ev.names.iter().any(|(_, _, how)| how.is_equality());
    if equal && any_kind(set, &ev.in_meta, signals::Kind::is_identity) {
        confirmations.push(InvestigationConfirmation::RequestedAttachmentNameMatch);
    }
    Some(InvestigationMatchOut {
        folder: folder.into(),
        classification: if confirmations.is_empty() {
            Classification::CandidateReview
        } else {
            Classification::Confirmed
        },
        message: project(message, listing),
        matched_signals: matched,
        confirmation_reasons: confirmations,
        name_matches: ev
            .names
            .into_iter()
            .map(|(requested, attachment_id, matched_by)| NameMatchOut {
                requested,
                attachment_id,
                matched_by,
            })
            .collect(),
        content_match_attachment_ids: ev.content_ids,
    })
}

/// Reads attachment text for one call, within its budgets: `maxAttachmentInputBytes` per
/// attachment, `maxExtractedChars` per text, the shared extraction slots, and one deadline for
/// the whole call. Records every attachment it could not wholly read.
struct ContentReader<'a> {
    slots: Arc<tokio::sync::Semaphore>,
    extractor: &'a extract::Extractor,
    max_input_bytes: u64,
    caps: extract::Caps,
    deadline: std::time::Instant,
    coverage: ContentCoverageOut,
}

impl ContentReader<'_> {
    /// Searches the text of `message`'s attachments until every content signal has been found
    /// in the message (then the rest cannot change what the message proves). Returns how many
    /// were read and how many could hold a signal but were not (wholly) read.
    async fn read_message(
        &mut self,
        backend: &Backend,
        folder: InvestigationFolder,
        message: &MessageSummary,
        listing: &Listing,
        set: &Signals,
        ev: &mut MessageEvidence,
    ) -> (usize, usize) {
        let mut read = 0;
        let mut not_read: Vec<(&AttachmentMeta, &'static str, ContentReason)> = Vec::new();
        for a in &listing.items {
            if set.all_content_found(&ev.found()) {
                // Whatever the remaining attachments hold, this message already shows every
                // signal: nothing about absence depends on them.
                not_read.clear();
                break;
            }
            match self.read_one(backend, &message.id, a).await {
                Ok((text, format)) => {
                    let mut found = set.none_found();
                    set.scan(&Haystack::new(&text.text, text.truncated), &mut found);
                    if found.iter().any(|f| *f) {
                        ev.content_ids.push(a.id.clone());
                        ev.in_content = union(&ev.in_content, &found);
                    }
                    if text.truncated {
                        not_read.push((a, format, ContentReason::ExtractionTruncated));
                    } else if text.unread_parts > 0 {
                        not_read.push((a, format, ContentReason::NestedPartsNotRead));
                    } else {
                        read += 1;
                    }
                }
                Err((format, reason)) => not_read.push((a, format, reason)),
            }
        }
        if set.all_content_found(&ev.found()) {
            not_read.clear();
        }
        for (a, format, reason) in &not_read {
            self.record(folder, &message.id, a, format, *reason);
        }
        self.coverage.read += read;
        (read, not_read.len())
    }

    /// The text of one attachment, or the format and why it was not read.
    async fn read_one(
        &self,
        backend: &Backend,
        message_id: &str,
        a: &AttachmentMeta,
    ) -> Result<(Extracted, &'static str), (&'static str, ContentReason)> {
        // The format named with a reason: the declared one until the bytes are sniffed, or the
        // one the worker found it has no extractor for.
        let mut format = pipeline::declared_format(a.name.as_deref(), &a.content_type);
        match self.text_of(backend, message_id, a, &mut format).await {
            Ok(text) => Ok((text, format.as_str())),
            Err(why) => {
                let named = why.unsupported_format().unwrap_or(format);
                Err((named.as_str(), ContentReason::from(why)))
            }
        }
    }

    /// The pipeline for one attachment, `format` updated to what its bytes are once read.
    async fn text_of(
        &self,
        backend: &Backend,
        message_id: &str,
        a: &AttachmentMeta,
        format: &mut extract::Format,
    ) -> Result<Extracted, NotRead> {
        // The declared name and type decide a non-text format without the bytes.
        pipeline::readable(*format)?;
        if std::time::Instant::now() >= self.deadline {
            return Err(NotRead::DeadlineExceeded);
        }
        if a.size > self.max_input_bytes {
            return Err(NotRead::TooLarge);
        }
        let (meta, bytes) =
            pipeline::download(backend, message_id, &a.id, self.max_input_bytes).await?;
        *format = pipeline::sniffed_format(meta.name.as_deref(), &meta.content_type, &bytes);
        pipeline::readable(*format)?;
        // Wait for a slot (an investigation queues behind other extractions rather than
        // failing), but never past the call's deadline.
        Pipeline::new(self.extractor, &self.slots, self.caps)
            .evidence_text(
                Wait::Until(self.deadline),
                *format,
                meta.name,
                meta.content_type,
                bytes,
            )
            .await
    }

    fn record(
        &mut self,
        folder: InvestigationFolder,
        message_id: &str,
        a: &AttachmentMeta,
        format: &'static str,
        reason: ContentReason,
    ) {
        let c = &mut self.coverage;
        c.not_read += 1;
        match c.not_read_by_reason.iter_mut().find(|r| r.reason == reason) {
            Some(r) => {
                r.count += 1;
                push_once(&mut r.formats, format);
            }
            None => c.not_read_by_reason.push(NotReadReasonOut {
                reason,
                count: 1,
                formats: vec![format],
                lift: reason.lift(),
            }),
        }
        if c.not_read_attachments.len() < SHOWN_NOT_READ {
            c.not_read_attachments.push(NotReadAttachmentOut {
                folder: folder.into(),
                message_id: message_id.to_owned(),
                attachment_id: a.id.clone(),
                name: bounded(a.name.as_deref().unwrap_or(""), NOT_READ_NAME_CHARS),
                format,
                reason,
            });
        }
    }
}

/// The investigation's reason for an attachment whose text was not read: the one derivation
/// from the pipeline's reason.
impl From<NotRead> for ContentReason {
    fn from(why: NotRead) -> Self {
        match why {
            NotRead::Unsupported(_) => ContentReason::UnsupportedFormat,
            NotRead::Encrypted(_) => ContentReason::Encrypted,
            NotRead::TooLarge => ContentReason::AttachmentTooLarge,
            NotRead::Limit(_) => ContentReason::ExtractionLimit,
            NotRead::Timeout => ContentReason::ExtractionTimeout,
            NotRead::Failed(_) => ContentReason::ExtractionFailed,
            // No slot in time: an investigation waits up to its deadline, and one that cannot
            // wait at all ran out of it at once.
            NotRead::Busy | NotRead::DeadlineExceeded => ContentReason::DeadlineExceeded,
            NotRead::DownloadFailed => ContentReason::DownloadFailed,
        }
    }
}

fn project(m: &MessageSummary, listing: &Listing) -> InvestigationMessageOut {
    let attachments = listing
        .items
        .iter()
        .take(SHOWN_ATTACHMENTS)
        .map(|a| {
            let name = a.name.as_deref().unwrap_or("");
            InvestigationAttachmentOut {
                id: a.id.clone(),
                name: bounded(name, output::ATTACHMENT_NAME_CHARS),
                name_truncated: name.chars().count() > output::ATTACHMENT_NAME_CHARS,
                content_type: bounded(&a.content_type, output::CONTENT_TYPE_CHARS),
                size: a.size,
                is_inline: a.is_inline,
            }
        })
        .collect();
    InvestigationMessageOut {
        id: m.id.clone(),
        folder_id: m.folder_id.clone(),
        subject: bounded(m.subject.as_deref().unwrap_or(""), output::SUBJECT_CHARS),
        from: m.from.as_ref().map(AddressOut::from_mailbox),
        received_date_time: m.received.map(crate::tools::dates::iso_z),
        is_read: m.is_read,
        has_attachments: m.has_attachments,
        attachment_count: listing.items.len(),
        attachments,
        attachment_names_truncated: listing.partial || listing.items.len() > SHOWN_ATTACHMENTS,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::tools::testutil::{demo_app, message_id};

    async fn investigate(app: &Arc<App>, args: Value) -> Result<Value, ToolError> {
        let args: InvestigateArgs = serde_json::from_value(args).expect("args parse");
        let out = investigate_documents(Arc::clone(app), args).await?;
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
            let past = cursor::Binding {
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

    fn meta(id: &str, name: Option<&str>) -> AttachmentMeta {
        AttachmentMeta {
            id: id.into(),
            name: name.map(str::to_owned),
            content_type: "application/pdf".into(),
            size: 10,
            size_is_estimate: false,
            is_inline: false,
        }
    }

    fn limits(max_attachments: u32) -> InvestigationLimitsOut {
        InvestigationLimitsOut {
            max_pages_per_folder: 10,
            max_messages_per_folder: 100,
            max_attachment_pages_per_message: 5,
            max_attachments_per_message: max_attachments,
            max_results: 25,
        }
    }

    fn signals(json: Value) -> Signals {
        let c: crate::tools::args::InvestigationCriteria =
            serde_json::from_value(json).expect("criteria parse");
        Signals::new(&c.signals())
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

    #[test]
    fn full_name_is_matched_while_the_projection_is_cut() {
        let set = signals(json!({"proposalIds": ["PROP-7001"]}));
        let name = format!("{} PROP-7001.pdf", "x".repeat(400));
        let mut reasons = Vec::new();
        let listing = cap_listing(vec![meta("att-0", Some(&name))], &limits(50), &mut reasons);
        let c = engine::tests::candidate("m1", "no ids here");
        let m = match_message(InvestigationFolder::Inbox, &c, &listing, &set, &mut reasons)
            .expect("matched");
        assert_eq!(m.classification, Classification::Confirmed);
        assert!(m.message.attachments[0].name_truncated);
        assert!(m.message.attachments[0].name.chars().count() <= 303);
        assert_eq!(reasons, [FolderReason::AttachmentNameTruncated]);
    }

    #[test]
    fn signals_never_bridge_fields_and_long_fields_are_flagged() {
        let set = signals(json!({"clients": ["Orchard Bakery Ltd"]}));
        let empty = Listing {
            items: Vec::new(),
            clean: true,
            partial: false,
        };
        let mut c = engine::tests::candidate("m1", "Orchard");
        c.preview = "Bakery Ltd".into();
        let mut reasons = Vec::new();
        assert!(
            match_message(InvestigationFolder::Inbox, &c, &empty, &set, &mut reasons).is_none()
        );
        assert!(reasons.is_empty());

        c.preview = format!("{} Orchard Bakery Ltd", "y ".repeat(40_000));
        let m = match_message(InvestigationFolder::Inbox, &c, &empty, &set, &mut reasons);
        assert!(m.is_none(), "the signal lies beyond the 65,536-char cut");
        assert_eq!(reasons, [FolderReason::MessageTextTruncated]);

        // A metadata-only identity match is a candidate; a keyword alone too.
        c.preview = "Orchard Bakery Ltd renewal".into();
        let mut reasons = Vec::new();
        let m = match_message(InvestigationFolder::Archive, &c, &empty, &set, &mut reasons)
            .expect("matched");
        assert_eq!(m.classification, Classification::CandidateReview);
        assert_eq!(m.folder, FolderName::Archive);
        let kw = signals(json!({"keywords": ["renewal"]}));
        let m = match_message(InvestigationFolder::Inbox, &c, &empty, &kw, &mut reasons)
            .expect("matched");
        assert_eq!(m.classification, Classification::CandidateReview);
    }

    #[test]
    fn a_partial_proposal_id_in_a_name_is_not_a_confirmation() {
        let set = signals(json!({"proposalIds": ["PROP-1001"]}));
        let mut reasons = Vec::new();
        let listing = cap_listing(
            vec![meta("att-0", Some("PROP-10012-draft.pdf"))],
            &limits(50),
            &mut reasons,
        );
        let c = engine::tests::candidate("m1", "draft");
        assert!(
            match_message(InvestigationFolder::Inbox, &c, &listing, &set, &mut reasons).is_none()
        );
    }

    /// Every worker failure keeps the content reason it had before the extraction pipeline
    /// (issue 27, item 8); the table is the old mapping, written out.
    #[test]
    fn every_extraction_failure_keeps_its_content_reason() {
        use crate::extract::{ExtractError as E, SlotError as S, ZipError as Z};
        for e in pipeline::tests::every_slot_error() {
            let want = match &e {
                S::TimedOut => ContentReason::ExtractionTimeout,
                S::LimitExceeded | S::Extract(E::Zip(Z::TooManyEntries | Z::TooLarge)) => {
                    ContentReason::ExtractionLimit
                }
                S::Stopped | S::Extract(E::Failed | E::Zip(Z::Invalid | Z::EntryNotFound)) => {
                    ContentReason::ExtractionFailed
                }
                S::Extract(E::Unsupported(_) | E::Zip(Z::Nested)) => {
                    ContentReason::UnsupportedFormat
                }
                S::Extract(
                    E::Encrypted | E::Zip(Z::Encrypted | Z::PasswordIncorrect | Z::Unsupported),
                ) => ContentReason::Encrypted,
            };
            let label = format!("{e:?}");
            assert_eq!(ContentReason::from(NotRead::from(e)), want, "{label}");
        }
        // Before the worker: the deadline, the input cap, the download.
        for (why, want) in [
            (NotRead::DeadlineExceeded, ContentReason::DeadlineExceeded),
            (NotRead::TooLarge, ContentReason::AttachmentTooLarge),
            (NotRead::DownloadFailed, ContentReason::DownloadFailed),
        ] {
            assert_eq!(ContentReason::from(why), want);
        }
    }
}
