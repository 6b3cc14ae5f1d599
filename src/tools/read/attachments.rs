//! The attachment tools: `list_attachments` (paged), `get_attachment_content` (text through the
//! extraction pipeline, or bounded raw bytes) and the fetch, pipeline and error mapping that the
//! handoff, write and evidence tools share.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::backends::BackendError;
use crate::extract::pipeline::{
    Cap, Failure, Locked, NoExtractor, NotRead, Pipeline, Wait, sniffed_format,
};
use crate::extract::{self, Format};
use crate::tools::CallScope;
use crate::tools::args::{AttachmentContentArgs, ContentMode, ListAttachmentsArgs};
use crate::tools::cursor;
use crate::tools::output::{
    self, AttachmentContentOut, AttachmentOut, ContentKind, ListAttachmentsOut, bounded,
};
use crate::tools::{App, ErrorCode, ToolError, ToolOutput};

pub(super) async fn list_attachments(
    app: CallScope,
    args: ListAttachmentsArgs,
) -> Result<ToolOutput, ToolError> {
    let resolved = app.resolve(&args.mailbox)?;
    let request = serde_json::json!({ "messageId": args.message_id, "limit": args.limit });
    let binding = cursor::Binding {
        signer: app.cursor_signer(),
        tool: "list_attachments",
        alias: resolved.alias.as_str(),
        request: &request,
    };
    no_offsets_with_cursor(args.cursor.is_some() && args.offset.is_some())?;
    let start = match args.offset {
        Some(offset) => offset,
        None => binding.start(args.cursor.as_deref())?,
    };
    let metas = resolved.backend.list_attachments(&args.message_id).await?;
    let offset = usize::try_from(start).unwrap_or(usize::MAX);
    let limit = args
        .limit
        .map_or(output::ATTACHMENT_PAGE, |l| l as usize)
        .min(output::ATTACHMENT_PAGE);
    let page = output::page(&metas, offset, limit);
    let attachments: Vec<AttachmentOut> = page
        .items
        .iter()
        .map(|a| AttachmentOut::from_meta(a, output::ATTACHMENT_NAME_CHARS))
        .collect();
    let summary = format!(
        "Message has {} attachment(s); {} listed from offset {}.",
        page.total,
        attachments.len(),
        page.offset
    );
    Ok(ToolOutput::untrusted(
        summary,
        ListAttachmentsOut {
            mailbox: resolved.alias.to_string(),
            message_id: args.message_id,
            attachments,
            offset: page.offset as u64,
            total_count: page.total,
            next_offset: page.next.map(|n| n as u64),
            next_cursor: page.next.map(|n| binding.at(n as u64)),
            pages_scanned: 1,
            truncated: page.next.is_some(),
        },
    ))
}

/// A cursor says where to go on: an offset beside it would be a second answer to that.
pub(super) fn no_offsets_with_cursor(offsets_given: bool) -> Result<(), ToolError> {
    if offsets_given {
        return Err(ToolError::new(
            ErrorCode::InvalidArgument,
            "cursor: pass either cursor or the offsets it replaces, not both",
        ));
    }
    Ok(())
}

/// Fetches an attachment under the input cap, mapping failures to the reference's codes.
pub(in crate::tools) async fn fetch_attachment(
    app: &App,
    backend: &crate::backends::Backend,
    message_id: &str,
    attachment_id: &str,
) -> Result<(crate::backends::AttachmentMeta, Vec<u8>), ToolError> {
    backend
        .attachment(
            message_id,
            attachment_id,
            app.config.limits.max_attachment_input_bytes,
        )
        .await
        .map_err(|e| match e {
            BackendError::TooLarge => ToolError::new(
                ErrorCode::AttachmentTooLarge,
                "the attachment exceeds maxAttachmentInputBytes",
            ),
            BackendError::NotFound | BackendError::BadId => {
                ToolError::new(ErrorCode::NotFound, "no such attachment in this message")
            }
            BackendError::Io(_) => ToolError::new(
                ErrorCode::AttachmentFetchFailed,
                "the attachment could not be read",
            ),
            other => ToolError::from_backend(&other),
        })
}

/// This server's extraction pipeline: its worker, its `maxConcurrentExtractions` slots and the
/// caps of `limits`.
pub(crate) fn extraction_pipeline(app: &App) -> Pipeline<'_> {
    Pipeline::new(
        &app.extractor,
        &app.extraction_slots,
        extract::Caps::from_limits(&app.config.limits),
    )
}

/// Runs one extraction job in the worker under the process-wide extraction bound (busy → a
/// fast `EXTRACTION_BUSY`).
async fn extract_bounded(
    app: &App,
    job: extract::Job,
    bytes: Vec<u8>,
) -> Result<extract::Answer, ToolError> {
    extraction_pipeline(app)
        .run(Wait::No, job, bytes)
        .await
        .map_err(not_read_error)
}

/// The tool error for an attachment whose text was not read, derived from the pipeline's one
/// reason ([`NotRead`]). Messages say which limit or cause, and what would lift it.
fn not_read_error(why: NotRead) -> ToolError {
    let (code, message): (ErrorCode, &'static str) = match why {
        NotRead::Unsupported(NoExtractor::Format(format)) => {
            return ToolError::new(
                ErrorCode::UnsupportedFormat,
                format!("this attachment format ({format}) has no text extractor"),
            );
        }
        NotRead::Unsupported(NoExtractor::NestedArchive) => {
            return ToolError::new(
                ErrorCode::UnsupportedFormat,
                "an archive inside an archive is not read",
            )
            .with_reason("nested_archive");
        }
        NotRead::Unsupported(NoExtractor::NotText) => (
            ErrorCode::UnsupportedFormat,
            "the extraction gave no text for this attachment",
        ),
        NotRead::Encrypted(Locked::Document) => (
            ErrorCode::Encrypted,
            "the document is encrypted; mailgate reads passwords only for ZIP archives",
        ),
        NotRead::Encrypted(Locked::ZipEntry) => (
            ErrorCode::ZipEncrypted,
            "the entry is encrypted: pass its password",
        ),
        NotRead::Encrypted(Locked::WrongPassword) => (
            ErrorCode::ZipPasswordIncorrect,
            "the password does not decrypt the entry",
        ),
        NotRead::Encrypted(Locked::UnknownMethod) => (
            ErrorCode::ZipUnsupportedEncryption,
            "the entry uses an encryption or compression method mailgate does not read",
        ),
        NotRead::TooLarge => (
            ErrorCode::AttachmentTooLarge,
            "the attachment exceeds maxAttachmentInputBytes",
        ),
        NotRead::Limit(Cap::Worker) => (
            ErrorCode::LimitExceeded,
            "the extraction hit the worker's memory or CPU limit and was stopped",
        ),
        NotRead::Limit(Cap::Entries) => (
            ErrorCode::ZipTooManyEntries,
            "the archive has more entries than maxZipEntries (maxContainerEntries for a \
             DOCX/XLSX)",
        ),
        NotRead::Limit(Cap::Bytes) => (
            ErrorCode::ZipTooLarge,
            "the archive inflates past maxZipUncompressedBytes \
             (maxContainerUncompressedBytes for a DOCX/XLSX)",
        ),
        NotRead::Timeout => (
            ErrorCode::ExtractionTimeout,
            "the extraction ran past its 30 s limit and was stopped",
        ),
        NotRead::Failed(Failure::Unparseable) => (
            ErrorCode::ExtractionFailed,
            "the attachment could not be parsed",
        ),
        NotRead::Failed(Failure::WorkerStopped) => (
            ErrorCode::ExtractionFailed,
            "the extraction worker stopped without an answer",
        ),
        NotRead::Failed(Failure::SlotsClosed) => (
            ErrorCode::ExtractionFailed,
            "extraction is no longer available in this server",
        ),
        NotRead::Failed(Failure::InvalidArchive) => {
            (ErrorCode::ZipInvalid, "the archive could not be read")
        }
        NotRead::Failed(Failure::EntryNotFound) => (
            ErrorCode::ZipEntryNotFound,
            "no listed entry has that exact name; call without entry to list them",
        ),
        NotRead::Busy => (
            ErrorCode::ExtractionBusy,
            "too many extractions are running; retry",
        ),
        NotRead::DeadlineExceeded => (
            ErrorCode::ExtractionTimeout,
            "the call's time ran out before the extraction could start; retry",
        ),
        NotRead::DownloadFailed => (
            ErrorCode::AttachmentFetchFailed,
            "the attachment could not be read",
        ),
    };
    ToolError::new(code, message)
}

pub(super) async fn get_attachment_content(
    app: CallScope,
    args: AttachmentContentArgs,
) -> Result<ToolOutput, ToolError> {
    let resolved = app.resolve(&args.mailbox)?;
    let raw = matches!(args.mode.unwrap_or_default(), ContentMode::Raw);
    // The password is left out of what a cursor is bound to, so nothing in a cursor depends on
    // it; a cursor passed with another password reads nothing the password does not open.
    let request = serde_json::json!({
        "messageId": args.message_id,
        "attachmentId": args.attachment_id,
        "entry": args.entry,
        "raw": raw,
    });
    let binding = cursor::Binding {
        signer: app.cursor_signer(),
        tool: "get_attachment_content",
        alias: resolved.alias.as_str(),
        request: &request,
    };
    // Where this answer starts: a character of the text, or an entry of the listing.
    let from = binding.start(args.cursor.as_deref())?;
    let (meta, bytes) = fetch_attachment(
        &app,
        resolved.backend,
        &args.message_id,
        &args.attachment_id,
    )
    .await?;
    let size = bytes.len() as u64;
    let format = sniffed_format(meta.name.as_deref(), &meta.content_type, &bytes);
    let mut out = AttachmentContentOut {
        mailbox: resolved.alias.to_string(),
        message_id: args.message_id.clone(),
        attachment_id: args.attachment_id.clone(),
        name: bounded(
            meta.name.as_deref().unwrap_or(""),
            output::ATTACHMENT_NAME_CHARS,
        ),
        content_type: bounded(&meta.content_type, output::CONTENT_TYPE_CHARS),
        kind: ContentKind::Text,
        size_bytes: size,
        text: None,
        truncated: None,
        extractor: None,
        base64: None,
        entry: None,
        zip_entries: None,
        hidden_entries: None,
        next_cursor: None,
    };
    let max_raw = app.config.limits.max_raw_attachment_bytes;
    // `entry` on anything but an archive is ignored (reference §5.11).
    let job = match (format, args.entry) {
        (Format::Zip, None) => extract::Job::ZipList,
        (Format::Zip, Some(entry)) => {
            out.entry = Some(entry.clone());
            extract::Job::ZipEntry {
                entry,
                password: args.password.map(extract::Password::new),
                raw_cap: raw.then_some(max_raw),
            }
        }
        (_, _) if raw => {
            if size > max_raw {
                return Err(raw_too_large());
            }
            out.kind = ContentKind::Raw;
            out.base64 = Some(STANDARD.encode(&bytes));
            return Ok(content_output(&args.attachment_id, &args.message_id, out));
        }
        (_, _) => extract::Job::Text {
            name: meta.name.clone(),
            content_type: meta.content_type.clone(),
        },
    };
    let is_entry = out.entry.is_some();
    let job = match job {
        extract::Job::ZipList => extract::Job::ZipList,
        job if from > 0 => extract::Job::Window {
            from_char: from,
            job: Box::new(job),
        },
        job => job,
    };
    let answer = extract_bounded(&app, job, bytes).await.map_err(|e| {
        // Only a raw entry read has the raw cap in force: its overflow is RAW_TOO_LARGE.
        if raw && is_entry && e.code == ErrorCode::ZipTooLarge {
            raw_too_large()
        } else {
            e
        }
    })?;
    match answer {
        extract::Answer::Text(extracted) => {
            // A window that gave nothing cannot be gone on from (no cursor that repeats itself).
            let shown = extracted.text.chars().count() as u64;
            out.next_cursor = (extracted.truncated && shown > 0).then(|| binding.at(from + shown));
            out.text = Some(extracted.text);
            out.truncated = Some(extracted.truncated);
            out.extractor = Some(extracted.extractor);
        }
        extract::Answer::Raw(entry_bytes) => {
            out.kind = ContentKind::Raw;
            out.size_bytes = entry_bytes.len() as u64;
            out.base64 = Some(STANDARD.encode(&entry_bytes));
        }
        extract::Answer::Listing(listing) => {
            out.kind = ContentKind::ZipListing;
            out.hidden_entries = Some(listing.hidden_entries as u64);
            let start = usize::try_from(from).unwrap_or(usize::MAX);
            let page = output::page(&listing.entries, start, output::ZIP_LISTING_PAGE);
            out.zip_entries = Some(
                page.items
                    .iter()
                    .map(|e| output::ZipEntryOut {
                        name: e.name.clone(),
                        uncompressed_size: e.uncompressed_size,
                        encrypted: e.encrypted,
                    })
                    .collect(),
            );
            // A listing says `truncated` only when it is cut, as the reference's never is.
            out.truncated = page.next.map(|_| true);
            out.next_cursor = page.next.map(|n| binding.at(n as u64));
        }
    }
    Ok(content_output(&args.attachment_id, &args.message_id, out))
}

fn raw_too_large() -> ToolError {
    ToolError::new(
        ErrorCode::RawTooLarge,
        "the content exceeds maxRawAttachmentBytes; use text mode",
    )
}

/// The answer: a summary line (for a listing, the entry count and whether some are hidden) and
/// the structured content, framed as untrusted.
fn content_output(attachment_id: &str, message_id: &str, out: AttachmentContentOut) -> ToolOutput {
    let summary = match (&out.zip_entries, out.hidden_entries) {
        (Some(entries), Some(hidden)) if hidden > 0 => format!(
            "Archive {attachment_id} of message {message_id}: {} entries listed; {hidden} \
             more have names that cannot be addressed, so this listing is incomplete and \
             those entries cannot be read.",
            entries.len()
        ),
        (Some(entries), _) => format!(
            "Archive {attachment_id} of message {message_id}: {} entries; pass one as entry \
             to read it.",
            entries.len()
        ),
        _ => format!("Attachment {attachment_id} of message {message_id}."),
    };
    let summary = summary
        + match (&out.next_cursor, &out.zip_entries) {
            (None, _) => "",
            (Some(_), Some(_)) => " More entries follow: pass nextCursor as cursor.",
            (Some(_), None) => " The text goes on: pass nextCursor as cursor.",
        };
    ToolOutput::untrusted(summary, out)
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::tools::input_schema;

    #[tokio::test]
    async fn a_busy_extractor_refuses_fast_and_serves_once_a_slot_frees() {
        let demo = crate::tools::testutil::demo_app();
        let app = &demo.app;
        let held: Vec<_> = (0..app.config.limits.max_concurrent_extractions)
            .map(|_| {
                std::sync::Arc::clone(&app.extraction_slots)
                    .try_acquire_owned()
                    .expect("a free slot")
            })
            .collect();
        let job = || extract::Job::Text {
            name: Some("a.txt".into()),
            content_type: "text/plain".into(),
        };
        let busy = extract_bounded(app, job(), b"hi".to_vec())
            .await
            .expect_err("every slot is taken");
        assert_eq!(busy.code, ErrorCode::ExtractionBusy);
        drop(held);
        let answer = extract_bounded(app, job(), b"hi".to_vec())
            .await
            .expect("a slot is free again");
        assert!(matches!(answer, extract::Answer::Text(t) if t.text == "hi"));
    }

    /// Every worker failure keeps the tool code, message and reason it had before the
    /// extraction pipeline (issue 27, item 8): the table is the old mapping, written out.
    #[test]
    fn every_extraction_failure_keeps_its_tool_error() {
        use crate::extract::{ExtractError as E, SlotError as S, ZipError as Z};
        for e in extract::pipeline::tests::every_slot_error() {
            let want: (ErrorCode, String, Option<&str>) = match &e {
                S::TimedOut => (
                    ErrorCode::ExtractionTimeout,
                    "the extraction ran past its 30 s limit and was stopped".into(),
                    None,
                ),
                S::LimitExceeded => (
                    ErrorCode::LimitExceeded,
                    "the extraction hit the worker's memory or CPU limit and was stopped".into(),
                    None,
                ),
                S::Stopped => (
                    ErrorCode::ExtractionFailed,
                    "the extraction worker stopped without an answer".into(),
                    None,
                ),
                S::Extract(E::Unsupported(f)) => (
                    ErrorCode::UnsupportedFormat,
                    format!("this attachment format ({f}) has no text extractor"),
                    None,
                ),
                S::Extract(E::Failed) => (
                    ErrorCode::ExtractionFailed,
                    "the attachment could not be parsed".into(),
                    None,
                ),
                S::Extract(E::Encrypted) => (
                    ErrorCode::Encrypted,
                    "the document is encrypted; mailgate reads passwords only for ZIP archives"
                        .into(),
                    None,
                ),
                S::Extract(E::Zip(Z::Invalid)) => (
                    ErrorCode::ZipInvalid,
                    "the archive could not be read".into(),
                    None,
                ),
                S::Extract(E::Zip(Z::TooManyEntries)) => (
                    ErrorCode::ZipTooManyEntries,
                    "the archive has more entries than maxZipEntries (maxContainerEntries for a \
                     DOCX/XLSX)"
                        .into(),
                    None,
                ),
                S::Extract(E::Zip(Z::TooLarge)) => (
                    ErrorCode::ZipTooLarge,
                    "the archive inflates past maxZipUncompressedBytes \
                     (maxContainerUncompressedBytes for a DOCX/XLSX)"
                        .into(),
                    None,
                ),
                S::Extract(E::Zip(Z::EntryNotFound)) => (
                    ErrorCode::ZipEntryNotFound,
                    "no listed entry has that exact name; call without entry to list them".into(),
                    None,
                ),
                S::Extract(E::Zip(Z::Encrypted)) => (
                    ErrorCode::ZipEncrypted,
                    "the entry is encrypted: pass its password".into(),
                    None,
                ),
                S::Extract(E::Zip(Z::PasswordIncorrect)) => (
                    ErrorCode::ZipPasswordIncorrect,
                    "the password does not decrypt the entry".into(),
                    None,
                ),
                S::Extract(E::Zip(Z::Unsupported)) => (
                    ErrorCode::ZipUnsupportedEncryption,
                    "the entry uses an encryption or compression method mailgate does not read"
                        .into(),
                    None,
                ),
                S::Extract(E::Zip(Z::Nested)) => (
                    ErrorCode::UnsupportedFormat,
                    "an archive inside an archive is not read".into(),
                    Some("nested_archive"),
                ),
            };
            let label = format!("{e:?}");
            let got = not_read_error(NotRead::from(e));
            assert_eq!(
                (got.code, got.message.into_owned(), got.reason),
                want,
                "{label}"
            );
        }
        // Busy keeps its code too (the one failure that is not the worker's).
        assert_eq!(
            not_read_error(NotRead::Busy).code,
            ErrorCode::ExtractionBusy
        );
    }

    #[test]
    fn the_published_page_bound_is_the_enforced_one() {
        let schema = input_schema::<ListAttachmentsArgs>();
        assert_eq!(
            schema["properties"]["limit"]["maximum"],
            serde_json::json!(output::ATTACHMENT_PAGE)
        );
    }
}
