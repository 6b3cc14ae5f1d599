//! Evidence-bearing search: the one place that decides what a search answer may claim.
//!
//! Invariant: `NOT_FOUND` is only produced after an exhaustive scan of the selected window; a page
//! limit, a failed page, an ignored query (the canary) or a failed scan is never turned into an
//! empty success. The rules are the reference's (spec/search.md "Rules"), restated in
//! [`engine::run`]. The engine is generic over [`SearchSource`], so the backends plug in and the
//! unit tests can script every outcome with a fake source.

pub(crate) mod engine;
pub(crate) mod fanout;
pub(crate) mod matcher;

use std::time::Instant;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::backends::{AttachmentMeta, BackendError};
use crate::mime::Mailbox;

/// The five outcomes of a search, ordered so that the worst wins when aggregating.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub(crate) enum SearchStatus {
    Found,
    NotFound,
    SearchIncomplete,
    SearchFailed,
    SearchUntrusted,
}

impl SearchStatus {
    /// Precedence of spec/search.md rule 9: FAILED > UNTRUSTED > INCOMPLETE > FOUND > NOT_FOUND.
    fn rank(self) -> u8 {
        match self {
            SearchStatus::NotFound => 0,
            SearchStatus::Found => 1,
            SearchStatus::SearchIncomplete => 2,
            SearchStatus::SearchUntrusted => 3,
            SearchStatus::SearchFailed => 4,
        }
    }

    /// The aggregate of several outcomes; `NOT_FOUND` for an empty set is never produced because
    /// callers always have at least one mailbox.
    pub(crate) fn worst(statuses: impl IntoIterator<Item = SearchStatus>) -> SearchStatus {
        statuses
            .into_iter()
            .max_by_key(|s| s.rank())
            .unwrap_or(SearchStatus::SearchIncomplete)
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SearchStatus::Found => "FOUND",
            SearchStatus::NotFound => "NOT_FOUND",
            SearchStatus::SearchIncomplete => "SEARCH_INCOMPLETE",
            SearchStatus::SearchFailed => "SEARCH_FAILED",
            SearchStatus::SearchUntrusted => "SEARCH_UNTRUSTED",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Strategy {
    /// The backend's own search or filter listing. Serialised with the reference's name on every
    /// backend, like the `graph_*` warning codes, so clients written for it keep working.
    #[serde(rename = "graph_search")]
    BackendSearch,
    LocalScan,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Confidence {
    Low,
    Medium,
    High,
}

/// Stable warning codes. The names follow the reference plugin so that a client written for it
/// reads mailgate's answers unchanged; `graph_*` names the backend's own search on every backend.
pub(crate) mod warning {
    pub(crate) const CANARY_FAILED: &str = "canary_failed";
    pub(crate) const CANARY_MATCHED: &str = "graph_search_canary_matched";
    pub(crate) const BACKEND_EMPTY: &str = "graph_search_empty";
    pub(crate) const BACKEND_FAILED: &str = "graph_search_failed";
    pub(crate) const LOCAL_SCAN_FAILED: &str = "local_scan_failed";
    pub(crate) const EXACT_TOKEN: &str = "fallback_exact_token_match";
    pub(crate) const FILTER_FAILED: &str = "graph_filter_failed";
    pub(crate) const MAILBOX_FAILED: &str = "mailbox_search_failed";
    pub(crate) const BUDGET_EXHAUSTED: &str = "budget_exhausted";
    pub(crate) const MEMORY_NOT_CONFIGURED: &str = "search_memory_not_configured";
    /// A search memory is configured, but term expansion is not built in this version.
    pub(crate) const EXPANSION_UNAVAILABLE: &str = "search_memory_expansion_unavailable";
    /// The mailbox's backend kind (Graph, IMAP) is not built in this version.
    pub(crate) const BACKEND_UNSUPPORTED: &str = "backend_unsupported";
    /// The search's deadline ([`super::SEARCH_DEADLINE`]) ended the scan early.
    pub(crate) const DEADLINE: &str = "search_deadline_exceeded";
    /// A message in the scanned window is over the backend's size bound and was not read.
    pub(crate) const MESSAGE_TOO_LARGE: &str = "message_too_large";
    /// A message in the scanned window could not be read (I/O error, not a regular file).
    pub(crate) const MESSAGE_UNREADABLE: &str = "message_unreadable";
    /// A message's MIME structure is beyond the parser's limits: some parts were not read.
    pub(crate) const MESSAGE_STRUCTURE_LIMIT: &str = "message_structure_limit";
    /// A header was longer than the matching bound: its tail was not searched.
    pub(crate) const HEADER_TRUNCATED: &str = "message_header_truncated";
    /// A body was longer than the matching bound: its tail was not searched.
    pub(crate) const BODY_TRUNCATED: &str = "message_body_truncated";
    /// The scan window (see [`super::SearchPlan::derive_limits`]) was full while older
    /// messages were left: raise `maxResults` or narrow the search, not `maxPages`.
    pub(crate) const SCAN_WINDOW_REACHED: &str = "scan_window_reached";
    /// `maxPages` pages were read while older messages were left.
    pub(crate) const MAX_PAGES_REACHED: &str = "max_pages_reached";
}

/// Which limit stopped a scan while messages were left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScanStop {
    /// The item cap (`scanLimit`, the scan window).
    Window,
    /// `maxPages`.
    Pages,
    /// [`SEARCH_DEADLINE`].
    Deadline,
}

/// What one scan covered, for the answer to say which limit stopped it and what lifts it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ScanReport {
    pub(crate) stop: Option<ScanStop>,
    /// Messages looked at (newest first), matching or not.
    pub(crate) examined: usize,
    /// Messages in the folder, when the backend knows.
    pub(crate) folder_total: Option<usize>,
    /// The scan window (`scanLimit`) and page limit of the plan.
    pub(crate) window: usize,
    pub(crate) max_pages: u32,
    pub(crate) page_size: Option<usize>,
    /// Whether the plan had a query (its window is 3 × maxResults ≤ 100, else 5 × ≤ 500).
    pub(crate) with_query: bool,
}

impl ScanReport {
    pub(crate) fn of(page: &Page, plan: &SearchPlan) -> Self {
        ScanReport {
            stop: page.stop,
            examined: page.examined,
            folder_total: page.folder_total,
            window: plan.scan_limit,
            max_pages: plan.max_pages,
            page_size: page.page_size,
            with_query: plan.query.is_some(),
        }
    }

    /// Which limit stopped the scan and what would lift it; `None` when no page or window
    /// limit did (the deadline and unread messages have their own warnings).
    pub(crate) fn limit_note(&self) -> Option<String> {
        let scanned = match self.folder_total {
            Some(total) => format!("scanned the newest {} of {total} messages", self.examined),
            None => format!("scanned the newest {} messages", self.examined),
        };
        let rule = if self.with_query {
            "3 × maxResults, at most 100"
        } else {
            "5 × maxResults, at most 500"
        };
        match self.stop? {
            ScanStop::Window => Some(format!(
                "{scanned}: the scan window of {} messages ({rule}) was full; narrow \
                 with dateFrom/dateTo/folder/sender or raise maxResults ({})",
                self.window,
                match self.page_size {
                    Some(size) => format!(
                        "maxPages does not lift it: {} pages of {size} already cover the window",
                        self.max_pages
                    ),
                    None => "maxPages does not lift it".to_owned(),
                }
            )),
            ScanStop::Pages => Some(format!(
                "{scanned}: maxPages ({}{}) was reached; raise maxPages (at most 10) or narrow \
                 with dateFrom/dateTo/folder/sender",
                self.max_pages,
                self.page_size
                    .map(|s| format!(" pages of {s} messages"))
                    .unwrap_or_default()
            )),
            ScanStop::Deadline => None,
        }
    }
}

/// How long one mailbox's search may run before it stops and answers `SEARCH_INCOMPLETE` with
/// [`warning::DEADLINE`]. A search that stops early has proven nothing about the rest.
pub(crate) const SEARCH_DEADLINE: std::time::Duration = std::time::Duration::from_secs(20);

/// Why a message in a scanned window was not wholly seen by the search, most severe first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ContentGap {
    /// Over the backend's size bound: nothing but its file metadata was read.
    TooLarge,
    /// Could not be read at all.
    Unreadable,
    /// Parts beyond the MIME parser's structural limits were not read.
    Structure,
    /// A header's tail beyond the matching bound was not read.
    Header,
    /// The body's tail beyond the matching bound was not read.
    Body,
}

impl ContentGap {
    pub(crate) fn warning(self) -> &'static str {
        match self {
            ContentGap::TooLarge => warning::MESSAGE_TOO_LARGE,
            ContentGap::Unreadable => warning::MESSAGE_UNREADABLE,
            ContentGap::Structure => warning::MESSAGE_STRUCTURE_LIMIT,
            ContentGap::Header => warning::HEADER_TRUNCATED,
            ContentGap::Body => warning::BODY_TRUNCATED,
        }
    }

    /// Nothing of the content was read: content filters cannot be evaluated.
    pub(crate) fn is_total(self) -> bool {
        matches!(self, ContentGap::TooLarge | ContentGap::Unreadable)
    }

    /// The most severe gap of a parsed view, if any.
    pub(crate) fn of(cuts: crate::mime::Cuts) -> Option<ContentGap> {
        if cuts.structure {
            Some(ContentGap::Structure)
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

    pub(crate) fn is_empty(&self) -> bool {
        self.messages == 0
    }

    pub(crate) fn warnings(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.kinds.iter().map(|g| g.warning())
    }
}

/// One message as a search or listing sees it. Every string is sender-controlled.
#[derive(Clone, Debug)]
pub(crate) struct Candidate {
    pub(crate) id: String,
    pub(crate) folder_id: String,
    pub(crate) subject: Option<String>,
    pub(crate) from: Option<Mailbox>,
    pub(crate) received: Option<DateTime<Utc>>,
    pub(crate) sent: Option<DateTime<Utc>>,
    pub(crate) is_read: bool,
    pub(crate) is_flagged: bool,
    #[expect(dead_code, reason = "flag kept for the write family (replied state)")]
    pub(crate) is_answered: bool,
    pub(crate) has_attachments: bool,
    /// Start of the body text, for previews.
    pub(crate) preview: String,
    /// Bounded body text used by the local scan (body-aware fallback).
    pub(crate) body: String,
    pub(crate) attachments: Vec<AttachmentMeta>,
    /// What of this message the fields above do not hold; `Some` makes a non-match unproven.
    pub(crate) gap: Option<ContentGap>,
}

/// Structured filters, applied by the backend and again locally (defence against a backend that
/// ignores part of a filter).
#[derive(Clone, Debug, Default)]
pub(crate) struct Filters {
    pub(crate) sender: Option<String>,
    pub(crate) subject: Option<String>,
    pub(crate) date_from: Option<DateTime<Utc>>,
    pub(crate) date_to: Option<DateTime<Utc>>,
    pub(crate) has_attachments: Option<bool>,
    pub(crate) is_read: Option<bool>,
}

impl Filters {
    /// Whether a filter reads the message's content (sender, subject, attachments), which a
    /// message whose content was not read cannot be tested against.
    pub(crate) fn reads_content(&self) -> bool {
        self.sender.is_some() || self.subject.is_some() || self.has_attachments.is_some()
    }

    pub(crate) fn matches(&self, c: &Candidate) -> bool {
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
        if let Some(from) = self.date_from
            && c.received.is_none_or(|d| d < from)
        {
            return false;
        }
        if let Some(to) = self.date_to
            && c.received.is_none_or(|d| d > to)
        {
            return false;
        }
        if let Some(want) = self.has_attachments
            && c.has_attachments != want
        {
            return false;
        }
        if let Some(want) = self.is_read
            && c.is_read != want
        {
            return false;
        }
        true
    }
}

/// What a backend is asked to scan: one folder, filters, and the explicit page and item limits
/// whose hitting must be reported as `truncated`.
#[derive(Clone, Debug)]
pub(crate) struct ScanRequest {
    pub(crate) folder: Option<String>,
    pub(crate) filters: Filters,
    pub(crate) max_items: usize,
    pub(crate) max_pages: u32,
    /// When the scan must stop (reporting `timed_out`), whatever is left.
    pub(crate) deadline: Instant,
}

/// A bounded answer from a backend.
#[derive(Clone, Debug, Default)]
pub(crate) struct Page {
    pub(crate) items: Vec<Candidate>,
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

    /// The warning codes naming every limit that left this page incomplete.
    pub(crate) fn limit_warnings(&self) -> impl Iterator<Item = &'static str> + '_ {
        let stop = match self.stop {
            Some(ScanStop::Window) => Some(warning::SCAN_WINDOW_REACHED),
            Some(ScanStop::Pages) => Some(warning::MAX_PAGES_REACHED),
            Some(ScanStop::Deadline) | None => None,
        };
        self.timed_out
            .then_some(warning::DEADLINE)
            .into_iter()
            .chain(stop)
            .chain(self.gaps.warnings())
    }
}

/// What the engine needs from a backend.
pub(crate) trait SearchSource: Sync {
    /// The backend's own relevance search for `query`, restricted by the request's filters and
    /// limits.
    fn search(
        &self,
        req: &ScanRequest,
        query: &str,
    ) -> impl Future<Output = Result<Page, BackendError>> + Send;

    /// A filter-only listing (newest first) within the request's limits.
    fn list(&self, req: &ScanRequest) -> impl Future<Output = Result<Page, BackendError>> + Send;
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

/// A fully derived search for one mailbox.
#[derive(Clone, Debug)]
pub(crate) struct SearchPlan {
    pub(crate) query: Option<String>,
    pub(crate) folder: Option<String>,
    pub(crate) filters: Filters,
    pub(crate) max_results: usize,
    pub(crate) scan_limit: usize,
    pub(crate) max_pages: u32,
    pub(crate) sort_by: SortBy,
    pub(crate) sort_order: SortOrder,
    /// See [`SEARCH_DEADLINE`].
    pub(crate) deadline: Instant,
}

impl SearchPlan {
    /// The reference's limit derivation (reference §5): deterministic listings may return up to
    /// 100 with a scan of 5×; relevance searches are capped at 50 with a scan of 3× (≤100).
    pub(crate) fn derive_limits(
        query: Option<&str>,
        requested: Option<usize>,
        per_mailbox: usize,
    ) -> (usize, usize) {
        let base = requested.unwrap_or(per_mailbox).min(per_mailbox).max(1);
        if query.is_some() {
            let max_results = base.min(50);
            (max_results, (3 * max_results).min(100))
        } else {
            let max_results = base.min(100);
            (max_results, (5 * max_results).min(500))
        }
    }

    fn scan_request(&self) -> ScanRequest {
        ScanRequest {
            folder: self.folder.clone(),
            filters: self.filters.clone(),
            max_items: self.scan_limit,
            max_pages: self.max_pages,
            deadline: self.deadline,
        }
    }
}

/// The evidence-bearing answer for one mailbox.
#[derive(Clone, Debug)]
pub(crate) struct SearchOutcome {
    pub(crate) status: SearchStatus,
    pub(crate) strategy: Strategy,
    pub(crate) confidence: Confidence,
    pub(crate) pages_scanned: u32,
    pub(crate) candidates_scanned: usize,
    pub(crate) truncated: bool,
    pub(crate) canary_matched: bool,
    pub(crate) warnings: Vec<&'static str>,
    pub(crate) messages: Vec<Candidate>,
    /// What the deciding scan covered (default when no scan ran).
    pub(crate) scan: ScanReport,
}

impl SearchOutcome {
    /// See [`ScanReport::limit_note`].
    pub(crate) fn limit_note(&self) -> Option<String> {
        self.scan.limit_note()
    }

    /// The in-band failure of one mailbox inside a fan-out: never a tool error, so the other
    /// mailboxes' evidence stays visible.
    pub(crate) fn failed(warning: &'static str) -> Self {
        SearchOutcome {
            status: SearchStatus::SearchFailed,
            strategy: Strategy::BackendSearch,
            confidence: Confidence::Low,
            pages_scanned: 0,
            candidates_scanned: 0,
            truncated: true,
            canary_matched: false,
            warnings: vec![warning],
            messages: Vec::new(),
            scan: ScanReport::default(),
        }
    }
}
