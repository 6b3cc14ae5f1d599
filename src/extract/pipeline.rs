//! Attachment bytes to text, one way for every caller: `get_attachment_content`,
//! `inspect_attachment_evidence`, `investigate_documents` and the index sync.
//!
//! Purpose: own every step between "here is an attachment" and "here is its text, or why not":
//! format detection ([`declared_format`], [`sniffed_format`]) and whether the format has an
//! extractor ([`readable`]), the bounded download ([`download`]), waiting for an extraction slot
//! ([`Wait`]: not at all, until a deadline, or as long as it takes), building the job and running
//! it in the worker ([`Pipeline`]), and the one vocabulary of why an attachment's text was not
//! read ([`NotRead`]).
//!
//! Invariant: [`NotRead`]'s `From<SlotError>`, `From<ExtractError>` and `From<ZipError>` are
//! the only mapping of the worker's failures in the crate; every caller's public vocabulary
//! (tool error codes, `ContentReason`, `EvidenceReason`, the sync's log) is derived from a
//! [`NotRead`] by one `match` of its own, so two callers can never disagree about what one
//! failure means.
//!
//! Callers: `tools::read`, `tools::evidence`, `index::sync`. Nothing here parses a byte: the
//! parsers run in the worker ([`super::pool`]).

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};

use super::{Answer, Caps, ExtractError, Extracted, Extractor, Format, Job, SlotError, ZipError};
use crate::backends::{AttachmentMeta, Backend, BackendError};

/// Why an attachment's text was not read. Top-level variants are the classes every caller
/// reports; the payloads keep the detail `get_attachment_content` names in its finer codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NotRead {
    /// No text extractor for what the attachment is.
    #[error("unsupported_format")]
    Unsupported(NoExtractor),
    /// Encrypted, or protected by a method mailgate does not read.
    #[error("encrypted")]
    Encrypted(Locked),
    /// Over `maxAttachmentInputBytes`, as declared or as downloaded.
    #[error("too_large")]
    TooLarge,
    /// A cap stopped the extraction.
    #[error("extraction_limit")]
    Limit(Cap),
    /// The worker ran past its wall-clock limit and was killed.
    #[error("extraction_timeout")]
    Timeout,
    /// The extraction ran and failed.
    #[error("extraction_failed")]
    Failed(Failure),
    /// Every extraction slot was taken and the caller does not wait ([`Wait::No`]).
    #[error("extraction_busy")]
    Busy,
    /// The caller's deadline passed before the extraction could start.
    #[error("deadline_exceeded")]
    DeadlineExceeded,
    /// The bytes could not be fetched from the mailbox.
    #[error("download_failed")]
    DownloadFailed,
}

/// Why there is no extractor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NoExtractor {
    /// The format has none (`Unknown`; `Zip` for a job that reads a file's own text).
    Format(Format),
    /// An archive inside an archive.
    NestedArchive,
    /// The job answered with something that is not text (a listing, raw bytes).
    NotText,
}

/// What locks the content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Locked {
    /// An encrypted PDF or a password-protected office document.
    Document,
    /// A ZIP entry that needs a password.
    ZipEntry,
    /// The password given does not decrypt the ZIP entry.
    WrongPassword,
    /// A ZIP encryption or compression method mailgate does not read.
    UnknownMethod,
}

/// Which cap stopped the extraction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cap {
    /// The worker's memory or CPU limit.
    Worker,
    /// More records than `maxZipEntries` (`maxContainerEntries` for DOCX/XLSX).
    Entries,
    /// More inflated bytes than `maxZipUncompressedBytes` (`maxContainerUncompressedBytes`).
    Bytes,
}

/// How the extraction failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The bytes could not be parsed (or a parser panicked).
    Unparseable,
    /// The worker crashed, could not start, or answered nonsense.
    WorkerStopped,
    /// Not a readable ZIP archive.
    InvalidArchive,
    /// No addressable ZIP entry has the name asked for.
    EntryNotFound,
    /// The extraction slots were closed (the process is going down).
    SlotsClosed,
}

impl NotRead {
    /// The format that has no extractor, when that is the reason.
    pub(crate) fn unsupported_format(self) -> Option<Format> {
        match self {
            NotRead::Unsupported(NoExtractor::Format(format)) => Some(format),
            _ => None,
        }
    }
}

/// The one mapping of the worker's outcomes.
impl From<SlotError> for NotRead {
    fn from(e: SlotError) -> Self {
        match e {
            SlotError::TimedOut => NotRead::Timeout,
            SlotError::LimitExceeded => NotRead::Limit(Cap::Worker),
            SlotError::Stopped => NotRead::Failed(Failure::WorkerStopped),
            SlotError::Extract(e) => e.into(),
        }
    }
}

/// The one mapping of the extractors' refusals.
impl From<ExtractError> for NotRead {
    fn from(e: ExtractError) -> Self {
        match e {
            ExtractError::Unsupported(format) => NotRead::Unsupported(NoExtractor::Format(format)),
            ExtractError::Failed => NotRead::Failed(Failure::Unparseable),
            ExtractError::Encrypted => NotRead::Encrypted(Locked::Document),
            ExtractError::Zip(z) => z.into(),
        }
    }
}

/// The one mapping of archive and container refusals.
impl From<ZipError> for NotRead {
    fn from(e: ZipError) -> Self {
        match e {
            ZipError::Invalid => NotRead::Failed(Failure::InvalidArchive),
            ZipError::TooManyEntries => NotRead::Limit(Cap::Entries),
            ZipError::TooLarge => NotRead::Limit(Cap::Bytes),
            ZipError::EntryNotFound => NotRead::Failed(Failure::EntryNotFound),
            ZipError::Encrypted => NotRead::Encrypted(Locked::ZipEntry),
            ZipError::PasswordIncorrect => NotRead::Encrypted(Locked::WrongPassword),
            ZipError::Unsupported => NotRead::Encrypted(Locked::UnknownMethod),
            ZipError::Nested => NotRead::Unsupported(NoExtractor::NestedArchive),
        }
    }
}

/// The format an attachment's declared name and content type give, before its bytes are read:
/// enough to skip one with no extractor without downloading it (magic bytes can only turn a
/// declared text format into a binary one, never the reverse).
pub(crate) fn declared_format(name: Option<&str>, content_type: &str) -> Format {
    super::detect(name, content_type, b"")
}

/// The format of the downloaded bytes (magic bytes, then content type, then name).
pub(crate) fn sniffed_format(name: Option<&str>, content_type: &str, bytes: &[u8]) -> Format {
    super::detect(name, content_type, bytes)
}

/// `format` when it has a text extractor, else why not.
pub(crate) fn readable(format: Format) -> Result<Format, NotRead> {
    if format.has_extractor() {
        Ok(format)
    } else {
        Err(NotRead::Unsupported(NoExtractor::Format(format)))
    }
}

/// One attachment's metadata and bytes, at most `max_bytes` of them: more is `TooLarge`, any
/// other failure `DownloadFailed` (a tool that must tell "no such attachment" apart maps the
/// backend's error itself).
pub(crate) async fn download(
    backend: &Backend,
    message_id: &str,
    attachment_id: &str,
    max_bytes: u64,
) -> Result<(AttachmentMeta, Vec<u8>), NotRead> {
    backend
        .attachment(message_id, attachment_id, max_bytes)
        .await
        .map_err(|e| match e {
            BackendError::TooLarge => NotRead::TooLarge,
            _ => NotRead::DownloadFailed,
        })
}

/// How long a caller waits for an extraction slot.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Wait {
    /// Take a free slot now or answer [`NotRead::Busy`]: a tool serving one request fails
    /// fast, and its caller may retry.
    No,
    /// Queue, but never past this instant ([`NotRead::DeadlineExceeded`] then).
    Until(Instant),
    /// Queue for as long as it takes (the index sync: no caller is waiting on one answer).
    Forever,
}

/// The extraction worker, the slots that bound how many extractions run at once
/// (`maxConcurrentExtractions`), and the caps each runs under.
#[derive(Clone, Copy)]
pub(crate) struct Pipeline<'a> {
    extractor: &'a Extractor,
    slots: &'a Arc<Semaphore>,
    caps: Caps,
}

impl<'a> Pipeline<'a> {
    pub(crate) fn new(extractor: &'a Extractor, slots: &'a Arc<Semaphore>, caps: Caps) -> Self {
        Self {
            extractor,
            slots,
            caps,
        }
    }

    /// Runs `job` on `bytes` in the worker, holding a slot taken as `wait` says.
    pub(crate) async fn run(
        &self,
        wait: Wait,
        job: Job,
        bytes: Vec<u8>,
    ) -> Result<Answer, NotRead> {
        let slot = self.slot(wait).await?;
        Ok(self.extractor.run(slot, job, bytes, self.caps).await?)
    }

    /// The text `job` gives; an answer that is not text is [`NoExtractor::NotText`].
    pub(crate) async fn text(
        &self,
        wait: Wait,
        job: Job,
        bytes: Vec<u8>,
    ) -> Result<Extracted, NotRead> {
        self.run(wait, job, bytes)
            .await?
            .into_text()
            .ok_or(NotRead::Unsupported(NoExtractor::NotText))
    }

    /// The text evidence search reads from an attachment of `format` (see [`Job::evidence`]:
    /// an archive's entries, or the file itself).
    pub(crate) async fn evidence_text(
        &self,
        wait: Wait,
        format: Format,
        name: Option<String>,
        content_type: String,
        bytes: Vec<u8>,
    ) -> Result<Extracted, NotRead> {
        let job = Job::evidence(format, name, content_type);
        self.text(wait, job, bytes).await
    }

    async fn slot(&self, wait: Wait) -> Result<OwnedSemaphorePermit, NotRead> {
        let slots = Arc::clone(self.slots);
        let closed = NotRead::Failed(Failure::SlotsClosed);
        match wait {
            Wait::No => slots.try_acquire_owned().map_err(|e| match e {
                TryAcquireError::NoPermits => NotRead::Busy,
                TryAcquireError::Closed => closed,
            }),
            Wait::Until(deadline) => {
                let deadline = tokio::time::Instant::from_std(deadline);
                match tokio::time::timeout_at(deadline, slots.acquire_owned()).await {
                    Err(_) => Err(NotRead::DeadlineExceeded),
                    Ok(slot) => slot.map_err(|_| closed),
                }
            }
            Wait::Forever => slots.acquire_owned().await.map_err(|_| closed),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Duration;

    use super::*;

    /// Every `ZipError`; the `match` fails to compile when a variant is added, so the table
    /// below cannot silently miss one.
    pub(crate) fn every_zip_error() -> [ZipError; 8] {
        let all = [
            ZipError::Invalid,
            ZipError::TooManyEntries,
            ZipError::TooLarge,
            ZipError::EntryNotFound,
            ZipError::Encrypted,
            ZipError::PasswordIncorrect,
            ZipError::Unsupported,
            ZipError::Nested,
        ];
        for z in all {
            match z {
                ZipError::Invalid
                | ZipError::TooManyEntries
                | ZipError::TooLarge
                | ZipError::EntryNotFound
                | ZipError::Encrypted
                | ZipError::PasswordIncorrect
                | ZipError::Unsupported
                | ZipError::Nested => {}
            }
        }
        all
    }

    /// Every `ExtractError` (each format of `Unsupported`, each `ZipError`).
    pub(crate) fn every_extract_error() -> Vec<ExtractError> {
        let formats = [
            Format::Text,
            Format::Csv,
            Format::Json,
            Format::Xml,
            Format::Html,
            Format::Eml,
            Format::Pdf,
            Format::Docx,
            Format::Xlsx,
            Format::Zip,
            Format::Unknown,
        ];
        let mut all: Vec<ExtractError> = formats.map(ExtractError::Unsupported).into();
        all.extend([ExtractError::Failed, ExtractError::Encrypted]);
        all.extend(every_zip_error().map(ExtractError::Zip));
        for e in &all {
            match e {
                ExtractError::Unsupported(_)
                | ExtractError::Failed
                | ExtractError::Encrypted
                | ExtractError::Zip(_) => {}
            }
        }
        all
    }

    /// Every `SlotError`, the extraction refusals included.
    pub(crate) fn every_slot_error() -> Vec<SlotError> {
        let mut all = vec![
            SlotError::TimedOut,
            SlotError::LimitExceeded,
            SlotError::Stopped,
        ];
        all.extend(every_extract_error().into_iter().map(SlotError::Extract));
        for e in &all {
            match e {
                SlotError::TimedOut
                | SlotError::LimitExceeded
                | SlotError::Stopped
                | SlotError::Extract(_) => {}
            }
        }
        all
    }

    /// What each failure means, written out once more by hand: the one place that says it.
    fn expected(e: &SlotError) -> NotRead {
        match e {
            SlotError::TimedOut => NotRead::Timeout,
            SlotError::LimitExceeded => NotRead::Limit(Cap::Worker),
            SlotError::Stopped => NotRead::Failed(Failure::WorkerStopped),
            SlotError::Extract(ExtractError::Unsupported(f)) => {
                NotRead::Unsupported(NoExtractor::Format(*f))
            }
            SlotError::Extract(ExtractError::Failed) => NotRead::Failed(Failure::Unparseable),
            SlotError::Extract(ExtractError::Encrypted) => NotRead::Encrypted(Locked::Document),
            SlotError::Extract(ExtractError::Zip(z)) => match z {
                ZipError::Invalid => NotRead::Failed(Failure::InvalidArchive),
                ZipError::TooManyEntries => NotRead::Limit(Cap::Entries),
                ZipError::TooLarge => NotRead::Limit(Cap::Bytes),
                ZipError::EntryNotFound => NotRead::Failed(Failure::EntryNotFound),
                ZipError::Encrypted => NotRead::Encrypted(Locked::ZipEntry),
                ZipError::PasswordIncorrect => NotRead::Encrypted(Locked::WrongPassword),
                ZipError::Unsupported => NotRead::Encrypted(Locked::UnknownMethod),
                ZipError::Nested => NotRead::Unsupported(NoExtractor::NestedArchive),
            },
        }
    }

    #[test]
    fn every_worker_failure_maps_to_one_reason() {
        let all = every_slot_error();
        assert_eq!(all.len(), 3 + 11 + 2 + 8);
        for e in all {
            let want = expected(&e);
            // The same failure reached through each of its three types agrees.
            if let SlotError::Extract(inner) = e {
                assert_eq!(NotRead::from(inner), want, "{inner:?}");
                if let ExtractError::Zip(z) = inner {
                    assert_eq!(NotRead::from(z), want, "{z:?}");
                }
            }
            assert_eq!(NotRead::from(e), want);
        }
    }

    #[test]
    fn the_classes_are_what_the_callers_report() {
        // Distinct failures that every caller reports alike share a class.
        let class = |e: ZipError| NotRead::from(e).to_string();
        assert_eq!(class(ZipError::TooManyEntries), "extraction_limit");
        assert_eq!(class(ZipError::TooLarge), "extraction_limit");
        assert_eq!(
            NotRead::from(SlotError::LimitExceeded).to_string(),
            "extraction_limit"
        );
        for z in [
            ZipError::Encrypted,
            ZipError::PasswordIncorrect,
            ZipError::Unsupported,
        ] {
            assert_eq!(class(z), "encrypted", "{z:?}");
        }
        assert_eq!(class(ZipError::Nested), "unsupported_format");
        assert_eq!(class(ZipError::Invalid), "extraction_failed");
        assert_eq!(
            NotRead::from(ExtractError::Unsupported(Format::Unknown)).unsupported_format(),
            Some(Format::Unknown)
        );
        assert_eq!(NotRead::from(ZipError::Nested).unsupported_format(), None);
    }

    #[test]
    fn readable_formats_are_those_with_an_extractor() {
        assert_eq!(readable(Format::Pdf), Ok(Format::Pdf));
        assert_eq!(readable(Format::Zip), Ok(Format::Zip));
        assert_eq!(
            readable(Format::Unknown),
            Err(NotRead::Unsupported(NoExtractor::Format(Format::Unknown)))
        );
        assert_eq!(
            declared_format(Some("scan.png"), "image/png"),
            Format::Unknown
        );
        assert_eq!(
            declared_format(Some("notes.txt"), "text/plain"),
            Format::Text
        );
        assert_eq!(
            sniffed_format(Some("notes.txt"), "text/plain", b"a\x00b"),
            Format::Unknown
        );
    }

    fn text_job() -> Job {
        Job::Text {
            name: Some("a.txt".into()),
            content_type: "text/plain".into(),
        }
    }

    #[tokio::test]
    async fn a_job_runs_and_its_failures_are_typed() {
        let extractor = Extractor::worker();
        let slots = Arc::new(Semaphore::new(1));
        let pipeline = Pipeline::new(&extractor, &slots, Caps::default());
        let text = pipeline
            .text(Wait::No, text_job(), b"hello".to_vec())
            .await
            .expect("text");
        assert_eq!(text.text, "hello");
        let got = pipeline
            .evidence_text(
                Wait::No,
                Format::Zip,
                Some("a.zip".into()),
                "application/zip".into(),
                b"PK\x03\x04 not an archive".to_vec(),
            )
            .await;
        assert_eq!(got, Err(NotRead::Failed(Failure::InvalidArchive)));
        // An empty archive (its end record only) lists fine, but a listing is not text.
        let mut empty_zip = b"PK\x05\x06".to_vec();
        empty_zip.extend([0; 18]);
        let got = pipeline.text(Wait::No, Job::ZipList, empty_zip).await;
        assert_eq!(got, Err(NotRead::Unsupported(NoExtractor::NotText)));
        assert_eq!(slots.available_permits(), 1, "every slot is given back");
    }

    #[tokio::test]
    async fn each_wait_ends_as_it_says() {
        let extractor = Extractor::worker();
        let slots = Arc::new(Semaphore::new(1));
        let pipeline = Pipeline::new(&extractor, &slots, Caps::default());
        let held = Arc::clone(&slots).try_acquire_owned().expect("a free slot");
        let run = |wait| pipeline.run(wait, text_job(), b"hi".to_vec());
        assert_eq!(run(Wait::No).await, Err(NotRead::Busy));
        let soon = Instant::now() + Duration::from_millis(20);
        assert_eq!(run(Wait::Until(soon)).await, Err(NotRead::DeadlineExceeded));
        // Forever waits until the slot frees.
        let free_later = async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            drop(held);
        };
        let (answer, ()) = tokio::join!(run(Wait::Forever), free_later);
        assert!(matches!(answer, Ok(Answer::Text(t)) if t.text == "hi"));
        // A slot free at once is taken even by a deadline that has passed (the caller checks
        // its deadline before it downloads; a free slot costs no waiting).
        let past = Instant::now();
        assert!(run(Wait::Until(past)).await.is_ok());
        slots.close();
        for wait in [Wait::No, Wait::Until(past), Wait::Forever] {
            assert_eq!(
                run(wait).await,
                Err(NotRead::Failed(Failure::SlotsClosed)),
                "{wait:?}"
            );
        }
    }
}
