//! What every index store keeps of a message for its answers: the summary an answer shows
//! (subject, sender, dates, flags, preview, attachments, content gap) as one opaque blob, the
//! content gap as a small code the stores filter on, and the raw values the substring filters
//! match. One codec, so an answer from either
//! store shows a message the same way.

use serde::{Deserialize, Serialize};

use super::IndexError;
use crate::backends::model::{AttachmentMeta, ContentGap, MessageSummary};
use crate::mime::Mailbox;

/// A content gap as a stored code (0: the message is wholly in the index).
pub(crate) fn gap_code(gap: Option<ContentGap>) -> u64 {
    match gap {
        None => 0,
        Some(ContentGap::TooLarge) => 1,
        Some(ContentGap::Unreadable) => 2,
        Some(ContentGap::Structure) => 3,
        Some(ContentGap::Header) => 4,
        Some(ContentGap::Body) => 5,
        Some(ContentGap::Undecodable) => 6,
        Some(ContentGap::UnknownPart) => 7,
    }
}

/// Raw (substring-matched) values are cut to this many bytes (far under tantivy's term limit of
/// 65,530), in both stores, so a sender or subject filter matches the same messages in each.
const MAX_RAW_BYTES: usize = 4_096;

/// The lower-cased value a sender or subject filter matches as a substring, cut to
/// [`MAX_RAW_BYTES`] on a character boundary.
pub(crate) fn raw(s: &str) -> String {
    let lower = s.to_lowercase();
    if lower.len() <= MAX_RAW_BYTES {
        return lower;
    }
    let mut end = MAX_RAW_BYTES;
    while !lower.is_char_boundary(end) {
        end -= 1;
    }
    lower[..end].to_owned()
}

/// Every content gap, in the order of their codes.
pub(crate) const GAPS: [ContentGap; 7] = [
    ContentGap::TooLarge,
    ContentGap::Unreadable,
    ContentGap::Structure,
    ContentGap::Header,
    ContentGap::Body,
    ContentGap::Undecodable,
    ContentGap::UnknownPart,
];

/// The summary as stored.
pub(crate) fn encode(summary: &MessageSummary) -> Result<Vec<u8>, IndexError> {
    serde_json::to_vec(&to_stored(summary)).map_err(|e| IndexError::Store(e.to_string()))
}

/// A stored summary back.
pub(crate) fn decode(bytes: &[u8]) -> Result<MessageSummary, IndexError> {
    let stored: StoredSummary = serde_json::from_slice(bytes)
        .map_err(|_| IndexError::Store("a stored summary is unreadable".to_owned()))?;
    Ok(from_stored(stored))
}

/// The stored summary: what an answer shows of a message, nothing more.
#[derive(Serialize, Deserialize)]
struct StoredSummary {
    id: String,
    folder: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    subject: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    from_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    from_address: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    received: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sent: Option<i64>,
    read: bool,
    flagged: bool,
    has_att: bool,
    preview: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    att: Vec<StoredAttachment>,
    gap: u64,
}

#[derive(Serialize, Deserialize)]
struct StoredAttachment {
    id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    ct: String,
    size: u64,
    est: bool,
    inline: bool,
}

fn to_stored(s: &MessageSummary) -> StoredSummary {
    StoredSummary {
        id: s.id.clone(),
        folder: s.folder_id.clone(),
        subject: s.subject.clone(),
        from_name: s.from.as_ref().and_then(|m| m.name.clone()),
        from_address: s.from.as_ref().and_then(|m| m.address.clone()),
        received: s.received.map(|d| d.timestamp()),
        sent: s.sent.map(|d| d.timestamp()),
        read: s.is_read,
        flagged: s.is_flagged,
        has_att: s.has_attachments,
        preview: s.preview.clone(),
        att: s
            .attachments
            .iter()
            .map(|a| StoredAttachment {
                id: a.id.clone(),
                name: a.name.clone(),
                ct: a.content_type.clone(),
                size: a.size,
                est: a.size_is_estimate,
                inline: a.is_inline,
            })
            .collect(),
        gap: gap_code(s.gap),
    }
}

fn from_stored(s: StoredSummary) -> MessageSummary {
    let ts = |t: Option<i64>| t.and_then(|t| chrono::DateTime::from_timestamp(t, 0));
    MessageSummary {
        id: s.id,
        folder_id: s.folder,
        subject: s.subject,
        from: (s.from_name.is_some() || s.from_address.is_some()).then_some(Mailbox {
            name: s.from_name,
            address: s.from_address,
        }),
        received: ts(s.received),
        sent: ts(s.sent),
        is_read: s.read,
        is_flagged: s.flagged,
        has_attachments: s.has_att,
        preview: s.preview,
        attachments: s
            .att
            .into_iter()
            .map(|a| AttachmentMeta {
                id: a.id,
                name: a.name,
                content_type: a.ct,
                size: a.size,
                size_is_estimate: a.est,
                is_inline: a.inline,
            })
            .collect(),
        attachments_listed: true,
        gap: GAPS.iter().copied().find(|g| gap_code(Some(*g)) == s.gap),
        // The index keeps no categories: a search filtering on them never runs on it.
        categories: Vec::new(),
    }
}
