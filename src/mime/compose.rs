//! Builds outgoing RFC 5322 messages (drafts, sends) with lettre's builder — never by string
//! concatenation, so encoding (RFC 2047 words, quoted-printable, MIME boundaries) is the
//! library's job.
//!
//! Invariant: every header value is checked by [`check_header_value`] before it reaches the
//! builder: CR, LF and NUL are refused outright, never escaped or stripped, so no caller-supplied
//! text can start a new header line.

use lettre::message::header::ContentType;
use lettre::message::{Attachment, Mailbox, MultiPart, SinglePart};

use crate::policy::address::EmailAddress;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum ComposeError {
    /// A header value holds CR, LF or NUL.
    #[error("a header value contains a line break or NUL")]
    HeaderInjection,
    #[error("an address could not be used")]
    Address,
    #[error("an attachment content type is not valid")]
    ContentType,
    #[error("the message could not be built")]
    Build,
}

/// Refuses CR, LF and NUL in a value that will become (part of) a header.
pub(crate) fn check_header_value(value: &str) -> Result<(), ComposeError> {
    if value.chars().any(|c| matches!(c, '\r' | '\n' | '\0')) {
        Err(ComposeError::HeaderInjection)
    } else {
        Ok(())
    }
}

/// An attachment to include, already read and bounded by the caller.
#[derive(Clone, Debug)]
pub(crate) struct OutgoingAttachment {
    pub(crate) filename: String,
    pub(crate) content_type: String,
    pub(crate) bytes: Vec<u8>,
}

/// What an outgoing message consists of.
#[derive(Clone, Debug)]
pub(crate) struct Outgoing {
    pub(crate) from: EmailAddress,
    pub(crate) to: Vec<EmailAddress>,
    pub(crate) cc: Vec<EmailAddress>,
    pub(crate) bcc: Vec<EmailAddress>,
    pub(crate) subject: String,
    pub(crate) body: String,
    /// Message-ID of the message this one answers (threading only).
    pub(crate) in_reply_to: Option<String>,
    pub(crate) references: Vec<String>,
    pub(crate) attachments: Vec<OutgoingAttachment>,
}

fn mailbox(a: &EmailAddress) -> Result<Mailbox, ComposeError> {
    a.as_str()
        .parse::<Mailbox>()
        .map_err(|_| ComposeError::Address)
}

/// Renders the message. `with_bcc_header` keeps a `Bcc:` header (drafts, which stay in the
/// mailbox); a message on the wire never carries one — its blind recipients are in the envelope.
pub(crate) fn render(msg: &Outgoing, with_bcc_header: bool) -> Result<Vec<u8>, ComposeError> {
    check_header_value(&msg.subject)?;
    for v in msg.in_reply_to.iter().chain(&msg.references) {
        check_header_value(v)?;
    }
    for a in &msg.attachments {
        check_header_value(&a.filename)?;
        check_header_value(&a.content_type)?;
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
        let parsed = crate::mime::parse(&raw);
        assert_eq!(parsed.subject.as_deref(), Some("Relatório de março"));
        assert!(parsed.body_text.contains("segue o relatório"));
        assert_eq!(parsed.attachments.len(), 1);
        assert_eq!(parsed.attachments[0].name.as_deref(), Some("ledger.csv"));
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
            assert_eq!(render(&m, false), Err(ComposeError::HeaderInjection));
            let mut m = sample();
            m.attachments[0].filename = bad.into();
            assert_eq!(render(&m, false), Err(ComposeError::HeaderInjection));
        }
    }

    proptest::proptest! {
        #[test]
        fn any_value_with_a_line_break_is_refused(a in ".{0,20}", b in ".{0,20}", sep in proptest::sample::select(vec!["\r", "\n", "\0"])) {
            let v = format!("{a}{sep}{b}");
            proptest::prop_assert_eq!(check_header_value(&v), Err(ComposeError::HeaderInjection));
        }
    }
}
