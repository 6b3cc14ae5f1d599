//! Tool inputs: one strict type per tool. The JSON Schema published in `tools/list` is derived
//! from these types (schemars reads the garde rules), and the same garde rules run before any
//! handler, so what the schema promises and what is enforced cannot drift apart.
//!
//! Every object is `deny_unknown_fields`; every string and array is bounded. Lengths count Unicode
//! scalar values. A `///` comment on a field becomes its schema description, sent in every
//! `tools/list` (and the criteria four times): only what the name, bounds and the tool's own
//! description do not already say (issue 9, token economy); the rest is in `//` comments.

use garde::Validate;
use schemars::JsonSchema;
use serde::Deserialize;

#[expect(clippy::ptr_arg, reason = "garde passes the field type")]
fn valid_address(value: &String, _ctx: &()) -> garde::Result {
    crate::address::EmailAddress::parse(value)
        .map(|_| ())
        .map_err(|_| garde::Error::new("not a valid email address"))
}

fn valid_date(value: &Option<String>, _ctx: &()) -> garde::Result {
    let Some(value) = value else { return Ok(()) };
    crate::tools::dates::parse(value, false)
        .map(|_| ())
        .map_err(|_| garde::Error::new("not a valid ISO-8601 date"))
}

fn valid_entry(value: &Option<String>, _ctx: &()) -> garde::Result {
    if value
        .as_deref()
        .is_none_or(crate::extract::is_addressable_entry)
    {
        Ok(())
    } else {
        Err(garde::Error::new("not an addressable archive entry"))
    }
}

/// An optional alias list: 1..=32 valid, unique aliases.
/// A categories filter: 1 to 10 names, each 1 to 255 characters without control characters.
fn category_list(values: &Option<Vec<String>>, _ctx: &()) -> garde::Result {
    let Some(values) = values else { return Ok(()) };
    if values.is_empty() || values.len() > 10 {
        return Err(garde::Error::new("between 1 and 10 categories"));
    }
    for v in values {
        let n = v.chars().count();
        if n == 0 || n > 255 || v.chars().any(char::is_control) {
            return Err(garde::Error::new(
                "each category is 1 to 255 characters, without control characters",
            ));
        }
    }
    Ok(())
}

/// A cursor's text: at most [`super::cursor::MAX_CURSOR_CHARS`] base64url characters (whether it is
/// one of this server's is decided when it is redeemed).
fn cursor_text(value: &Option<String>, _ctx: &()) -> garde::Result {
    let Some(value) = value else { return Ok(()) };
    let ok = !value.is_empty()
        && value.len() <= super::cursor::MAX_CURSOR_CHARS
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(garde::Error::new("not a cursor of this server"))
    }
}

fn alias_list(values: &Option<Vec<String>>, _ctx: &()) -> garde::Result {
    let Some(values) = values else { return Ok(()) };
    if values.is_empty() || values.len() > 32 {
        return Err(garde::Error::new(
            "length is lower than 1 or greater than 32",
        ));
    }
    for v in values {
        crate::alias::Alias::parse(v)
            .map_err(|_| garde::Error::new("an item is not a valid mailbox alias"))?;
        if v.trim() != v {
            return Err(garde::Error::new("an item is not a valid mailbox alias"));
        }
    }
    unique_strings(values, &())
}

/// An optional address list: 1..=50 parseable addresses.
fn address_list(values: &Option<Vec<String>>, _ctx: &()) -> garde::Result {
    let Some(values) = values else { return Ok(()) };
    if values.is_empty() || values.len() > 50 {
        return Err(garde::Error::new(
            "length is lower than 1 or greater than 50",
        ));
    }
    values.iter().try_for_each(|v| valid_address(v, &()))
}

/// An optional id list: 1..=100 ids of 1..=512 chars.
fn id_list(values: &Option<Vec<String>>, _ctx: &()) -> garde::Result {
    let Some(values) = values else { return Ok(()) };
    if values.is_empty() || values.len() > 100 {
        return Err(garde::Error::new(
            "length is lower than 1 or greater than 100",
        ));
    }
    if values
        .iter()
        .all(|v| (1..=512).contains(&v.chars().count()))
    {
        Ok(())
    } else {
        Err(garde::Error::new(
            "an id is empty or longer than 512 characters",
        ))
    }
}

fn unique_strings(values: &[String], _ctx: &()) -> garde::Result {
    let mut seen = std::collections::HashSet::new();
    if values.iter().all(|v| seen.insert(v.as_str())) {
        Ok(())
    } else {
        Err(garde::Error::new("items must be unique"))
    }
}

fn unique_folders(values: &Option<Vec<InvestigationFolder>>, _ctx: &()) -> garde::Result {
    let Some(values) = values else { return Ok(()) };
    let mut seen = std::collections::HashSet::new();
    if values.iter().all(|v| seen.insert(*v)) {
        Ok(())
    } else {
        Err(garde::Error::new("folders must be unique"))
    }
}

#[expect(clippy::ptr_arg, reason = "garde passes the field type")]
fn unique_labels(values: &Vec<BatchQuery>, _ctx: &()) -> garde::Result {
    let mut seen = std::collections::HashSet::new();
    if values.iter().all(|v| seen.insert(v.label.as_str())) {
        Ok(())
    } else {
        Err(garde::Error::new("labels must be unique within a batch"))
    }
}

/// No arguments.
#[derive(Debug, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoArgs {}

#[derive(Clone, Copy, Debug, Deserialize, JsonSchema, PartialEq, Eq)]
pub(crate) enum SortByArg {
    #[serde(rename = "receivedDateTime")]
    ReceivedDateTime,
    #[serde(rename = "subject")]
    Subject,
}

#[derive(Clone, Copy, Debug, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum SortOrderArg {
    Asc,
    Desc,
}

// Where a search runs: the live backend (default), the local index, or both.
#[derive(Clone, Copy, Debug, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum SourceArg {
    Live,
    Index,
    Hybrid,
}

impl From<SourceArg> for crate::search::indexed::Mode {
    fn from(s: SourceArg) -> Self {
        match s {
            SourceArg::Live => Self::Live,
            SourceArg::Index => Self::Index,
            SourceArg::Hybrid => Self::Hybrid,
        }
    }
}

// Search criteria shared by the search and list tools, all optional. Their meaning is told once,
// in search_mailbox's description: these fields are repeated in four tools' schemas.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Criteria {
    // Free-text query (relevance search); omitted, the answer is an exact filter listing.
    // Criteria strings publish only their maximum length: garde refuses an empty one and names
    // the field, and the bytes of `minLength` (four fields, four tools) pay for `categories`.
    #[schemars(length(max = 500))]
    #[garde(length(chars, min = 1, max = 500))]
    pub(crate) query: Option<String>,
    // Substring of the sender's address or name.
    #[schemars(length(max = 320))]
    #[garde(length(chars, min = 1, max = 320))]
    pub(crate) sender: Option<String>,
    // Substring of the subject.
    #[schemars(length(max = 500))]
    #[garde(length(chars, min = 1, max = 500))]
    pub(crate) subject: Option<String>,
    // Received on or after (ISO-8601 date or date-time; a date alone means its start, UTC).
    // The schema's pattern is the garde one's date part only (`\d` is exactly [0-9] in JSON
    // Schema, ECMA-262); garde checks the time part too and names the field when it is wrong.
    // It is sent eight times per catalog, so its bytes were spent on the `source` field
    // instead (schemars takes its own attribute over garde's).
    #[schemars(pattern(r"^\d{4}-\d\d-\d\d([T ].+)?$"))]
    #[garde(pattern(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?(Z|[+-][0-9]{2}:?[0-9]{2})?)?$"), custom(valid_date))]
    pub(crate) date_from: Option<String>,
    // Received on or before (a date alone means its end, UTC).
    #[schemars(pattern(r"^\d{4}-\d\d-\d\d([T ].+)?$"))]
    #[garde(pattern(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?(Z|[+-][0-9]{2}:?[0-9]{2})?)?$"), custom(valid_date))]
    pub(crate) date_to: Option<String>,
    #[garde(skip)]
    pub(crate) has_attachments: Option<bool>,
    #[garde(skip)]
    pub(crate) is_read: Option<bool>,
    // Folder id or well-known name (inbox, sentitems, drafts, archive, junkemail); default inbox.
    #[schemars(length(max = 512))]
    #[garde(length(chars, min = 1, max = 512))]
    pub(crate) folder: Option<String>,
    #[garde(range(min = 1, max = 100))]
    pub(crate) max_results: Option<u32>,
    #[garde(range(min = 1, max = 10))]
    pub(crate) max_pages: Option<u32>,
    #[garde(skip)]
    pub(crate) sort_by: Option<SortByArg>,
    #[garde(skip)]
    pub(crate) sort_order: Option<SortOrderArg>,
    // Include attachment names (untrusted) in each summary.
    #[garde(skip)]
    pub(crate) include_attachment_names: Option<bool>,
    // Expand the query through the operator's search memory.
    #[garde(skip)]
    pub(crate) expand_terms: Option<bool>,
    // live | index | hybrid; the default (hybrid where the operator indexed the mailbox, else
    // live) is told once, in search_mailbox's description.
    #[garde(skip)]
    pub(crate) source: Option<SourceArg>,
    // Any of these categories (Graph categories, IMAP keywords): 1 to 10 names of 1 to 255
    // characters, checked by garde (no bounds in the schema, sent eight times per catalog).
    #[garde(custom(category_list))]
    pub(crate) categories: Option<Vec<String>>,
}

#[derive(Debug, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ListFoldersArgs {
    // A mailbox alias from list_allowed_mailboxes (every tool's `mailbox`; the pattern says it).
    // The pattern needs a first character, so a `min` length would only repeat it in each schema.
    #[garde(length(chars, max = 64), pattern(r"^[a-z0-9][a-z0-9_-]*$"))]
    pub(crate) mailbox: String,
    // nextCursor: the folders past the first 1,000.
    #[garde(custom(cursor_text))]
    pub(crate) cursor: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct SearchMailboxArgs {
    #[garde(length(chars, max = 64), pattern(r"^[a-z0-9][a-z0-9_-]*$"))]
    pub(crate) mailbox: String,
    #[serde(default)]
    #[garde(dive)]
    pub(crate) criteria: Criteria,
    // nextCursor of the previous answer (the description says so).
    #[garde(custom(cursor_text))]
    pub(crate) cursor: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct SearchMailboxesArgs {
    // Default: all (the tool's description says so).
    #[garde(custom(alias_list))]
    #[schemars(
        length(min = 1, max = 32),
        inner(length(max = 64), pattern(r"^[a-z0-9][a-z0-9_-]*$"))
    )]
    pub(crate) mailboxes: Option<Vec<String>>,
    #[serde(default)]
    #[garde(dive)]
    pub(crate) criteria: Criteria,
    // nextCursor: the mailboxes past maxMailboxesPerSearch (the description says so).
    #[garde(custom(cursor_text))]
    pub(crate) cursor: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct BatchQuery {
    // Unique in the batch.
    #[garde(length(chars, min = 1, max = 120))]
    pub(crate) label: String,
    #[garde(custom(alias_list))]
    #[schemars(
        length(min = 1, max = 32),
        inner(length(max = 64), pattern(r"^[a-z0-9][a-z0-9_-]*$"))
    )]
    pub(crate) mailboxes: Option<Vec<String>>,
    #[serde(default)]
    #[garde(dive)]
    pub(crate) criteria: Criteria,
}

#[derive(Debug, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct SearchBatchArgs {
    #[garde(length(min = 1, max = 25), dive, custom(unique_labels))]
    pub(crate) queries: Vec<BatchQuery>,
    // nextCursor: the labels past a batch budget (the description says so).
    #[garde(custom(cursor_text))]
    pub(crate) cursor: Option<String>,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum MessageFormat {
    #[default]
    Text,
    Headers,
}

#[derive(Debug, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct GetMessageArgs {
    #[garde(length(chars, max = 64), pattern(r"^[a-z0-9][a-z0-9_-]*$"))]
    pub(crate) mailbox: String,
    // Ids (and the evidence tools' signal strings) publish only their maximum length, like
    // criteria strings (garde refuses an empty one and names the field): the bytes of
    // `minLength` pay for the cursors of get_attachment_content and the fan-out searches.
    #[schemars(length(max = 512))]
    #[garde(length(chars, min = 1, max = 512))]
    pub(crate) message_id: String,
    // Body character to start at: nextOffset (the tool's description says so).
    #[garde(range(min = 0, max = 10_000_000))]
    pub(crate) offset: Option<u64>,
    // headers: no body (default text: headers and body).
    #[garde(skip)]
    pub(crate) format: Option<MessageFormat>,
    // First To/Cc address to show: nextRecipientOffset (the description says so).
    #[garde(range(min = 0, max = 1_000_000))]
    pub(crate) recipient_offset: Option<u64>,
    // nextCursor, instead of both offsets.
    #[garde(custom(cursor_text))]
    pub(crate) cursor: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct FolderStatsArgs {
    #[garde(length(chars, max = 64), pattern(r"^[a-z0-9][a-z0-9_-]*$"))]
    pub(crate) mailbox: String,
    #[schemars(length(max = 512))]
    #[garde(length(chars, min = 1, max = 512))]
    pub(crate) folder_id: String,
}

#[derive(Debug, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct ListAttachmentsArgs {
    #[garde(length(chars, max = 64), pattern(r"^[a-z0-9][a-z0-9_-]*$"))]
    pub(crate) mailbox: String,
    #[schemars(length(max = 512))]
    #[garde(length(chars, min = 1, max = 512))]
    pub(crate) message_id: String,
    // Pass nextOffset (the description says so).
    #[garde(range(min = 0, max = 1_000_000))]
    pub(crate) offset: Option<u64>,
    // Attachments per page (default and maximum 100).
    #[garde(range(min = 1, max = 100))]
    pub(crate) limit: Option<u32>,
    // nextCursor, instead of offset.
    #[garde(custom(cursor_text))]
    pub(crate) cursor: Option<String>,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ContentMode {
    #[default]
    Text,
    Raw,
}

#[derive(Debug, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct AttachmentContentArgs {
    #[garde(length(chars, max = 64), pattern(r"^[a-z0-9][a-z0-9_-]*$"))]
    pub(crate) mailbox: String,
    #[schemars(length(max = 512))]
    #[garde(length(chars, min = 1, max = 512))]
    pub(crate) message_id: String,
    #[schemars(length(max = 512))]
    #[garde(length(chars, min = 1, max = 512))]
    pub(crate) attachment_id: String,
    // raw: the bytes as base64, up to maxRawAttachmentBytes (default text; the description says
    // so).
    #[garde(skip)]
    pub(crate) mode: Option<ContentMode>,
    /// Path inside a zip.
    #[garde(length(chars, min = 1, max = 512), custom(valid_entry))]
    pub(crate) entry: Option<String>,
    // For an encrypted zip; never logged or stored.
    #[garde(length(chars, min = 1, max = 256))]
    pub(crate) password: Option<String>,
    // nextCursor: the next window of text, or the next page of an archive listing.
    #[garde(custom(cursor_text))]
    pub(crate) cursor: Option<String>,
}

/// Signals to look for. The reference's names are kept for compatibility; they are generic lists:
/// identifiers (`proposalIds`), parties (`clients`), organisations (`insurers`), attachment
/// names (`attachmentNames`), plus free `keywords`. (serde cannot combine `flatten` with
/// `deny_unknown_fields`, so the inputs carry the five lists themselves and hand out this view.)
#[derive(Clone, Debug, Default)]
pub(crate) struct Signals {
    pub(crate) proposal_ids: Vec<String>,
    pub(crate) clients: Vec<String>,
    pub(crate) insurers: Vec<String>,
    pub(crate) attachment_names: Vec<String>,
    pub(crate) keywords: Vec<String>,
}

impl Signals {
    pub(crate) fn is_empty(&self) -> bool {
        self.proposal_ids.is_empty()
            && self.clients.is_empty()
            && self.insurers.is_empty()
            && self.attachment_names.is_empty()
            && self.keywords.is_empty()
    }
}

/// Cross-field rule hung on `proposalIds`: the five lists together hold at least one signal.
fn at_least_one_signal<'a>(
    others: [&'a [String]; 4],
) -> impl FnOnce(&Vec<String>, &()) -> garde::Result + 'a {
    move |first, _| {
        if first.is_empty() && others.iter().all(|o| o.is_empty()) {
            Err(garde::Error::new(
                "at least one signal (proposalIds, clients, insurers, attachmentNames, keywords) is required",
            ))
        } else {
            Ok(())
        }
    }
}

/// Declares an input struct carrying the five signal lists (serde cannot combine `flatten` with
/// `deny_unknown_fields`, so the lists are spliced in) and its [`Signals`] view. The caller
/// passes `self` so the cross-field rule's `self` has call-site hygiene.
macro_rules! with_signals {
    ($this:tt; $(#[$meta:meta])* pub(crate) struct $name:ident { $($fields:tt)* }) => {
        $(#[$meta])*
        pub(crate) struct $name {
            $($fields)*
    #[serde(default)]
    #[schemars(inner(length(max = 200)))]
    #[garde(length(max = 25), inner(length(chars, min = 1, max = 200)), custom(at_least_one_signal([&$this.clients, &$this.insurers, &$this.attachment_names, &$this.keywords])))]
    pub(crate) proposal_ids: Vec<String>,
    #[serde(default)]
    #[schemars(inner(length(max = 200)))]
    #[garde(length(max = 25), inner(length(chars, min = 1, max = 200)))]
    pub(crate) clients: Vec<String>,
    #[serde(default)]
    #[schemars(inner(length(max = 200)))]
    #[garde(length(max = 25), inner(length(chars, min = 1, max = 200)))]
    pub(crate) insurers: Vec<String>,
    /// Case-insensitive: full name or name without extension (confirms), or its words (candidate).
    #[serde(default)]
    #[schemars(inner(length(max = 200)))]
    #[garde(length(max = 25), inner(length(chars, min = 1, max = 200)))]
    pub(crate) attachment_names: Vec<String>,
    #[serde(default)]
    #[schemars(inner(length(max = 200)))]
    #[garde(length(max = 25), inner(length(chars, min = 1, max = 200)))]
    pub(crate) keywords: Vec<String>,
        }

        impl $name {
            pub(crate) fn signals(&self) -> Signals {
                Signals {
                    proposal_ids: self.proposal_ids.clone(),
                    clients: self.clients.clone(),
                    insurers: self.insurers.clone(),
                    attachment_names: self.attachment_names.clone(),
                    keywords: self.keywords.clone(),
                }
            }
        }
    };
}

with_signals! { self;
#[derive(Debug, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct EvidenceArgs {
    #[garde(length(chars, max = 64), pattern(r"^[a-z0-9][a-z0-9_-]*$"))]
    pub(crate) mailbox: String,
    #[schemars(length(max = 512))]
    #[garde(length(chars, min = 1, max = 512))]
    pub(crate) message_id: String,
    #[schemars(length(max = 512))]
    #[garde(length(chars, min = 1, max = 512))]
    pub(crate) attachment_id: String,
}
}

#[derive(Clone, Copy, Debug, Deserialize, JsonSchema, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub(crate) enum InvestigationFolder {
    Inbox,
    Sentitems,
    Archive,
}

impl InvestigationFolder {
    pub(crate) const ALL: [InvestigationFolder; 3] = [
        InvestigationFolder::Inbox,
        InvestigationFolder::Sentitems,
        InvestigationFolder::Archive,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            InvestigationFolder::Inbox => "inbox",
            InvestigationFolder::Sentitems => "sentitems",
            InvestigationFolder::Archive => "archive",
        }
    }
}

with_signals! { self;
#[derive(Debug, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct InvestigationCriteria {
    /// Default: all three.
    #[garde(length(min = 1, max = 3), custom(unique_folders))]
    pub(crate) folders: Option<Vec<InvestigationFolder>>,
    #[garde(range(min = 1, max = 10))]
    pub(crate) max_pages_per_folder: Option<u32>,
    #[garde(range(min = 1, max = 200))]
    pub(crate) max_messages_per_folder: Option<u32>,
    #[garde(range(min = 1, max = 5))]
    pub(crate) max_attachment_pages_per_message: Option<u32>,
    #[garde(range(min = 1, max = 50))]
    pub(crate) max_attachments_per_message: Option<u32>,
    #[garde(range(min = 1, max = 25))]
    pub(crate) max_results: Option<u32>,
    // live | index | hybrid, as search_mailbox's.
    #[garde(skip)]
    pub(crate) source: Option<SourceArg>,
}
}

#[derive(Debug, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct InvestigateArgs {
    #[garde(length(chars, max = 64), pattern(r"^[a-z0-9][a-z0-9_-]*$"))]
    pub(crate) mailbox: String,
    #[garde(dive)]
    pub(crate) criteria: InvestigationCriteria,
    // nextCursor: the matches past maxResults.
    #[garde(custom(cursor_text))]
    pub(crate) cursor: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct CreateHandoffArgs {
    #[garde(length(chars, max = 64), pattern(r"^[a-z0-9][a-z0-9_-]*$"))]
    pub(crate) mailbox: String,
    #[garde(length(chars, min = 1, max = 512))]
    pub(crate) message_id: String,
    #[garde(length(chars, min = 1, max = 512))]
    pub(crate) attachment_id: String,
    /// Your UUIDv4: the same key and request return the same handoff.
    #[garde(pattern(
        r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-4[0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}$"
    ))]
    pub(crate) idempotency_key: String,
}

#[derive(Debug, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct GetHandoffArgs {
    #[garde(pattern(r"^oh_[A-Za-z0-9_-]{43}$"))]
    pub(crate) handoff_id: String,
}

#[derive(Debug, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct MoveCopyArgs {
    #[garde(length(chars, max = 64), pattern(r"^[a-z0-9][a-z0-9_-]*$"))]
    pub(crate) mailbox: String,
    #[garde(length(min = 1, max = 100), inner(length(chars, min = 1, max = 512)))]
    pub(crate) message_ids: Vec<String>,
    #[garde(length(chars, min = 1, max = 512))]
    pub(crate) destination_folder_id: String,
}

#[derive(Debug, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct MarkArgs {
    #[garde(length(chars, max = 64), pattern(r"^[a-z0-9][a-z0-9_-]*$"))]
    pub(crate) mailbox: String,
    #[garde(length(min = 1, max = 100), inner(length(chars, min = 1, max = 512)))]
    pub(crate) message_ids: Vec<String>,
    /// false marks unread.
    #[garde(skip)]
    pub(crate) read: bool,
}

#[derive(Debug, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct DownloadArgs {
    #[garde(length(chars, max = 64), pattern(r"^[a-z0-9][a-z0-9_-]*$"))]
    pub(crate) mailbox: String,
    #[garde(length(chars, min = 1, max = 512))]
    pub(crate) message_id: String,
    /// Default: all.
    #[garde(custom(id_list))]
    #[schemars(length(min = 1, max = 100), inner(length(min = 1, max = 512)))]
    pub(crate) attachment_ids: Option<Vec<String>>,
}

/// messageId and attachmentId (same mailbox), or handoffId.
#[derive(Debug, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct AttachmentRef {
    #[garde(length(chars, min = 1, max = 512))]
    pub(crate) message_id: Option<String>,
    #[garde(length(chars, min = 1, max = 512))]
    pub(crate) attachment_id: Option<String>,
    #[garde(pattern(r"^oh_[A-Za-z0-9_-]{43}$"))]
    pub(crate) handoff_id: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct CreateDraftArgs {
    #[garde(length(chars, max = 64), pattern(r"^[a-z0-9][a-z0-9_-]*$"))]
    pub(crate) mailbox: String,
    #[garde(
        length(min = 1, max = 50),
        inner(length(chars, min = 3, max = 320), custom(valid_address))
    )]
    pub(crate) to: Vec<String>,
    #[garde(custom(address_list))]
    #[schemars(length(min = 1, max = 50), inner(length(min = 3, max = 320)))]
    pub(crate) cc: Option<Vec<String>>,
    #[garde(custom(address_list))]
    #[schemars(length(min = 1, max = 50), inner(length(min = 3, max = 320)))]
    pub(crate) bcc: Option<Vec<String>>,
    #[garde(length(chars, min = 1, max = 500))]
    pub(crate) subject: String,
    #[garde(length(chars, min = 1, max = 500_000))]
    pub(crate) body: String,
    // Attachments by reference only (never a local path): AttachmentRef's doc says how.
    #[garde(length(max = 10), dive)]
    pub(crate) attachments: Option<Vec<AttachmentRef>>,
    /// Message id (same mailbox) to thread with.
    #[garde(length(chars, min = 1, max = 512))]
    pub(crate) reply_to: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema, Validate)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct SendEmailArgs {
    #[garde(
        length(min = 1, max = 50),
        inner(length(chars, min = 3, max = 320), custom(valid_address))
    )]
    pub(crate) to: Vec<String>,
    #[garde(custom(address_list))]
    #[schemars(length(min = 1, max = 50), inner(length(min = 3, max = 320)))]
    pub(crate) cc: Option<Vec<String>>,
    #[garde(custom(address_list))]
    #[schemars(length(min = 1, max = 50), inner(length(min = 3, max = 320)))]
    pub(crate) bcc: Option<Vec<String>>,
    #[garde(length(chars, min = 1, max = 500))]
    pub(crate) subject: String,
    #[garde(length(chars, min = 1, max = 500_000))]
    pub(crate) body: String,
    // Message id in the sending mailbox to thread with; recipients are never derived from it
    // (the tool's description says so).
    #[garde(length(chars, min = 1, max = 512))]
    pub(crate) in_reply_to: Option<String>,
    // Render the envelope and the policy verdict without sending (the description says so).
    #[garde(skip)]
    pub(crate) dry_run: Option<bool>,
    // A UUIDv4: a retried call with the same key returns the first call's receipt.
    #[garde(pattern(
        r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-4[0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}$"
    ))]
    pub(crate) idempotency_key: Option<String>,
}
