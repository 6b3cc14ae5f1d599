//! `inspect_attachment_evidence`: checks one exact attachment against the caller's signals
//! (reference §5.10) and answers with evidence metadata only — a SHA-256 and sizes, which
//! signals matched where, stable reason codes and coverage; never the text or the bytes.
//!
//! Pipeline, each failure answering at once with its reason: metadata listing → exact id →
//! metadata checks → one download under `maxAttachmentInputBytes` → size checks and SHA-256 →
//! bounded text extraction → matching. When extraction cannot answer (unsupported format — PDF,
//! DOCX, XLSX and ZIP in this version —, timeout, failure, busy, truncation, empty text) the
//! status is `VALIDATION_INCOMPLETE`, never `NOT_CONFIRMED`; a requested proposal id in the
//! attachment *name* still confirms, because that check needs no text — but such an answer
//! never claims coverage: `coverage.contentRead` is false, `contentNotRead` says why and what
//! lifts it, and the text line says "by the attachment name only".
//!
//! Status: `CONFIRMED` when a confirmation reason holds; else `VALIDATION_INCOMPLETE` when any
//! reason says part of the pipeline did not complete; else `CANDIDATE_REVIEW` when anything
//! matched; else `NOT_CONFIRMED` (reached only after the whole pipeline, or for an attachment id
//! the complete listing does not contain).
//!
//! Mailgate differences from the reference: the listing cap is a fixed 1000 items rather than
//! `maxBatchSize + 1` (reference §13.12: tying it to the batch size made messages with many
//! attachments uninspectable); the backend hands over decoded bytes, so the reference's Base64
//! checks become the size checks; `EXTRACTION_BUSY` is reported as such (retryable) instead of
//! as `EXTRACTION_FAILED`; `keywords` match the name and the text but only make a candidate.

use schemars::JsonSchema;
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::signals::{self, Haystack, Signals};
use super::{MatchedSignalsOut, NameMatchOut, any_kind, push_once, union};
use crate::backends::AttachmentMeta;
use crate::extract::pipeline::{self, NotRead, Wait};
use crate::tools::CallScope;
use crate::tools::args::EvidenceArgs;
use crate::tools::output::{self, bounded};
use crate::tools::{App, ErrorCode, ToolError, ToolOutput};

/// Most attachments one metadata listing may hold before the listing counts as incomplete.
const LISTING_CAP: usize = 1000;
/// Longest attachment id accepted from a listing (ids are 1..=512 chars in every input).
const MAX_ID_CHARS: usize = 512;
/// Largest integer a JSON client can hold exactly (the reference's "safe integer").
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub(crate) enum EvidenceStatus {
    /// A confirmation reason holds (see `confirmationReasons`).
    Confirmed,
    /// Something matched, but nothing that confirms: a person must look.
    CandidateReview,
    /// The whole pipeline ran and no signal occurs (or the attachment id is not in the message).
    NotConfirmed,
    /// Part of the pipeline could not complete (see `reasons`): absence is not shown.
    ValidationIncomplete,
}

impl EvidenceStatus {
    fn as_str(self) -> &'static str {
        match self {
            EvidenceStatus::Confirmed => "CONFIRMED",
            EvidenceStatus::CandidateReview => "CANDIDATE_REVIEW",
            EvidenceStatus::NotConfirmed => "NOT_CONFIRMED",
            EvidenceStatus::ValidationIncomplete => "VALIDATION_INCOMPLETE",
        }
    }
}

/// Why the pipeline stopped or is incomplete (stable codes, reference §5.10).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub(crate) enum EvidenceReason {
    AttachmentListFailed,
    AttachmentListIncomplete,
    AttachmentNotFound,
    AttachmentIdDuplicate,
    AttachmentMetadataInvalid,
    AttachmentTooLarge,
    DownloadFailed,
    DownloadMetadataInvalid,
    SizeMismatch,
    UnsupportedFormat,
    ExtractionTimeout,
    ExtractionFailed,
    ExtractionBusy,
    ExtractionTruncated,
    ExtractionEmpty,
    /// A cap stopped the extraction: an archive or container limit, or the worker's memory or
    /// CPU limit.
    ExtractionLimit,
    /// The document or archive entry is encrypted.
    Encrypted,
    /// Parts of the file were not read: archive entries (hidden names, encrypted, nested
    /// archives, formats without text) or an embedded message's attachments.
    PartsNotRead,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub(crate) enum EvidenceConfirmation {
    /// A requested proposal id occurs in the attachment's name.
    ProposalIdInAttachmentName,
    /// The name equals a requested attachment name and an identity signal (proposal id,
    /// client, insurer) occurs in the extracted text.
    RequestedAttachmentNameAndIdentityInText,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EvidenceAttachmentOut {
    pub(crate) id: String,
    /// Sender-controlled, at most 300 characters (plus `...`).
    pub(crate) name: String,
    pub(crate) name_truncated: bool,
    pub(crate) content_type: String,
    pub(crate) declared_size_bytes: u64,
    /// Length of the downloaded, decoded bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) actual_size_bytes: Option<u64>,
    /// Lower-case hex SHA-256 of the downloaded bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) sha256: Option<String>,
    /// `text`, `html` or `eml` when text was extracted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) extractor: Option<&'static str>,
}

#[derive(Debug, Default, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ListingCoverageOut {
    pub(crate) pages_scanned: u32,
    pub(crate) items_scanned: usize,
    pub(crate) complete: bool,
}

#[derive(Debug, Default, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DownloadCoverageOut {
    pub(crate) attempted: bool,
    pub(crate) decoded: bool,
}

#[derive(Debug, Default, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ExtractionCoverageOut {
    pub(crate) attempted: bool,
    /// All of the text was read.
    pub(crate) complete: bool,
    /// The format has a text extractor in this version.
    pub(crate) supported: bool,
    /// Present when text was extracted: whether `maxExtractedChars` cut it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) truncated: Option<bool>,
    /// The detected format (`text`, `csv`, `json`, `xml`, `html`, `eml`, `pdf`, `docx`,
    /// `xlsx`, `zip`, `unknown`) once the bytes were seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) format: Option<&'static str>,
}

#[derive(Debug, Default, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EvidenceCoverageOut {
    /// The listing was complete and either the id is absent from it, or the attachment was
    /// downloaded, fully extracted and no reason was recorded.
    pub(crate) complete: bool,
    /// False: a `CONFIRMED` rests on the name; `contentNotRead` says why.
    pub(crate) content_read: bool,
    // Why the text was not (wholly) searched and what would lift it; absent when it was, or
    // when the attachment id is not in the message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) content_not_read: Option<String>,
    pub(crate) listing: ListingCoverageOut,
    pub(crate) download: DownloadCoverageOut,
    pub(crate) extraction: ExtractionCoverageOut,
}

/// The answer of `inspect_attachment_evidence`. No text, no bytes, no Base64.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EvidenceOut {
    pub(crate) mailbox: String,
    pub(crate) message_id: String,
    pub(crate) attachment_id: String,
    pub(crate) status: EvidenceStatus,
    /// Present once the attachment was found in the listing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) attachment: Option<EvidenceAttachmentOut>,
    pub(crate) matched_signals: MatchedSignalsOut,
    pub(crate) confirmation_reasons: Vec<EvidenceConfirmation>,
    pub(crate) reasons: Vec<EvidenceReason>,
    pub(crate) coverage: EvidenceCoverageOut,
    // How requested attachment names matched; absent when none did.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) name_matches: Vec<NameMatchOut>,
}

pub(crate) async fn inspect_attachment_evidence(
    app: CallScope,
    args: EvidenceArgs,
) -> Result<ToolOutput, ToolError> {
    let resolved = app.resolve(&args.mailbox)?;
    let requested = args.signals();
    let set = Signals::new(&requested);
    // garde already demands one signal; a signal of punctuation only can never match, so a
    // "not found" for it would be a claim without evidence.
    if requested.is_empty() || !set.any_matchable() {
        return Err(ToolError::new(
            ErrorCode::InvalidArgument,
            "no signal contains a letter or a digit, so none could ever match",
        ));
    }
    let mut run = Inspection::new(resolved.alias.to_string(), &args);
    run.pipeline(&app, resolved.backend, &args, &set).await;
    let out = run.finish();
    let mut summary = format!(
        "Attachment {} of message {}: {}",
        args.attachment_id,
        args.message_id,
        out.status.as_str()
    );
    if out.status == EvidenceStatus::Confirmed && !out.coverage.content_read {
        summary.push_str(" by the attachment name only");
    }
    summary.push_str(if out.coverage.complete {
        "; coverage complete"
    } else {
        "; coverage incomplete"
    });
    if let Some(why) = &out.coverage.content_not_read {
        summary.push_str("; content not read: ");
        summary.push_str(why);
    }
    if set.has_names() {
        summary.push_str(
            "; attachmentNames match case-insensitively the full name or the name without \
             extension (may confirm), or their words in order (candidate only)",
        );
    }
    summary.push('.');
    Ok(ToolOutput::untrusted(summary, out))
}

/// The evidence being gathered; [`Inspection::finish`] derives the status and coverage.
struct Inspection {
    out: EvidenceOut,
    not_found: bool,
}

/// What matching produced.
struct Matches {
    matched: MatchedSignalsOut,
    confirmations: Vec<EvidenceConfirmation>,
    /// (requested name, how it matched).
    names: Vec<(String, signals::NameMatch)>,
}

impl Inspection {
    fn new(mailbox: String, args: &EvidenceArgs) -> Self {
        Self {
            out: EvidenceOut {
                mailbox,
                message_id: args.message_id.clone(),
                attachment_id: args.attachment_id.clone(),
                status: EvidenceStatus::ValidationIncomplete,
                attachment: None,
                matched_signals: MatchedSignalsOut::default(),
                confirmation_reasons: Vec::new(),
                reasons: Vec::new(),
                coverage: EvidenceCoverageOut::default(),
                name_matches: Vec::new(),
            },
            not_found: false,
        }
    }

    fn reason(&mut self, r: EvidenceReason) {
        push_once(&mut self.out.reasons, r);
    }

    async fn pipeline(
        &mut self,
        app: &App,
        backend: &crate::backends::Backend,
        args: &EvidenceArgs,
        set: &Signals,
    ) {
        // 1. Metadata listing.
        let Ok(items) = backend.list_attachments(&args.message_id).await else {
            self.reason(EvidenceReason::AttachmentListFailed);
            return;
        };
        let listing = &mut self.out.coverage.listing;
        listing.pages_scanned = 1;
        listing.items_scanned = items.len().min(LISTING_CAP);
        if items
            .iter()
            .any(|a| a.id.is_empty() || a.id.chars().count() > MAX_ID_CHARS)
        {
            self.reason(EvidenceReason::AttachmentListFailed);
            return;
        }
        if items.len() > LISTING_CAP {
            self.reason(EvidenceReason::AttachmentListIncomplete);
            return;
        }
        listing.complete = true;

        // 2. Exactly one item with the requested id.
        let mut same = items.iter().filter(|a| a.id == args.attachment_id);
        let Some(meta) = same.next() else {
            self.not_found = true;
            self.reason(EvidenceReason::AttachmentNotFound);
            return;
        };
        if same.next().is_some() {
            self.reason(EvidenceReason::AttachmentIdDuplicate);
            return;
        }
        let raw_name = meta.name.clone().unwrap_or_default();
        let name_chars = raw_name.chars().count();
        self.out.attachment = Some(EvidenceAttachmentOut {
            id: meta.id.clone(),
            name: bounded(&raw_name, output::ATTACHMENT_NAME_CHARS),
            name_truncated: name_chars > output::ATTACHMENT_NAME_CHARS,
            content_type: bounded(&meta.content_type, output::CONTENT_TYPE_CHARS),
            declared_size_bytes: meta.size,
            actual_size_bytes: None,
            sha256: None,
            extractor: None,
        });

        // 3. Metadata checks.
        if raw_name.trim().is_empty()
            || name_chars > signals::MAX_NAME_CHARS
            || meta.content_type.trim().is_empty()
            || meta.size > MAX_SAFE_INTEGER
        {
            self.reason(EvidenceReason::AttachmentMetadataInvalid);
            return;
        }
        let max = app.config.limits.max_attachment_input_bytes;
        if meta.size > max {
            self.reason(EvidenceReason::AttachmentTooLarge);
            return;
        }

        // 4. One download, whose metadata must agree with the listing.
        self.out.coverage.download.attempted = true;
        let (downloaded, bytes) =
            match pipeline::download(backend, &args.message_id, &args.attachment_id, max).await {
                Ok(pair) => pair,
                Err(why) => {
                    self.reason(why.into());
                    return;
                }
            };
        if !same_metadata(meta, &downloaded) {
            self.reason(EvidenceReason::DownloadMetadataInvalid);
            return;
        }

        // 5. Sizes and digest.
        self.out.coverage.download.decoded = true;
        let actual = bytes.len() as u64;
        if let Some(att) = &mut self.out.attachment {
            att.actual_size_bytes = Some(actual);
            att.sha256 = Some(hex::encode(Sha256::digest(&bytes)));
        }
        if actual > max {
            self.reason(EvidenceReason::AttachmentTooLarge);
            return;
        }
        if actual != downloaded.size || (!meta.size_is_estimate && actual != meta.size) {
            self.reason(EvidenceReason::SizeMismatch);
            return;
        }

        // 6. Text extraction (bounded, off the executor, under the extraction slots).
        let extraction = &mut self.out.coverage.extraction;
        extraction.attempted = true;
        let format = pipeline::sniffed_format(Some(&raw_name), &meta.content_type, &bytes);
        extraction.format = Some(format.as_str());
        let name_hay = Haystack::new(&raw_name, false);
        let result = crate::tools::read::extraction_pipeline(app)
            .evidence_text(
                Wait::No,
                format,
                Some(raw_name.clone()),
                meta.content_type.clone(),
                bytes,
            )
            .await;
        let text = match result {
            Ok(extracted) => {
                extraction.supported = true;
                extraction.truncated = Some(extracted.truncated);
                extraction.complete = !extracted.truncated && extracted.unread_parts == 0;
                if let Some(att) = &mut self.out.attachment {
                    att.extractor = Some(extracted.extractor);
                }
                if extracted.truncated {
                    self.reason(EvidenceReason::ExtractionTruncated);
                }
                if extracted.unread_parts > 0 {
                    self.reason(EvidenceReason::PartsNotRead);
                }
                if extracted.text.trim().is_empty() {
                    self.reason(EvidenceReason::ExtractionEmpty);
                    None
                } else {
                    Some(extracted)
                }
            }
            Err(why) => {
                let reason = EvidenceReason::from(why);
                extraction.supported = reason != EvidenceReason::UnsupportedFormat;
                self.reason(reason);
                None
            }
        };

        // 7. Matching: the name always, the text when there is one.
        let text_hay = text.map(|t| Haystack::new(&t.text, t.truncated));
        let m = match_signals(set, &raw_name, &name_hay, text_hay.as_ref());
        self.out.matched_signals = m.matched;
        self.out.confirmation_reasons = m.confirmations;
        self.out.name_matches = m
            .names
            .into_iter()
            .map(|(requested, matched_by)| NameMatchOut {
                requested,
                attachment_id: args.attachment_id.clone(),
                matched_by,
            })
            .collect();
    }

    fn finish(mut self) -> EvidenceOut {
        let out = &mut self.out;
        out.status = if self.not_found {
            EvidenceStatus::NotConfirmed
        } else if !out.confirmation_reasons.is_empty() {
            EvidenceStatus::Confirmed
        } else if !out.reasons.is_empty() {
            EvidenceStatus::ValidationIncomplete
        } else if !out.matched_signals.is_empty() {
            EvidenceStatus::CandidateReview
        } else {
            EvidenceStatus::NotConfirmed
        };
        let c = &out.coverage;
        let content_read = c.download.decoded && c.extraction.complete && out.reasons.is_empty();
        out.coverage.complete = c.listing.complete && (self.not_found || content_read);
        out.coverage.content_read = content_read;
        if !content_read && !self.not_found {
            out.coverage.content_not_read = Some(not_read_why(&out.reasons));
        }
        self.out
    }
}

/// The download describes the listed attachment: same id, same name (normalised equality),
/// same content type (case-insensitive).
fn same_metadata(listed: &AttachmentMeta, downloaded: &AttachmentMeta) -> bool {
    let name = |a: &AttachmentMeta| a.name.as_deref().and_then(signals::name_key);
    listed.id == downloaded.id
        && name(listed).is_some()
        && name(listed) == name(downloaded)
        && listed
            .content_type
            .trim()
            .eq_ignore_ascii_case(downloaded.content_type.trim())
}

/// Why the text was not (wholly) searched, and what would lift it, from the recorded reasons.
fn not_read_why(reasons: &[EvidenceReason]) -> String {
    let why: Vec<&str> = reasons
        .iter()
        .map(|r| match r {
            EvidenceReason::AttachmentListFailed | EvidenceReason::AttachmentListIncomplete => {
                "the message's attachment listing failed or was cut (retry)"
            }
            EvidenceReason::AttachmentNotFound => "no attachment with this id",
            EvidenceReason::AttachmentIdDuplicate => "the attachment id is not unique",
            EvidenceReason::AttachmentMetadataInvalid => {
                "the attachment's name, type or size is invalid"
            }
            EvidenceReason::AttachmentTooLarge => "over maxAttachmentInputBytes (raise that limit)",
            EvidenceReason::DownloadFailed | EvidenceReason::DownloadMetadataInvalid => {
                "the download failed or disagreed with the listing (retry)"
            }
            EvidenceReason::SizeMismatch => "the downloaded size differs from the declared one",
            EvidenceReason::UnsupportedFormat => {
                "no text extractor for this format (images, binaries, legacy office files, \
                 archives in archives); no setting lifts it"
            }
            EvidenceReason::ExtractionLimit => {
                "a cap stopped the extraction (maxZipEntries, maxZipUncompressedBytes, \
                 maxContainerEntries, maxContainerUncompressedBytes, or the worker's memory/CPU \
                 limit): raise the named limit"
            }
            EvidenceReason::Encrypted => {
                "encrypted: read a ZIP entry with its password through get_attachment_content"
            }
            EvidenceReason::PartsNotRead => {
                "some archive entries or embedded attachments were not read (get_attachment_content \
                 lists them)"
            }
            EvidenceReason::ExtractionTimeout => "extraction ran past its time limit (retry)",
            EvidenceReason::ExtractionFailed => "the file could not be parsed",
            EvidenceReason::ExtractionBusy => "all extraction slots were busy (retry)",
            EvidenceReason::ExtractionTruncated => {
                "text beyond maxExtractedChars was not searched (raise that limit)"
            }
            EvidenceReason::ExtractionEmpty => "the file holds no text",
        })
        .collect();
    if why.is_empty() {
        "the pipeline did not reach the text".to_owned()
    } else {
        why.join("; ")
    }
}

/// The evidence reason for an attachment whose text was not read: the one derivation from the
/// pipeline's reason.
impl From<NotRead> for EvidenceReason {
    fn from(why: NotRead) -> Self {
        match why {
            NotRead::Unsupported(_) => EvidenceReason::UnsupportedFormat,
            NotRead::Encrypted(_) => EvidenceReason::Encrypted,
            NotRead::TooLarge => EvidenceReason::AttachmentTooLarge,
            NotRead::Limit(_) => EvidenceReason::ExtractionLimit,
            // A deadline is the call's clock running out, as a timeout is the worker's.
            NotRead::Timeout | NotRead::DeadlineExceeded => EvidenceReason::ExtractionTimeout,
            NotRead::Failed(_) => EvidenceReason::ExtractionFailed,
            NotRead::Busy => EvidenceReason::ExtractionBusy,
            NotRead::DownloadFailed => EvidenceReason::DownloadFailed,
        }
    }
}

/// Proposal ids and keywords against the name; proposal ids, clients, insurers and keywords
/// against the text; requested names by [`Signals::match_names`].
fn match_signals(
    set: &Signals,
    raw_name: &str,
    name_hay: &Haystack,
    text_hay: Option<&Haystack>,
) -> Matches {
    let mut in_name = set.none_found();
    set.scan(name_hay, &mut in_name);
    // Only identifiers and keywords count in a name (a client's name in a file name proves
    // little); reference §5.10 step 7.
    for (i, f) in in_name.iter_mut().enumerate() {
        if !matches!(
            set.kind(i),
            signals::Kind::ProposalId | signals::Kind::Keyword
        ) {
            *f = false;
        }
    }
    let mut in_text = set.none_found();
    if let Some(hay) = text_hay {
        set.scan(hay, &mut in_text);
    }
    let names = set.match_names(raw_name);
    // Only equality (full name or name without extension) may confirm, never a word match.
    let equal = names.iter().any(|(_, how)| how.is_equality());
    let mut confirmations = Vec::new();
    if any_kind(set, &in_name, |k| k == signals::Kind::ProposalId) {
        confirmations.push(EvidenceConfirmation::ProposalIdInAttachmentName);
    }
    if equal && any_kind(set, &in_text, signals::Kind::is_identity) {
        confirmations.push(EvidenceConfirmation::RequestedAttachmentNameAndIdentityInText);
    }
    let listed: Vec<&str> = names.iter().map(|(n, _)| *n).collect();
    Matches {
        matched: MatchedSignalsOut::collect(set, &union(&in_name, &in_text), &listed),
        confirmations,
        names: names
            .into_iter()
            .map(|(n, how)| (n.to_owned(), how))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::tools::testutil::{demo_app, message_id, operator};

    async fn inspect(app: &std::sync::Arc<App>, args: Value) -> Result<Value, ToolError> {
        let args: EvidenceArgs = serde_json::from_value(args).expect("args parse");
        let out = inspect_attachment_evidence(operator(app), args).await?;
        assert!(out.untrusted, "evidence is framed untrusted");
        Ok(out.structured)
    }

    /// The attachment id of the attachment called `name` in demo message `key`.
    async fn attachment_id(
        app: &std::sync::Arc<App>,
        mailbox: &str,
        key: &str,
        name: &str,
    ) -> String {
        let scope = operator(app);
        let r = scope.resolve(mailbox).expect("alias");
        r.backend
            .list_attachments(&message_id(key))
            .await
            .expect("listing")
            .into_iter()
            .find(|a| a.name.as_deref() == Some(name))
            .expect("attachment present")
            .id
    }

    fn strings(v: &Value) -> Vec<&str> {
        v.as_array()
            .expect("array")
            .iter()
            .map(|s| s.as_str().expect("string"))
            .collect()
    }

    /// No key anywhere in the answer carries content.
    fn assert_no_content(v: &Value) {
        match v {
            Value::Object(map) => {
                for (k, inner) in map {
                    assert!(
                        !["text", "base64", "body", "bodyPreview", "content"].contains(&k.as_str()),
                        "{k} in {v}"
                    );
                    assert_no_content(inner);
                }
            }
            Value::Array(items) => items.iter().for_each(assert_no_content),
            _ => {}
        }
    }

    #[tokio::test]
    async fn csv_keyword_present_is_candidate_and_absent_is_not_confirmed() {
        let demo = demo_app();
        let aid = attachment_id(&demo.app, "finance", "csv-ledger", "ledger-2026-06.csv").await;
        let mid = message_id("csv-ledger");
        let hit = inspect(
            &demo.app,
            json!({"mailbox": "finance", "messageId": mid, "attachmentId": aid,
                   "keywords": ["Orchard Bakery Ltd", "xylophone"]}),
        )
        .await
        .expect("answers");
        assert_eq!(hit["status"], "CANDIDATE_REVIEW");
        assert_eq!(
            strings(&hit["matchedSignals"]["keywords"]),
            ["Orchard Bakery Ltd"]
        );
        assert_eq!(strings(&hit["reasons"]), Vec::<&str>::new());
        assert_eq!(hit["coverage"]["complete"], true);
        assert_eq!(hit["attachment"]["extractor"], "text");
        let sha = hit["attachment"]["sha256"].as_str().expect("sha256");
        let scope = demo.operator();
        let r = scope.resolve("finance").expect("alias");
        let (_, bytes) = r
            .backend
            .attachment(&mid, &aid, u64::MAX)
            .await
            .expect("bytes");
        assert_eq!(sha, hex::encode(Sha256::digest(&bytes)));
        assert_eq!(hit["attachment"]["actualSizeBytes"], bytes.len() as u64);
        assert_no_content(&hit);

        let miss = inspect(
            &demo.app,
            json!({"mailbox": "finance", "messageId": mid, "attachmentId": aid,
                   "keywords": ["xylophone"], "proposalIds": ["PROP-3107"]}),
        )
        .await
        .expect("answers");
        assert_eq!(miss["status"], "NOT_CONFIRMED");
        assert_eq!(miss["coverage"]["complete"], true);
        assert!(
            miss["confirmationReasons"]
                .as_array()
                .expect("array")
                .is_empty()
        );
    }

    #[tokio::test]
    async fn exact_name_plus_identity_in_text_confirms_and_client_in_text_alone_is_candidate() {
        let demo = demo_app();
        let aid = attachment_id(&demo.app, "finance", "csv-ledger", "ledger-2026-06.csv").await;
        let mid = message_id("csv-ledger");
        let strong = inspect(
            &demo.app,
            json!({"mailbox": "finance", "messageId": mid, "attachmentId": aid,
                   "attachmentNames": ["LEDGER-2026-06.csv"], "clients": ["Harbour Lights Café Ltd"]}),
        )
        .await
        .expect("answers");
        assert_eq!(strong["status"], "CONFIRMED");
        assert_eq!(
            strings(&strong["confirmationReasons"]),
            ["REQUESTED_ATTACHMENT_NAME_AND_IDENTITY_IN_TEXT"]
        );
        assert_eq!(
            strings(&strong["matchedSignals"]["attachmentNames"]),
            ["LEDGER-2026-06.csv"]
        );

        let content_only = inspect(
            &demo.app,
            json!({"mailbox": "finance", "messageId": mid, "attachmentId": aid,
                   "clients": ["Harbour Lights Café Ltd"]}),
        )
        .await
        .expect("answers");
        assert_eq!(content_only["status"], "CANDIDATE_REVIEW");

        let name_only = inspect(
            &demo.app,
            json!({"mailbox": "finance", "messageId": mid, "attachmentId": aid,
                   "attachmentNames": ["ledger-2026-06.csv"], "insurers": ["Northwind Mutual"]}),
        )
        .await
        .expect("answers");
        assert_eq!(name_only["status"], "CANDIDATE_REVIEW");
        assert!(
            name_only["confirmationReasons"]
                .as_array()
                .expect("array")
                .is_empty()
        );
    }

    #[tokio::test]
    async fn a_pdf_is_read_and_a_proposal_id_in_its_name_confirms() {
        let demo = demo_app();
        let aid = attachment_id(
            &demo.app,
            "personal",
            "orchard-1",
            "PROP-1001-orchard-bakery.pdf",
        )
        .await;
        let mid = message_id("orchard-1");
        // The client is in the PDF's text: a content match over a wholly read file.
        let read = inspect(
            &demo.app,
            json!({"mailbox": "personal", "messageId": mid, "attachmentId": aid,
                   "clients": ["Orchard Bakery Ltd"]}),
        )
        .await
        .expect("answers");
        assert_eq!(read["status"], "CANDIDATE_REVIEW", "{read}");
        assert!(strings(&read["reasons"]).is_empty(), "{read}");
        assert_eq!(read["coverage"]["extraction"]["supported"], true);
        assert_eq!(read["coverage"]["extraction"]["format"], "pdf");
        assert_eq!(read["attachment"]["extractor"], "pdf");
        assert_eq!(read["coverage"]["complete"], true);
        assert!(read["attachment"]["sha256"].is_string());

        let by_name = inspect(
            &demo.app,
            json!({"mailbox": "personal", "messageId": mid, "attachmentId": aid,
                   "proposalIds": ["PROP-1001"]}),
        )
        .await
        .expect("answers");
        assert_eq!(by_name["status"], "CONFIRMED");
        assert_eq!(
            strings(&by_name["confirmationReasons"]),
            ["PROPOSAL_ID_IN_ATTACHMENT_NAME"]
        );
        assert_no_content(&by_name);

        // A longer id in the request is neither the id in the name nor in the text.
        let longer = inspect(
            &demo.app,
            json!({"mailbox": "personal", "messageId": mid, "attachmentId": aid,
                   "proposalIds": ["PROP-10012"]}),
        )
        .await
        .expect("answers");
        assert_eq!(longer["status"], "NOT_CONFIRMED", "{longer}");
        assert_eq!(longer["coverage"]["complete"], true);
    }

    #[tokio::test]
    async fn an_image_is_validation_incomplete_never_not_confirmed() {
        let demo = demo_app();
        let aid = attachment_id(&demo.app, "personal", "inline-lunch", "team-lunch.png").await;
        let out = inspect(
            &demo.app,
            json!({"mailbox": "personal", "messageId": message_id("inline-lunch"),
                   "attachmentId": aid, "keywords": ["lunch"]}),
        )
        .await
        .expect("answers");
        assert_eq!(out["status"], "VALIDATION_INCOMPLETE", "{out}");
        assert_eq!(strings(&out["reasons"]), ["UNSUPPORTED_FORMAT"]);
        assert_eq!(out["coverage"]["extraction"]["supported"], false);
        assert_eq!(out["coverage"]["complete"], false);
    }

    #[tokio::test]
    async fn unknown_attachment_id_is_not_confirmed_with_complete_coverage() {
        let demo = demo_app();
        let out = inspect(
            &demo.app,
            json!({"mailbox": "personal", "messageId": message_id("orchard-1"),
                   "attachmentId": "att-99", "proposalIds": ["PROP-1001"]}),
        )
        .await
        .expect("answers");
        assert_eq!(out["status"], "NOT_CONFIRMED");
        assert_eq!(strings(&out["reasons"]), ["ATTACHMENT_NOT_FOUND"]);
        assert_eq!(out["coverage"]["complete"], true);
        assert_eq!(out["coverage"]["download"]["attempted"], false);
        assert!(out.get("attachment").is_none());
    }

    #[tokio::test]
    async fn failures_are_validation_incomplete_with_stable_reasons() {
        let demo = demo_app();
        // A message id the mailbox never issued: the listing fails, nothing is claimed.
        let bad = inspect(
            &demo.app,
            json!({"mailbox": "personal", "messageId": "bm90LWEtbWVzc2FnZQ",
                   "attachmentId": "att-0", "keywords": ["x"]}),
        )
        .await
        .expect("answers");
        assert_eq!(bad["status"], "VALIDATION_INCOMPLETE");
        assert_eq!(strings(&bad["reasons"]), ["ATTACHMENT_LIST_FAILED"]);
        assert_eq!(bad["coverage"]["complete"], false);

        // Over maxAttachmentInputBytes (1 MiB in the demo): refused before any download.
        let aid = attachment_id(
            &demo.app,
            "support",
            "oversized",
            crate::demo::corpus::OVERSIZED_ATTACHMENT_NAME,
        )
        .await;
        let big = inspect(
            &demo.app,
            json!({"mailbox": "support", "messageId": message_id("oversized"),
                   "attachmentId": aid, "keywords": ["survey"]}),
        )
        .await
        .expect("answers");
        assert_eq!(big["status"], "VALIDATION_INCOMPLETE");
        assert_eq!(strings(&big["reasons"]), ["ATTACHMENT_TOO_LARGE"]);
        assert_eq!(big["coverage"]["download"]["attempted"], false);
    }

    #[tokio::test]
    async fn unknown_alias_fails_before_anything_else() {
        let demo = demo_app();
        let err = inspect(
            &demo.app,
            json!({"mailbox": "nobody", "messageId": "x", "attachmentId": "y",
                   "attachmentNames": ["--"]}),
        )
        .await
        .expect_err("refused");
        assert_eq!(err.code, ErrorCode::UnknownMailbox);
        let unmatchable = inspect(
            &demo.app,
            json!({"mailbox": "personal", "messageId": "x", "attachmentId": "y",
                   "keywords": ["--"]}),
        )
        .await
        .expect_err("refused");
        assert_eq!(unmatchable.code, ErrorCode::InvalidArgument);
    }

    /// Every worker failure keeps the evidence reason it had before the extraction pipeline
    /// (issue 27, item 8); the table is the old mapping, written out.
    #[test]
    fn every_extraction_failure_keeps_its_evidence_reason() {
        use crate::extract::{ExtractError as E, SlotError as S, ZipError as Z};
        for e in pipeline::tests::every_slot_error() {
            let want = match &e {
                S::TimedOut => EvidenceReason::ExtractionTimeout,
                S::LimitExceeded | S::Extract(E::Zip(Z::TooManyEntries | Z::TooLarge)) => {
                    EvidenceReason::ExtractionLimit
                }
                S::Stopped | S::Extract(E::Failed | E::Zip(Z::Invalid | Z::EntryNotFound)) => {
                    EvidenceReason::ExtractionFailed
                }
                S::Extract(E::Unsupported(_) | E::Zip(Z::Nested)) => {
                    EvidenceReason::UnsupportedFormat
                }
                S::Extract(
                    E::Encrypted | E::Zip(Z::Encrypted | Z::PasswordIncorrect | Z::Unsupported),
                ) => EvidenceReason::Encrypted,
            };
            let label = format!("{e:?}");
            assert_eq!(EvidenceReason::from(NotRead::from(e)), want, "{label}");
        }
        assert_eq!(
            EvidenceReason::from(NotRead::Busy),
            EvidenceReason::ExtractionBusy
        );
        assert_eq!(
            EvidenceReason::from(NotRead::TooLarge),
            EvidenceReason::AttachmentTooLarge
        );
        assert_eq!(
            EvidenceReason::from(NotRead::DownloadFailed),
            EvidenceReason::DownloadFailed
        );
    }
}
