//! What a message's BODYSTRUCTURE says about its attachments and body text, so that the IMAP
//! backend can list attachments and preview a message without downloading it, then fetch one
//! part by its section (`BODY.PEEK[2]`, `BODY.PEEK[1.2]`) and decode it ([`decode_part`]).
//! Invariants: sections are numbered as RFC 3501 §6.4.5 numbers them (a non-multipart message is
//! section `1`; an attached `message/rfc822` is one attachment and is not descended into); which
//! leaves are attachments, their names, content types and `is_inline` follow `crate::mime` (the
//! Maildir backend's view through mail-parser) part for part, so both backends list the same
//! attachments for the same message; names are decoded (RFC 2047, RFC 2231) by mail-parser's own
//! parameter parser and bounded like mime's header strings. The BODYSTRUCTURE is untrusted server
//! data: the walk stops at [`MAX_DEPTH`] nested multiparts and [`MAX_PARTS`] parts and says so
//! (`cut`), and parameter text handed to mail-parser is bounded ([`MAX_PARAM_BYTES`]). Callers:
//! the IMAP backend only.

use std::borrow::Cow;

use imap_proto::{BodyContentCommon, BodyParams, BodyStructure, ContentEncoding};
use mail_parser::HeaderValue;
use mail_parser::decoders::charsets::map::charset_decoder;
use mail_parser::parsers::MessageStream;

use crate::backends::AttachmentMeta;
use crate::mime::{self, MAX_HEADER_CHARS};

/// Nested multiparts the walk enters; deeper ones are left out and the result is `cut`. Real mail
/// nests a handful (mixed → alternative → related); mail-parser's own bound is 64.
pub(crate) const MAX_DEPTH: usize = 32;
/// Parts (multiparts included) the walk looks at; the rest are left out and the result is `cut`.
pub(crate) const MAX_PARTS: usize = 1_000;
/// Bytes of one parameter list (`name`/`filename` only) handed to mail-parser's parser: enough for
/// a [`MAX_HEADER_CHARS`] name even as base64 encoded-words of 4-byte characters.
pub(crate) const MAX_PARAM_BYTES: usize = 64 * 1024;
/// Longest charset label kept; real labels are short tokens (`iso-8859-15`, `windows-1252`).
const MAX_CHARSET_BYTES: usize = 64;
/// RFC 6838 limits type and subtype names to 127 characters each (as `crate::mime` does).
const MAX_MEDIA_NAME: usize = 127;
/// Content type reported for an unusable one (as `crate::mime` does).
/// What a part with an invalid type or subtype is read as (RFC 2045 §5.2).
const INVALID_CONTENT_TYPE: &str = "text/plain";
/// A base64 line as MIME writes it: 76 characters and CRLF (RFC 2045 §6.8).
const BASE64_LINE: u64 = 78;

/// A part's Content-Transfer-Encoding, which decides how its fetched bytes are decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TransferEncoding {
    /// 7bit, 8bit, binary, and any unknown encoding (mail-parser reads those as-is too).
    Identity,
    Base64,
    QuotedPrintable,
}

/// One attachment of a message: its metadata (`meta.id` is the IMAP section, e.g. `2` or
/// `1.2`) and how its section's bytes decode.
#[derive(Clone, Debug)]
pub(crate) struct PartInfo {
    /// `size` is an estimate of the decoded size from the encoded octets (see [`decoded_size`]),
    /// for refusing a too-large attachment before downloading it; the decoded bytes are exact.
    pub(crate) meta: AttachmentMeta,
    pub(crate) encoding: TransferEncoding,
    /// The Content-Type `charset` label (text parts), so that a text attachment can be
    /// transcoded as the Maildir backend does; `None` when absent or not a short token.
    pub(crate) charset: Option<String>,
}

/// The attachments of a message in part order, and whether a bound left parts out.
#[derive(Clone, Debug, Default)]
pub(crate) struct Attachments {
    pub(crate) parts: Vec<PartInfo>,
    /// [`MAX_DEPTH`] or [`MAX_PARTS`] left parts unread: the list may miss attachments.
    pub(crate) cut: bool,
    /// A name was longer than mime's header bound ([`MAX_HEADER_CHARS`] characters, or
    /// [`MAX_PARAM_BYTES`] of parameter text) and is truncated.
    pub(crate) name_cut: bool,
}

/// Where a message's body text is: the section to fetch (`BODY.PEEK[<section>]<0.2048>` for a
/// preview), how it decodes, and whether it is HTML (to be rendered to text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TextSection {
    pub(crate) section: String,
    pub(crate) encoding: TransferEncoding,
    pub(crate) charset: Option<String>,
    pub(crate) is_html: bool,
}

/// Everything the walk finds, in one pass: the attachments and the body text's section.
#[derive(Clone, Debug, Default)]
pub(crate) struct Structure {
    pub(crate) attachments: Attachments,
    /// Where the Maildir view's body text starts: the first text/plain body part, or an inline
    /// text/html part before it outside any alternative (mime renders both, in order); else
    /// the first text/html body part. `None` when the message has no body text outside attached
    /// messages (or a bound cut it off: then `attachments.cut` is set).
    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "the walk's body rule decides which text parts are attachments; the \
                      section itself is read by the tests that pin that rule to mime's (search \
                      reads still fetch whole messages)"
        )
    )]
    pub(crate) text: Option<TextSection>,
}

/// The attachments of a message, in part order.
pub(crate) fn attachments(structure: &BodyStructure<'_>) -> Attachments {
    analyze(structure).attachments
}

/// Attachments and body text section of one BODYSTRUCTURE, in one walk.
pub(crate) fn analyze(structure: &BodyStructure<'_>) -> Structure {
    let mut walk = Walk::default();
    let mut root = Container::message();
    // RFC 3501 §6.4.5: the parts of a top-level multipart are 1, 2, …; a top-level
    // non-multipart body is section 1.
    let section = match structure {
        BodyStructure::Multipart { .. } => String::new(),
        _ => "1".to_owned(),
    };
    walk.visit(structure, section, 1, &mut root, 0);
    Structure {
        attachments: Attachments {
            parts: walk.parts,
            cut: walk.cut,
            name_cut: walk.name_cut,
        },
        text: walk.text.or(walk.html),
    }
}

/// The decoded bytes of a fetched section; `None` when its base64 is broken.
///
/// The decoders are mail-parser's MIME body decoders, the ones that produced the Maildir
/// backend's bytes of the same part: base64 skips CR, LF, blanks and padding and fails on any
/// other byte; quoted-printable drops soft line breaks and keeps a malformed `=XY` as-is, as
/// mail-parser does for a Maildir message (a strict decoder would refuse the same attachment on
/// one backend only).
pub(crate) fn decode_part(bytes: &[u8], encoding: TransferEncoding) -> Option<Vec<u8>> {
    // An empty boundary decodes to the end of `bytes`; `usize::MAX` is the decoders' failure.
    let (end, decoded) = match encoding {
        TransferEncoding::Identity => return Some(bytes.to_vec()),
        TransferEncoding::Base64 => MessageStream::new(bytes).decode_base64_mime(b""),
        TransferEncoding::QuotedPrintable => {
            MessageStream::new(bytes).decode_quoted_printable_mime(b"")
        }
    };
    (end != usize::MAX).then(|| decoded.into_owned())
}

/// The bytes the Maildir backend gives for the same attachment, from its `decode_part` output:
/// a text part whose charset mail-parser knows is transcoded to UTF-8 (as `crate::mime` does,
/// since the label does not travel with the bytes); anything else is returned as it is.
/// `us-ascii` is never transcoded: servers (Dovecot) report it for a text part without a charset
/// (RFC 2045's default), where mime keeps the original bytes, often UTF-8.
pub(crate) fn attachment_bytes(decoded: Vec<u8>, info: &PartInfo) -> Vec<u8> {
    if !info.meta.content_type.starts_with("text/") {
        return decoded;
    }
    match info
        .charset
        .as_deref()
        .filter(|c| !c.eq_ignore_ascii_case("us-ascii"))
        .and_then(|c| charset_decoder(c.as_bytes()))
    {
        Some(decode) => decode(&decoded).into_bytes(),
        None => decoded,
    }
}

/// The decoded size of a part of `octets` encoded bytes, as an estimate known before the fetch.
///
/// Base64: `(octets − 2 × ⌊octets / 78⌋) × 3 / 4`, i.e. the encoded characters without the CRLF
/// that ends each full 76-character line, three bytes per four characters. For base64 written in
/// 76-character CRLF lines (what mail software writes) it is within 4 bytes of the decoded size
/// (padding, and a line end after a short last line); longer lines or LF-only line ends make it
/// up to about 1 % high, never low by more than those 4 bytes. Other encodings: the octets, exact for identity and an upper bound for
/// quoted-printable.
pub(crate) fn decoded_size(octets: u32, encoding: TransferEncoding) -> u64 {
    let octets = u64::from(octets);
    match encoding {
        TransferEncoding::Base64 => (octets - 2 * (octets / BASE64_LINE)) * 3 / 4,
        TransferEncoding::Identity | TransferEncoding::QuotedPrintable => octets,
    }
}

/// How mail-parser classifies a part by its Content-Type (`parsers/message.rs`, `mime_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Mixed,
    Alternative,
    Related,
    Digest,
    /// The root of a message (what mail-parser's walk starts in).
    Message,
    TextPlain,
    TextHtml,
    TextOther,
    /// image, audio, video
    Inline,
    Other,
}

/// mail-parser's per-container state: the walk mirrors it so that a part is an attachment
/// exactly when mail-parser puts it in `Message::attachments`. A child container starts from a
/// copy of its parent's flags, and its changes stay with it (mail-parser restores the parent's
/// state from its stack).
#[derive(Clone, Copy, Debug)]
struct Container {
    kind: Kind,
    in_alternative: bool,
    need_html: bool,
    need_text: bool,
}

impl Container {
    fn message() -> Self {
        Container {
            kind: Kind::Message,
            in_alternative: false,
            need_html: true,
            need_text: true,
        }
    }
}

#[derive(Default)]
struct Walk {
    parts: Vec<PartInfo>,
    text: Option<TextSection>,
    html: Option<TextSection>,
    seen: usize,
    cut: bool,
    name_cut: bool,
}

impl Walk {
    /// Visits `node`, the `position`-th (from 1) part of `parent`, at `section`, nested in
    /// `depth` multiparts. Recursion is bounded by [`MAX_DEPTH`].
    fn visit(
        &mut self,
        node: &BodyStructure<'_>,
        section: String,
        position: usize,
        parent: &mut Container,
        depth: usize,
    ) {
        if self.cut {
            return;
        }
        if self.seen >= MAX_PARTS {
            self.cut = true;
            return;
        }
        self.seen += 1;
        match node {
            BodyStructure::Multipart { common, bodies, .. } => {
                if depth >= MAX_DEPTH {
                    self.cut = true;
                    return;
                }
                let kind = match lower(&common.ty.subtype).as_ref() {
                    "mixed" => Kind::Mixed,
                    "alternative" => Kind::Alternative,
                    "related" => Kind::Related,
                    "digest" => Kind::Digest,
                    _ => Kind::Other,
                };
                let mut container = Container {
                    kind,
                    in_alternative: parent.in_alternative || kind == Kind::Alternative,
                    ..*parent
                };
                for (i, body) in bodies.iter().enumerate() {
                    let child = if section.is_empty() {
                        (i + 1).to_string()
                    } else {
                        format!("{section}.{}", i + 1)
                    };
                    self.visit(body, child, i + 1, &mut container, depth + 1);
                    if self.cut {
                        return;
                    }
                }
            }
            BodyStructure::Message { common, other, .. } => {
                // Always an attachment, never descended into (mail-parser does the same).
                let part = self.part(common, other, section, false);
                self.parts.push(part);
            }
            BodyStructure::Basic { common, other, .. }
            | BodyStructure::Text { common, other, .. } => {
                self.leaf(common, other, section, position, parent);
            }
        }
    }

    /// A non-multipart part: mail-parser's rule for body versus attachment, step for step.
    fn leaf(
        &mut self,
        common: &BodyContentCommon<'_>,
        other: &imap_proto::BodyContentSinglePart<'_>,
        section: String,
        position: usize,
        parent: &mut Container,
    ) {
        let ty = lower(&common.ty.ty);
        let subtype = lower(&common.ty.subtype);
        // The vendored mail-parser's rules (issue 36; vendor/mail-parser/PATCHES.md), so that
        // both backends list the same attachments and read the same body.
        let (inline_type, is_text, kind) = match (ty.as_ref(), subtype.as_ref()) {
            // RFC 2045 §5.2: an invalid or missing type or subtype is text/plain.
            _ if !mime::media_name(&ty) || !mime::media_name(&subtype) => {
                (true, true, Kind::TextPlain)
            }
            ("text", "plain") => (true, true, Kind::TextPlain),
            ("text", "html") => (true, true, Kind::TextHtml),
            // A multipart mail-parser cannot split (no usable boundary) is one text body.
            ("multipart", _) => (true, true, Kind::TextPlain),
            // Other text, and the text reports of bounces and receipts, is shown inline.
            ("text", _)
            | (
                "message",
                "delivery-status"
                | "global-delivery-status"
                | "disposition-notification"
                | "global-disposition-notification"
                | "feedback-report"
                | "rfc822-headers"
                | "global-headers",
            ) => (true, true, Kind::TextOther),
            ("image" | "audio" | "video", _) => (true, false, Kind::Inline),
            ("message", "rfc822" | "global") => {
                let part = self.part(common, other, section, false);
                self.parts.push(part);
                return;
            }
            _ => (false, false, Kind::Other),
        };
        let disposition_is_attachment = common
            .disposition
            .as_ref()
            .is_some_and(|d| d.ty.eq_ignore_ascii_case("attachment"));
        let has_name = param(&common.ty.params, "name", &mut false).is_some();
        // Other text is shown inline only without a file name (the vendored parser's rule).
        let inline_type = inline_type
            && !(kind == Kind::TextOther
                && (has_name
                    || common
                        .disposition
                        .as_ref()
                        .is_some_and(|d| param(&d.params, "filename", &mut false).is_some())));
        let is_inline = inline_type
            && !disposition_is_attachment
            && (position == 1
                || parent.kind != Kind::Related && (kind == Kind::Inline || !has_name));
        let (add_html, add_text) = if parent.kind == Kind::Alternative {
            match kind {
                Kind::TextHtml => (true, false),
                Kind::TextPlain => (false, true),
                _ => (false, false),
            }
        } else if is_inline {
            if parent.in_alternative && (parent.need_text || parent.need_html) {
                match kind {
                    Kind::TextHtml => parent.need_text = false,
                    Kind::TextPlain => parent.need_html = false,
                    _ => {}
                }
            }
            (parent.need_html, parent.need_text)
        } else {
            (false, false)
        };
        let is_html = kind == Kind::TextHtml;
        let is_attachment = !is_text || is_html && !add_html || !is_html && !add_text;
        if is_attachment {
            let inline_binary = !is_text && is_inline;
            let part = self.part(common, other, section, inline_binary);
            self.parts.push(part);
            return;
        }
        // mime's body text is mail-parser's text body list (which holds an inline HTML part
        // outside an alternative too), else its HTML body list: the preview starts where that
        // text starts.
        let slot = if add_text {
            &mut self.text
        } else {
            &mut self.html
        };
        if slot.is_none() {
            *slot = Some(TextSection {
                section,
                encoding: encoding(&other.transfer_encoding),
                charset: charset(&common.ty.params),
                is_html,
            });
        }
    }

    /// The attachment record of a part; `inline_binary` is mail-parser's `InlineBinary`.
    fn part(
        &mut self,
        common: &BodyContentCommon<'_>,
        other: &imap_proto::BodyContentSinglePart<'_>,
        section: String,
        inline_binary: bool,
    ) -> PartInfo {
        let encoding = encoding(&other.transfer_encoding);
        let mut cut = false;
        let name = common
            .disposition
            .as_ref()
            .and_then(|d| param(&d.params, "filename", &mut cut))
            .or_else(|| param(&common.ty.params, "name", &mut cut))
            .and_then(|name| clean_name(&name, &mut cut));
        self.name_cut |= cut;
        // mime: the disposition decides when there is one; else an inline binary or a
        // Content-ID (an embedded image) is inline.
        let is_inline = match &common.disposition {
            Some(disposition) => disposition.ty.eq_ignore_ascii_case("inline"),
            None => inline_binary || other.id.is_some(),
        };
        PartInfo {
            meta: AttachmentMeta {
                id: section,
                name,
                content_type: content_type(&common.ty.ty, &common.ty.subtype),
                size: decoded_size(other.octets, encoding),
                size_is_estimate: encoding == TransferEncoding::Base64,
                is_inline,
            },
            encoding,
            charset: charset(&common.ty.params),
        }
    }
}

fn lower<'a>(s: &'a str) -> Cow<'a, str> {
    if s.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(s.to_ascii_lowercase())
    } else {
        Cow::Borrowed(s)
    }
}

fn encoding(encoding: &ContentEncoding<'_>) -> TransferEncoding {
    match encoding {
        ContentEncoding::Base64 => TransferEncoding::Base64,
        ContentEncoding::QuotedPrintable => TransferEncoding::QuotedPrintable,
        // imap-proto matches the known names exactly; a padded one arrives as Other.
        ContentEncoding::Other(name) if name.trim().eq_ignore_ascii_case("base64") => {
            TransferEncoding::Base64
        }
        ContentEncoding::Other(name) if name.trim().eq_ignore_ascii_case("quoted-printable") => {
            TransferEncoding::QuotedPrintable
        }
        ContentEncoding::SevenBit
        | ContentEncoding::EightBit
        | ContentEncoding::Binary
        | ContentEncoding::Other(_) => TransferEncoding::Identity,
    }
}

/// RFC 2045 token characters (no tspecials, space or controls).
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_graphic() && !b"()<>@,;:\\\"/[]?=".contains(&b)
}

/// `type/subtype` in lower case when both are tokens of at most 127 characters, else
/// `text/plain`, as the part is read (RFC 2045 §5.2; `crate::mime`'s rule, so both backends
/// name a type alike).
fn content_type(ty: &str, subtype: &str) -> String {
    let is_token =
        |s: &str| (1..=MAX_MEDIA_NAME).contains(&s.len()) && s.bytes().all(is_token_byte);
    if is_token(ty) && is_token(subtype) {
        format!("{ty}/{subtype}").to_ascii_lowercase()
    } else {
        INVALID_CONTENT_TYPE.to_owned()
    }
}

fn charset(params: &BodyParams<'_>) -> Option<String> {
    params
        .iter()
        .flatten()
        .find(|(key, _)| key.eq_ignore_ascii_case("charset"))
        .map(|(_, value)| value.trim())
        .filter(|value| {
            (1..=MAX_CHARSET_BYTES).contains(&value.len()) && value.bytes().all(is_token_byte)
        })
        .map(str::to_owned)
}

/// The decoded value of parameter `wanted` (`name` or `filename`): its plain, RFC 2231
/// (`wanted*`, `wanted*0*`, …) and RFC 2047 forms decoded by mail-parser's Content-Type parser
/// over [`param_header`]. Sets `cut` when [`MAX_PARAM_BYTES`] truncated it.
fn param(params: &BodyParams<'_>, wanted: &str, cut: &mut bool) -> Option<String> {
    let header = param_header(params, wanted, cut)?;
    match MessageStream::new(header.as_bytes()).parse_content_type() {
        HeaderValue::ContentType(ct) => ct.attribute(wanted).map(str::to_owned),
        _ => None,
    }
}

/// A Content-Type value (`x/y; …`, CRLF-terminated, at most [`MAX_PARAM_BYTES`] before the CRLF)
/// rebuilt from the BODYSTRUCTURE's parameters for mail-parser to decode: only `wanted`'s
/// parameters, only keys that are tokens, every value quoted (mail-parser percent-decodes a
/// quoted RFC 2231 value too; Dovecot sends continuations already joined as `wanted*`), with
/// quotes and backslashes escaped and control characters blanked, so that no server value can
/// end the line or add a parameter. `None` when there is no such parameter.
fn param_header(params: &BodyParams<'_>, wanted: &str, cut: &mut bool) -> Option<String> {
    let mut header = String::from("x/y");
    let mut any = false;
    for (key, value) in params.iter().flatten() {
        let base = key.split('*').next().unwrap_or_default();
        if !base.eq_ignore_ascii_case(wanted) || !key.bytes().all(is_token_byte) {
            continue;
        }
        // "; " + key + "=\"" before the value, "\"" after it.
        let budget = MAX_PARAM_BYTES.saturating_sub(header.len() + key.len() + 5);
        if budget == 0 {
            *cut = true;
            break;
        }
        any = true;
        header.push_str("; ");
        header.push_str(key);
        header.push_str("=\"");
        let mut used = 0;
        for c in imap_unescape(value) {
            let escaped = matches!(c, '"' | '\\');
            used += c.len_utf8() + usize::from(escaped);
            if used > budget {
                *cut = true;
                break;
            }
            if escaped {
                header.push('\\');
            }
            header.push(if c.is_control() { ' ' } else { c });
        }
        header.push('"');
    }
    header.push_str("\r\n");
    any.then_some(header)
}

/// The characters of an IMAP string as the server meant them. imap-proto 0.17 returns a quoted
/// string's content with its escapes (`\"`, `\\`) still in, and a literal's content as-is; the
/// two cannot be told apart after parsing, so an escape pair is always read as one character (a
/// literal value with a backslash before a quote or backslash loses that backslash: servers send
/// literals only for 8-bit or CR/LF values).
fn imap_unescape(value: &str) -> impl Iterator<Item = char> + '_ {
    let mut chars = value.chars().peekable();
    std::iter::from_fn(move || {
        let c = chars.next()?;
        if c == '\\'
            && let Some(&next) = chars.peek()
            && matches!(next, '"' | '\\')
        {
            chars.next();
            return Some(next);
        }
        Some(c)
    })
}

/// A name as `crate::mime` keeps header strings: control characters blanked, at most
/// [`MAX_HEADER_CHARS`] characters (setting `cut` when longer), trimmed, `None` when empty.
fn clean_name(value: &str, cut: &mut bool) -> Option<String> {
    let mut chars = value.chars();
    let cleaned: String = chars
        .by_ref()
        .take(MAX_HEADER_CHARS)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if chars.next().is_some() {
        *cut = true;
    }
    let trimmed = cleaned.trim();
    (!trimmed.is_empty()).then(|| trimmed.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demo::corpus;
    use crate::mime;
    use imap_proto::{AttributeValue, Response};

    type Case = (String, Vec<u8>, BodyStructure<'static>);

    /// The BODYSTRUCTURE of one untagged FETCH response (owned).
    fn structure_of(response: Response<'_>) -> BodyStructure<'static> {
        let Response::Fetch(_, attributes) = response else {
            panic!("not a FETCH response: {response:?}");
        };
        attributes
            .into_iter()
            .find_map(|a| match a {
                AttributeValue::BodyStructure(s) => Some(s.into_owned()),
                _ => None,
            })
            .expect("FETCH has a BODYSTRUCTURE")
    }

    /// Parses the BODYSTRUCTURE of `* 1 FETCH (UID 5 BODYSTRUCTURE <body>)`.
    fn bs(body: &str) -> BodyStructure<'static> {
        let line = format!("* 1 FETCH (UID 5 BODYSTRUCTURE {body})\r\n");
        let (rest, response) = Response::parse(line.as_bytes()).expect("parses");
        assert!(rest.is_empty());
        structure_of(response)
    }

    /// A captured fixture (tests/fixtures/imap/capture.py): `# key` lines, each followed by
    /// the server's raw FETCH response.
    fn fixture(bytes: &'static [u8]) -> Vec<(String, BodyStructure<'static>)> {
        let mut out = Vec::new();
        let mut rest = bytes;
        while !rest.is_empty() {
            let line_end = rest
                .windows(2)
                .position(|w| w == b"\r\n")
                .expect("key line");
            let key = std::str::from_utf8(&rest[..line_end]).expect("utf-8 key");
            let key = key.strip_prefix("# ").expect("# key").to_owned();
            let (after, response) = Response::parse(&rest[line_end + 2..]).expect("FETCH parses");
            out.push((key, structure_of(response)));
            rest = after;
        }
        out
    }

    /// Every demo message with the BODYSTRUCTURE Dovecot reported for it.
    fn demo_cases() -> Vec<Case> {
        let mut captured = fixture(include_bytes!(
            "../../../tests/fixtures/imap/demo-bodystructure.txt"
        ));
        let mut out = Vec::new();
        for mailbox in corpus::corpus() {
            for folder in mailbox.folders {
                for message in folder.messages {
                    let key = format!("{}/{}/{}", mailbox.alias, folder.name, message.unique);
                    let at = captured
                        .iter()
                        .position(|(k, _)| *k == key)
                        .unwrap_or_else(|| panic!("no captured BODYSTRUCTURE for {key}"));
                    let (_, structure) = captured.swap_remove(at);
                    out.push((key, message.raw.into_owned(), structure));
                }
            }
        }
        assert!(
            captured.is_empty(),
            "a capture per demo message and no more"
        );
        assert_eq!(out.len(), 209);
        out
    }

    /// The hand-written edge messages (tests/fixtures/imap/edge) with Dovecot's BODYSTRUCTURE.
    fn edge_cases() -> Vec<Case> {
        macro_rules! edge {
            ($name:literal) => {
                (
                    $name,
                    include_bytes!(concat!("../../../tests/fixtures/imap/edge/", $name)) as &[u8],
                )
            };
        }
        let sources = [
            edge!("encoded-word.eml"),
            edge!("html-only.eml"),
            edge!("related-inline.eml"),
            edge!("rfc2231-continuation.eml"),
            edge!("single-pdf.eml"),
        ];
        let captured = fixture(include_bytes!(
            "../../../tests/fixtures/imap/edge-bodystructure.txt"
        ));
        assert_eq!(captured.len(), sources.len());
        captured
            .into_iter()
            .map(|(key, structure)| {
                let raw = sources
                    .iter()
                    .find(|(name, _)| *name == key)
                    .map(|(_, raw)| raw.to_vec())
                    .unwrap_or_else(|| panic!("no source for {key}"));
                (key, raw, structure)
            })
            .collect()
    }

    fn names(list: &Attachments) -> Vec<Option<&str>> {
        list.parts.iter().map(|p| p.meta.name.as_deref()).collect()
    }

    fn ids(list: &Attachments) -> Vec<&str> {
        list.parts.iter().map(|p| p.meta.id.as_str()).collect()
    }

    /// The IMAP view of every captured message lists what the Maildir view (crate::mime) lists:
    /// same count, names, content types and inline flags, sizes within the estimate's error, and
    /// the body text from the same kind of part.
    #[test]
    fn agrees_with_mime_on_demo_and_edge_corpus() {
        let mut attachments_seen = 0;
        for (key, raw, structure) in demo_cases().into_iter().chain(edge_cases()) {
            let parsed = mime::parse(&raw);
            let ours = analyze(&structure);
            assert!(!ours.attachments.cut && !ours.attachments.name_cut, "{key}");
            let theirs = &parsed.attachments;
            let mine = &ours.attachments.parts;
            assert_eq!(mine.len(), theirs.len(), "{key}: attachment count");
            for (m, t) in mine.iter().zip(theirs) {
                let m = &m.meta;
                assert_eq!(m.name, t.name, "{key}: name of {}", m.id);
                assert_eq!(m.content_type, t.content_type, "{key}: type of {}", m.id);
                assert_eq!(m.is_inline, t.is_inline, "{key}: inline of {}", m.id);
                // Text parts: mime counts transcoded UTF-8, we count encoded octets.
                let slack = t.size / 20 + 4;
                assert!(
                    m.size + 4 >= t.size && m.size <= t.size + slack,
                    "{key}: size of {}: estimate {} vs decoded {}",
                    m.id,
                    m.size,
                    t.size
                );
                attachments_seen += 1;
            }
            match &ours.text {
                Some(text) if !parsed.body_text.is_empty() => {
                    assert_eq!(text.is_html, parsed.body_is_html, "{key}: body kind");
                }
                Some(_) => {}
                None => assert!(parsed.body_text.is_empty(), "{key}: body without a section"),
            }
        }
        // The corpus must exercise the comparison.
        assert_eq!(attachments_seen, 33, "attachments compared");
    }

    /// Fetching a listed section and decoding it gives the Maildir backend's bytes, for every
    /// non-text attachment of the corpus. The section bytes are cut from the raw message at
    /// mail-parser's part offsets (what `BODY[<section>]` returns for a leaf).
    #[test]
    fn decoded_sections_match_mime_bytes() {
        let mut compared = 0;
        for (key, raw, structure) in demo_cases().into_iter().chain(edge_cases()) {
            let list = attachments(&structure);
            let message = mail_parser::MessageParser::default()
                .parse(&raw)
                .expect("parses");
            for (i, info) in list.parts.iter().enumerate() {
                let part = &message.parts[message.attachments[i] as usize];
                let section = &raw[part.offset_body as usize..part.offset_end as usize];
                let decoded = decode_part(section, info.encoding).expect("decodes");
                let expected = mime::attachment_bytes(&raw, i).expect("mime bytes");
                let bytes = attachment_bytes(decoded.clone(), info);
                assert_eq!(bytes, expected, "{key}: bytes of {}", info.meta.id);
                if info.encoding == TransferEncoding::Base64 {
                    let actual = decoded.len() as u64;
                    assert!(
                        info.meta.size.abs_diff(actual) <= 4,
                        "{key}: {} estimated {} for {actual} bytes",
                        info.meta.id,
                        info.meta.size
                    );
                }
                compared += 1;
            }
        }
        assert_eq!(compared, 33, "sections compared");
    }

    #[test]
    fn single_part_messages_are_section_1() {
        let text =
            bs(r#"("text" "plain" ("charset" "utf-8") NIL NIL "7bit" 75 5 NIL NIL NIL NIL)"#);
        let s = analyze(&text);
        assert!(s.attachments.parts.is_empty());
        assert_eq!(
            s.text,
            Some(TextSection {
                section: "1".into(),
                encoding: TransferEncoding::Identity,
                charset: Some("utf-8".into()),
                is_html: false,
            })
        );
        let pdf =
            bs(r#"("application" "pdf" ("name" "scan.pdf") NIL NIL "base64" 26 NIL NIL NIL NIL)"#);
        let s = analyze(&pdf);
        assert_eq!(ids(&s.attachments), ["1"]);
        assert_eq!(names(&s.attachments), [Some("scan.pdf")]);
        assert_eq!(s.attachments.parts[0].encoding, TransferEncoding::Base64);
        assert_eq!(s.text, None);
    }

    const ALTERNATIVE: &str = r#"("text" "plain" ("charset" "utf-8") NIL NIL "quoted-printable" 5 1 NIL NIL NIL NIL)("text" "html" ("charset" "iso-8859-1") NIL NIL "base64" 11 1 NIL NIL NIL NIL) "alternative" ("boundary" "b3") NIL NIL NIL"#;

    #[test]
    fn nested_sections_are_numbered_per_rfc_3501() {
        let s = analyze(&bs(&format!(
            r#"((({ALTERNATIVE})("image" "png" NIL "<logo@example.com>" NIL "base64" 12 NIL NIL NIL NIL) "related" NIL NIL NIL NIL)("application" "pdf" NIL NIL NIL "base64" 780 NIL ("attachment" ("filename" "a.pdf")) NIL NIL)(("text" "csv" ("name" "d.csv") NIL NIL "7bit" 8 1 NIL NIL NIL NIL)("application" "zip" ("name" "z.zip") NIL NIL "base64" 8 NIL NIL NIL NIL) "mixed" NIL NIL NIL NIL) "mixed" NIL NIL NIL NIL)"#
        )));
        assert_eq!(ids(&s.attachments), ["1.2", "2", "3.1", "3.2"]);
        assert_eq!(
            names(&s.attachments),
            [None, Some("a.pdf"), Some("d.csv"), Some("z.zip")]
        );
        let text = s.text.expect("text body");
        assert_eq!(text.section, "1.1.1");
        assert_eq!(text.encoding, TransferEncoding::QuotedPrintable);
    }

    #[test]
    fn attached_message_is_one_attachment_and_not_descended() {
        let s = analyze(&bs(
            r#"(("text" "plain" NIL NIL NIL "7bit" 3 1 NIL NIL NIL NIL)("message" "rfc822" NIL NIL NIL "7bit" 309 (NIL "inner" NIL NIL NIL NIL NIL NIL NIL NIL) (("text" "plain" NIL NIL NIL "7bit" 10 0 NIL NIL NIL NIL)("application" "zip" ("name" "inner.zip") NIL NIL "base64" 32 NIL NIL NIL NIL) "mixed" NIL NIL NIL NIL) 16 NIL NIL NIL NIL) "mixed" NIL NIL NIL NIL)"#,
        ));
        assert_eq!(ids(&s.attachments), ["2"]);
        let inner = &s.attachments.parts[0].meta;
        assert_eq!(inner.content_type, "message/rfc822");
        assert_eq!(inner.size, 309);
        assert!(!inner.is_inline);
        assert_eq!(s.text.map(|t| t.section).as_deref(), Some("1"));
        // A message whose only text is inside the attached message has no body section.
        let only = analyze(&bs(
            r#"("message" "rfc822" NIL NIL NIL "7bit" 40 (NIL "inner" NIL NIL NIL NIL NIL NIL NIL NIL) ("text" "plain" NIL NIL NIL "7bit" 10 1 NIL NIL NIL NIL) 3 NIL NIL NIL NIL)"#,
        ));
        assert_eq!(ids(&only.attachments), ["1"]);
        assert_eq!(only.text, None);
    }

    #[test]
    fn html_body_when_there_is_no_plain_one() {
        let s = analyze(&bs(
            r#"(("text" "html" ("charset" "utf-8") NIL NIL "7bit" 11 1 NIL NIL NIL NIL)("text" "plain" ("charset" "utf-8") NIL NIL "7bit" 11 1 NIL ("attachment" ("filename" "notes.txt")) NIL NIL) "mixed" NIL NIL NIL NIL)"#,
        ));
        assert_eq!(names(&s.attachments), [Some("notes.txt")]);
        let text = s.text.expect("html body");
        assert_eq!((text.section.as_str(), text.is_html), ("1", true));
    }

    #[test]
    fn which_leaves_are_attachments() {
        // text/plain + text/html inline in mixed: both body, and so is an unnamed text/calendar
        // there (issue 36: other text is shown inline); a second text/plain with a name in
        // related, and any non-text part: attachments.
        let s = analyze(&bs(&format!(
            r#"(({ALTERNATIVE})("text" "calendar" NIL NIL NIL "7bit" 9 1 NIL NIL NIL NIL)("audio" "ogg" NIL NIL NIL "base64" 4 NIL NIL NIL NIL)(("text" "html" NIL NIL NIL "7bit" 4 1 NIL NIL NIL NIL)("text" "plain" ("name" "n.txt") NIL NIL "7bit" 4 1 NIL NIL NIL NIL) "related" NIL NIL NIL NIL)("text" "plain" NIL NIL NIL "7bit" 4 1 NIL NIL NIL NIL) "mixed" NIL NIL NIL NIL)"#
        )));
        assert_eq!(ids(&s.attachments), ["3", "4.2"]);
        let types: Vec<_> = s
            .attachments
            .parts
            .iter()
            .map(|p| p.meta.content_type.as_str())
            .collect();
        assert_eq!(types, ["audio/ogg", "text/plain"]);
        // Inline image/audio without disposition is inline (mail-parser's InlineBinary).
        assert!(s.attachments.parts[0].meta.is_inline);
        assert!(!s.attachments.parts[1].meta.is_inline);
    }

    #[test]
    fn names_prefer_disposition_and_decode_rfc2047_and_rfc2231() {
        let s = analyze(&bs(
            r#"(("text" "plain" NIL NIL NIL "7bit" 3 1 NIL NIL NIL NIL)("application" "pdf" ("name" "ct.pdf") NIL NIL "base64" 24 NIL ("attachment" ("filename" "disp.pdf")) NIL NIL)("application" "pdf" NIL NIL NIL "base64" 24 NIL ("attachment" ("FILENAME*" "UTF-8''%E2%82%AC%20rapport.pdf")) NIL NIL)("text" "csv" ("name*" "iso-8859-1'fr'donn%E9es.csv") NIL NIL "7bit" 8 1 NIL NIL NIL NIL)("application" "octet-stream" NIL NIL NIL "base64" 24 NIL ("attachment" ("filename*0*" "UTF-8''caf%C3%A9-" "filename*1" "menu.txt")) NIL NIL)("application" "x-xls" ("name" "=?UTF-8?B?UHLDpG1pZW4gMjAyNi54bHN4?=") NIL NIL "base64" 8 NIL NIL NIL NIL)("image" "png" ("NAME" "Logo \"Q\" \\ 1.png") NIL NIL "base64" 8 NIL NIL NIL NIL)("application" "octet-stream" ("name" "   ") NIL NIL "base64" 8 NIL ("attachment" NIL) NIL NIL) "mixed" NIL NIL NIL NIL)"#,
        ));
        assert_eq!(
            names(&s.attachments),
            [
                Some("disp.pdf"),
                Some("€ rapport.pdf"),
                Some("données.csv"),
                Some("café-menu.txt"),
                Some("Prämien 2026.xlsx"),
                Some("Logo \"Q\" \\ 1.png"),
                None,
            ]
        );
        assert!(!s.attachments.name_cut);
    }

    #[test]
    fn server_values_cannot_inject_parameters_or_controls() {
        let s = analyze(&bs(
            "(\"application\" \"pdf\" (\"name\" \"a.pdf\\\"; name=\\\"evil.exe\" \"x\\\"\" \"y\") NIL NIL \"base64\" 8 NIL (\"attachment\" (\"filename\" \"tab\there.pdf\" \"bad key\" \"evil.exe\")) NIL NIL)",
        ));
        let name = s.attachments.parts[0].meta.name.as_deref();
        assert_eq!(name, Some("tab here.pdf"));
        let t = analyze(&bs(
            "(\"application\" \"pdf\" (\"name\" \"a.pdf\\\"; name=\\\"evil.exe\") NIL NIL \"base64\" 8 NIL NIL NIL NIL)",
        ));
        assert_eq!(
            t.attachments.parts[0].meta.name.as_deref(),
            Some("a.pdf\"; name=\"evil.exe")
        );
    }

    #[test]
    fn long_names_are_capped_and_flagged() {
        let long = "n".repeat(MAX_HEADER_CHARS + 10);
        let s = analyze(&bs(&format!(
            r#"("application" "pdf" ("name" "{long}") NIL NIL "base64" 8 NIL NIL NIL NIL)"#
        )));
        let name = s.attachments.parts[0].meta.name.as_deref().expect("name");
        assert_eq!(name.chars().count(), MAX_HEADER_CHARS);
        assert!(s.attachments.name_cut);
        // Parameter text past MAX_PARAM_BYTES is not even handed to the parser.
        let huge = "é".repeat(MAX_PARAM_BYTES);
        let s = analyze(&bs(&format!(
            r#"("application" "pdf" ("name" "{huge}") NIL NIL "base64" 8 NIL NIL NIL NIL)"#
        )));
        assert!(s.attachments.name_cut);
        assert_eq!(
            s.attachments.parts[0]
                .meta
                .name
                .as_deref()
                .map(|n| n.chars().count()),
            Some(MAX_HEADER_CHARS)
        );
    }

    #[test]
    fn content_types_are_lower_case_tokens() {
        let s = analyze(&bs(
            r#"(("IMAGE" "PNG" NIL NIL NIL "BASE64" 8 NIL NIL NIL NIL)("application" "a b" ("NAME" "a.bin") NIL NIL "7bit" 8 NIL NIL NIL NIL)("application" "" ("NAME" "b.bin") NIL NIL "7bit" 8 NIL NIL NIL NIL)("application" "" NIL NIL NIL "7bit" 8 NIL NIL NIL NIL) "MIXED" NIL NIL NIL NIL)"#,
        ));
        let types: Vec<_> = s
            .attachments
            .parts
            .iter()
            .map(|p| p.meta.content_type.as_str())
            .collect();
        assert_eq!(
            types,
            ["image/png", INVALID_CONTENT_TYPE, INVALID_CONTENT_TYPE],
            "issue 36: named parts of an invalid type are text/plain attachments, an unnamed one \
             is body text"
        );
        assert_eq!(s.attachments.parts[0].encoding, TransferEncoding::Base64);
    }

    #[test]
    fn inline_follows_disposition_then_content_id() {
        let s = analyze(&bs(
            r#"(("text" "plain" NIL NIL NIL "7bit" 3 1 NIL NIL NIL NIL)("application" "pdf" NIL "<a@example.com>" NIL "base64" 8 NIL NIL NIL NIL)("application" "pdf" NIL "<b@example.com>" NIL "base64" 8 NIL ("attachment" NIL) NIL NIL)("application" "pdf" NIL NIL NIL "base64" 8 NIL ("INLINE" NIL) NIL NIL)("application" "pdf" NIL NIL NIL "base64" 8 NIL NIL NIL NIL)("image" "png" NIL NIL NIL "base64" 8 NIL ("attachment" NIL) NIL NIL) "mixed" NIL NIL NIL NIL)"#,
        ));
        let inline: Vec<_> = s
            .attachments
            .parts
            .iter()
            .map(|p| p.meta.is_inline)
            .collect();
        assert_eq!(inline, [true, false, true, false, false]);
    }

    #[test]
    fn sizes_estimate_decoded_bytes() {
        // 57 bytes encode to one full 76-character line + CRLF = 78 octets.
        assert_eq!(decoded_size(78, TransferEncoding::Base64), 57);
        assert_eq!(decoded_size(78 * 100, TransferEncoding::Base64), 5_700);
        assert_eq!(decoded_size(0, TransferEncoding::Base64), 0);
        assert_eq!(
            decoded_size(u32::MAX, TransferEncoding::Base64),
            3_138_629_946
        );
        assert_eq!(decoded_size(99, TransferEncoding::QuotedPrintable), 99);
        assert_eq!(decoded_size(99, TransferEncoding::Identity), 99);
        let s = analyze(&bs(
            r#"("application" "pdf" NIL NIL NIL "base64" 7800 NIL NIL NIL NIL)"#,
        ));
        assert_eq!(s.attachments.parts[0].meta.size, 5_700);
    }

    #[test]
    fn weird_encodings_and_missing_params() {
        let s = analyze(&bs(
            r#"(("application" "pdf" NIL NIL NIL "x-uuencode" 8 NIL NIL NIL NIL)("application" "pdf" NIL NIL NIL NIL 8 NIL NIL NIL NIL)("application" "pdf" NIL NIL NIL " base64 " 8 NIL NIL NIL NIL)("application" "pdf" NIL NIL NIL "Quoted-Printable" 8 NIL NIL NIL NIL)("application" "pdf" NIL NIL NIL "8bit" 8 NIL NIL NIL NIL)("application" "pdf" NIL NIL NIL "binary" 8 NIL NIL NIL NIL) "mixed" NIL NIL NIL NIL)"#,
        ));
        let encodings: Vec<_> = s.attachments.parts.iter().map(|p| p.encoding).collect();
        use TransferEncoding::*;
        assert_eq!(
            encodings,
            [
                Identity,
                Identity,
                Base64,
                QuotedPrintable,
                Identity,
                Identity
            ]
        );
        assert!(names(&s.attachments).iter().all(Option::is_none));
        assert!(s.attachments.parts.iter().all(|p| p.charset.is_none()));
    }

    #[test]
    fn charset_is_kept_only_as_a_short_token() {
        let s = analyze(&bs(&format!(
            r#"(("text" "plain" ("charset" "ISO-8859-15") NIL NIL "7bit" 3 1 NIL NIL NIL NIL)("text" "csv" ("charset" "a b" "name" "a.csv") NIL NIL "7bit" 3 1 NIL NIL NIL NIL)("text" "csv" ("CHARSET" "windows-1252" "name" "b.csv") NIL NIL "7bit" 3 1 NIL NIL NIL NIL)("text" "csv" ("charset" "{}" "name" "c.csv") NIL NIL "7bit" 3 1 NIL NIL NIL NIL) "mixed" NIL NIL NIL NIL)"#,
            "x".repeat(MAX_CHARSET_BYTES + 1)
        )));
        assert_eq!(
            s.text.and_then(|t| t.charset).as_deref(),
            Some("ISO-8859-15")
        );
        let charsets: Vec<_> = s
            .attachments
            .parts
            .iter()
            .map(|p| p.charset.as_deref())
            .collect();
        assert_eq!(charsets, [None, Some("windows-1252"), None]);
    }

    /// `levels` multiparts, each holding one PDF and the next level.
    fn nested(levels: usize) -> String {
        let mut body = r#"("application" "pdf" NIL NIL NIL "base64" 8 NIL NIL NIL NIL)"#.to_owned();
        for _ in 0..levels {
            body = format!(
                r#"(("application" "pdf" NIL NIL NIL "base64" 8 NIL NIL NIL NIL){body} "mixed" NIL NIL NIL NIL)"#
            );
        }
        body
    }

    #[test]
    fn deep_nesting_stops_at_the_bound_and_says_so() {
        let within = analyze(&bs(&nested(MAX_DEPTH)));
        assert!(!within.attachments.cut);
        assert_eq!(within.attachments.parts.len(), MAX_DEPTH + 1);
        let deepest = &within.attachments.parts[MAX_DEPTH].meta.id;
        assert_eq!(deepest.split('.').count(), MAX_DEPTH);

        let beyond = analyze(&bs(&nested(MAX_DEPTH + 8)));
        assert!(beyond.attachments.cut);
        assert_eq!(beyond.attachments.parts.len(), MAX_DEPTH);
    }

    #[test]
    fn huge_part_counts_stop_at_the_bound_and_say_so() {
        let leaf = r#"("application" "pdf" NIL NIL NIL "base64" 8 NIL NIL NIL NIL)"#;
        let many = |n: usize| format!("({} \"mixed\" NIL NIL NIL NIL)", leaf.repeat(n));
        // The multipart itself is one of the MAX_PARTS parts.
        let full = analyze(&bs(&many(MAX_PARTS - 1)));
        assert!(!full.attachments.cut);
        assert_eq!(full.attachments.parts.len(), MAX_PARTS - 1);
        let over = analyze(&bs(&many(5 * MAX_PARTS)));
        assert!(over.attachments.cut);
        assert_eq!(over.attachments.parts.len(), MAX_PARTS - 1);
        assert_eq!(
            over.attachments.parts.last().map(|p| p.meta.id.as_str()),
            Some("999")
        );
    }

    #[test]
    fn decode_part_base64_tolerates_line_breaks_and_rejects_garbage() {
        use TransferEncoding::*;
        assert_eq!(
            decode_part(b"aGVs\r\nbG8g\r\n d29y bGQ=\r\n", Base64).as_deref(),
            Some(&b"hello world"[..])
        );
        assert_eq!(decode_part(b"", Base64).as_deref(), Some(&b""[..]));
        assert_eq!(decode_part(b"aGVs*bG8=", Base64), None);
        assert_eq!(decode_part(b"aGVs\r\n--bG8=", Base64), None);
    }

    #[test]
    fn decode_part_quoted_printable_and_identity() {
        use TransferEncoding::*;
        assert_eq!(
            decode_part(b"Caf=C3=A9 cr=\r\n=C3=A8me\r\nline 2=\r\n", QuotedPrintable).as_deref(),
            Some("Café crème\r\nline 2".as_bytes())
        );
        // Malformed escapes are kept, as mail-parser keeps them for a Maildir message.
        assert_eq!(
            decode_part(b"100=% sure=ZZ", QuotedPrintable).as_deref(),
            Some(&b"100=% sure=ZZ"[..])
        );
        assert_eq!(
            decode_part(b"=3D\x00\xff raw", Identity).as_deref(),
            Some(&b"=3D\x00\xff raw"[..])
        );
    }

    /// Our list for `body` matches mime's for `eml` (count, names, types, inline), and is `ids`.
    fn agrees_with_mime(eml: &str, body: &str, ids_expected: &[&str]) {
        let raw = eml.replace('\n', "\r\n");
        let theirs = mime::parse(raw.as_bytes()).attachments;
        let ours = attachments(&bs(body));
        assert_eq!(ids(&ours), ids_expected);
        let ours: Vec<_> = ours
            .parts
            .iter()
            .map(|p| {
                (
                    p.meta.name.clone(),
                    p.meta.content_type.clone(),
                    p.meta.is_inline,
                )
            })
            .collect();
        let theirs: Vec<_> = theirs
            .iter()
            .map(|a| (a.name.clone(), a.content_type.clone(), a.is_inline))
            .collect();
        assert_eq!(ours, theirs);
    }

    #[test]
    fn later_parts_of_a_related_are_attachments() {
        // mail-parser: in multipart/related only the first part can be inline body text.
        agrees_with_mime(
            "Content-Type: multipart/related; boundary=r\n\n--r\nContent-Type: text/html\n\n\
             <p>x</p>\n--r\nContent-Type: text/plain\n\nnot body\n--r--\n",
            r#"(("text" "html" NIL NIL NIL "7bit" 8 1 NIL NIL NIL NIL)("text" "plain" NIL NIL NIL "7bit" 8 1 NIL NIL NIL NIL) "related" NIL NIL NIL NIL)"#,
            &["2"],
        );
    }

    #[test]
    fn inline_html_in_an_alternative_branch_makes_later_plain_an_attachment() {
        // alternative → mixed [html, plain]: the HTML answers the branch, the plain part after
        // it is no body (mail-parser's need_text/need_html flags).
        agrees_with_mime(
            "Content-Type: multipart/alternative; boundary=a\n\n--a\n\
             Content-Type: multipart/mixed; boundary=m\n\n--m\nContent-Type: text/html\n\n\
             <p>x</p>\n--m\nContent-Type: text/plain\n\nsecond\n--m--\n--a--\n",
            r#"((("text" "html" NIL NIL NIL "7bit" 8 1 NIL NIL NIL NIL)("text" "plain" NIL NIL NIL "7bit" 6 1 NIL NIL NIL NIL) "mixed" NIL NIL NIL NIL) "alternative" NIL NIL NIL NIL)"#,
            &["1.2"],
        );
    }

    #[test]
    fn line_breaks_from_literals_are_blanked() {
        // A literal can carry CR LF, which would end the rebuilt header line early.
        let s = analyze(&bs(
            "(\"application\" \"pdf\" NIL NIL NIL \"base64\" 8 NIL (\"attachment\" (\"filename\" {17}\r\nline\r\nbreak\r\n.pdf)) NIL NIL)",
        ));
        assert_eq!(
            s.attachments.parts[0].meta.name.as_deref(),
            Some("line  break  .pdf")
        );
    }

    #[test]
    fn keys_that_are_not_tokens_are_dropped() {
        // A literal key can hold `=` and `;`: passed on, it would set `filename*0` itself.
        let s = analyze(&bs(
            "(\"application\" \"pdf\" (\"name\" \"ct.pdf\") NIL NIL \"base64\" 8 NIL (\"attachment\" ({21}\r\nfilename*0=evil.exe;x \"good.pdf\")) NIL NIL)",
        ));
        assert_eq!(s.attachments.parts[0].meta.name.as_deref(), Some("ct.pdf"));
    }

    #[test]
    fn parameter_text_handed_to_the_parser_is_bounded() {
        let value = "a\"".repeat(MAX_PARAM_BYTES);
        let params: BodyParams<'_> = Some(vec![
            (Cow::Borrowed("name*0"), Cow::Borrowed(value.as_str())),
            (Cow::Borrowed("name*1"), Cow::Borrowed("tail")),
        ]);
        let mut cut = false;
        let header = param_header(&params, "name", &mut cut).expect("header");
        assert!(cut);
        assert!(header.len() <= MAX_PARAM_BYTES + 2, "{}", header.len());
        assert!(header.ends_with("\"\r\n"));
        let mut cut = false;
        assert_eq!(param_header(&None, "name", &mut cut), None);
        assert!(!cut);
    }

    #[test]
    fn labelled_text_attachments_are_transcoded_like_mime() {
        let raw = "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nbody\r\n--b\r\nContent-Type: text/csv; charset=iso-8859-1; name=d.csv\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\ncaf=E9\r\n--b\r\nContent-Type: application/octet-stream; name=b.bin\r\n\r\nxy\r\n--b--\r\n";
        let list = attachments(&bs(
            r#"(("text" "plain" NIL NIL NIL "7bit" 4 1 NIL NIL NIL NIL)("text" "csv" ("charset" "iso-8859-1" "name" "d.csv") NIL NIL "quoted-printable" 6 1 NIL NIL NIL NIL)("application" "octet-stream" ("name" "b.bin") NIL NIL "7bit" 2 NIL NIL NIL NIL) "mixed" NIL NIL NIL NIL)"#,
        ));
        let csv = decode_part(b"caf=E9", list.parts[0].encoding).expect("qp");
        assert_eq!(csv, b"caf\xe9");
        let csv = attachment_bytes(csv, &list.parts[0]);
        assert_eq!(csv, "café".as_bytes());
        assert_eq!(Some(csv), mime::attachment_bytes(raw.as_bytes(), 0));
        let bin = attachment_bytes("é".as_bytes().to_vec(), &list.parts[1]);
        assert_eq!(bin, "é".as_bytes());
    }
}
