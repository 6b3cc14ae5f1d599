//! The backend-neutral model: what every backend answers and what it is asked, in terms no
//! backend owns. Folder selectors use the well-known names the tools expose (`inbox`,
//! `sentitems`, …), flags are named (not Maildir letters or IMAP keywords), a message summary
//! carries no body (a remote backend would pay one fetch per message for it), and every listing
//! runs under an explicit [`Budget`]. Search (`crate::search`) and the tools build on these types;
//! nothing here imports either, so the dependency runs one way: tools → search → backends.
//!
//! Everything a backend returns that came from a message is untrusted: these types carry it
//! unbounded and the tool layer bounds and frames it.

use std::time::Instant;

use chrono::{DateTime, Utc};

use super::BackendError;
use crate::mime::Mailbox;

/// A folder as a caller names it: one of the well-known folders every backend maps to its own
/// (Graph's well-known names, IMAP special-use flags, Maildir++ conventions), or a backend's own
/// folder id, passed through opaque.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FolderSelector {
    WellKnown(WellKnown),
    Id(String),
}

/// The well-known folders (Graph's names, which the tools expose).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WellKnown {
    Inbox,
    SentItems,
    Drafts,
    Archive,
    JunkEmail,
    DeletedItems,
}

impl WellKnown {
    pub(crate) const ALL: [WellKnown; 6] = [
        WellKnown::Inbox,
        WellKnown::SentItems,
        WellKnown::Drafts,
        WellKnown::Archive,
        WellKnown::JunkEmail,
        WellKnown::DeletedItems,
    ];

    /// The canonical name (Graph's well-known folder name, and the index's label).
    pub(crate) fn label(self) -> &'static str {
        match self {
            WellKnown::Inbox => "inbox",
            WellKnown::SentItems => "sentitems",
            WellKnown::Drafts => "drafts",
            WellKnown::Archive => "archive",
            WellKnown::JunkEmail => "junkemail",
            WellKnown::DeletedItems => "deleteditems",
        }
    }
}

impl FolderSelector {
    /// A caller's folder: a well-known name (case-insensitive, with the common aliases `sent`,
    /// `junk`, `trash`) or else an id; `None` is the inbox.
    pub(crate) fn parse(requested: Option<&str>) -> Self {
        let Some(raw) = requested.map(str::trim) else {
            return FolderSelector::WellKnown(WellKnown::Inbox);
        };
        let well_known = match raw.to_ascii_lowercase().as_str() {
            "inbox" => Some(WellKnown::Inbox),
            "sentitems" | "sent" => Some(WellKnown::SentItems),
            "drafts" => Some(WellKnown::Drafts),
            "archive" => Some(WellKnown::Archive),
            "junkemail" | "junk" => Some(WellKnown::JunkEmail),
            "deleteditems" | "trash" => Some(WellKnown::DeletedItems),
            _ => None,
        };
        match well_known {
            Some(name) => FolderSelector::WellKnown(name),
            None => FolderSelector::Id(raw.to_owned()),
        }
    }
}

/// The flags a new message is stored with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Flags {
    pub(crate) seen: bool,
    pub(crate) draft: bool,
}

/// One item's outcome in a batch write: its value (the new id of a moved or copied message), or
/// why this item failed.
pub(crate) type ItemResult<T> = Result<T, BackendError>;

/// A mailbox's categories: the labels its messages can carry, as its backend defines them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Categories {
    /// The names the backend lists (Graph's master categories, IMAP keywords). Untrusted: a
    /// mailbox's owner (or a sender, for IMAP keywords some servers let a message create)
    /// chose them.
    Listed(Vec<String>),
    /// The backend keeps none; why, for the answer.
    Unsupported(&'static str),
}

/// One correspondent: an address-book entry, or a name and address seen in headers.
/// Sender-controlled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Contact {
    pub(crate) name: Option<String>,
    pub(crate) address: String,
}

/// One folder of a mailbox, flat; the tree is rebuilt from `parent_id`.
#[derive(Clone, Debug)]
pub(crate) struct FolderInfo {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) parent_id: Option<String>,
    pub(crate) total: u64,
    pub(crate) unread: u64,
}

/// Attachment metadata; `name` is sender-controlled.
#[derive(Clone, Debug)]
pub(crate) struct AttachmentMeta {
    pub(crate) id: String,
    pub(crate) name: Option<String>,
    pub(crate) content_type: String,
    /// The decoded size in bytes: exact, unless `size_is_estimate`.
    pub(crate) size: u64,
    /// The listing could only estimate the decoded size (IMAP declares a base64 part's encoded
    /// length); the download's own metadata then declares it exactly, and that is what the
    /// bytes must match.
    pub(crate) size_is_estimate: bool,
    pub(crate) is_inline: bool,
}

/// One message as a listing or search sees it: headers, flags, a bounded preview and the
/// attachment list, never the body. Every string is sender-controlled.
#[derive(Clone, Debug)]
pub(crate) struct MessageSummary {
    pub(crate) id: String,
    pub(crate) folder_id: String,
    pub(crate) subject: Option<String>,
    pub(crate) from: Option<Mailbox>,
    pub(crate) received: Option<DateTime<Utc>>,
    pub(crate) sent: Option<DateTime<Utc>>,
    pub(crate) is_read: bool,
    pub(crate) is_flagged: bool,
    pub(crate) has_attachments: bool,
    /// Start of the body text, for previews (at most [`PREVIEW_CHARS`]).
    pub(crate) preview: String,
    pub(crate) attachments: Vec<AttachmentMeta>,
    /// `attachments` is the message's whole list. A remote listing does not fetch attachment
    /// lists (one request per message), so there it holds none and a name match needs a fetch.
    pub(crate) attachments_listed: bool,
    /// What of this message the backend did not read; `Some` makes a non-match unproven.
    pub(crate) gap: Option<ContentGap>,
    /// The categories the message carries (Graph categories, IMAP keywords); empty on a
    /// backend that keeps none.
    pub(crate) categories: Vec<String>,
}

#[cfg(any(test, fuzzing))]
impl MessageSummary {
    /// A summary with only an id and a folder: the base of test and fuzz fixtures.
    pub(crate) fn blank(id: &str, folder_id: &str) -> Self {
        MessageSummary {
            id: id.into(),
            folder_id: folder_id.into(),
            subject: None,
            from: None,
            received: None,
            sent: None,
            is_read: false,
            is_flagged: false,
            has_attachments: false,
            preview: String::new(),
            attachments: Vec::new(),
            attachments_listed: true,
            gap: None,
            categories: Vec::new(),
        }
    }
}

/// The words of a search query as a server-side search is given them: maximal runs of letters
/// and digits, lower-cased. Punctuation, quotes and operators never reach a server's query
/// language; the engine matches the caller's own tokens locally either way.
pub(crate) fn query_words(query: &str) -> Vec<String> {
    query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Characters of body text a summary's preview keeps.
pub(crate) const PREVIEW_CHARS: usize = 500;

/// A whole message as the reader tools see it.
#[derive(Clone, Debug)]
pub(crate) struct MessageDetail {
    /// Its summary, whose `attachments` is the message's whole attachment list (what
    /// `list_attachments` answers), so one read serves a caller that needs both.
    pub(crate) summary: MessageSummary,
    pub(crate) to: Vec<Mailbox>,
    pub(crate) cc: Vec<Mailbox>,
    /// The message lists more To/Cc addresses than the parser keeps (`mime::MAX_ADDRESSES`).
    pub(crate) recipients_cut: bool,
    pub(crate) body_text: String,
    pub(crate) body_is_html: bool,
    pub(crate) internet_message_id: Option<String>,
    pub(crate) in_reply_to: Option<String>,
    /// The `References` chain, oldest first (for threading a reply).
    pub(crate) references: Vec<String>,
}

/// What a search reads of a message its summary did not settle: the body text and the whole
/// attachment list.
#[derive(Clone, Debug)]
pub(crate) struct MessageText {
    pub(crate) body: String,
    pub(crate) attachments: Vec<AttachmentMeta>,
    /// What of the message `body` does not hold (a bound cut it, a part no matcher reads),
    /// `None` when it is the whole text, so a word missing from it is missing.
    pub(crate) gap: Option<ContentGap>,
}

/// Counts of one folder over a bounded scan.
#[derive(Clone, Debug)]
pub(crate) struct FolderStats {
    pub(crate) folder: FolderInfo,
    pub(crate) with_attachments: u64,
    pub(crate) oldest: Option<DateTime<Utc>>,
    pub(crate) newest: Option<DateTime<Utc>>,
    pub(crate) messages_scanned: u64,
    /// Scanned messages that could not be read or wholly parsed: the attachment count does not
    /// cover them.
    pub(crate) messages_not_read: u64,
    pub(crate) pages_scanned: u32,
    pub(crate) truncated: bool,
}

/// Why a message in a scanned window was not wholly seen, most severe first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ContentGap {
    /// Over the backend's size bound: nothing but its metadata was read.
    TooLarge,
    /// Could not be read at all.
    Unreadable,
    /// Parts beyond the MIME parser's structural limits were not read.
    Structure,
    /// A body part's transfer encoding could not be decoded: its text is raw or short.
    Undecodable,
    /// A part in the body's place is neither text nor a type without words (an unknown type,
    /// binary bytes without a name, encrypted content): no matcher read it.
    UnknownPart,
    /// A header's tail beyond the matching bound was not read.
    Header,
    /// The body's tail beyond the matching bound was not read.
    Body,
}

impl ContentGap {
    /// The most severe gap of a parsed view, if any.
    pub(crate) fn of(cuts: crate::mime::Cuts) -> Option<ContentGap> {
        if cuts.structure {
            Some(ContentGap::Structure)
        } else if let Some(part) = cuts.part {
            Some(match part {
                crate::mime::PartGap::Undecodable => ContentGap::Undecodable,
                crate::mime::PartGap::UnknownType => ContentGap::UnknownPart,
            })
        } else if cuts.header {
            Some(ContentGap::Header)
        } else if cuts.body {
            Some(ContentGap::Body)
        } else {
            None
        }
    }
}

/// The gaps met in one scanned window, by kind (each kind once, in order of severity).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Gaps {
    kinds: Vec<ContentGap>,
    messages: usize,
}

impl Gaps {
    pub(crate) fn add(&mut self, gap: ContentGap) {
        self.messages += 1;
        if !self.kinds.contains(&gap) {
            self.kinds.push(gap);
            self.kinds.sort_by_key(|g| *g as u8);
        }
    }

    pub(crate) fn merge(&mut self, other: &Gaps) {
        for &gap in &other.kinds {
            if !self.kinds.contains(&gap) {
                self.kinds.push(gap);
            }
        }
        self.kinds.sort_by_key(|g| *g as u8);
        self.messages += other.messages;
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.messages == 0
    }

    pub(crate) fn kinds(&self) -> &[ContentGap] {
        &self.kinds
    }
}

/// Structured filters, applied by the backend and again by the search engine (defence against a
/// backend that ignores part of a filter).
#[derive(Clone, Debug, Default)]
pub(crate) struct Filters {
    pub(crate) sender: Option<String>,
    pub(crate) subject: Option<String>,
    pub(crate) date_from: Option<DateTime<Utc>>,
    pub(crate) date_to: Option<DateTime<Utc>>,
    pub(crate) has_attachments: Option<bool>,
    pub(crate) is_read: Option<bool>,
    /// Any of these categories (case-insensitive); empty: no category filter. Only a backend
    /// that keeps categories ([`super::MailStore::keeps_categories`]) can be asked.
    pub(crate) categories: Vec<String>,
}

impl Filters {
    /// Whether a filter reads the message's content (sender, subject, attachments), which a
    /// message whose content was not read cannot be tested against.
    pub(crate) fn reads_content(&self) -> bool {
        self.sender.is_some() || self.subject.is_some() || self.has_attachments.is_some()
    }

    /// Whether the filters that need no content (read state, received date) admit a message;
    /// a backend can apply these before reading it.
    pub(crate) fn admits_metadata(&self, is_read: bool, received: Option<DateTime<Utc>>) -> bool {
        if let Some(from) = self.date_from
            && received.is_none_or(|d| d < from)
        {
            return false;
        }
        if let Some(to) = self.date_to
            && received.is_none_or(|d| d > to)
        {
            return false;
        }
        self.is_read.is_none_or(|want| want == is_read)
    }

    pub(crate) fn matches(&self, c: &MessageSummary) -> bool {
        if let Some(sender) = &self.sender {
            let needle = sender.to_lowercase();
            let from = c.from.as_ref();
            let hit = from
                .and_then(|m| m.address.as_deref())
                .is_some_and(|a| a.to_lowercase().contains(&needle))
                || from
                    .and_then(|m| m.name.as_deref())
                    .is_some_and(|n| n.to_lowercase().contains(&needle));
            if !hit {
                return false;
            }
        }
        if let Some(subject) = &self.subject {
            let needle = subject.to_lowercase();
            if !c
                .subject
                .as_deref()
                .is_some_and(|s| s.to_lowercase().contains(&needle))
            {
                return false;
            }
        }
        if let Some(want) = self.has_attachments
            && c.has_attachments != want
        {
            return false;
        }
        if !self.categories.is_empty()
            && !c.categories.iter().any(|have| {
                self.categories
                    .iter()
                    .any(|want| want.to_lowercase() == have.to_lowercase())
            })
        {
            return false;
        }
        self.admits_metadata(c.is_read, c.received)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum SortBy {
    #[default]
    ReceivedDateTime,
    Subject,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum SortOrder {
    Asc,
    #[default]
    Desc,
}

/// The order results are returned in; a backend that keeps only the best `keep` matches keeps
/// them by this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct Order {
    pub(crate) by: SortBy,
    pub(crate) direction: SortOrder,
}

impl Order {
    pub(crate) fn compare(self, a: &MessageSummary, b: &MessageSummary) -> std::cmp::Ordering {
        let ord = match self.by {
            SortBy::ReceivedDateTime => a.received.cmp(&b.received),
            SortBy::Subject => a
                .subject
                .as_deref()
                .unwrap_or("")
                .to_lowercase()
                .cmp(&b.subject.as_deref().unwrap_or("").to_lowercase()),
        }
        .then_with(|| a.id.cmp(&b.id));
        match self.direction {
            SortOrder::Asc => ord,
            SortOrder::Desc => ord.reverse(),
        }
    }
}

/// What one call may spend on a listing or search: a deadline, and for backends that page, the
/// page and item limits whose hitting must be reported.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Budget {
    /// When the work must stop (reporting `timed_out`), whatever is left.
    pub(crate) deadline: Instant,
    /// Pages a paging backend may fetch.
    pub(crate) max_pages: u32,
    /// Messages a paging backend may examine (the scan window).
    pub(crate) max_items: usize,
}

/// What a backend is asked to list or search: one folder, filters, the budget, and how many of
/// the matches to return (the best `keep` by `order`; the rest are counted).
#[derive(Clone, Debug)]
pub(crate) struct ScanRequest {
    pub(crate) folder: FolderSelector,
    pub(crate) filters: Filters,
    pub(crate) budget: Budget,
    pub(crate) keep: usize,
    pub(crate) order: Order,
}

/// Which limit stopped a scan while messages were left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScanStop {
    /// The item cap (`scanLimit`, the scan window).
    Window,
    /// `maxPages`.
    Pages,
    /// The budget's deadline.
    Deadline,
    /// The server's own cap on results (Graph's `$search` returns at most 1,000).
    ServerCap,
    /// A page after the first failed: what was read before it is kept, the rest is unknown.
    Fault(Fault),
}

/// The class of a failure that ended a scan part-way (see [`BackendError::fault`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    Throttled,
    Unauthorised,
    /// The delegated grant must be renewed by the operator (`BackendError::AuthRequired`).
    AuthRequired,
    Timeout,
    Unavailable,
    Malformed,
}

/// A bounded answer from a backend.
#[derive(Clone, Debug, Default)]
pub(crate) struct Page {
    /// The best `keep` matches by the request's order (an exhaustive scan), or the matches in
    /// the order the backend returned them (a paged listing).
    pub(crate) items: Vec<MessageSummary>,
    /// Matches found, kept or not.
    pub(crate) matched: usize,
    pub(crate) pages_scanned: u32,
    /// Stopped because of a limit while more items were left.
    pub(crate) truncated: bool,
    /// Stopped because the deadline passed (then `truncated` is set too).
    pub(crate) timed_out: bool,
    /// Messages of the scanned window that were not wholly read, returned or not.
    pub(crate) gaps: Gaps,
    /// The limit that stopped the scan while messages were left, when one did.
    pub(crate) stop: Option<ScanStop>,
    /// Messages looked at, matching or not.
    pub(crate) examined: usize,
    /// Messages in the folder, when the backend knows.
    pub(crate) folder_total: Option<usize>,
    /// Messages per page, when the backend pages by a fixed count.
    pub(crate) page_size: Option<usize>,
}

impl Page {
    /// Whether a non-match in this page proves nothing: a limit stopped it or a message in it
    /// was not wholly read.
    pub(crate) fn is_incomplete(&self) -> bool {
        self.truncated || self.timed_out || !self.gaps.is_empty()
    }
}

/// How a backend searches, which decides what the search engine must add to prove an answer
/// (search.md rules; issue 10's cost model).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SearchKind {
    /// No server-side search: the engine scans listings itself (the bounded fallback scan).
    ListingOnly,
    /// The backend's search reads every message of the folder with mailgate's own matcher
    /// (Maildir): it cannot ignore the query, so no canary, and no fallback scan either.
    ExhaustiveLocal,
    /// A server-side relevance search that may ignore or loosen the query (Graph `$search`,
    /// IMAP SEARCH): canary, then a bounded local scan of recent messages as the fallback.
    RemoteRelevance,
}

/// What a backend can do, declared once per backend. Listings never carry bodies (a summary has
/// none): a search that must match a body the backend did not match fetches it per message, only
/// for the messages whose summary does not settle the match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Capabilities {
    pub(crate) search: SearchKind,
    /// A message keeps its id when moved (Graph's immutable ids); otherwise a move answers the
    /// new id.
    pub(crate) ids_survive_move: bool,
}
