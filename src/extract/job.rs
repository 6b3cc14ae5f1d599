//! One extraction job and its answer: the unit of work the server hands the worker process
//! (`worker`), and the one function, [`run`], that does it. Everything that parses attachment
//! bytes is reached from `run` only, so "every attachment is read in the worker" is a property of
//! who calls `run`: the worker, and in-process only under `cfg(test)` and the fuzzer. The wire
//! form (a JSON line, then the raw bytes) is framed here too, so both ends share one definition.

use std::io::{self, BufRead, Read, Write};

use super::{Caps, ExtractError, Extracted, Format, ZipError, extract_text, zip};

/// A caller's archive password: sent to the worker over its stdin pipe only, never printed.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub(crate) struct Password(String);

impl Password {
    pub(crate) fn new(password: String) -> Self {
        Self(password)
    }
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Password(..)")
    }
}

/// What to do with one attachment's bytes.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub(crate) enum Job {
    /// Its text, the format sniffed from the bytes, the name and the content type.
    Text {
        name: Option<String>,
        content_type: String,
    },
    /// The file entries of a ZIP archive.
    ZipList,
    /// The text of every readable entry of a ZIP archive, for evidence search (see
    /// [`archive_text`]).
    ArchiveText,
    /// One entry of a ZIP archive: its text (format sniffed by the entry's name and bytes), or
    /// with `raw_cap` its bytes, at most that many.
    ZipEntry {
        entry: String,
        password: Option<Password>,
        raw_cap: Option<u64>,
    },
    /// The text `job` gives, from its `from_char`th Unicode scalar value on, at most
    /// `caps.max_chars` of it: where a continuation cursor goes on. The inner job runs with the
    /// cap widened by `from_char`, so `truncated` still says whether text follows the window.
    Window { from_char: u64, job: Box<Job> },
}

/// What a job produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    Text(Extracted),
    Listing(zip::ZipListing),
    Raw(Vec<u8>),
}

/// Does `job` on `bytes` within `caps`.
pub(crate) fn run(job: &Job, bytes: &[u8], caps: &Caps) -> Result<Answer, ExtractError> {
    match job {
        Job::Text { name, content_type } => {
            extract_text(name.as_deref(), content_type, bytes, caps).map(Answer::Text)
        }
        Job::ZipList => zip::list(bytes, caps).map(Answer::Listing),
        Job::ArchiveText => archive_text(bytes, caps).map(Answer::Text),
        Job::ZipEntry {
            entry,
            password,
            raw_cap,
        } => {
            let cap = raw_cap.map_or(caps.max_zip_uncompressed_bytes, |raw| {
                raw.min(caps.max_zip_uncompressed_bytes)
            });
            let password = password.as_ref().map(|p| p.0.as_str());
            let inner = zip::read_entry(bytes, entry, password, cap, caps)?;
            if raw_cap.is_some() {
                return Ok(Answer::Raw(inner));
            }
            // `read_entry` already refused an archive in the archive (`Nested`).
            extract_text(Some(entry), "", &inner, caps).map(Answer::Text)
        }
        Job::Window { from_char, job } => {
            let from = usize::try_from(*from_char).unwrap_or(usize::MAX);
            let widened = Caps {
                max_chars: caps.max_chars.saturating_add(from),
                ..*caps
            };
            run(job, bytes, &widened).map(|answer| answer.without_first(from))
        }
    }
}

impl Job {
    /// The job that reads an attachment's text for evidence search: an archive's entries, or
    /// the attachment itself.
    pub(crate) fn evidence(format: Format, name: Option<String>, content_type: String) -> Self {
        match format {
            Format::Zip => Job::ArchiveText,
            _ => Job::Text { name, content_type },
        }
    }
}

impl Answer {
    /// A text answer without its first `from` characters (other answers are unchanged).
    fn without_first(self, from: usize) -> Self {
        match self {
            Answer::Text(mut text) => {
                text.text = match text.text.char_indices().nth(from) {
                    Some((at, _)) => text.text.split_off(at),
                    None => String::new(),
                };
                Answer::Text(text)
            }
            other => other,
        }
    }

    /// The text, when the job produced text.
    pub(crate) fn into_text(self) -> Option<Extracted> {
        match self {
            Answer::Text(text) => Some(text),
            Answer::Listing(_) | Answer::Raw(_) => None,
        }
    }
}

/// Each readable entry's text under a `== name ==` line, in listing order, within
/// `caps.max_chars` in all and `caps.max_zip_uncompressed_bytes` of inflated bytes in all.
/// Entries not read — hidden names, encrypted, archives in the archive, formats without text,
/// failures — are counted in `unread_parts`; entries past a budget too, with `truncated` set.
fn archive_text(bytes: &[u8], caps: &Caps) -> Result<Extracted, ExtractError> {
    let listing = zip::list(bytes, caps)?;
    let mut text = String::new();
    let mut chars = 0usize;
    let mut inflated = 0u64;
    let mut unread = listing.hidden_entries;
    let mut truncated = false;
    for entry in &listing.entries {
        let budget = caps.max_zip_uncompressed_bytes.saturating_sub(inflated);
        if truncated || chars >= caps.max_chars || budget == 0 {
            truncated = true;
            unread += 1;
            continue;
        }
        if entry.encrypted {
            unread += 1;
            continue;
        }
        let inner = match zip::read_entry(bytes, &entry.name, None, budget, caps) {
            Ok(inner) => inner,
            Err(ExtractError::Zip(ZipError::TooLarge)) => {
                truncated = true;
                unread += 1;
                continue;
            }
            Err(_) => {
                unread += 1;
                continue;
            }
        };
        inflated += inner.len() as u64;
        let entry_caps = Caps {
            max_chars: caps.max_chars - chars,
            ..*caps
        };
        match extract_text(Some(&entry.name), "", &inner, &entry_caps) {
            Ok(extracted) => {
                let part = format!("== {} ==\n{}\n\n", entry.name, extracted.text);
                chars += part.chars().count();
                text.push_str(&part);
                truncated |= extracted.truncated;
                unread += extracted.unread_parts;
            }
            _ => unread += 1,
        }
    }
    let (text, cut) = super::html::truncate_chars(text, caps.max_chars);
    Ok(Extracted {
        text,
        truncated: truncated || cut,
        extractor: "zip",
        unread_parts: unread,
    })
}

/// Longest header line either side accepts: a job's names are bounded by the tool schemas, an
/// answer's text by `maxExtractedChars` (1,000,000 at most, each at most 6 bytes as JSON).
pub(crate) const MAX_HEADER_BYTES: u64 = 8 << 20;

/// The request line: the job, its caps, and how many attachment bytes follow.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Request {
    pub(crate) job: Job,
    pub(crate) caps: Caps,
    pub(crate) len: u64,
}

/// The answer line; raw bytes, if any, follow it.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Reply {
    Text(Extracted),
    Listing(zip::ZipListing),
    Raw { len: u64 },
    Error(ExtractError),
}

/// Writes a JSON line, then `payload`.
pub(crate) fn write_framed(
    out: &mut impl Write,
    line: &impl serde::Serialize,
    payload: &[u8],
) -> io::Result<()> {
    serde_json::to_writer(&mut *out, line)?;
    out.write_all(b"\n")?;
    out.write_all(payload)?;
    out.flush()
}

/// Reads one JSON line of at most [`MAX_HEADER_BYTES`].
pub(crate) fn read_line<T: serde::de::DeserializeOwned>(input: &mut impl BufRead) -> io::Result<T> {
    let mut line = Vec::new();
    input.take(MAX_HEADER_BYTES).read_until(b'\n', &mut line)?;
    if line.last() != Some(&b'\n') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "no complete header line",
        ));
    }
    serde_json::from_slice(&line).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Reads exactly `len` bytes, refusing more than `max`.
pub(crate) fn read_payload(input: &mut impl Read, len: u64, max: u64) -> io::Result<Vec<u8>> {
    if len > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "payload over its bound",
        ));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    input.take(len).read_to_end(&mut bytes)?;
    if bytes.len() as u64 != len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "short payload",
        ));
    }
    Ok(bytes)
}

impl Reply {
    /// The reply line and payload for `result`.
    pub(crate) fn from_result(result: Result<Answer, ExtractError>) -> (Reply, Vec<u8>) {
        match result {
            Ok(Answer::Text(text)) => (Reply::Text(text), Vec::new()),
            Ok(Answer::Listing(listing)) => (Reply::Listing(listing), Vec::new()),
            Ok(Answer::Raw(bytes)) => (
                Reply::Raw {
                    len: bytes.len() as u64,
                },
                bytes,
            ),
            Err(e) => (Reply::Error(e), Vec::new()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_round_trips_and_never_prints_its_password() {
        let job = Job::ZipEntry {
            entry: "secret.txt".into(),
            password: Some(Password::new("hunter2-example".into())),
            raw_cap: None,
        };
        assert!(!format!("{job:?}").contains("hunter2"));
        let mut wire = Vec::new();
        let request = Request {
            job: job.clone(),
            caps: Caps::default(),
            len: 3,
        };
        write_framed(&mut wire, &request, b"abc").expect("write");
        let mut input = &wire[..];
        let back: Request = read_line(&mut input).expect("line");
        assert_eq!(back.job, job);
        assert_eq!(
            read_payload(&mut input, back.len, 3).expect("payload"),
            b"abc"
        );
    }

    /// Reads `job`'s text window by window, `max` characters each, as cursors do.
    fn by_windows(job: &Job, bytes: &[u8], max: usize) -> (String, usize) {
        let caps = Caps {
            max_chars: max,
            ..Caps::default()
        };
        let (mut text, mut windows) = (String::new(), 0);
        loop {
            let window = Job::Window {
                from_char: text.chars().count() as u64,
                job: Box::new(job.clone()),
            };
            let part = run(&window, bytes, &caps).unwrap().into_text().unwrap();
            windows += 1;
            assert!(part.text.chars().count() <= max);
            text.push_str(&part.text);
            if !part.truncated {
                return (text, windows);
            }
            assert!(windows < 10_000, "windows never end");
        }
    }

    proptest::proptest! {
        /// Windows laid end to end are the whole text, each cut where the cap says, whatever
        /// the text (multi-byte characters, markup) and the window size.
        #[test]
        fn windows_end_to_end_are_the_whole_text(
            text in "[a-zé€😀 <>/\n]{0,300}",
            html in proptest::bool::ANY,
            max in 1usize..64,
        ) {
            let job = Job::Text {
                name: None,
                content_type: if html { "text/html" } else { "text/plain" }.into(),
            };
            let whole = run(&job, text.as_bytes(), &Caps::default()).unwrap().into_text().unwrap();
            let (joined, windows) = by_windows(&job, text.as_bytes(), max);
            proptest::prop_assert_eq!(&joined, &whole.text);
            proptest::prop_assert!(windows <= whole.text.chars().count() / max + 1);
        }
    }

    #[test]
    fn a_window_past_the_end_is_empty_and_whole() {
        let job = Job::Window {
            from_char: 99,
            job: Box::new(Job::Text {
                name: None,
                content_type: "text/plain".into(),
            }),
        };
        let e = run(&job, "short".as_bytes(), &Caps::default())
            .unwrap()
            .into_text()
            .unwrap();
        assert_eq!((e.text.as_str(), e.truncated), ("", false));
    }

    #[test]
    fn framing_refuses_short_and_oversized_input() {
        let mut input = &b"{\"len\":1}"[..];
        assert!(
            read_line::<serde_json::Value>(&mut input).is_err(),
            "no newline"
        );
        let mut input = &b"ab"[..];
        assert!(read_payload(&mut input, 3, 10).is_err(), "short");
        assert!(read_payload(&mut input, 11, 10).is_err(), "over the bound");
    }

    #[test]
    fn every_reply_round_trips() {
        let text = Extracted {
            text: "t".into(),
            truncated: true,
            extractor: "pdf",
            unread_parts: 0,
        };
        for reply in [
            Reply::Text(text),
            Reply::Raw { len: 2 },
            Reply::Error(ExtractError::Zip(ZipError::PasswordIncorrect)),
            Reply::Error(ExtractError::Unsupported(Format::Zip)),
        ] {
            let json = serde_json::to_string(&reply).expect("json");
            let back: Reply = serde_json::from_str(&json).expect("back");
            assert_eq!(format!("{back:?}"), format!("{reply:?}"));
        }
        let forged =
            r#"{"text":{"text":"","truncated":false,"extractor":"evil","unread_parts":0}}"#;
        assert!(serde_json::from_str::<Reply>(forged).is_err());
    }
}
