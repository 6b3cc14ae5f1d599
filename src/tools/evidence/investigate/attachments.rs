//! Attachment text reading for `investigate_documents` ([`ContentReader`]): downloads an
//! attachment and extracts its text through the extraction pipeline within the call's budgets,
//! and records every attachment it could not wholly read, with the reason and what lifts it.
//!
//! Invariant: an attachment that could hold a content signal and was not searched in full is
//! counted as not read (so its folder cannot be `COMPLETE`), unless its message already shows
//! every content signal. One reader serves a whole call (one deadline, the shared extraction
//! slots): the orchestration in [`super`] creates it and its folder scan calls it per message.

use std::sync::Arc;

use crate::backends::model::MessageSummary;
use crate::backends::{AttachmentMeta, Backend};
use crate::extract::pipeline::{self, NotRead, Pipeline, Wait};
use crate::extract::{self, Extracted};
use crate::tools::args::InvestigationFolder;
use crate::tools::evidence::signals::{Haystack, Signals};
use crate::tools::evidence::{push_once, union};
use crate::tools::output::bounded;

use super::listing::Listing;
use super::matching::MessageEvidence;
use super::output::{ContentCoverageOut, ContentReason, NotReadAttachmentOut, NotReadReasonOut};

/// Attachments not read that the answer names one by one (the rest are counted).
const SHOWN_NOT_READ: usize = 10;
/// Characters of a not-read attachment's name in the answer.
const NOT_READ_NAME_CHARS: usize = 100;

/// Reads attachment text for one call, within its budgets: `maxAttachmentInputBytes` per
/// attachment, `maxExtractedChars` per text, the shared extraction slots, and one deadline for
/// the whole call. Records every attachment it could not wholly read.
pub(super) struct ContentReader<'a> {
    pub(super) slots: Arc<tokio::sync::Semaphore>,
    pub(super) extractor: &'a extract::Extractor,
    pub(super) max_input_bytes: u64,
    pub(super) caps: extract::Caps,
    pub(super) deadline: std::time::Instant,
    pub(super) coverage: ContentCoverageOut,
}

impl ContentReader<'_> {
    /// Searches the text of `message`'s attachments until every content signal has been found
    /// in the message (then the rest cannot change what the message proves). Returns how many
    /// were read and how many could hold a signal but were not (wholly) read.
    pub(super) async fn read_message(
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

#[cfg(test)]
mod tests {
    use super::*;

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
