//! The answer of `investigate_documents`: its serialized types (status, classifications,
//! per-folder coverage and reasons, attachments whose text was not read, limits) and its one
//! text line.
//!
//! Invariant: these types are the tool's wire format and schema, so field names, serde renames,
//! `skip_serializing_if` and variant order are the contract (variants carry `//` comments where
//! a `///` would change the generated schema). Nothing here reads mail: the orchestration in
//! [`super`] and its scan modules build these values, the tool table serves their schema.

use schemars::JsonSchema;
use serde::Serialize;

use crate::tools::args::InvestigationFolder;
use crate::tools::evidence::signals::Signals;
use crate::tools::evidence::{MatchedSignalsOut, NameMatchOut};
use crate::tools::output::AddressOut;

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
    pub(super) fn is_failure(self) -> bool {
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
    pub(super) fn lift(self) -> &'static str {
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

/// The serialized name of a unit enum value (the stable code the JSON carries).
fn code<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    }
}

/// The text line: the status, and when coverage is incomplete, which folders and which
/// attachments were not read and what would lift it.
pub(super) fn summary(out: &InvestigateOut, set: &Signals) -> String {
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
