//! The fake Graph's mailbox model: folders, messages and attachments, their Graph v1.0 JSON, and
//! how they are built (the fluent `Message` seed, `.eml` parsing, synthetic messages).

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use chrono::{DateTime, TimeZone, Utc};
use mail_parser::{MessageParser, MimeHeaders};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::query::{Haystack, html_to_text};

/// Graph's well-known folder names and the display names the fake gives them.
pub(crate) const WELL_KNOWN: &[(&str, &str)] = &[
    ("inbox", "Inbox"),
    ("sentitems", "Sent Items"),
    ("drafts", "Drafts"),
    ("archive", "Archive"),
    ("junkemail", "Junk Email"),
    ("deleteditems", "Deleted Items"),
];

/// An opaque, Graph-like id (`AAMkAG…=`): a hash of a counter, never of an address.
pub(crate) fn opaque_id(prefix: &str, n: u64) -> String {
    let mut h = Sha256::new();
    h.update(b"fake-graph-id");
    h.update(prefix.as_bytes());
    h.update(n.to_be_bytes());
    let digest = h.finalize();
    let mut bytes = digest.to_vec();
    bytes.extend_from_slice(&digest[..3]);
    // 35 bytes: 46 characters plus one `=`, like the padded ids Graph hands out.
    format!("{prefix}{}", URL_SAFE.encode(&bytes))
}

/// Whether an id has the shape of a Graph id (else Graph answers `ErrorInvalidIdMalformed`).
pub(crate) fn id_is_well_formed(id: &str) -> bool {
    id.len() >= 16
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'='))
}

/// A name and an address, Graph's `emailAddress`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct EmailAddress {
    pub(crate) name: String,
    pub(crate) address: String,
}

impl EmailAddress {
    pub(crate) fn new(name: &str, address: &str) -> Self {
        Self {
            name: name.to_owned(),
            address: address.to_owned(),
        }
    }

    fn json(&self) -> Value {
        json!({"emailAddress": {"name": self.name, "address": self.address}})
    }
}

/// One mail folder.
#[derive(Clone, Debug)]
pub(crate) struct Folder {
    pub(crate) id: String,
    pub(crate) display_name: String,
    /// The parent folder's id; top-level folders name the mailbox root.
    pub(crate) parent_id: String,
    pub(crate) well_known: Option<&'static str>,
    pub(crate) is_hidden: bool,
}

/// What an attachment holds.
#[derive(Clone, Debug)]
pub(crate) enum AttachmentContent {
    /// `#microsoft.graph.fileAttachment`: real bytes.
    File(Vec<u8>),
    /// `#microsoft.graph.itemAttachment`: an attached message and its MIME.
    Item {
        message: Box<Message>,
        mime: Vec<u8>,
    },
    /// `#microsoft.graph.referenceAttachment`: a link, no bytes.
    Reference { source_url: String },
}

/// One attachment.
#[derive(Clone, Debug)]
pub(crate) struct Attachment {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) content_type: String,
    pub(crate) is_inline: bool,
    pub(crate) content_id: Option<String>,
    /// A `size` to declare instead of the real one (to test the client's size check).
    pub(crate) declared_size: Option<u64>,
    pub(crate) content: AttachmentContent,
}

impl Attachment {
    fn real_size(&self) -> u64 {
        match &self.content {
            AttachmentContent::File(b) => b.len() as u64,
            AttachmentContent::Item { mime, .. } => mime.len() as u64,
            AttachmentContent::Reference { .. } => 0,
        }
    }

    /// The attachment's JSON: every property; `contentBytes` only for file attachments.
    pub(crate) fn json(&self, modified: DateTime<Utc>) -> Map<String, Value> {
        let odata_type = match self.content {
            AttachmentContent::File(_) => "#microsoft.graph.fileAttachment",
            AttachmentContent::Item { .. } => "#microsoft.graph.itemAttachment",
            AttachmentContent::Reference { .. } => "#microsoft.graph.referenceAttachment",
        };
        let mut m = Map::new();
        m.insert("@odata.type".into(), json!(odata_type));
        m.insert("id".into(), json!(self.id));
        m.insert("lastModifiedDateTime".into(), json!(iso(modified)));
        m.insert("name".into(), json!(self.name));
        m.insert("contentType".into(), json!(self.content_type));
        m.insert(
            "size".into(),
            json!(self.declared_size.unwrap_or_else(|| self.real_size())),
        );
        m.insert("isInline".into(), json!(self.is_inline));
        if let AttachmentContent::File(bytes) = &self.content {
            m.insert("contentId".into(), json!(self.content_id));
            m.insert("contentLocation".into(), Value::Null);
            m.insert("contentBytes".into(), json!(STANDARD.encode(bytes)));
        }
        m
    }
}

/// One message, also the fluent seed the tests build (`Message::new("subject").from(..)…`);
/// the fake assigns `id`, `folder_id` and attachment ids when it files it.
#[derive(Clone, Debug)]
pub(crate) struct Message {
    pub(crate) id: String,
    pub(crate) folder_id: String,
    pub(crate) conversation_id: String,
    pub(crate) internet_message_id: String,
    pub(crate) subject: String,
    pub(crate) body: String,
    pub(crate) body_is_html: bool,
    pub(crate) from: Option<EmailAddress>,
    pub(crate) sender: Option<EmailAddress>,
    pub(crate) to: Vec<EmailAddress>,
    pub(crate) cc: Vec<EmailAddress>,
    pub(crate) bcc: Vec<EmailAddress>,
    pub(crate) reply_to: Vec<EmailAddress>,
    pub(crate) received: DateTime<Utc>,
    pub(crate) sent: DateTime<Utc>,
    pub(crate) is_read: bool,
    pub(crate) is_draft: bool,
    pub(crate) importance: String,
    pub(crate) flagged: bool,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) attachments: Vec<Attachment>,
    /// Bumped on every change: feeds `changeKey` and `@odata.etag`.
    pub(crate) change: u32,
    pub(crate) categories: Vec<String>,
}

/// Fixed epoch of seeded messages without a date (2026-01-05T09:00:00Z).
fn default_date() -> DateTime<Utc> {
    Utc.timestamp_opt(1_767_603_600, 0)
        .single()
        .unwrap_or_default()
}

/// ISO 8601 with `Z`, seconds precision, as Graph writes dates.
pub(crate) fn iso(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn short_hash(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    URL_SAFE.encode(&h.finalize()[..24])
}

impl Message {
    /// A plain-text message with `subject`, from a fictional sender, dated 2026-01-05.
    pub(crate) fn new(subject: &str) -> Self {
        let at = default_date();
        let mid = format!("<{}@example.org>", short_hash(&[subject, "mid"]));
        Self {
            id: String::new(),
            folder_id: String::new(),
            conversation_id: String::new(),
            internet_message_id: mid,
            subject: subject.to_owned(),
            body: String::new(),
            body_is_html: false,
            from: Some(EmailAddress::new("Nora Vance", "nora.vance@example.org")),
            sender: None,
            to: Vec::new(),
            cc: Vec::new(),
            bcc: Vec::new(),
            reply_to: Vec::new(),
            received: at,
            sent: at,
            is_read: false,
            is_draft: false,
            importance: "normal".into(),
            flagged: false,
            headers: Vec::new(),
            attachments: Vec::new(),
            change: 1,
            categories: Vec::new(),
        }
    }

    /// The message's categories (Outlook labels).
    pub(crate) fn categories(mut self, names: &[&str]) -> Self {
        self.categories = names.iter().map(|n| (*n).to_owned()).collect();
        self
    }

    pub(crate) fn from(mut self, name: &str, address: &str) -> Self {
        self.from = Some(EmailAddress::new(name, address));
        self
    }
    pub(crate) fn to(mut self, name: &str, address: &str) -> Self {
        self.to.push(EmailAddress::new(name, address));
        self
    }
    pub(crate) fn cc(mut self, name: &str, address: &str) -> Self {
        self.cc.push(EmailAddress::new(name, address));
        self
    }
    pub(crate) fn bcc(mut self, name: &str, address: &str) -> Self {
        self.bcc.push(EmailAddress::new(name, address));
        self
    }
    pub(crate) fn reply_to(mut self, name: &str, address: &str) -> Self {
        self.reply_to.push(EmailAddress::new(name, address));
        self
    }
    pub(crate) fn text(mut self, body: &str) -> Self {
        self.body = body.to_owned();
        self.body_is_html = false;
        self
    }
    pub(crate) fn html(mut self, body: &str) -> Self {
        self.body = body.to_owned();
        self.body_is_html = true;
        self
    }
    /// Received (and sent, one minute earlier) at an RFC 3339 instant.
    pub(crate) fn received(mut self, rfc3339: &str) -> Self {
        let at = DateTime::parse_from_rfc3339(rfc3339)
            .expect("seed date must be RFC 3339")
            .with_timezone(&Utc);
        self.received = at;
        self.sent = at - chrono::Duration::minutes(1);
        self
    }
    /// Sent at an RFC 3339 instant (search sorts by it).
    pub(crate) fn sent(mut self, rfc3339: &str) -> Self {
        self.sent = DateTime::parse_from_rfc3339(rfc3339)
            .expect("seed date must be RFC 3339")
            .with_timezone(&Utc);
        self
    }
    pub(crate) fn read(mut self, is_read: bool) -> Self {
        self.is_read = is_read;
        self
    }
    pub(crate) fn flagged(mut self, flagged: bool) -> Self {
        self.flagged = flagged;
        self
    }
    pub(crate) fn draft(mut self, is_draft: bool) -> Self {
        self.is_draft = is_draft;
        self
    }
    pub(crate) fn importance(mut self, importance: &str) -> Self {
        self.importance = importance.to_owned();
        self
    }
    pub(crate) fn message_id(mut self, mid: &str) -> Self {
        self.internet_message_id = mid.to_owned();
        self
    }
    /// An extra internet message header (e.g. `In-Reply-To`, `References`).
    pub(crate) fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }
    pub(crate) fn file_attachment(self, name: &str, content_type: &str, bytes: &[u8]) -> Self {
        self.attach(
            name,
            content_type,
            false,
            AttachmentContent::File(bytes.to_vec()),
        )
    }
    pub(crate) fn inline_attachment(
        mut self,
        name: &str,
        content_type: &str,
        content_id: &str,
        bytes: &[u8],
    ) -> Self {
        self = self.attach(
            name,
            content_type,
            true,
            AttachmentContent::File(bytes.to_vec()),
        );
        if let Some(a) = self.attachments.last_mut() {
            a.content_id = Some(content_id.to_owned());
        }
        self
    }
    /// An attached message (`itemAttachment`), its MIME rendered from the seed.
    pub(crate) fn item_attachment(self, attached: Message) -> Self {
        let mime = attached.to_mime();
        let name = attached.subject.clone();
        self.attach(
            &name,
            "message/rfc822",
            false,
            AttachmentContent::Item {
                message: Box::new(attached),
                mime,
            },
        )
    }
    pub(crate) fn reference_attachment(self, name: &str, source_url: &str) -> Self {
        self.attach(
            name,
            "application/octet-stream",
            false,
            AttachmentContent::Reference {
                source_url: source_url.to_owned(),
            },
        )
    }
    /// Makes the last attachment declare `size` instead of its real size.
    pub(crate) fn declared_size(mut self, size: u64) -> Self {
        if let Some(a) = self.attachments.last_mut() {
            a.declared_size = Some(size);
        }
        self
    }

    fn attach(
        mut self,
        name: &str,
        content_type: &str,
        is_inline: bool,
        content: AttachmentContent,
    ) -> Self {
        self.attachments.push(Attachment {
            id: String::new(),
            name: name.to_owned(),
            content_type: content_type.to_owned(),
            is_inline,
            content_id: None,
            declared_size: None,
            content,
        });
        self
    }

    /// The body as plain text (tags stripped from HTML).
    pub(crate) fn body_text(&self) -> String {
        if self.body_is_html {
            html_to_text(&self.body)
        } else {
            self.body.clone()
        }
    }

    /// Graph's `hasAttachments`: true only for non-inline attachments.
    pub(crate) fn has_attachments(&self) -> bool {
        self.attachments.iter().any(|a| !a.is_inline)
    }

    pub(crate) fn etag(&self) -> String {
        format!(
            "W/\"CQAAABYAAAA{}\"",
            short_hash(&[&self.id, &self.change.to_string()])
        )
    }

    pub(crate) fn haystack(&self) -> Haystack {
        let from = self
            .from
            .iter()
            .map(|a| format!("{} {}", a.name, a.address))
            .collect::<String>();
        let to = self
            .to
            .iter()
            .chain(&self.cc)
            .map(|a| format!("{} {} ", a.name, a.address))
            .collect::<String>();
        Haystack {
            subject: self.subject.to_lowercase(),
            body: self.body_text().to_lowercase(),
            from: from.to_lowercase(),
            to: to.to_lowercase(),
            attachments: self
                .attachments
                .iter()
                .map(|a| a.name.to_lowercase())
                .collect::<Vec<_>>()
                .join(" "),
        }
    }

    /// Every property the fake serves, keyed by its Graph name. `internetMessageHeaders` is in
    /// the map but only served when selected, as Graph does.
    pub(crate) fn json(&self, body_as_text: bool) -> Map<String, Value> {
        let (content_type, content) = if self.body_is_html && !body_as_text {
            ("html", self.body.clone())
        } else {
            ("text", self.body_text())
        };
        let preview: String = self
            .body_text()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .chars()
            .take(255)
            .collect();
        let list = |v: &[EmailAddress]| Value::Array(v.iter().map(EmailAddress::json).collect());
        let mut headers = vec![
            ("Message-ID".to_owned(), self.internet_message_id.clone()),
            ("Subject".to_owned(), self.subject.clone()),
        ];
        headers.extend(self.headers.iter().cloned());
        let mut m = Map::new();
        m.insert("@odata.etag".into(), json!(self.etag()));
        m.insert("id".into(), json!(self.id));
        m.insert("createdDateTime".into(), json!(iso(self.received)));
        m.insert("lastModifiedDateTime".into(), json!(iso(self.received)));
        m.insert(
            "changeKey".into(),
            json!(format!("CQAAABYAAA{}", self.change)),
        );
        m.insert("categories".into(), json!(self.categories));
        m.insert("receivedDateTime".into(), json!(iso(self.received)));
        m.insert("sentDateTime".into(), json!(iso(self.sent)));
        m.insert("hasAttachments".into(), json!(self.has_attachments()));
        m.insert("internetMessageId".into(), json!(self.internet_message_id));
        m.insert("subject".into(), json!(self.subject));
        m.insert("bodyPreview".into(), json!(preview));
        m.insert("importance".into(), json!(self.importance));
        m.insert("parentFolderId".into(), json!(self.folder_id));
        m.insert("conversationId".into(), json!(self.conversation_id));
        m.insert("isDeliveryReceiptRequested".into(), json!(false));
        m.insert("isReadReceiptRequested".into(), json!(false));
        m.insert("isRead".into(), json!(self.is_read));
        m.insert("isDraft".into(), json!(self.is_draft));
        m.insert(
            "webLink".into(),
            json!(format!(
                "https://outlook.office365.example.com/owa/?ItemID={}",
                self.id
            )),
        );
        m.insert("inferenceClassification".into(), json!("focused"));
        m.insert(
            "body".into(),
            json!({"contentType": content_type, "content": content}),
        );
        let sender = self.sender.as_ref().or(self.from.as_ref());
        m.insert(
            "sender".into(),
            sender.map(EmailAddress::json).unwrap_or(Value::Null),
        );
        m.insert(
            "from".into(),
            self.from
                .as_ref()
                .map(EmailAddress::json)
                .unwrap_or(Value::Null),
        );
        m.insert("toRecipients".into(), list(&self.to));
        m.insert("ccRecipients".into(), list(&self.cc));
        m.insert("bccRecipients".into(), list(&self.bcc));
        m.insert("replyTo".into(), list(&self.reply_to));
        m.insert(
            "flag".into(),
            json!({"flagStatus": if self.flagged { "flagged" } else { "notFlagged" }}),
        );
        m.insert(
            "internetMessageHeaders".into(),
            Value::Array(
                headers
                    .iter()
                    .map(|(n, v)| json!({"name": n, "value": v}))
                    .collect(),
            ),
        );
        m
    }

    /// A single-part RFC 5322 rendering (for item attachments' `$value`).
    pub(crate) fn to_mime(&self) -> Vec<u8> {
        let addr = |a: &EmailAddress| format!("{} <{}>", a.name, a.address);
        let join = |v: &[EmailAddress]| v.iter().map(addr).collect::<Vec<_>>().join(", ");
        let mut out = String::new();
        if let Some(f) = &self.from {
            out.push_str(&format!("From: {}\r\n", addr(f)));
        }
        if !self.to.is_empty() {
            out.push_str(&format!("To: {}\r\n", join(&self.to)));
        }
        if !self.cc.is_empty() {
            out.push_str(&format!("Cc: {}\r\n", join(&self.cc)));
        }
        out.push_str(&format!("Subject: {}\r\n", self.subject));
        out.push_str(&format!("Date: {}\r\n", self.sent.to_rfc2822()));
        out.push_str(&format!("Message-ID: {}\r\n", self.internet_message_id));
        for (n, v) in &self.headers {
            out.push_str(&format!("{n}: {v}\r\n"));
        }
        out.push_str("MIME-Version: 1.0\r\n");
        let ct = if self.body_is_html { "html" } else { "plain" };
        out.push_str(&format!("Content-Type: text/{ct}; charset=utf-8\r\n"));
        out.push_str("Content-Transfer-Encoding: 8bit\r\n\r\n");
        out.push_str(&self.body.replace('\n', "\r\n"));
        out.push_str("\r\n");
        out.into_bytes()
    }

    /// Builds a message from RFC 5322 bytes; `None` when mail-parser cannot parse them.
    pub(crate) fn from_eml(bytes: &[u8]) -> Option<Self> {
        let parsed = MessageParser::default().parse(bytes)?;
        Some(Self::from_parsed(&parsed))
    }

    fn from_parsed(p: &mail_parser::Message<'_>) -> Self {
        let mut m = Message::new(p.subject().unwrap_or(""));
        let list = |a: Option<&mail_parser::Address<'_>>| -> Vec<EmailAddress> {
            a.map(|a| {
                a.iter()
                    .map(|x| EmailAddress::new(x.name().unwrap_or(""), x.address().unwrap_or("")))
                    .collect()
            })
            .unwrap_or_default()
        };
        m.from = list(p.from()).into_iter().next();
        m.sender = list(p.sender()).into_iter().next();
        m.to = list(p.to());
        m.cc = list(p.cc());
        m.bcc = list(p.bcc());
        m.reply_to = list(p.reply_to());
        if let Some(at) = p
            .date()
            .and_then(|d| Utc.timestamp_opt(d.to_timestamp(), 0).single())
        {
            m.received = at;
            m.sent = at;
        }
        if let Some(mid) = p.message_id() {
            m.internet_message_id = format!("<{mid}>");
        }
        let has_html = p.html_bodies().any(|part| part.is_text_html());
        if has_html {
            m.body = p.body_html(0).map(|c| c.into_owned()).unwrap_or_default();
            m.body_is_html = true;
        } else {
            m.body = p.body_text(0).map(|c| c.into_owned()).unwrap_or_default();
        }
        m.headers = p
            .headers_raw()
            .filter(|(n, _)| {
                !n.eq_ignore_ascii_case("Message-ID") && !n.eq_ignore_ascii_case("Subject")
            })
            .map(|(n, v)| (n.to_owned(), v.trim().to_owned()))
            .collect();
        for part in p.attachments() {
            let ctype = part
                .content_type()
                .map(|c| match c.subtype() {
                    Some(s) => format!("{}/{}", c.ctype(), s),
                    None => c.ctype().to_owned(),
                })
                .unwrap_or_else(|| "application/octet-stream".into());
            let is_inline = part.content_disposition().is_some_and(|d| d.is_inline());
            if let Some(inner) = part.message() {
                let attached = Message::from_parsed(inner);
                let name = part
                    .attachment_name()
                    .map(str::to_owned)
                    .unwrap_or_else(|| attached.subject.clone());
                m = m.attach(
                    &name,
                    "message/rfc822",
                    is_inline,
                    AttachmentContent::Item {
                        message: Box::new(attached),
                        mime: inner.raw_message().to_vec(),
                    },
                );
            } else {
                let name = part.attachment_name().unwrap_or("attachment").to_owned();
                m = m.attach(
                    &name,
                    &ctype,
                    is_inline,
                    AttachmentContent::File(part.contents().to_vec()),
                );
                if let Some(a) = m.attachments.last_mut() {
                    a.content_id = part.content_id().map(str::to_owned);
                }
            }
        }
        m
    }

    /// The thread key: the first `References` id, else `In-Reply-To`, else its own id.
    pub(crate) fn thread_root(&self) -> String {
        let header = |name: &str| {
            self.headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .and_then(|(_, v)| v.split_whitespace().next().map(str::to_owned))
        };
        header("References")
            .or_else(|| header("In-Reply-To"))
            .unwrap_or_else(|| self.internet_message_id.clone())
    }

    /// The `n`th synthetic message (for paging tests): distinct subjects and hourly dates,
    /// every third unread, every fifth with a small CSV.
    pub(crate) fn synthetic(n: usize) -> Self {
        let at = default_date() + chrono::Duration::hours(n as i64);
        let mut m = Message::new(&format!("Synthetic report {n:04}"))
            .from("Ravi Okafor", "ravi.okafor@example.org")
            .to("Mina Holt", "mina.holt@example.com")
            .text(&format!(
                "Synthetic body number {n}. Quarterly numbers attached where noted."
            ))
            .read(!n.is_multiple_of(3))
            .message_id(&format!("<synthetic-{n}@example.org>"));
        m.received = at;
        m.sent = at - chrono::Duration::minutes(2);
        if n.is_multiple_of(5) {
            m = m.file_attachment(
                &format!("figures-{n}.csv"),
                "text/csv",
                format!("month,amount\njan,{n}\n").as_bytes(),
            );
        }
        m
    }
}
