//! Text of attachments, for `get_attachment_content` and evidence search.
//!
//! Purpose: decide what an attachment is ([`detect`], reference §7.1 order: magic bytes, then
//! content type, then file extension) and turn it into bounded text ([`extract_text`]): the
//! text-like formats (TXT/MD, CSV, JSON, XML, HTML, EML) here, PDF, DOCX and XLSX in [`pdf`],
//! [`docx`] and [`xlsx`]; ZIP archives are listed and read entry by entry in [`zip`]. Anything
//! binary we cannot name is [`ExtractError::Unsupported`].
//!
//! Isolation: none of this runs in the server. [`job::run`] is the one entry to the parsers,
//! and only the worker process ([`worker`]) calls it; the server hands jobs to workers through
//! [`pool::Extractor`] (unit tests run jobs in-process).
//!
//! Invariants: never panics on any input (and a panic in a parser is caught in the worker); the
//! text has at most `max_chars` Unicode scalar values and `truncated` says whether anything was
//! left out; archive and container caps are counted while inflating. Bytes are
//! sender-controlled: callers frame the result as untrusted.
//!
//! Callers: the tools layer and the index sync through [`pipeline`] (the one way from an
//! attachment to its text, or to the one reason it was not read), and, for ZIP entry names,
//! [`is_addressable_entry`], shared by the input schema and the ZIP listing.

use crate::mime::{self, Mailbox, html};

pub(crate) mod docx;
pub(crate) mod job;
pub(crate) mod pdf;
pub(crate) mod pipeline;
pub(crate) mod pool;
pub(crate) mod worker;
pub(crate) mod xlsx;
pub(crate) mod zip;

pub(crate) use job::{Answer, Job, Password};
pub(crate) use pool::{Extractor, SlotError};

/// Attachment names an `.eml` extraction lists; the rest are counted.
const EML_ATTACHMENT_NAMES: usize = 30;
/// Addresses an `.eml` extraction lists per header (From, To, Cc); the rest are counted.
const EML_ADDRESSES: usize = 50;

/// What an attachment is, as far as extraction is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Format {
    Text,
    Csv,
    Json,
    Xml,
    Html,
    Eml,
    Pdf,
    Docx,
    Xlsx,
    Zip,
    Unknown,
}

impl Format {
    /// The serialized name (`"text"`, `"csv"`, …).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Csv => "csv",
            Format::Json => "json",
            Format::Xml => "xml",
            Format::Html => "html",
            Format::Eml => "eml",
            Format::Pdf => "pdf",
            Format::Docx => "docx",
            Format::Xlsx => "xlsx",
            Format::Zip => "zip",
            Format::Unknown => "unknown",
        }
    }

    /// Whether extraction can turn this format into text (everything named; an archive's
    /// text is its entries').
    pub(crate) fn has_extractor(self) -> bool {
        self != Format::Unknown
    }

    /// Formats whose bytes are (declared to be) text.
    fn is_textual(self) -> bool {
        matches!(
            self,
            Format::Text | Format::Csv | Format::Json | Format::Xml | Format::Html | Format::Eml
        )
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Extracted text, at most `max_chars` Unicode scalar values.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Extracted {
    pub(crate) text: String,
    /// True when the attachment holds more text than was returned.
    pub(crate) truncated: bool,
    /// One of [`EXTRACTORS`].
    pub(crate) extractor: &'static str,
    /// Parts whose content is not in `text` at all: an EML's own attachments (only their names
    /// are listed), an archive's entries that could not be read. Evidence search counts them as
    /// not read.
    pub(crate) unread_parts: usize,
}

/// Every `extractor` name an [`Extracted`] may carry.
pub(crate) const EXTRACTORS: [&str; 7] = ["text", "html", "eml", "pdf", "docx", "xlsx", "zip"];

/// [`Extracted`] as the worker sends it; the extractor name must be one of [`EXTRACTORS`].
#[derive(serde::Deserialize)]
struct ExtractedWire {
    text: String,
    truncated: bool,
    extractor: String,
    unread_parts: usize,
}

impl<'de> serde::Deserialize<'de> for Extracted {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let wire = <ExtractedWire as serde::Deserialize>::deserialize(d)?;
        Extracted::try_from(wire).map_err(serde::de::Error::custom)
    }
}

impl TryFrom<ExtractedWire> for Extracted {
    type Error = &'static str;

    fn try_from(wire: ExtractedWire) -> Result<Self, Self::Error> {
        let extractor = EXTRACTORS
            .into_iter()
            .find(|known| *known == wire.extractor)
            .ok_or("unknown extractor")?;
        Ok(Extracted {
            text: wire.text,
            truncated: wire.truncated,
            extractor,
            unread_parts: wire.unread_parts,
        })
    }
}

/// The limits of one extraction (`plugin.json` `limits`), carried to the worker with the job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Caps {
    /// `maxExtractedChars`: Unicode scalar values of text returned.
    pub(crate) max_chars: usize,
    /// `maxZipEntries`: central-directory records (directories count) of an attached archive.
    pub(crate) max_zip_entries: usize,
    /// `maxZipUncompressedBytes`: declared total of a listing, real bytes of one entry.
    pub(crate) max_zip_uncompressed_bytes: u64,
    /// `maxContainerEntries`: records of a DOCX/XLSX container.
    pub(crate) max_container_entries: usize,
    /// `maxContainerUncompressedBytes`: real inflated bytes of a DOCX/XLSX container, counted
    /// while inflating.
    pub(crate) max_container_uncompressed_bytes: u64,
}

impl Caps {
    /// The caps `limits` sets.
    pub(crate) fn from_limits(limits: &crate::config::Limits) -> Self {
        Self {
            max_chars: limits.max_extracted_chars,
            max_zip_entries: limits.max_zip_entries,
            max_zip_uncompressed_bytes: limits.max_zip_uncompressed_bytes,
            max_container_entries: limits.max_container_entries,
            max_container_uncompressed_bytes: limits.max_container_uncompressed_bytes,
        }
    }
}

/// The defaults of `plugin.json` (tests and fuzz targets build on them).
#[cfg(any(test, fuzzing))]
impl Default for Caps {
    fn default() -> Self {
        Self::from_limits(&crate::config::Limits::default())
    }
}

/// Why no text came out. The display strings are the stable tool error codes.
#[derive(
    Clone, Copy, Debug, thiserror::Error, PartialEq, Eq, serde::Serialize, serde::Deserialize,
)]
pub(crate) enum ExtractError {
    #[error("UNSUPPORTED_FORMAT")]
    Unsupported(Format),
    /// The bytes could not be parsed (or the parser panicked).
    #[error("EXTRACTION_FAILED")]
    Failed,
    /// An encrypted PDF or a password-protected office document.
    #[error("ENCRYPTED")]
    Encrypted,
    #[error("{0}")]
    Zip(ZipError),
}

/// What went wrong with a ZIP archive, or with the ZIP container of a DOCX/XLSX (a tripped
/// container cap is reported with its ZIP code). Display strings are the tool error codes.
#[derive(
    Clone, Copy, Debug, thiserror::Error, PartialEq, Eq, serde::Serialize, serde::Deserialize,
)]
pub(crate) enum ZipError {
    /// Not a readable archive (bad central directory, multi-disk, a stream error).
    #[error("ZIP_INVALID")]
    Invalid,
    /// More records than the entry cap.
    #[error("ZIP_TOO_MANY_ENTRIES")]
    TooManyEntries,
    /// Declared or real (inflated) bytes over the byte cap.
    #[error("ZIP_TOO_LARGE")]
    TooLarge,
    /// No addressable entry has that exact name.
    #[error("ZIP_ENTRY_NOT_FOUND")]
    EntryNotFound,
    /// The entry is encrypted and no password was given.
    #[error("ZIP_ENCRYPTED")]
    Encrypted,
    /// The password given does not decrypt the entry (ZipCrypto or AES).
    #[error("ZIP_PASSWORD_INCORRECT")]
    PasswordIncorrect,
    /// An encryption or compression method mailgate does not read (strong encryption, bzip2…).
    #[error("ZIP_UNSUPPORTED_ENCRYPTION")]
    Unsupported,
    /// An archive inside an archive.
    #[error("ZIP_NESTED")]
    Nested,
}

/// Longest ZIP entry name that can be listed and addressed (reference §4.2, §5.11).
pub(crate) const MAX_ENTRY_CHARS: usize = 512;

/// How many leading bytes [`looks_binary`] inspects.
const SNIFF_BYTES: usize = 8 * 1024;

/// Sniffs the format: magic bytes first (`%PDF`; `PK` plus name or content type for
/// DOCX/XLSX/ZIP), then the content type, then the file extension (reference §7.1). A generic
/// content type (`application/octet-stream`, none) with no known extension is `Text` when the
/// bytes look like text, else `Unknown`. A textual format whose bytes look binary is `Unknown`.
pub(crate) fn detect(name: Option<&str>, content_type: &str, bytes: &[u8]) -> Format {
    let media = media_type(content_type);
    let ext = name.and_then(extension);
    let ext = ext.as_deref();
    if bytes.starts_with(b"%PDF") {
        return Format::Pdf;
    }
    if bytes.starts_with(b"PK") {
        return if ext == Some("xlsx") || media.contains("spreadsheetml") {
            Format::Xlsx
        } else if ext == Some("docx") || media.contains("wordprocessingml") {
            Format::Docx
        } else if ext == Some("zip") || media.contains("zip") {
            Format::Zip
        } else {
            Format::Unknown
        };
    }
    let by_ext = ext.and_then(format_from_extension);
    let format = match format_from_media_type(&media) {
        // `text/plain` is what many clients send for any text file: a more specific textual
        // extension wins (`.csv`, and `.html`, which must be rendered rather than shown raw).
        Some(Format::Text) => by_ext.filter(|f| f.is_textual()).unwrap_or(Format::Text),
        Some(format) => format,
        None => by_ext.unwrap_or_else(|| {
            if is_generic_media_type(&media) && !looks_binary(bytes) {
                Format::Text
            } else {
                Format::Unknown
            }
        }),
    };
    if format.is_textual() && looks_binary(bytes) {
        Format::Unknown
    } else {
        format
    }
}

/// Extracts at most `max_chars` Unicode scalar values of text (see the module invariants).
///
/// Text, CSV, JSON, XML: decoded as-is (BOM aware, UTF-16 by BOM, otherwise UTF-8 or a
/// windows-1252 fallback), CRLF → LF. HTML: [`html::to_text`]. EML: Subject/From/To/Cc/Date
/// lines, attachment names (each list cut to a bound, the rest counted and `truncated` set), a
/// blank line, then the body text. Everything else:
/// [`ExtractError::Unsupported`].
pub(crate) fn extract_text(
    name: Option<&str>,
    content_type: &str,
    bytes: &[u8],
    caps: &Caps,
) -> Result<Extracted, ExtractError> {
    let max_chars = caps.max_chars;
    match detect(name, content_type, bytes) {
        Format::Text | Format::Csv | Format::Json | Format::Xml => Ok(plain(bytes, max_chars)),
        Format::Html => Ok(html_text(bytes, max_chars)),
        Format::Eml => eml(bytes, max_chars),
        Format::Pdf => pdf::extract(bytes, caps),
        Format::Docx => docx::extract(bytes, caps),
        Format::Xlsx => xlsx::extract(bytes, caps),
        unsupported @ (Format::Zip | Format::Unknown) => {
            Err(ExtractError::Unsupported(unsupported))
        }
    }
}

/// The `entry` addressability predicate (reference §5.11): 1..=512 Unicode scalar values, not
/// starting with `/`, no backslash, no `..` path segment (`report..v2.pdf` is fine), and — a
/// mailgate addition — no NUL. The input schema and the ZIP listing both use it, so every listed
/// name can be extracted and vice versa.
pub(crate) fn is_addressable_entry(name: &str) -> bool {
    (1..=MAX_ENTRY_CHARS).contains(&name.chars().count())
        && !name.starts_with('/')
        && !name.contains('\\')
        && !name.contains('\0')
        && !name.split('/').any(|segment| segment == "..")
}

fn plain(bytes: &[u8], max_chars: usize) -> Extracted {
    // Each scalar value takes at most 4 bytes in every encoding we decode, so this prefix holds
    // more than `max_chars` of them whenever the input does.
    let budget = max_chars.saturating_mul(4).saturating_add(4);
    let (prefix, input_cut) = byte_prefix(bytes, budget);
    let text = mime::decode_unlabelled(prefix);
    let text = if text.contains('\r') {
        text.replace("\r\n", "\n")
    } else {
        text
    };
    let (text, cut) = html::truncate_chars(text, max_chars);
    Extracted {
        text,
        truncated: cut || input_cut,
        extractor: "text",
        unread_parts: 0,
    }
}

fn html_text(bytes: &[u8], max_chars: usize) -> Extracted {
    let (prefix, input_cut) = byte_prefix(bytes, html::MAX_HTML_INPUT_BYTES);
    let source = match meta_charset_decoder(prefix) {
        Some(decode) if std::str::from_utf8(prefix).is_err() => decode(prefix),
        _ => mime::decode_unlabelled(prefix),
    };
    let (text, cut) = html::to_text_bounded(&source, max_chars);
    Extracted {
        text,
        truncated: cut || input_cut,
        extractor: "html",
        unread_parts: 0,
    }
}

fn eml(bytes: &[u8], max_chars: usize) -> Result<Extracted, ExtractError> {
    let message = mime::try_parse(bytes).ok_or(ExtractError::Failed)?;
    // The sender sizes these lists: cut each, so a flood of names cannot push the body out of
    // the `max_chars` budget, and count what was cut.
    let mut cut = false;
    let from = listed(&message.from, EML_ADDRESSES, render_mailbox, &mut cut);
    let to = listed(&message.to, EML_ADDRESSES, render_mailbox, &mut cut);
    let cc = listed(&message.cc, EML_ADDRESSES, render_mailbox, &mut cut);
    let attachments = listed(
        &message.attachments,
        EML_ATTACHMENT_NAMES,
        |a| a.name.clone().unwrap_or_else(|| a.content_type.clone()),
        &mut cut,
    );
    let mut out = String::new();
    let mut line = |label: &str, value: &str| {
        if !value.is_empty() {
            out.push_str(label);
            out.push_str(": ");
            out.push_str(value);
            out.push('\n');
        }
    };
    line("Subject", message.subject.as_deref().unwrap_or_default());
    line("From", &from);
    line("To", &to);
    line("Cc", &cc);
    line(
        "Date",
        &message
            .date
            .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
            .unwrap_or_default(),
    );
    line("Attachments", &attachments);
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(&message.body_text);
    let (text, truncated) = html::truncate_chars(out, max_chars);
    let truncated = truncated || message.cuts.header || message.cuts.body;
    Ok(Extracted {
        text,
        truncated: truncated || cut,
        extractor: "eml",
        // A structural cut means parts were never parsed, and a body part no matcher reads
        // (issue 36) was not read either: count one more part not read for each.
        unread_parts: message.attachments.len()
            + usize::from(message.cuts.structure)
            + usize::from(message.cuts.part.is_some()),
    })
}

fn render_mailbox(m: &Mailbox) -> String {
    match (&m.name, &m.address) {
        (Some(name), Some(address)) => format!("{name} <{address}>"),
        (Some(only), None) | (None, Some(only)) => only.clone(),
        (None, None) => String::new(),
    }
}

/// The first `max` items, comma-separated, then `... and N more` (setting `cut`) if there are
/// more.
fn listed<T>(items: &[T], max: usize, render: impl Fn(&T) -> String, cut: &mut bool) -> String {
    let mut out = items
        .iter()
        .take(max)
        .map(render)
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > max {
        *cut = true;
        out.push_str(&format!(", ... and {} more", items.len() - max));
    }
    out
}

/// At most `max` leading bytes, not ending inside a UTF-8 sequence when the bytes are UTF-8 up
/// to the cut (a split character would otherwise tip the charset guess), and whether anything
/// was cut.
fn byte_prefix(bytes: &[u8], max: usize) -> (&[u8], bool) {
    let Some(prefix) = bytes.get(..max) else {
        return (bytes, false);
    };
    let utf16 = prefix.starts_with(b"\xFF\xFE") || prefix.starts_with(b"\xFE\xFF");
    match std::str::from_utf8(prefix) {
        Err(e) if !utf16 && e.error_len().is_none() => (&prefix[..e.valid_up_to()], true),
        _ => (prefix, true),
    }
}

/// The decoder named by a `<meta charset=…>` / `content="…; charset=…"` in the first KiB, when
/// mail-parser knows that charset.
fn meta_charset_decoder(html: &[u8]) -> Option<fn(&[u8]) -> String> {
    let head = html.get(..1024).unwrap_or(html).to_ascii_lowercase();
    let at = head.windows(8).position(|w| w == b"charset=")? + 8;
    let label: Vec<u8> = head[at..]
        .iter()
        .copied()
        .skip_while(|b| *b == b'"' || *b == b'\'' || b.is_ascii_whitespace())
        .take_while(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(b))
        .collect();
    mail_parser::decoders::charsets::map::charset_decoder(&label)
}

/// `type/subtype` in lower case, parameters and whitespace removed.
fn media_type(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// Lower-case extension of the last path component, if any.
fn extension(name: &str) -> Option<String> {
    let file = name.rsplit(['/', '\\']).next().unwrap_or(name);
    let (stem, ext) = file.rsplit_once('.')?;
    (!stem.is_empty() && !ext.is_empty()).then(|| ext.trim().to_ascii_lowercase())
}

fn format_from_media_type(media: &str) -> Option<Format> {
    let format = match media {
        "text/html" | "application/xhtml+xml" => Format::Html,
        "message/rfc822" | "message/global" => Format::Eml,
        "application/pdf" | "application/x-pdf" => Format::Pdf,
        "application/zip" | "application/x-zip" | "application/x-zip-compressed" => Format::Zip,
        "text/tab-separated-values" => Format::Csv,
        m if m.contains("spreadsheetml") => Format::Xlsx,
        m if m.contains("wordprocessingml") => Format::Docx,
        m if m.contains("json") => Format::Json,
        m if m.contains("csv") => Format::Csv,
        m if m.contains("xml") => Format::Xml,
        m if m.starts_with("text/") => Format::Text,
        _ => return None,
    };
    Some(format)
}

fn format_from_extension(ext: &str) -> Option<Format> {
    let format = match ext {
        "txt" | "text" | "md" | "markdown" | "log" => Format::Text,
        "csv" | "tsv" => Format::Csv,
        "json" => Format::Json,
        "xml" => Format::Xml,
        "htm" | "html" | "xhtml" => Format::Html,
        "eml" => Format::Eml,
        "pdf" => Format::Pdf,
        "docx" => Format::Docx,
        "xlsx" => Format::Xlsx,
        "zip" => Format::Zip,
        _ => return None,
    };
    Some(format)
}

/// Content types that say nothing about the content.
fn is_generic_media_type(media: &str) -> bool {
    matches!(
        media,
        "" | "application/octet-stream" | "application/unknown" | "binary/octet-stream"
    )
}

/// Binary by a known magic number, a NUL byte, or many control characters in the first
/// [`SNIFF_BYTES`]. UTF-16 with a BOM is text.
fn looks_binary(bytes: &[u8]) -> bool {
    const MAGIC: &[&[u8]] = &[
        b"\x89PNG",
        b"GIF8",
        b"\xFF\xD8\xFF",
        b"\xD0\xCF\x11\xE0",
        b"\x1F\x8B",
        b"Rar!",
        b"7z\xBC\xAF",
        b"\x7FELF",
        b"BZh",
        b"\xFD7zXZ",
    ];
    let head = bytes.get(..SNIFF_BYTES).unwrap_or(bytes);
    if head.starts_with(b"\xFF\xFE") || head.starts_with(b"\xFE\xFF") {
        return false;
    }
    if MAGIC.iter().any(|m| head.starts_with(m)) || head.contains(&0) {
        return true;
    }
    let controls = head
        .iter()
        .filter(|b| b.is_ascii_control() && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0C | 0x1B))
        .count();
    controls * 10 > head.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Caps with `max_chars` and the default container limits.
    pub(crate) fn caps(max_chars: usize) -> Caps {
        Caps {
            max_chars,
            ..Caps::default()
        }
    }

    const MAX: usize = 10_000;

    #[test]
    fn detect_by_magic_first() {
        assert_eq!(
            detect(Some("scan.tmp"), "text/plain", b"%PDF-1.7\n"),
            Format::Pdf
        );
        let zip = b"PK\x03\x04rest";
        assert_eq!(
            detect(Some("a.xlsx"), "application/octet-stream", zip),
            Format::Xlsx
        );
        assert_eq!(
            detect(
                None,
                "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
                zip
            ),
            Format::Xlsx
        );
        assert_eq!(detect(Some("Letter.DOCX"), "", zip), Format::Docx);
        assert_eq!(
            detect(
                None,
                "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
                zip
            ),
            Format::Docx
        );
        assert_eq!(
            detect(Some("bundle.zip"), "application/octet-stream", zip),
            Format::Zip
        );
        assert_eq!(
            detect(None, "application/x-zip-compressed", zip),
            Format::Zip
        );
        assert_eq!(
            detect(Some("slides.pptx"), "application/octet-stream", zip),
            Format::Unknown
        );
        assert_eq!(
            detect(Some("notes.txt"), "text/plain", zip),
            Format::Unknown
        );
    }

    #[test]
    fn detect_by_content_type_then_extension() {
        assert_eq!(
            detect(None, "text/plain; charset=utf-8", b"hi"),
            Format::Text
        );
        assert_eq!(detect(None, "text/markdown", b"# hi"), Format::Text);
        assert_eq!(detect(None, "TEXT/CSV", b"a,b"), Format::Csv);
        assert_eq!(detect(None, "application/json", b"{}"), Format::Json);
        assert_eq!(detect(None, "application/ld+json", b"{}"), Format::Json);
        assert_eq!(detect(None, "application/xml", b"<a/>"), Format::Xml);
        assert_eq!(detect(None, "text/html", b"<p>"), Format::Html);
        assert_eq!(detect(None, "application/xhtml+xml", b"<p>"), Format::Html);
        assert_eq!(
            detect(None, "message/rfc822", b"Subject: x\r\n\r\n"),
            Format::Eml
        );
        // The content type outranks the extension...
        assert_eq!(
            detect(Some("data.txt"), "application/json", b"{}"),
            Format::Json
        );
        // ...except that generic text/plain yields to a more specific textual extension.
        assert_eq!(detect(Some("data.csv"), "text/plain", b"a,b"), Format::Csv);
        assert_eq!(
            detect(Some("page.html"), "text/plain", b"<p>"),
            Format::Html
        );
        assert_eq!(
            detect(Some("odd.pdf"), "text/plain", b"just text"),
            Format::Text
        );
        for (name, format) in [
            ("a.txt", Format::Text),
            ("README.md", Format::Text),
            ("a.CSV", Format::Csv),
            ("a.json", Format::Json),
            ("a.xml", Format::Xml),
            ("a.htm", Format::Html),
            ("a.html", Format::Html),
            ("fwd.eml", Format::Eml),
            ("x.pdf", Format::Pdf),
            ("x.docx", Format::Docx),
            ("x.xlsx", Format::Xlsx),
            ("x.zip", Format::Zip),
        ] {
            assert_eq!(
                detect(Some(name), "application/octet-stream", b"abc"),
                format,
                "{name}"
            );
        }
    }

    #[test]
    fn detect_unknown_and_sniffed() {
        assert_eq!(
            detect(Some("photo.png"), "image/png", b"\x89PNG\r\n\x1a\n"),
            Format::Unknown
        );
        assert_eq!(
            detect(Some("old.doc"), "application/msword", b"\xD0\xCF\x11\xE0"),
            Format::Unknown
        );
        assert_eq!(
            detect(Some("blob"), "application/octet-stream", b"\x00\x01\x02"),
            Format::Unknown
        );
        assert_eq!(
            detect(None, "application/octet-stream", b"plain words\n"),
            Format::Text
        );
        assert_eq!(
            detect(Some("noext"), "", "utf-8 ✓".as_bytes()),
            Format::Text
        );
        assert_eq!(detect(None, "image/svg+xml", b"<svg/>"), Format::Xml);
        assert_eq!(
            detect(None, "application/x-unknown-thing", b"text"),
            Format::Unknown
        );
        // Declared text but binary bytes: not text.
        assert_eq!(
            detect(Some("a.txt"), "text/plain", b"ab\x00cd"),
            Format::Unknown
        );
        assert_eq!(
            detect(None, "text/plain", b"\xFF\xFEa\x00b\x00"),
            Format::Text
        );
    }

    #[test]
    fn extract_plain_utf8_bom_utf16_and_fallbacks() {
        let ok = |bytes: &[u8]| extract_text(Some("a.txt"), "text/plain", bytes, &caps(MAX));
        assert_eq!(
            ok(b"line1\r\nline2").map(|e| e.text),
            Ok("line1\nline2".to_owned())
        );
        assert_eq!(
            ok(b"\xEF\xBB\xBFbom text").map(|e| e.text),
            Ok("bom text".to_owned())
        );
        assert_eq!(
            ok(b"\xFF\xFEh\x00\xe9\x00").map(|e| e.text),
            Ok("hé".to_owned())
        );
        assert_eq!(
            ok(b"\xFE\xFF\x00h\x00\xe9").map(|e| e.text),
            Ok("hé".to_owned())
        );
        assert_eq!(ok(b"caf\xe9 \x80").map(|e| e.text), Ok("café €".to_owned()));
        let extracted = ok("ünïcödé".as_bytes()).expect("text");
        assert_eq!(
            extracted,
            Extracted {
                text: "ünïcödé".into(),
                truncated: false,
                extractor: "text",
                unread_parts: 0,
            }
        );
        let csv = extract_text(Some("d.csv"), "text/csv", b"a,b\n1,2\n", &caps(MAX)).expect("csv");
        assert_eq!(csv.text, "a,b\n1,2\n");
        let json =
            extract_text(None, "application/json", br#"{"k": [1, 2]}"#, &caps(MAX)).expect("json");
        assert_eq!(json.text, r#"{"k": [1, 2]}"#);
        let xml = extract_text(Some("x.xml"), "", b"<a><b>t</b></a>", &caps(MAX)).expect("xml");
        assert_eq!(
            (xml.text.as_str(), xml.extractor),
            ("<a><b>t</b></a>", "text")
        );
    }

    #[test]
    fn extract_plain_is_bounded_in_scalar_values() {
        let text = "é".repeat(1_000);
        let e =
            extract_text(Some("a.txt"), "text/plain", text.as_bytes(), &caps(10)).expect("text");
        assert_eq!(e.text, "é".repeat(10));
        assert!(e.truncated);
        let e = extract_text(
            Some("a.txt"),
            "text/plain",
            "é".repeat(10).as_bytes(),
            &caps(10),
        )
        .expect("text");
        assert!(!e.truncated);
        // A cut inside a multi-byte character must not flip the charset guess.
        let mixed = format!("ab{}", "€".repeat(100));
        for max in 0..12 {
            let e = extract_text(None, "text/plain", mixed.as_bytes(), &caps(max)).expect("text");
            assert_eq!(
                e.text,
                mixed.chars().take(max).collect::<String>(),
                "max {max}"
            );
            assert!(e.truncated);
        }
        let e = extract_text(None, "text/plain", b"", &caps(5)).expect("empty");
        assert_eq!((e.text.as_str(), e.truncated), ("", false));
        let e = extract_text(None, "text/plain", b"abc", &caps(0)).expect("zero");
        assert_eq!((e.text.as_str(), e.truncated), ("", true));
    }

    #[test]
    fn extract_html() {
        let page = b"<html><head><style>x{}</style></head><body><p>Quarterly <b>numbers</b></p>\
            <script>evil()</script><div style='display:none'>hidden</div>\
            <img src='https://img.example.com/p.gif'></body></html>";
        let e = extract_text(Some("r.html"), "text/html", page, &caps(MAX)).expect("html");
        assert_eq!(
            e,
            Extracted {
                text: "Quarterly numbers".into(),
                truncated: false,
                extractor: "html",
                unread_parts: 0,
            }
        );
        let e =
            extract_text(Some("r.htm"), "application/octet-stream", page, &caps(9)).expect("html");
        assert_eq!((e.text.as_str(), e.truncated), ("Quarterly", true));
        let latin2 = b"<meta charset=\"iso-8859-2\"><p>\xb3\xf3d\xbc</p>";
        let e = extract_text(None, "text/html", latin2, &caps(MAX)).expect("latin2");
        assert_eq!(e.text, "łódź");
        let latin1 = b"<p>na\xefve</p>";
        assert_eq!(
            extract_text(None, "text/html", latin1, &caps(MAX)).map(|e| e.text),
            Ok("naïve".into())
        );
    }

    #[test]
    fn extract_eml() {
        let raw = b"From: Ann Example <ann@example.com>\r\nTo: bob@example.org\r\n\
            Subject: Minutes\r\nDate: Wed, 2 Jul 2025 09:30:00 +0000\r\n\
            Content-Type: multipart/mixed; boundary=B\r\n\r\n--B\r\nContent-Type: text/plain\r\n\r\n\
            See notes.\r\n--B\r\nContent-Type: text/csv; name=n.csv\r\n\r\na,b\r\n--B--\r\n";
        let e = extract_text(Some("fwd.eml"), "message/rfc822", raw, &caps(MAX)).expect("eml");
        assert_eq!(e.extractor, "eml");
        assert_eq!(
            e.text,
            "Subject: Minutes\nFrom: Ann Example <ann@example.com>\nTo: bob@example.org\n\
             Date: 2025-07-02T09:30:00Z\nAttachments: n.csv\n\nSee notes."
        );
        assert!(!e.truncated);
        let e = extract_text(Some("fwd.eml"), "message/rfc822", raw, &caps(16)).expect("eml");
        assert_eq!((e.text.as_str(), e.truncated), ("Subject: Minutes", true));
        // Missing headers are simply left out.
        let e = extract_text(
            None,
            "message/rfc822",
            b"X-A: 1\r\n\r\nonly body",
            &caps(MAX),
        )
        .expect("eml");
        assert_eq!(e.text, "only body");
        assert_eq!(
            extract_text(Some("empty.eml"), "message/rfc822", b"", &caps(MAX)),
            Err(ExtractError::Failed)
        );
    }

    // See: issue 8, finding 3 (sender-sized lists in an .eml's header lines).
    #[test]
    fn issue_8_eml_lists_are_cut_so_the_body_stays_in_budget() {
        let mut raw = String::from(
            "From: a@example.org\r\nTo: b@example.org\r\nSubject: Many\r\n\
             Content-Type: multipart/mixed; boundary=B\r\n\r\n\
             --B\r\nContent-Type: text/plain\r\n\r\nBODY-MARKER\r\n",
        );
        for i in 0..2_000 {
            raw.push_str(&format!(
                "--B\r\nContent-Type: text/plain; name=part-{i}.txt\r\n\r\nx\r\n"
            ));
        }
        raw.push_str("--B--\r\n");
        let e = extract_text(
            Some("fwd.eml"),
            "message/rfc822",
            raw.as_bytes(),
            &caps(10_000),
        )
        .expect("eml");
        assert!(e.text.contains("BODY-MARKER"), "{}", e.text);
        assert!(e.text.contains("part-29.txt, ... and 1970 more\n"));
        assert!(!e.text.contains("part-30.txt"));
        assert!(e.truncated, "a cut list counts as truncation");
    }

    #[test]
    fn unsupported_formats() {
        // PDF, DOCX and XLSX have extractors (pdf.rs, docx.rs, xlsx.rs), tested there.
        let cases: [(Option<&str>, &str, &[u8], Format); 3] = [
            (Some("a.zip"), "application/zip", b"PK\x03\x04", Format::Zip),
            (Some("a.png"), "image/png", b"\x89PNG\r\n", Format::Unknown),
            (
                None,
                "application/octet-stream",
                b"\x00\x00\x01",
                Format::Unknown,
            ),
        ];
        for (name, ct, bytes, format) in cases {
            assert_eq!(
                extract_text(name, ct, bytes, &caps(MAX)),
                Err(ExtractError::Unsupported(format)),
                "{name:?}"
            );
        }
        // DOCX and XLSX have extractors (issue 13): a bare local header is a broken document.
        for name in ["a.docx", "a.xlsx"] {
            assert_eq!(
                extract_text(Some(name), "", b"PK\x03\x04", &caps(MAX)),
                Err(ExtractError::Failed),
                "{name}"
            );
        }
        assert_eq!(
            ExtractError::Unsupported(Format::Pdf).to_string(),
            "UNSUPPORTED_FORMAT"
        );
        assert_eq!(ExtractError::Failed.to_string(), "EXTRACTION_FAILED");
    }

    #[test]
    fn format_serializes_lowercase() {
        for format in [
            Format::Text,
            Format::Csv,
            Format::Eml,
            Format::Docx,
            Format::Unknown,
        ] {
            let json = serde_json::to_string(&format).expect("serialize");
            assert_eq!(json, format!("\"{}\"", format.as_str()));
            assert_eq!(format.to_string(), format.as_str());
        }
    }

    #[test]
    fn addressable_entries() {
        for ok in [
            "a.txt",
            "dir/sub/report..v2.pdf",
            "..hidden",
            "a/..b/c",
            "é",
            &"x".repeat(512),
        ] {
            assert!(is_addressable_entry(ok), "{ok}");
        }
        let too_long = "x".repeat(513);
        let multibyte_ok = "é".repeat(512);
        assert!(is_addressable_entry(&multibyte_ok));
        for bad in [
            "",
            "/etc/passwd",
            "..",
            "../x",
            "a/../b",
            "a/..",
            "a\\b",
            "nul\0byte",
            &too_long,
        ] {
            assert!(!is_addressable_entry(bad), "{bad:?}");
        }
    }

    #[test]
    fn extension_parsing() {
        assert_eq!(extension("a.tar.GZ").as_deref(), Some("gz"));
        assert_eq!(extension("dir.d/file").as_deref(), None);
        assert_eq!(extension(".bashrc"), None);
        assert_eq!(extension("trailing."), None);
        assert_eq!(extension("c:\\x\\y.Txt").as_deref(), Some("txt"));
    }

    proptest::proptest! {
        #[test]
        fn extraction_never_panics_and_is_bounded(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512),
            max in 0usize..64,
            ct in proptest::sample::select(vec![
                "text/plain", "text/html", "message/rfc822", "application/json", "",
                "application/octet-stream", "application/pdf",
            ]),
        ) {
            if let Ok(e) = extract_text(None, ct, &bytes, &caps(max)) {
                proptest::prop_assert!(e.text.chars().count() <= max);
            }
        }
    }
}
