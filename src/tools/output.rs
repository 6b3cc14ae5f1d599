//! Tool outputs: typed projections whose JSON Schemas are published as `outputSchema`.
//!
//! Invariant: every sender-controlled string passes through [`bounded`] with the reference's
//! bounds (subject 300, from 320, preview 500, ≤30 attachment names of 200 chars, content types
//! 100) before it leaves the server, and every sender-controlled list (attachments, To, Cc) is
//! cut to a named bound with a flag saying so, the full count, and a page argument to read the
//! rest ([`page`]). Lengths count Unicode scalar values. [`answer_limit`] is the backstop over a
//! whole answer.

use schemars::JsonSchema;
use serde::Serialize;

use crate::backends::model::MessageSummary;
use crate::backends::{AttachmentMeta, FolderInfo};
use crate::mime::Mailbox;
use crate::search::indexed::Answer;
use crate::search::{Confidence, SearchStatus, Strategy};

pub(crate) const SUBJECT_CHARS: usize = 300;
pub(crate) const ADDRESS_CHARS: usize = 320;
pub(crate) const PREVIEW_CHARS: usize = 500;
pub(crate) const SUMMARY_ATTACHMENTS: usize = 30;
pub(crate) const SUMMARY_ATTACHMENT_NAME_CHARS: usize = 200;
pub(crate) const ATTACHMENT_NAME_CHARS: usize = 300;
pub(crate) const CONTENT_TYPE_CHARS: usize = 100;
pub(crate) const FOLDER_NAME_CHARS: usize = 300;
/// Attachments `get_message` shows; `list_attachments` pages through the rest.
pub(crate) const MESSAGE_ATTACHMENTS: usize = 50;
/// To and Cc addresses `get_message` shows per call, each; `recipientOffset` reads on.
pub(crate) const MESSAGE_RECIPIENTS: usize = 50;
/// The largest (and default) `list_attachments` page.
pub(crate) const ATTACHMENT_PAGE: usize = 100;
/// Entries of an archive listing per answer: `maxZipEntries`' default, so a listing is one
/// answer unless the operator raised that limit.
pub(crate) const ZIP_LISTING_PAGE: usize = 200;
/// Lower bound of [`answer_limit`]: structured JSON bytes of one answer.
pub(crate) const MIN_ANSWER_BYTES: usize = 4 * 1024 * 1024;
/// Room for the fields around the largest configured payload in [`answer_limit`].
const ANSWER_SLACK_BYTES: usize = 1024 * 1024;
/// Most bytes one char can take in JSON (`\u001f`: six).
const JSON_BYTES_PER_CHAR: usize = 6;

/// The most structured JSON bytes one answer may have (a backstop: every list and string is
/// bounded on its own, so only a combination the per-field bounds did not foresee reaches it).
/// It sits above the largest payload the limits allow (a batch, an extraction, a raw
/// attachment), so no answer within the configured limits is refused.
pub(crate) fn answer_limit(limits: &crate::config::Limits) -> usize {
    let to_usize = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
    let largest = [
        to_usize(limits.max_batch_result_bytes),
        limits
            .max_extracted_chars
            .saturating_mul(JSON_BYTES_PER_CHAR),
        to_usize(limits.max_raw_attachment_bytes)
            .div_ceil(3)
            .saturating_mul(4),
    ]
    .into_iter()
    .max()
    .unwrap_or(0);
    MIN_ANSWER_BYTES.max(largest.saturating_add(ANSWER_SLACK_BYTES))
}

/// One page of a list: items `[offset, offset + limit)`, `offset` clamped to the length.
pub(crate) struct Page<'a, T> {
    pub(crate) items: &'a [T],
    pub(crate) offset: usize,
    pub(crate) total: usize,
    /// Where the next page starts; `None` on the last page.
    pub(crate) next: Option<usize>,
}

pub(crate) fn page<T>(list: &[T], offset: usize, limit: usize) -> Page<'_, T> {
    let offset = offset.min(list.len());
    let end = offset.saturating_add(limit).min(list.len());
    Page {
        items: &list[offset..end],
        offset,
        total: list.len(),
        next: (end < list.len()).then_some(end),
    }
}

/// Collapses whitespace runs to one space, trims, and cuts to `max` chars plus `...`.
pub(crate) fn bounded(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max * 4 + 3));
    let mut count = 0;
    let mut pending_space = false;
    for ch in text.chars() {
        if ch.is_whitespace() || ch.is_control() {
            pending_space = count > 0;
            continue;
        }
        if pending_space {
            if count >= max {
                out.push_str("...");
                return out;
            }
            out.push(' ');
            count += 1;
            pending_space = false;
        }
        if count >= max {
            out.push_str("...");
            return out;
        }
        out.push(ch);
        count += 1;
    }
    out
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
pub(crate) struct AddressOut {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) address: Option<String>,
}

impl AddressOut {
    pub(crate) fn from_mailbox(m: &Mailbox) -> Self {
        Self {
            name: m
                .name
                .as_deref()
                .map(|n| bounded(n, ADDRESS_CHARS))
                .filter(|n| !n.is_empty()),
            address: m.address.as_deref().map(|a| bounded(a, ADDRESS_CHARS)),
        }
    }
}

#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AttachmentOut {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) content_type: String,
    pub(crate) size: u64,
    pub(crate) is_inline: bool,
}

impl AttachmentOut {
    pub(crate) fn from_meta(a: &AttachmentMeta, name_chars: usize) -> Self {
        Self {
            id: a.id.clone(),
            name: bounded(a.name.as_deref().unwrap_or(""), name_chars),
            content_type: bounded(&a.content_type, CONTENT_TYPE_CHARS),
            size: a.size,
            is_inline: a.is_inline,
        }
    }
}

/// One message in a search answer or listing.
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MessageSummaryOut {
    pub(crate) id: String,
    pub(crate) folder_id: String,
    pub(crate) subject: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) from: Option<AddressOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) received_date_time: Option<String>,
    /// Absent when unknown or equal to `receivedDateTime`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) sent_date_time: Option<String>,
    pub(crate) is_read: bool,
    /// Absent when not flagged.
    #[serde(skip_serializing_if = "is_false")]
    pub(crate) is_flagged: bool,
    pub(crate) has_attachments: bool,
    pub(crate) body_preview: String,
    /// Absent when the listing did not fetch the message's attachment list (a remote
    /// mailbox; `includeAttachmentNames` fetches it): `hasAttachments` still says whether
    /// there are any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) attachment_count: Option<usize>,
    /// Present when attachment names were asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) attachments: Option<Vec<AttachmentOut>>,
    pub(crate) attachments_truncated: bool,
    /// Present when the message was not wholly read (a warning code such as
    /// `message_too_large`): fields may be missing and a search's non-match in it is unproven.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) content_gap: Option<String>,
    /// Index and hybrid answers: `live`, `index` or `both`, whichever returned the message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) source: Option<&'static str>,
}

impl MessageSummaryOut {
    pub(crate) fn from_summary(c: &MessageSummary, with_attachments: bool) -> Self {
        let listed: Vec<&AttachmentMeta> = c.attachments.iter().filter(|a| !a.is_inline).collect();
        Self {
            id: c.id.clone(),
            folder_id: c.folder_id.clone(),
            subject: bounded(c.subject.as_deref().unwrap_or(""), SUBJECT_CHARS),
            from: c.from.as_ref().map(AddressOut::from_mailbox),
            received_date_time: c.received.map(crate::tools::dates::iso_z),
            // Listings carry what an agent uses: a second, identical timestamp is not that.
            sent_date_time: c
                .sent
                .filter(|s| Some(*s) != c.received)
                .map(crate::tools::dates::iso_z),
            is_read: c.is_read,
            is_flagged: c.is_flagged,
            has_attachments: c.has_attachments,
            body_preview: bounded(&c.preview, PREVIEW_CHARS),
            attachment_count: c.attachments_listed.then_some(listed.len()),
            attachments: (with_attachments && c.attachments_listed).then(|| {
                listed
                    .iter()
                    .take(SUMMARY_ATTACHMENTS)
                    .map(|a| AttachmentOut::from_meta(a, SUMMARY_ATTACHMENT_NAME_CHARS))
                    .collect()
            }),
            attachments_truncated: with_attachments && listed.len() > SUMMARY_ATTACHMENTS,
            content_gap: c.gap.map(|g| crate::search::gap_warning(g).to_owned()),
            source: None,
        }
    }
}

#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde passes a reference"
)]
fn is_false(b: &bool) -> bool {
    !*b
}

/// The evidence-bearing answer for one mailbox (spec/search.md "Outcome").
#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SearchProjection {
    pub(crate) mailbox: String,
    pub(crate) status: SearchStatus,
    pub(crate) strategy: Strategy,
    pub(crate) confidence: Confidence,
    pub(crate) pages_scanned: u32,
    pub(crate) candidates_scanned: usize,
    pub(crate) truncated: bool,
    pub(crate) canary_matched: bool,
    pub(crate) warnings: Vec<String>,
    /// Index and hybrid answers: when the index's scope was last wholly synced (ISO-8601).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) indexed_through: Option<String>,
    pub(crate) messages: Vec<MessageSummaryOut>,
    /// More messages matched than `maxResults`: pass as `cursor` for the next ones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) next_cursor: Option<String>,
}

impl SearchProjection {
    pub(crate) fn new(mailbox: &str, answer: &Answer, with_attachments: bool) -> Self {
        let o = &answer.outcome;
        let mut messages: Vec<MessageSummaryOut> = o
            .messages
            .iter()
            .map(|c| MessageSummaryOut::from_summary(c, with_attachments))
            .collect();
        if let Some(sources) = &answer.sources {
            for (m, source) in messages.iter_mut().zip(sources) {
                m.source = Some(source.as_str());
            }
        }
        Self {
            mailbox: mailbox.to_owned(),
            status: o.status,
            strategy: o.strategy,
            confidence: o.confidence,
            pages_scanned: o.pages_scanned,
            candidates_scanned: o.candidates_scanned,
            truncated: o.truncated,
            canary_matched: o.canary_matched,
            warnings: o.warnings.iter().map(|w| (*w).to_owned()).collect(),
            indexed_through: answer.indexed_through.map(crate::tools::dates::iso_z),
            messages,
            next_cursor: None,
        }
    }
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MailboxAccessOut {
    pub(crate) alias: String,
    pub(crate) access: String,
}

/// Exactly the reference's `{"mailboxes": [...]}` unless an alias is narrowed.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ListMailboxesOut {
    /// Aliases, in configuration order.
    pub(crate) mailboxes: Vec<String>,
    /// Only when some alias is narrowed to `read` (write and handoff tools refused): every
    /// alias with `full` or `read`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) mailbox_access: Option<Vec<MailboxAccessOut>>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MultiSearchOut {
    /// The worst per-mailbox status (FAILED > UNTRUSTED > INCOMPLETE > FOUND > NOT_FOUND).
    pub(crate) status: SearchStatus,
    pub(crate) results: Vec<SearchProjection>,
    /// More mailboxes than `maxMailboxesPerSearch` were asked for (status is at best
    /// SEARCH_INCOMPLETE): pass as `cursor` with the same arguments to search the next ones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) next_cursor: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BatchLabelOut {
    pub(crate) label: String,
    pub(crate) status: SearchStatus,
    pub(crate) warnings: Vec<String>,
    pub(crate) results: Vec<SearchProjection>,
    /// The label names more mailboxes than `maxMailboxesPerSearch` (`mailbox_limit`): pass as
    /// `cursor` to search_mailboxes with its mailboxes and criteria to search the next ones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) next_cursor: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BatchOut {
    pub(crate) status: SearchStatus,
    pub(crate) results: Vec<BatchLabelOut>,
    /// Totals counted against the batch budgets.
    pub(crate) budget: BatchBudgetOut,
    /// A budget ran out: pass as `cursor` with the same queries to run the labels it left.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) next_cursor: Option<String>,
}

#[derive(Debug, Default, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BatchBudgetOut {
    pub(crate) messages: usize,
    pub(crate) attachments: usize,
    pub(crate) context_chars: usize,
    pub(crate) bytes: usize,
    pub(crate) exhausted: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MessageOut {
    #[serde(flatten)]
    pub(crate) summary: MessageSummaryOut,
    pub(crate) to: Vec<AddressOut>,
    pub(crate) cc: Vec<AddressOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) internet_message_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) in_reply_to: Option<String>,
    /// Always `text`: HTML bodies are converted (scripts, styles, hidden text, images dropped).
    pub(crate) content_type: &'static str,
    /// `html` when the body was converted from HTML.
    pub(crate) body_source: &'static str,
    /// The body slice `[bodyOffset, bodyOffset + maxBodyChars)`; absent for `format: headers`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) body: Option<String>,
    pub(crate) body_offset: u64,
    pub(crate) body_total_chars: u64,
    pub(crate) body_truncated: bool,
    /// Pass as `offset` to read on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) next_offset: Option<u64>,
    /// The first 50 attachments, inline parts included (`attachmentsTruncated` says more exist;
    /// list_attachments pages through all of them).
    pub(crate) attachments: Vec<AttachmentOut>,
    /// Length of the full attachment list, inline parts included.
    pub(crate) attachments_total: usize,
    /// Addresses in the To list (the first 1,000 are kept); `to` shows at most 50 per call.
    pub(crate) to_total: usize,
    /// Addresses in the Cc list (the first 1,000 are kept); `cc` shows at most 50 per call.
    pub(crate) cc_total: usize,
    /// More To or Cc addresses exist than are shown (also beyond the 1,000 kept).
    pub(crate) recipients_truncated: bool,
    /// Pass as `recipientOffset` to read the next To and Cc addresses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) next_recipient_offset: Option<u64>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GetMessageOut {
    pub(crate) mailbox: String,
    pub(crate) message: MessageOut,
    /// Pass as `cursor` to read on where this answer stopped (body and To/Cc at once).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) next_cursor: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FolderOut {
    pub(crate) id: String,
    pub(crate) display_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) parent_folder_id: Option<String>,
    pub(crate) total_item_count: u64,
    pub(crate) unread_item_count: u64,
    pub(crate) child_folder_count: usize,
}

impl FolderOut {
    pub(crate) fn list(folders: &[FolderInfo]) -> Vec<FolderOut> {
        folders
            .iter()
            .map(|f| FolderOut {
                id: f.id.clone(),
                display_name: bounded(&f.name, FOLDER_NAME_CHARS),
                parent_folder_id: f.parent_id.clone(),
                total_item_count: f.total,
                unread_item_count: f.unread,
                child_folder_count: folders
                    .iter()
                    .filter(|c| c.parent_id.as_deref() == Some(f.id.as_str()))
                    .count(),
            })
            .collect()
    }
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ListFoldersOut {
    pub(crate) mailbox: String,
    /// Flat list; rebuild the tree from `parentFolderId`.
    pub(crate) folders: Vec<FolderOut>,
    pub(crate) truncated: bool,
    /// More than 1,000 folders: pass as `cursor` for the next ones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) next_cursor: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DateRangeOut {
    pub(crate) oldest: String,
    pub(crate) newest: String,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FolderStatsOut {
    pub(crate) mailbox: String,
    pub(crate) folder_id: String,
    pub(crate) folder_name: String,
    pub(crate) total_emails: u64,
    pub(crate) unread_emails: u64,
    pub(crate) read_emails: u64,
    /// Counted over the scanned window (`messagesScanned`).
    pub(crate) emails_with_attachments: u64,
    /// ISO-8601, over the scanned window.
    pub(crate) date_range: Option<DateRangeOut>,
    pub(crate) messages_scanned: u64,
    /// Scanned messages that could not be read or wholly parsed (too large, beyond the MIME
    /// parser's limits): `emailsWithAttachments` does not cover them.
    pub(crate) messages_not_read: u64,
    pub(crate) pages_scanned: u32,
    pub(crate) truncated: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ListAttachmentsOut {
    pub(crate) mailbox: String,
    pub(crate) message_id: String,
    /// Attachments `[offset, offset + limit)` of the message's list, in its order.
    pub(crate) attachments: Vec<AttachmentOut>,
    pub(crate) offset: u64,
    /// Length of the full list, inline parts included.
    pub(crate) total_count: usize,
    /// Pass as `offset` to read the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) next_offset: Option<u64>,
    /// Pass as `cursor` to read the next page (the same as `nextOffset`, authenticated).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) next_cursor: Option<String>,
    pub(crate) pages_scanned: u32,
    /// More attachments follow this page.
    pub(crate) truncated: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ContentKind {
    Text,
    Raw,
    ZipListing,
}

/// One file entry of an attached ZIP archive.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ZipEntryOut {
    /// Pass as `entry` to read it.
    pub(crate) name: String,
    pub(crate) uncompressed_size: u64,
    /// Needs `password`.
    pub(crate) encrypted: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AttachmentContentOut {
    pub(crate) mailbox: String,
    pub(crate) message_id: String,
    pub(crate) attachment_id: String,
    pub(crate) name: String,
    pub(crate) content_type: String,
    pub(crate) kind: ContentKind,
    pub(crate) size_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) truncated: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) extractor: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) base64: Option<String>,
    /// The archive entry read (`entry` of the call).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) entry: Option<String>,
    /// The archive's addressable file entries (`kind: zip_listing`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) zip_entries: Option<Vec<ZipEntryOut>>,
    /// Entries whose names cannot be addressed (absolute, `..`, backslashes, too long): not
    /// listed and not readable, so a listing with any is incomplete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) hidden_entries: Option<u64>,
    /// The text went on past `maxExtractedChars`, or the listing past a page: pass as `cursor`
    /// for the next window or page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) next_cursor: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_collapses_and_cuts() {
        assert_eq!(bounded("  a \n\t b  ", 10), "a b");
        assert_eq!(bounded("1234567890abcdef", 12), "1234567890ab...");
        assert_eq!(bounded("héllo wörld", 5), "héllo...");
        assert_eq!(bounded("", 5), "");
    }

    #[test]
    fn pages_cover_a_list_once_and_in_order() {
        let list: Vec<usize> = (0..23).collect();
        let mut seen = Vec::new();
        let mut offset = 0;
        loop {
            let p = page(&list, offset, 10);
            assert_eq!(p.total, 23);
            assert_eq!(p.offset, offset);
            assert!(p.items.len() <= 10);
            seen.extend_from_slice(p.items);
            match p.next {
                Some(next) => offset = next,
                None => break,
            }
        }
        assert_eq!(seen, list);
        let past = page(&list, 99, 10);
        assert!(past.items.is_empty() && past.next.is_none());
        assert_eq!(past.offset, 23);
        assert!(page::<u8>(&[], 0, 10).next.is_none());
    }

    #[test]
    fn the_answer_limit_covers_every_configured_payload() {
        let mut limits = crate::config::Config::from_json(
            br#"{"mailboxes": [{"alias": "a", "address": "a@example.com"}]}"#,
            std::path::Path::new("/"),
        )
        .expect("minimal config")
        .limits;
        assert_eq!(answer_limit(&limits), MIN_ANSWER_BYTES);
        limits.max_batch_result_bytes = 10 * 1024 * 1024;
        assert_eq!(answer_limit(&limits), 11 * 1024 * 1024);
        limits.max_batch_result_bytes = 2 * 1024 * 1024;
        limits.max_extracted_chars = 1_000_000;
        assert_eq!(answer_limit(&limits), 6_000_000 + ANSWER_SLACK_BYTES);
    }

    proptest::proptest! {
        #[test]
        fn following_next_reads_every_item_once(len in 0usize..500, limit in 1usize..120) {
            let list: Vec<usize> = (0..len).collect();
            let (mut seen, mut offset) = (Vec::new(), 0);
            loop {
                let p = page(&list, offset, limit);
                proptest::prop_assert!(p.items.len() <= limit);
                seen.extend_from_slice(p.items);
                match p.next {
                    Some(next) => offset = next,
                    None => break,
                }
            }
            proptest::prop_assert_eq!(seen, list);
        }

        #[test]
        fn bounded_never_exceeds(s in ".{0,400}", max in 1usize..50) {
            let out = bounded(&s, max);
            proptest::prop_assert!(out.chars().count() <= max + 3);
            proptest::prop_assert!(!out.contains('\n'));
        }
    }
}
