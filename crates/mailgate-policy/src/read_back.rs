//! Test-only: reads a rendered message back with mail-parser, the parser the main crate's MIME
//! view is built on, so the compose and outbound tests can check what a recipient's client sees.

use mail_parser::{HeaderValue, MessageParser, MimeHeaders as _};

/// The parts of a parsed message the tests compare.
pub(crate) struct Parsed {
    pub(crate) subject: Option<String>,
    pub(crate) body_text: String,
    pub(crate) attachment_names: Vec<Option<String>>,
    /// Message-IDs without angle brackets, as the main crate's view has them.
    pub(crate) in_reply_to: Option<String>,
    pub(crate) references: Vec<String>,
}

fn texts(value: &HeaderValue<'_>) -> Vec<String> {
    match value {
        HeaderValue::Text(text) => vec![text.trim().to_owned()],
        HeaderValue::TextList(list) => list.iter().map(|t| t.trim().to_owned()).collect(),
        _ => Vec::new(),
    }
}

/// Parses `raw`; panics when mail-parser cannot read it at all.
pub(crate) fn parse(raw: &[u8]) -> Parsed {
    let message = MessageParser::default()
        .parse(raw)
        .expect("mail-parser reads the rendered message");
    Parsed {
        subject: message.subject().map(str::to_owned),
        body_text: message
            .body_text(0)
            .map(|text| text.into_owned())
            .unwrap_or_default(),
        attachment_names: message
            .attachments()
            .map(|part| part.attachment_name().map(str::to_owned))
            .collect(),
        in_reply_to: texts(message.in_reply_to()).into_iter().next(),
        references: texts(message.references()),
    }
}
