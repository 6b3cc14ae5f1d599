//! Graph's JSON as it arrives, and its translation into the neutral model.
//!
//! Every field Graph may omit is optional here: a message without an `id` cannot be returned,
//! so a listing counts it as an unreadable message (a gap that keeps absence unproven) instead
//! of failing the whole page; any other missing field is simply absent in the model. Bodies are
//! bounded and HTML goes through the same converter as Maildir's (`mime::html`). Everything here
//! is sender-controlled data.

use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::super::changes::SyncItem;
use super::super::model::{
    AttachmentMeta, ContentGap, FolderInfo, MessageDetail, MessageSummary, MessageText,
    PREVIEW_CHARS,
};
use crate::backends::BackendError;
use crate::mime::{self, Mailbox};

/// The `$select` of a listing or search: the summary fields, never the body.
pub(crate) const SUMMARY_FIELDS: &str = "id,parentFolderId,subject,from,receivedDateTime,\
sentDateTime,isRead,flag,hasAttachments,bodyPreview,categories";

/// The `$select` of one message read (summary plus recipients, body and thread headers).
pub(crate) const DETAIL_FIELDS: &str = "id,parentFolderId,subject,from,receivedDateTime,\
sentDateTime,isRead,flag,hasAttachments,bodyPreview,categories,toRecipients,ccRecipients,body,\
internetMessageId,internetMessageHeaders";

/// The `$select` of attachment metadata (never `contentBytes`).
pub(crate) const ATTACHMENT_FIELDS: &str = "id,name,contentType,size,isInline";

/// The `$select` of a folder's `messages/delta`: what a version needs and no more (the index
/// reads the message itself when its version changed).
pub(crate) const DELTA_FIELDS: &str = "id,changeKey";

/// The `$select` of folders.
pub(crate) const FOLDER_FIELDS: &str =
    "id,displayName,parentFolderId,childFolderCount,unreadItemCount,totalItemCount";

/// One page of a collection.
#[derive(Debug, Deserialize)]
pub(crate) struct Collection<T> {
    #[serde(default = "Vec::new")]
    pub(crate) value: Vec<T>,
    #[serde(rename = "@odata.nextLink")]
    pub(crate) next_link: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Folder {
    pub(crate) id: String,
    pub(crate) display_name: Option<String>,
    pub(crate) parent_folder_id: Option<String>,
    #[serde(default)]
    pub(crate) child_folder_count: u64,
    #[serde(default)]
    pub(crate) unread_item_count: u64,
    #[serde(default)]
    pub(crate) total_item_count: u64,
}

impl Folder {
    pub(crate) fn into_info(self) -> FolderInfo {
        FolderInfo {
            name: self.display_name.unwrap_or_else(|| self.id.clone()),
            id: self.id,
            parent_id: self.parent_folder_id,
            total: self.total_item_count,
            unread: self.unread_item_count,
        }
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct EmailAddress {
    pub(crate) name: Option<String>,
    pub(crate) address: Option<String>,
}

/// One of `outlook/masterCategories`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Category {
    pub(crate) display_name: Option<String>,
}

/// One of `contacts` (an Outlook contact: a name and up to three addresses).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ContactItem {
    pub(crate) display_name: Option<String>,
    #[serde(default)]
    pub(crate) email_addresses: Vec<EmailAddress>,
}

/// One of `people` (a person relevant to the user, ranked by Graph).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Person {
    pub(crate) display_name: Option<String>,
    #[serde(default)]
    pub(crate) scored_email_addresses: Vec<ScoredAddress>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ScoredAddress {
    pub(crate) address: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Recipient {
    pub(crate) email_address: Option<EmailAddress>,
}

impl Recipient {
    fn into_mailbox(self) -> Option<Mailbox> {
        let e = self.email_address?;
        Some(Mailbox {
            name: e.name.filter(|n| !n.is_empty()),
            address: e.address.filter(|a| !a.is_empty()),
        })
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FollowupFlag {
    pub(crate) flag_status: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ItemBody {
    pub(crate) content_type: Option<String>,
    pub(crate) content: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Header {
    pub(crate) name: String,
    pub(crate) value: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Message {
    pub(crate) id: String,
    pub(crate) parent_folder_id: Option<String>,
    pub(crate) subject: Option<String>,
    pub(crate) from: Option<Recipient>,
    pub(crate) received_date_time: Option<String>,
    pub(crate) sent_date_time: Option<String>,
    #[serde(default)]
    pub(crate) is_read: bool,
    pub(crate) flag: Option<FollowupFlag>,
    #[serde(default)]
    pub(crate) has_attachments: bool,
    pub(crate) body_preview: Option<String>,
    #[serde(default)]
    pub(crate) categories: Vec<String>,
    #[serde(default)]
    pub(crate) to_recipients: Vec<Recipient>,
    #[serde(default)]
    pub(crate) cc_recipients: Vec<Recipient>,
    pub(crate) body: Option<ItemBody>,
    pub(crate) internet_message_id: Option<String>,
    #[serde(default)]
    pub(crate) internet_message_headers: Vec<Header>,
}

fn timestamp(raw: Option<&str>) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(raw?)
        .ok()
        .map(|d| d.with_timezone(&Utc))
}

/// `<a> <b>` → `["<a>", "<b>"]`.
fn message_ids(value: &str) -> Vec<String> {
    value
        .split_whitespace()
        .filter(|id| id.starts_with('<') && id.ends_with('>'))
        .map(str::to_owned)
        .collect()
}

impl Message {
    /// The body as text (HTML converted), bounded like Maildir's: (text, came from HTML, cut).
    fn body_text(&mut self) -> (String, bool, bool) {
        match self.body.take() {
            Some(ItemBody {
                content_type,
                content: Some(content),
            }) if content_type
                .as_deref()
                .is_some_and(|t| t.eq_ignore_ascii_case("html")) =>
            {
                let (text, cut) = mime::html::to_text_bounded(&content, mime::MAX_BODY_CHARS);
                (text, true, cut)
            }
            Some(ItemBody {
                content: Some(content),
                ..
            }) => {
                let (text, cut) =
                    mime::html::truncate_chars(content.replace("\r\n", "\n"), mime::MAX_BODY_CHARS);
                (text, false, cut)
            }
            _ => (String::new(), false, false),
        }
    }

    /// What a search's fallback reads: the body and `attachments`, saying whether a bound cut
    /// the body (then a word missing from it is not proven missing).
    pub(crate) fn into_text(mut self, attachments: Vec<AttachmentMeta>) -> MessageText {
        let (body, _, cut) = self.body_text();
        MessageText {
            body,
            attachments,
            gap: cut.then_some(ContentGap::Body),
        }
    }

    /// The summary; `folder_hint` names the folder when Graph left `parentFolderId` out.
    pub(crate) fn summary(&mut self, folder_hint: &str) -> MessageSummary {
        MessageSummary {
            id: self.id.clone(),
            folder_id: self
                .parent_folder_id
                .clone()
                .unwrap_or_else(|| folder_hint.to_owned()),
            subject: self.subject.take(),
            from: self.from.take().and_then(Recipient::into_mailbox),
            received: timestamp(self.received_date_time.as_deref()),
            sent: timestamp(self.sent_date_time.as_deref()),
            is_read: self.is_read,
            is_flagged: self
                .flag
                .as_ref()
                .and_then(|f| f.flag_status.as_deref())
                .is_some_and(|s| s.eq_ignore_ascii_case("flagged")),
            has_attachments: self.has_attachments,
            preview: self
                .body_preview
                .take()
                .unwrap_or_default()
                .chars()
                .take(PREVIEW_CHARS)
                .collect(),
            attachments: Vec::new(),
            // Nothing to list when Graph says there are no attachments.
            attachments_listed: !self.has_attachments,
            gap: None,
            categories: std::mem::take(&mut self.categories),
        }
    }

    /// The whole message; the body bounded like Maildir's, HTML converted by `mime::html`.
    pub(crate) fn into_detail(mut self, attachments: Vec<AttachmentMeta>) -> MessageDetail {
        let mut summary = self.summary("");
        summary.attachments = attachments;
        summary.attachments_listed = true;
        let header = |name: &str| {
            self.internet_message_headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
                .map(|h| h.value.as_str())
        };
        let in_reply_to = header("In-Reply-To")
            .and_then(|v| message_ids(v).into_iter().next())
            .or_else(|| header("In-Reply-To").map(|v| v.trim().to_owned()))
            .filter(|v| !v.is_empty());
        let mut references = header("References").map(message_ids).unwrap_or_default();
        references.truncate(mime::MAX_REFERENCES);
        let (body_text, body_is_html, _) = self.body_text();
        let mut to: Vec<Mailbox> = self
            .to_recipients
            .into_iter()
            .filter_map(Recipient::into_mailbox)
            .collect();
        let mut cc: Vec<Mailbox> = self
            .cc_recipients
            .into_iter()
            .filter_map(Recipient::into_mailbox)
            .collect();
        let recipients_cut = to.len() > mime::MAX_ADDRESSES || cc.len() > mime::MAX_ADDRESSES;
        to.truncate(mime::MAX_ADDRESSES);
        cc.truncate(mime::MAX_ADDRESSES);
        MessageDetail {
            summary,
            to,
            cc,
            recipients_cut,
            body_text,
            body_is_html,
            internet_message_id: self.internet_message_id,
            in_reply_to,
            references,
        }
    }
}

/// A `$batch` answer: one response per step, in any order.
#[derive(Debug, Deserialize)]
pub(crate) struct BatchResponse {
    #[serde(default)]
    pub(crate) responses: Vec<BatchStep>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct BatchStep {
    pub(crate) id: String,
    pub(crate) status: u16,
    #[serde(default)]
    pub(crate) body: serde_json::Value,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Attachment {
    #[serde(rename = "@odata.type")]
    pub(crate) odata_type: Option<String>,
    pub(crate) id: String,
    pub(crate) name: Option<String>,
    pub(crate) content_type: Option<String>,
    #[serde(default)]
    pub(crate) size: u64,
    #[serde(default)]
    pub(crate) is_inline: bool,
}

/// What an attachment's `/$value` holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AttachmentKind {
    /// A file: its bytes.
    File,
    /// An attached Outlook item (a message): its MIME.
    Item,
    /// A link to a file stored elsewhere (OneDrive, SharePoint): no bytes in the mailbox.
    Reference,
}

impl Attachment {
    pub(crate) fn kind(&self) -> AttachmentKind {
        match self.odata_type.as_deref() {
            Some(t) if t.ends_with("itemAttachment") => AttachmentKind::Item,
            Some(t) if t.ends_with("referenceAttachment") => AttachmentKind::Reference,
            _ => AttachmentKind::File,
        }
    }

    pub(crate) fn into_meta(self) -> AttachmentMeta {
        let content_type = match self.kind() {
            // `/$value` of an item attachment is the attached message as MIME.
            AttachmentKind::Item => "message/rfc822".to_owned(),
            _ => self
                .content_type
                .filter(|t| !t.trim().is_empty())
                .unwrap_or_else(|| "application/octet-stream".to_owned()),
        };
        AttachmentMeta {
            id: self.id,
            name: self.name,
            content_type,
            size: self.size,
            size_is_estimate: false,
            is_inline: self.is_inline,
        }
    }
}

/// Graph's error answer, of which only the code is read (the message may echo addresses).
#[derive(Debug, Deserialize)]
pub(crate) struct ErrorBody {
    pub(crate) error: ErrorDetail,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ErrorDetail {
    pub(crate) code: Option<String>,
}

/// One page of `messages/delta` as it arrives: the items and exactly one of the two links.
#[derive(Debug, Deserialize)]
struct DeltaPageWire {
    value: Vec<DeltaItemWire>,
    #[serde(rename = "@odata.nextLink")]
    next_link: Option<String>,
    #[serde(rename = "@odata.deltaLink")]
    delta_link: Option<String>,
}

#[derive(Debug, Deserialize)]
struct DeltaItemWire {
    id: String,
    #[serde(rename = "changeKey")]
    change_key: Option<String>,
    #[serde(rename = "@odata.etag")]
    etag: Option<String>,
    /// Present (an object naming a reason: `deleted`, or `changed` for moved away) when the
    /// message left the folder.
    #[serde(rename = "@removed")]
    removed: Option<serde_json::Value>,
}

/// Where a delta page says to go next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum DeltaLink {
    /// `@odata.nextLink`: this round has another page.
    Next(String),
    /// `@odata.deltaLink`: the round is over; the link asks for what changes from now on.
    Delta(String),
}

/// One page of `messages/delta`, read: the messages new or changed, the ids gone from the
/// folder, and the link onward.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DeltaPage {
    pub(crate) changed: Vec<SyncItem>,
    pub(crate) removed: Vec<String>,
    pub(crate) link: DeltaLink,
}

/// Reads a delta page. Strict where the index depends on it: every item has a non-empty id
/// and, unless removed, a version (its `changeKey`, else its etag); the page has exactly one of
/// nextLink and deltaLink, non-empty. Anything else is `Malformed`, so a broken page never
/// reads as "nothing changed". Unknown fields are ignored.
pub(crate) fn parse_delta_page(body: &[u8]) -> Result<DeltaPage, BackendError> {
    let wire: DeltaPageWire = serde_json::from_slice(body).map_err(|_| BackendError::Malformed)?;
    let link = match (wire.next_link, wire.delta_link) {
        (Some(next), None) if !next.is_empty() => DeltaLink::Next(next),
        (None, Some(delta)) if !delta.is_empty() => DeltaLink::Delta(delta),
        _ => return Err(BackendError::Malformed),
    };
    let mut changed = Vec::new();
    let mut removed = Vec::new();
    for item in wire.value {
        if item.id.is_empty() {
            return Err(BackendError::Malformed);
        }
        if item.removed.is_some() {
            removed.push(item.id);
            continue;
        }
        let version = item
            .change_key
            .filter(|k| !k.is_empty())
            .or(item.etag.filter(|e| !e.is_empty()))
            .ok_or(BackendError::Malformed)?;
        changed.push(SyncItem {
            id: item.id,
            version,
        });
    }
    Ok(DeltaPage {
        changed,
        removed,
        link,
    })
}

// Only in fuzz and test builds: an oracle is no part of what ships.
#[cfg(any(test, fuzzing))]
impl DeltaPage {
    /// The page as Graph would send it (removed items with reason `deleted`); reading it back
    /// gives the same page. For the fuzz oracle and tests.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        let mut value: Vec<serde_json::Value> = self
            .changed
            .iter()
            .map(|i| serde_json::json!({"id": i.id, "changeKey": i.version}))
            .collect();
        value.extend(
            self.removed
                .iter()
                .map(|id| serde_json::json!({"id": id, "@removed": {"reason": "deleted"}})),
        );
        let mut page = serde_json::json!({ "value": value });
        match &self.link {
            DeltaLink::Next(l) => page["@odata.nextLink"] = serde_json::json!(l),
            DeltaLink::Delta(l) => page["@odata.deltaLink"] = serde_json::json!(l),
        }
        page
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_documented_message_payload_becomes_a_detail() {
        let json = serde_json::json!({
            "@odata.etag": "W/\"CQAAABYAAAA\"",
            "id": "AAMkAGI2THVSAAA=",
            "parentFolderId": "AAMkAGI2AAEMAAA=",
            "subject": "Quarterly report",
            "bodyPreview": "Hello team",
            "from": {"emailAddress": {"name": "Dana Example", "address": "dana@example.com"}},
            "toRecipients": [{"emailAddress": {"name": "", "address": "finance@example.com"}}],
            "ccRecipients": [],
            "receivedDateTime": "2024-03-01T10:00:00Z",
            "sentDateTime": "2024-03-01T09:59:58Z",
            "isRead": false,
            "hasAttachments": true,
            "flag": {"flagStatus": "flagged"},
            "body": {"contentType": "html", "content": "<p>Hello <b>team</b></p><script>x</script>"},
            "internetMessageId": "<m2@example.com>",
            "internetMessageHeaders": [
                {"name": "In-Reply-To", "value": "<m1@example.com>"},
                {"name": "References", "value": "<m0@example.com> <m1@example.com>"}
            ]
        });
        let message: Message = serde_json::from_value(json).expect("parses");
        let detail = message.into_detail(Vec::new());
        assert_eq!(detail.summary.id, "AAMkAGI2THVSAAA=");
        assert_eq!(detail.summary.folder_id, "AAMkAGI2AAEMAAA=");
        assert!(detail.summary.is_flagged && !detail.summary.is_read);
        assert_eq!(
            detail
                .summary
                .from
                .as_ref()
                .and_then(|m| m.address.as_deref()),
            Some("dana@example.com")
        );
        assert_eq!(detail.to[0].name, None, "an empty display name is absent");
        assert!(detail.body_is_html);
        assert!(
            detail.body_text.contains("Hello team"),
            "{}",
            detail.body_text
        );
        assert!(!detail.body_text.contains("script"), "{}", detail.body_text);
        assert_eq!(detail.in_reply_to.as_deref(), Some("<m1@example.com>"));
        assert_eq!(detail.references, ["<m0@example.com>", "<m1@example.com>"]);
        assert_eq!(
            detail.summary.received.map(|d| d.to_rfc3339()).as_deref(),
            Some("2024-03-01T10:00:00+00:00")
        );
    }

    /// A body past the bound is cut, and the text says so: a search must not read a missing
    /// word as absent from it.
    #[test]
    fn a_cut_body_is_an_incomplete_text() {
        let long = "word ".repeat(mime::MAX_BODY_CHARS / 5 + 10);
        for content_type in ["text", "html"] {
            let message: Message = serde_json::from_value(serde_json::json!({
                "id": "AAMk=", "body": {"contentType": content_type, "content": long}
            }))
            .expect("parses");
            let text = message.into_text(Vec::new());
            assert_eq!(text.gap, Some(ContentGap::Body), "{content_type}");
            assert!(text.body.chars().count() <= mime::MAX_BODY_CHARS);
        }
        let short: Message = serde_json::from_value(serde_json::json!({
            "id": "AAMk=", "body": {"contentType": "html", "content": "<p>short</p>"}
        }))
        .expect("parses");
        assert_eq!(short.into_text(Vec::new()).gap, None);
    }

    #[test]
    fn attachment_kinds_follow_the_odata_type() {
        let parse = |t: &str| -> Attachment {
            serde_json::from_value(serde_json::json!({
                "@odata.type": t, "id": "AAMk=", "name": "x", "contentType": "text/csv",
                "size": 12, "isInline": false
            }))
            .expect("parses")
        };
        assert_eq!(
            parse("#microsoft.graph.fileAttachment").kind(),
            AttachmentKind::File
        );
        let item = parse("#microsoft.graph.itemAttachment");
        assert_eq!(item.kind(), AttachmentKind::Item);
        assert_eq!(item.into_meta().content_type, "message/rfc822");
        assert_eq!(
            parse("#microsoft.graph.referenceAttachment").kind(),
            AttachmentKind::Reference
        );
    }

    #[test]
    fn a_documented_delta_page_reads_and_writes_back_the_same() {
        let body = serde_json::json!({
            "@odata.context": "https://graph.microsoft.com/v1.0/$metadata#Collection(message)",
            "@odata.deltaLink": "https://graph.microsoft.com/v1.0/users/a/mailFolders('x')/messages/delta?$deltatoken=T",
            "value": [
                {"@odata.type": "#microsoft.graph.message", "@odata.etag": "W/\"CQAAABYAAAA\"",
                 "id": "AAMkAGI1AAA=", "changeKey": "CQAAABYAAAA1"},
                {"@odata.etag": "W/\"CQAAABYAAAB\"", "id": "AAMkAGI1AAB="},
                {"id": "AAMkAGI1AAC=", "@removed": {"reason": "deleted"}}
            ]
        });
        let bytes = serde_json::to_vec(&body).expect("json");
        let page = parse_delta_page(&bytes).expect("parses");
        assert_eq!(page.changed.len(), 2);
        assert_eq!(page.changed[0].version, "CQAAABYAAAA1", "changeKey first");
        assert_eq!(
            page.changed[1].version, "W/\"CQAAABYAAAB\"",
            "else the etag"
        );
        assert_eq!(page.removed, ["AAMkAGI1AAC="]);
        assert!(matches!(&page.link, DeltaLink::Delta(l) if l.ends_with("$deltatoken=T")));
        let again = serde_json::to_vec(&page.to_json()).expect("json");
        assert_eq!(parse_delta_page(&again).expect("parses"), page);
        for garbage in [&b""[..], b"[]", b"{}", b"{\"value\": []}", b"\xff"] {
            assert!(
                matches!(parse_delta_page(garbage), Err(BackendError::Malformed)),
                "{garbage:?}"
            );
        }
    }

    /// The fuzz seeds are real pages: each reads (or, the error answer, is refused) and writes
    /// back to itself, so the fuzzer starts from inputs that reach the whole parser.
    #[test]
    fn the_delta_fuzz_seeds_read_as_pages() {
        let seeds: [(&[u8], usize); 4] = [
            (
                include_bytes!("../../../fuzz/corpus/graph_delta/initial-next.json"),
                2,
            ),
            (
                include_bytes!("../../../fuzz/corpus/graph_delta/changes-removed-delta.json"),
                3,
            ),
            (
                include_bytes!("../../../fuzz/corpus/graph_delta/etag-only.json"),
                1,
            ),
            (
                include_bytes!("../../../fuzz/corpus/graph_delta/empty-round.json"),
                0,
            ),
        ];
        for (seed, items) in seeds {
            let page = parse_delta_page(seed).expect("a seed page");
            assert_eq!(page.changed.len() + page.removed.len(), items);
            let again = serde_json::to_vec(&page.to_json()).expect("json");
            assert_eq!(parse_delta_page(&again).expect("parses"), page);
        }
        let gone = include_bytes!("../../../fuzz/corpus/graph_delta/gone.json");
        assert!(matches!(
            parse_delta_page(gone),
            Err(BackendError::Malformed)
        ));
    }
}
