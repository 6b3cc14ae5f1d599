//! Builds outgoing RFC 5322 messages (drafts, sends) with lettre's builder — never by string
//! concatenation, so encoding (RFC 2047 words, quoted-printable, MIME boundaries) is the
//! library's job.
//!
//! Invariant: every header value is checked by [`check_header_value`] before it reaches the
//! builder: a value holding any control character (C0 including CR, LF, NUL, HT, VT, FF, ESC and
//! BEL; DEL; C1) or a Unicode line or paragraph separator is refused outright, never escaped or
//! stripped, so no caller-supplied text can start a new header line or put a raw control byte
//! on the wire (issue 8, finding 12: lettre passes printable-ASCII-plus-controls through
//! unencoded). The only bytes below 0x20 in a rendered header section are lettre's own CRLF line
//! ends and folding whitespace.

use std::fmt;

use lettre::message::header::ContentType;
use lettre::message::{Attachment, Mailbox, MultiPart, SinglePart};

use crate::address::EmailAddress;

/// Which header a refused value was meant for, so the refusal can name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeaderField {
    Subject,
    InReplyTo,
    References,
    Recipient,
    AttachmentName,
    AttachmentContentType,
}

impl fmt::Display for HeaderField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HeaderField::Subject => "subject",
            HeaderField::InReplyTo => "In-Reply-To thread id",
            HeaderField::References => "References thread id",
            HeaderField::Recipient => "recipient address",
            HeaderField::AttachmentName => "attachment name",
            HeaderField::AttachmentContentType => "attachment content type",
        })
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ComposeError {
    /// A header value holds a control character (see the module invariant).
    #[error(
        "the {field} contains a control character (line break, NUL, tab, escape or another \
         control); header values are refused, not escaped"
    )]
    HeaderInjection { field: HeaderField },
    #[error("an address could not be used")]
    Address,
    #[error("an attachment content type is not valid")]
    ContentType,
    #[error("the message could not be built")]
    Build,
}

/// Whether `c` may not appear in a header value: every Unicode control character (`Cc`: C0,
/// DEL, C1) and the Unicode line and paragraph separators, which a client may render as a line
/// break once it has decoded an RFC 2047 word.
pub(crate) fn is_forbidden_in_header(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')
}

/// Refuses a value that will become (part of) header `field` when it holds a character of
/// [`is_forbidden_in_header`].
pub fn check_header_value(field: HeaderField, value: &str) -> Result<(), ComposeError> {
    if value.chars().any(is_forbidden_in_header) {
        Err(ComposeError::HeaderInjection { field })
    } else {
        Ok(())
    }
}

/// An attachment to include, already read and bounded by the caller.
#[derive(Clone, Debug)]
pub struct OutgoingAttachment {
    pub filename: String,
    pub content_type: String,
    pub bytes: Vec<u8>,
}

/// What an outgoing message consists of.
#[derive(Clone, Debug)]
pub struct Outgoing {
    pub from: EmailAddress,
    pub to: Vec<EmailAddress>,
    pub cc: Vec<EmailAddress>,
    pub bcc: Vec<EmailAddress>,
    pub subject: String,
    pub body: String,
    /// Message-ID of the message this one answers (threading only).
    pub in_reply_to: Option<String>,
    pub references: Vec<String>,
    pub attachments: Vec<OutgoingAttachment>,
}

fn mailbox(a: &EmailAddress) -> Result<Mailbox, ComposeError> {
    a.as_str()
        .parse::<Mailbox>()
        .map_err(|_| ComposeError::Address)
}

/// Renders the message once and returns it twice: as it goes on an SMTP wire (no `Bcc:` header;
/// the blind recipients are in the envelope) and header-addressed (with the `Bcc:` header, for a
/// transport that takes every recipient from the headers, as Graph's MIME `sendMail` does).
/// Both are the same bytes but for that one header field, so Message-ID and Date agree.
pub fn render_for_sending(msg: &Outgoing) -> Result<(Vec<u8>, Vec<u8>), ComposeError> {
    let addressed = render(msg, true)?;
    let wire = without_header(&addressed, "bcc");
    Ok((wire, addressed))
}

/// `raw` without the header field `name` (lower-case), continuation lines included.
fn without_header(raw: &[u8], name: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut in_headers = true;
    let mut dropping = false;
    for line in raw.split_inclusive(|b| *b == b'\n') {
        if in_headers {
            if line == b"\r\n" || line == b"\n" {
                in_headers = false;
            } else if line.starts_with(b" ") || line.starts_with(b"\t") {
                if dropping {
                    continue;
                }
            } else {
                dropping = line
                    .iter()
                    .position(|b| *b == b':')
                    .is_some_and(|colon| line[..colon].eq_ignore_ascii_case(name.as_bytes()));
                if dropping {
                    continue;
                }
            }
        }
        out.extend_from_slice(line);
    }
    out
}

/// Renders the message. `with_bcc_header` keeps a `Bcc:` header (drafts, which stay in the
/// mailbox); a message on the wire never carries one — its blind recipients are in the envelope.
pub fn render(msg: &Outgoing, with_bcc_header: bool) -> Result<Vec<u8>, ComposeError> {
    check_header_value(HeaderField::Subject, &msg.subject)?;
    if let Some(v) = &msg.in_reply_to {
        check_header_value(HeaderField::InReplyTo, v)?;
    }
    for v in &msg.references {
        check_header_value(HeaderField::References, v)?;
    }
    for a in &msg.attachments {
        check_header_value(HeaderField::AttachmentName, &a.filename)?;
        check_header_value(HeaderField::AttachmentContentType, &a.content_type)?;
    }
    let mut b = lettre::Message::builder()
        .from(mailbox(&msg.from)?)
        .subject(msg.subject.clone());
    for a in &msg.to {
        b = b.to(mailbox(a)?);
    }
    for a in &msg.cc {
        b = b.cc(mailbox(a)?);
    }
    for a in &msg.bcc {
        b = b.bcc(mailbox(a)?);
    }
    if with_bcc_header {
        // lettre drops the Bcc header when formatting unless told to keep it.
        b = b.keep_bcc();
    }
    if let Some(id) = &msg.in_reply_to {
        b = b.in_reply_to(id.clone());
    }
    if !msg.references.is_empty() {
        // lettre's `references` replaces rather than appends: the whole chain goes in one value.
        b = b.references(msg.references.join(" "));
    }
    let text = SinglePart::plain(msg.body.clone());
    let built = if msg.attachments.is_empty() {
        b.singlepart(text)
    } else {
        let mut parts = MultiPart::mixed().singlepart(text);
        for a in &msg.attachments {
            let ct = ContentType::parse(&a.content_type).map_err(|_| ComposeError::ContentType)?;
            parts = parts.singlepart(Attachment::new(a.filename.clone()).body(a.bytes.clone(), ct));
        }
        b.multipart(parts)
    };
    let message = built.map_err(|_| ComposeError::Build)?;
    Ok(message.formatted())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> EmailAddress {
        EmailAddress::parse(s).unwrap()
    }

    fn sample() -> Outgoing {
        Outgoing {
            from: addr("finance@example.com"),
            to: vec![addr("ana.lima@example.com")],
            cc: vec![],
            bcc: vec![addr("records@example.net")],
            subject: "Relatório de março".into(),
            body: "Olá,\nsegue o relatório.\n".into(),
            in_reply_to: Some("<orchard-1@demo.example.com>".into()),
            references: vec![
                "<orchard-0@demo.example.com>".into(),
                "<orchard-1@demo.example.com>".into(),
            ],
            attachments: vec![OutgoingAttachment {
                filename: "ledger.csv".into(),
                content_type: "text/csv".into(),
                bytes: b"a,b\n1,2\n".to_vec(),
            }],
        }
    }

    #[test]
    fn round_trips_through_the_parser() {
        let raw = render(&sample(), false).unwrap();
        let parsed = crate::read_back::parse(&raw);
        assert_eq!(parsed.subject.as_deref(), Some("Relatório de março"));
        assert!(parsed.body_text.contains("segue o relatório"));
        assert_eq!(parsed.attachment_names, [Some("ledger.csv".to_owned())]);
        assert_eq!(
            parsed
                .in_reply_to
                .as_deref()
                .map(|s| s.trim_matches(['<', '>'])),
            Some("orchard-1@demo.example.com")
        );
        let text = String::from_utf8_lossy(&raw);
        assert!(
            !text.to_ascii_lowercase().contains("\nbcc:"),
            "no Bcc on the wire"
        );
        assert!(!text.contains("records@example.net"));
    }

    /// The two renders of a send differ in exactly the `Bcc:` field (folded lines included), so
    /// the header-addressed copy Graph receives is the wire message plus its blind recipients.
    #[test]
    fn sending_renders_differ_only_in_the_bcc_field() {
        let mut m = sample();
        m.bcc = (0..12)
            .map(|i| addr(&format!("blind-recipient-number-{i}@example.net")))
            .collect();
        let (wire, addressed) = render_for_sending(&m).unwrap();
        let wire_text = String::from_utf8_lossy(&wire).into_owned();
        let addressed_text = String::from_utf8_lossy(&addressed).into_owned();
        assert!(
            !wire_text.to_ascii_lowercase().contains("bcc:"),
            "{wire_text}"
        );
        assert!(!wire_text.contains("blind-recipient"), "{wire_text}");
        for i in 0..12 {
            assert!(addressed_text.contains(&format!("blind-recipient-number-{i}@")));
        }
        // Remove the Bcc field (its first line up to the next line that starts a field) from
        // the addressed copy: what is left is the wire copy, byte for byte.
        let start = addressed_text.find("Bcc:").expect("bcc field");
        let end = start
            + addressed_text[start..]
                .match_indices("\r\n")
                .map(|(i, _)| i + 2)
                .find(|&i| {
                    !addressed_text[start + i..].starts_with(' ')
                        && !addressed_text[start + i..].starts_with('\t')
                })
                .expect("field end");
        let mut rebuilt = addressed_text.clone();
        rebuilt.replace_range(start..end, "");
        assert_eq!(rebuilt, wire_text);
        // A body line that looks like a Bcc header is body, and stays.
        let mut m = sample();
        m.body = "Bcc: not-a-header@example.net".into();
        let (wire, _) = render_for_sending(&m).unwrap();
        assert!(String::from_utf8_lossy(&wire).contains("Bcc: not-a-header@example.net"));
    }

    #[test]
    fn drafts_keep_their_bcc() {
        let raw = render(&sample(), true).unwrap();
        assert!(String::from_utf8_lossy(&raw).contains("records@example.net"));
    }

    #[test]
    fn header_injection_is_refused_not_escaped() {
        for bad in ["a\r\nBcc: x@evil.example.net", "a\nb", "a\0b", "a\rb"] {
            let mut m = sample();
            m.subject = bad.into();
            assert_eq!(
                render(&m, false),
                Err(ComposeError::HeaderInjection {
                    field: HeaderField::Subject
                })
            );
            let mut m = sample();
            m.attachments[0].filename = bad.into();
            assert_eq!(
                render(&m, false),
                Err(ComposeError::HeaderInjection {
                    field: HeaderField::AttachmentName
                })
            );
        }
    }

    /// The header section of `raw`: everything before the first empty line.
    fn header_section(raw: &[u8]) -> &[u8] {
        let end = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map_or(raw.len(), |at| at + 2);
        &raw[..end]
    }

    /// Bytes below 0x20 only as CRLF line ends and as the leading whitespace of a folded
    /// continuation line; no DEL; no bare CR or LF.
    fn header_bytes_are_clean(headers: &[u8]) -> Result<(), String> {
        for (n, line) in headers.split(|b| *b == b'\n').enumerate() {
            let Some(line) = line.strip_suffix(b"\r") else {
                if line.is_empty() {
                    continue; // after the final CRLF
                }
                return Err(format!("line {n} does not end in CRLF: {line:?}"));
            };
            for (i, b) in line.iter().enumerate() {
                let folding = i == 0 && n > 0 && *b == b'\t';
                if (*b < 0x20 && !folding) || *b == 0x7f {
                    return Err(format!("line {n} holds byte {b:#04x}: {line:?}"));
                }
            }
        }
        Ok(())
    }

    // See: issue 8, finding 12 (raw VT/FF/ESC/BEL bytes went out in `Subject:`).
    #[test]
    fn issue_8_control_characters_never_reach_a_header() {
        for control in [
            '\u{b}', '\u{c}', '\u{1b}', '\u{7}', '\t', '\u{7f}', '\u{9b}', '\u{2028}',
        ] {
            let value = format!("Invoice{control}[31m due");
            let mut m = sample();
            m.subject = value.clone();
            assert_eq!(
                render(&m, true),
                Err(ComposeError::HeaderInjection {
                    field: HeaderField::Subject
                }),
                "{control:?}"
            );
            let mut m = sample();
            m.references = vec![format!("<a{control}@example.com>")];
            assert_eq!(
                render(&m, true),
                Err(ComposeError::HeaderInjection {
                    field: HeaderField::References
                }),
                "{control:?}"
            );
        }
        let raw = render(&sample(), true).unwrap();
        header_bytes_are_clean(header_section(&raw)).unwrap();
    }

    #[test]
    fn the_header_law_checker_finds_raw_controls() {
        assert!(header_bytes_are_clean(b"Subject: a\x0bb\r\n").is_err());
        assert!(header_bytes_are_clean(b"Subject: a\x1b[31m\r\n").is_err());
        assert!(header_bytes_are_clean(b"Subject: a\nX: b\r\n").is_err());
        assert!(header_bytes_are_clean(b"Subject: a\x7f\r\n").is_err());
        assert!(header_bytes_are_clean(b"Subject: a\r\n\tb\r\n b\r\n").is_ok());
    }

    proptest::proptest! {
        #[test]
        fn any_value_with_a_line_break_is_refused(a in ".{0,20}", b in ".{0,20}", sep in proptest::sample::select(vec!["\r", "\n", "\0"])) {
            let v = format!("{a}{sep}{b}");
            proptest::prop_assert_eq!(
                check_header_value(HeaderField::Subject, &v),
                Err(ComposeError::HeaderInjection { field: HeaderField::Subject })
            );
        }

        /// For any subject, attachment name and thread id: either the value holds a forbidden
        /// character and the message is refused naming that field, or the rendered header
        /// section has no byte below 0x20 but CRLF and folding whitespace, and no DEL.
        #[test]
        fn issue_8_any_header_value_renders_clean_or_is_refused(
            subject in "(\\PC|[\\x00-\\x1f\\x7f-\\x9f\\u{2028}\\u{2029}]){0,120}",
            filename in "(\\PC|[\\x00-\\x1f\\x7f]){0,40}",
            reference in "[!-~\\x00-\\x1f\\x7f]{0,30}",
            drafted in proptest::bool::ANY,
        ) {
            let mut m = sample();
            m.subject = subject.clone();
            m.attachments[0].filename = filename.clone();
            m.references = vec![reference.clone()];
            let bad = |s: &str| s.chars().any(is_forbidden_in_header);
            match render(&m, drafted) {
                Ok(raw) => {
                    proptest::prop_assert!(!bad(&subject) && !bad(&filename) && !bad(&reference));
                    if let Err(why) = header_bytes_are_clean(header_section(&raw)) {
                        proptest::prop_assert!(false, "{}", why);
                    }
                }
                Err(ComposeError::HeaderInjection { field }) => {
                    let expected = if bad(&subject) {
                        HeaderField::Subject
                    } else if bad(&reference) {
                        HeaderField::References
                    } else {
                        HeaderField::AttachmentName
                    };
                    proptest::prop_assert_eq!(field, expected);
                    proptest::prop_assert!(bad(&subject) || bad(&filename) || bad(&reference));
                }
                Err(other) => proptest::prop_assert!(false, "unexpected {:?}", other),
            }
        }
    }
}
