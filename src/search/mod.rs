//! Evidence-bearing search: the one place that decides what a search answer may claim.
//!
//! Invariant: `NOT_FOUND` is only produced after an exhaustive scan of the selected window; a page
//! limit, a failed page, an ignored query (the canary) or a failed scan is never turned into an
//! empty success. The rules are the reference's (spec/search.md "Rules"), restated in
//! [`engine::run`]. The engine is generic over [`SearchSource`], so the backends plug in and the
//! unit tests can script every outcome with a fake source; what it adds to a backend's answer
//! (canary, fallback scan, lazily fetched bodies) follows the backend's declared
//! [`Capabilities`].

pub(crate) mod engine;
pub(crate) mod fanout;
pub(crate) mod indexed;
pub(crate) mod matcher;

use std::time::Instant;

use serde::Serialize;

use crate::backends::model::{
    Budget, Capabilities, ContentGap, Fault, Filters, FolderSelector, MessageSummary, Order, Page,
    ScanRequest, ScanStop, SortBy, SortOrder,
};
use crate::backends::{AttachmentMeta, Backend, BackendError, MessageText};

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
    /// The local index alone.
    Index,
    /// The local index and the live backend, merged.
    Hybrid,
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
    /// A categories filter on a mailbox (or a source) that keeps no categories.
    pub(crate) const CATEGORIES_UNSUPPORTED: &str = "categories_unsupported";
    pub(crate) const CANARY_FAILED: &str = "canary_failed";
    pub(crate) const CANARY_MATCHED: &str = "graph_search_canary_matched";
    pub(crate) const BACKEND_EMPTY: &str = "graph_search_empty";
    pub(crate) const BACKEND_FAILED: &str = "graph_search_failed";
    pub(crate) const LOCAL_SCAN_FAILED: &str = "local_scan_failed";
    pub(crate) const EXACT_TOKEN: &str = "fallback_exact_token_match";
    /// The query has no word to match (only punctuation, symbols or invisible characters): no
    /// search ran, so nothing is proved either way.
    pub(crate) const QUERY_HAS_NO_WORDS: &str = "query_has_no_words";
    pub(crate) const FILTER_FAILED: &str = "graph_filter_failed";
    pub(crate) const MAILBOX_FAILED: &str = "mailbox_search_failed";
    pub(crate) const BUDGET_EXHAUSTED: &str = "budget_exhausted";
    /// A batch label named more mailboxes than `maxMailboxesPerSearch`: the first ones were
    /// searched, and the label's `nextCursor` searches the rest.
    pub(crate) const MAILBOX_LIMIT: &str = "mailbox_limit";
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
    /// A body part's transfer encoding could not be decoded (base64 with invalid characters
    /// or cut inside a quantum): its text was not wholly searched.
    pub(crate) const PART_UNDECODABLE: &str = "message_part_undecodable";
    /// A part in the body's place is of a type no matcher reads (not text, no file name:
    /// `application/x-unknown`, binary bytes, encrypted content).
    pub(crate) const PART_UNKNOWN_TYPE: &str = "message_part_unknown_type";
    /// A header was longer than the matching bound: its tail was not searched.
    pub(crate) const HEADER_TRUNCATED: &str = "message_header_truncated";
    /// A body was longer than the matching bound: its tail was not searched.
    pub(crate) const BODY_TRUNCATED: &str = "message_body_truncated";
    /// The scan window (see [`super::SearchPlan::derive_limits`]) was full while older
    /// messages were left: raise `maxResults` or narrow the search, not `maxPages`.
    pub(crate) const SCAN_WINDOW_REACHED: &str = "scan_window_reached";
    /// `maxPages` pages were read while older messages were left.
    pub(crate) const MAX_PAGES_REACHED: &str = "max_pages_reached";
    /// The server stopped returning results at its own cap (Graph's `$search` returns at most
    /// 1,000): narrow the query, folder or dates.
    pub(crate) const SERVER_RESULT_CAP: &str = "server_result_cap_reached";
    /// The backend throttled the search (HTTP 429/503, a rate limit) beyond its budget.
    pub(crate) const RATE_LIMITED: &str = "backend_rate_limited";
    /// The backend refused the credentials.
    pub(crate) const AUTH_FAILED: &str = "backend_auth_failed";
    /// The alias's delegated sign-in expired or was revoked: the operator must run
    /// `mailgate auth login ALIAS` (issue 37).
    pub(crate) const AUTH_REQUIRED: &str = "backend_sign_in_required";
    /// The backend did not answer within the search's deadline.
    pub(crate) const TIMEOUT: &str = "backend_timeout";
    /// The backend was unreachable or failed transiently.
    pub(crate) const UNAVAILABLE: &str = "backend_unavailable";
    /// The backend answered something unreadable.
    pub(crate) const MALFORMED: &str = "backend_malformed_response";
    /// A message's body could not be fetched for matching.
    pub(crate) const BODY_UNREAD: &str = "message_body_not_fetched";
}

/// The warning naming the failure that ended a paged scan part-way.
fn fault_warning(fault: Fault) -> &'static str {
    match fault {
        Fault::Throttled => warning::RATE_LIMITED,
        Fault::Unauthorised => warning::AUTH_FAILED,
        Fault::AuthRequired => warning::AUTH_REQUIRED,
        Fault::Timeout => warning::TIMEOUT,
        Fault::Unavailable => warning::UNAVAILABLE,
        Fault::Malformed => warning::MALFORMED,
    }
}

/// The evidence warning naming why a backend call failed, for a search to say which class of
/// failure left it unproven (the tool boundary maps the same classes to error codes).
pub(crate) fn error_warning(err: &BackendError) -> Option<&'static str> {
    match err {
        BackendError::Unsupported(_) | BackendError::ServerLacks(_) => {
            Some(warning::BACKEND_UNSUPPORTED)
        }
        BackendError::Throttled { .. } => Some(warning::RATE_LIMITED),
        BackendError::Unauthorised => Some(warning::AUTH_FAILED),
        BackendError::AuthRequired(_) => Some(warning::AUTH_REQUIRED),
        BackendError::Timeout => Some(warning::TIMEOUT),
        BackendError::Unavailable | BackendError::Io(_) => Some(warning::UNAVAILABLE),
        BackendError::Malformed => Some(warning::MALFORMED),
        BackendError::NotFound
        | BackendError::BadId
        | BackendError::Outdated
        | BackendError::TooLarge => None,
    }
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

    /// The folder's size when this scan read every message of it (an exhaustive scan no
    /// limit stopped).
    pub(crate) fn whole_folder(&self) -> Option<usize> {
        self.folder_total
            .filter(|total| self.stop.is_none() && self.examined == *total)
    }

    /// How far a scan the deadline stopped got, when the backend knows the folder's size.
    pub(crate) fn deadline_note(&self) -> Option<String> {
        match (self.stop, self.folder_total) {
            (Some(ScanStop::Deadline), Some(total)) => Some(format!(
                "the deadline stopped the scan after {} of {total} messages",
                self.examined
            )),
            _ => None,
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
            ScanStop::ServerCap => Some(format!(
                "{scanned}: the mail server returns at most that many search results; narrow \
                 the query or search with dateFrom/dateTo/folder"
            )),
            ScanStop::Fault(_) => Some(format!(
                "{scanned}: a later page could not be read (see the warnings); retry, or narrow \
                 with dateFrom/dateTo/folder"
            )),
            ScanStop::Deadline => None,
        }
    }
}

/// How long one mailbox's search may run before it stops and answers `SEARCH_INCOMPLETE` with
/// [`warning::DEADLINE`]. A search that stops early has proven nothing about the rest.
pub(crate) const SEARCH_DEADLINE: std::time::Duration = std::time::Duration::from_secs(20);

/// The warning code of a content gap.
pub(crate) fn gap_warning(gap: ContentGap) -> &'static str {
    match gap {
        ContentGap::TooLarge => warning::MESSAGE_TOO_LARGE,
        ContentGap::Unreadable => warning::MESSAGE_UNREADABLE,
        ContentGap::Structure => warning::MESSAGE_STRUCTURE_LIMIT,
        ContentGap::Undecodable => warning::PART_UNDECODABLE,
        ContentGap::UnknownPart => warning::PART_UNKNOWN_TYPE,
        ContentGap::Header => warning::HEADER_TRUNCATED,
        ContentGap::Body => warning::BODY_TRUNCATED,
    }
}

/// The warning codes naming every limit that left `page` incomplete.
pub(crate) fn limit_warnings(page: &Page) -> impl Iterator<Item = &'static str> + '_ {
    let stop = match page.stop {
        Some(ScanStop::Window) => Some(warning::SCAN_WINDOW_REACHED),
        Some(ScanStop::Pages) => Some(warning::MAX_PAGES_REACHED),
        Some(ScanStop::ServerCap) => Some(warning::SERVER_RESULT_CAP),
        Some(ScanStop::Fault(fault)) => Some(fault_warning(fault)),
        Some(ScanStop::Deadline) | None => None,
    };
    page.timed_out
        .then_some(warning::DEADLINE)
        .into_iter()
        .chain(stop)
        .chain(page.gaps.kinds().iter().map(|g| gap_warning(*g)))
}

/// What the engine needs from a backend.
pub(crate) trait SearchSource: Sync {
    /// How the backend searches, which decides what the engine adds to prove an answer.
    fn capabilities(&self) -> Capabilities;

    /// A listing (no `query`) or the backend's own search for `query`, within the request's
    /// filters, budget and keep count.
    fn scan(
        &self,
        req: &ScanRequest,
        query: Option<&str>,
    ) -> impl Future<Output = Result<Page, BackendError>> + Send;

    /// The body text and whole attachment list of each message, for a fallback match their
    /// summaries did not settle: one result per message, in order.
    fn texts(
        &self,
        wanted: &[&MessageSummary],
        deadline: Instant,
    ) -> impl Future<Output = Vec<Result<MessageText, BackendError>>> + Send;

    /// Why this source cannot answer `query` at all (a warning code), `None` when it can. A
    /// source that would have to drop part of the query must say so here rather than match
    /// wider.
    fn unanswerable(&self, _query: &str) -> Option<&'static str> {
        None
    }

    /// One message's whole attachment list, for a result whose listing left it out.
    fn attachments(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<Vec<AttachmentMeta>, BackendError>> + Send;
}

impl SearchSource for Backend {
    fn capabilities(&self) -> Capabilities {
        Backend::capabilities(self)
    }

    async fn scan(&self, req: &ScanRequest, query: Option<&str>) -> Result<Page, BackendError> {
        Backend::scan(self, req, query).await
    }

    async fn texts(
        &self,
        wanted: &[&MessageSummary],
        deadline: Instant,
    ) -> Vec<Result<MessageText, BackendError>> {
        Backend::texts(self, wanted, deadline).await
    }

    async fn attachments(&self, id: &str) -> Result<Vec<AttachmentMeta>, BackendError> {
        self.list_attachments(id).await
    }
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
    /// Results must carry their attachment lists (`includeAttachmentNames`): a backend whose
    /// listings leave them out is asked per result.
    pub(crate) attachment_names: bool,
}

impl SearchPlan {
    /// A listing of the newest `n` messages of `folder`, unfiltered, within `max_pages` pages
    /// and `deadline` (the document investigation's and the contacts window's listing).
    pub(crate) fn newest(
        folder: &str,
        n: usize,
        max_pages: u32,
        deadline: Instant,
        attachment_names: bool,
    ) -> Self {
        SearchPlan {
            query: None,
            folder: Some(folder.to_owned()),
            filters: Filters::default(),
            max_results: n,
            scan_limit: n,
            max_pages,
            sort_by: SortBy::ReceivedDateTime,
            sort_order: SortOrder::Desc,
            deadline,
            attachment_names,
        }
    }

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

    /// Widens the plan to reach `skip` results further (a continuation cursor's position):
    /// `skip + max_results` kept, the scan window grown in proportion. Refused beyond
    /// [`MAX_CURSOR_DEPTH`] (`false`, the plan unchanged).
    pub(crate) fn deepen(&mut self, skip: usize) -> bool {
        if skip == 0 {
            return true;
        }
        let keep = skip.saturating_add(self.max_results);
        if keep > MAX_CURSOR_DEPTH {
            return false;
        }
        let ratio = self.scan_limit.div_ceil(self.max_results.max(1)).max(1);
        self.scan_limit = keep.saturating_mul(ratio).min(MAX_CURSOR_DEPTH * 5);
        self.max_results = keep;
        true
    }

    fn scan_request(&self) -> ScanRequest {
        ScanRequest {
            folder: FolderSelector::parse(self.folder.as_deref()),
            filters: self.filters.clone(),
            budget: Budget {
                deadline: self.deadline,
                max_pages: self.max_pages,
                max_items: self.scan_limit,
            },
            keep: self.max_results,
            order: Order {
                by: self.sort_by,
                direction: self.sort_order,
            },
        }
    }
}

/// How many results continuation cursors reach into one search at most: each continuation
/// re-runs the search wider, so the depth bounds what one call can cost.
pub(crate) const MAX_CURSOR_DEPTH: usize = 1_000;

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
    pub(crate) messages: Vec<MessageSummary>,
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
    /// The answer to a query no search could run for: nothing proved, the warning says why.
    pub(crate) fn unsearched(warning: &'static str) -> Self {
        SearchOutcome {
            status: SearchStatus::SearchIncomplete,
            ..SearchOutcome::failed(warning)
        }
    }

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
