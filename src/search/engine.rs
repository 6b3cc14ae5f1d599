//! The search algorithm for one mailbox (spec/search.md rules 1–10, reference §6.2–6.3).
//!
//! Invariant: every path that ends in `NOT_FOUND` has passed through a complete scan (not
//! truncated, not stopped by the deadline, and every message in it wholly read); every error or
//! limit ends in `SEARCH_INCOMPLETE`, `SEARCH_FAILED` or `SEARCH_UNTRUSTED`, with warning codes
//! that name the limit.

use futures::StreamExt;
use sha2::{Digest, Sha256};

use super::matcher::TokenQuery;
use super::{
    Confidence, ScanReport, SearchOutcome, SearchPlan, SearchSource, SearchStatus, Strategy,
    error_warning, limit_warnings, warning,
};
use crate::backends::AttachmentMeta;
use crate::backends::BackendError;
use crate::backends::model::{ContentGap, Gaps, MessageSummary, Order, Page, SearchKind};

/// A term that cannot occur in real mail, derived from the query so that a backend which ignores
/// the query returns the same "hits" for it.
pub(crate) fn canary_term(query: &str) -> String {
    let digest = Sha256::digest(query.as_bytes());
    format!("__mailgate_canary_{}__", &hex::encode(digest)[..16])
}

pub(crate) async fn run<S: SearchSource>(source: &S, plan: &SearchPlan) -> SearchOutcome {
    let mut outcome = decide(source, plan).await;
    if plan.attachment_names {
        list_attachments(source, plan, &mut outcome.messages).await;
    }
    outcome
}

/// Fills the attachment lists a listing left out, for the results only (at most
/// `maxResults`), a few at a time; a list that cannot be fetched stays unlisted (the answer
/// then shows no names for that message rather than an empty list).
async fn list_attachments<S: SearchSource>(
    source: &S,
    plan: &SearchPlan,
    messages: &mut [MessageSummary],
) {
    let deadline = tokio::time::Instant::from_std(plan.deadline);
    let wanted: Vec<(usize, String)> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| !m.attachments_listed)
        .map(|(i, m)| (i, m.id.clone()))
        .collect();
    let fetched: Vec<(usize, Option<Vec<AttachmentMeta>>)> = futures::stream::iter(wanted)
        .map(|(i, id)| async move {
            let list = tokio::time::timeout_at(deadline, source.attachments(&id)).await;
            (i, list.ok().and_then(Result::ok))
        })
        .buffered(crate::backends::FETCHES_AT_ONCE)
        .collect()
        .await;
    for (i, list) in fetched {
        if let Some(list) = list {
            messages[i].attachments = list;
            messages[i].attachments_listed = true;
        }
    }
}

async fn decide<S: SearchSource>(source: &S, plan: &SearchPlan) -> SearchOutcome {
    if let Some(q) = plan.query.as_deref() {
        // A query of no word would match nothing and prove nothing; a query the source cannot
        // represent whole would match wider. Neither is searched.
        if crate::text::query_tokens(q).is_empty() {
            return SearchOutcome::unsearched(warning::QUERY_HAS_NO_WORDS);
        }
        if let Some(why) = source.unanswerable(q) {
            return SearchOutcome::unsearched(why);
        }
    }
    match (plan.query.as_deref(), source.capabilities().search) {
        (None, _) => one_scan(source, plan, None).await,
        (Some(q), SearchKind::ExhaustiveLocal) => one_scan(source, plan, Some(q)).await,
        (Some(q), SearchKind::RemoteRelevance) => relevance(source, plan, q).await,
        (Some(q), SearchKind::ListingOnly) => {
            fallback(source, plan, q, Vec::new(), Trust::default()).await
        }
    }
}

/// The failure outcome of a backend call, naming its class when it has one.
fn failed_with(first: &'static str, err: &BackendError) -> SearchOutcome {
    let mut outcome = SearchOutcome::failed(first);
    outcome.warnings.extend(error_warning(err));
    outcome
}

/// A page's matches that pass the filters again (a backend may ignore part of a filter).
fn filtered(page: &mut Page, plan: &SearchPlan) -> Vec<MessageSummary> {
    std::mem::take(&mut page.items)
        .into_iter()
        .filter(|c| plan.filters.matches(c))
        .collect()
}

/// Matches the backend found beyond those it returned (it keeps the best `keep`).
fn unreturned(page: &Page) -> bool {
    page.matched > page.items.len()
}

/// One scan is the whole answer: a filter-only listing (the backend's filter is exact: rule 10,
/// no canary) or the search of a backend that reads every message with our matcher (no canary:
/// it cannot ignore the query; no fallback: a second scan would read the same messages).
async fn one_scan<S: SearchSource>(
    source: &S,
    plan: &SearchPlan,
    query: Option<&str>,
) -> SearchOutcome {
    // A complete word search proves less than a complete filter listing: word matching has no
    // stemming or synonyms, so its absence is medium at most (the reference's rule 7).
    let (strategy, failure, absent) = match query {
        None => (
            Strategy::BackendSearch,
            warning::FILTER_FAILED,
            Confidence::High,
        ),
        Some(_) => (
            Strategy::LocalScan,
            warning::LOCAL_SCAN_FAILED,
            Confidence::Medium,
        ),
    };
    let mut page = match source.scan(&plan.scan_request(), query).await {
        Err(err) => {
            let mut outcome = failed_with(failure, &err);
            outcome.strategy = strategy;
            return outcome;
        }
        Ok(page) => page,
    };
    let scanned = page.examined.max(page.items.len());
    let incomplete = page.is_incomplete();
    let scan = ScanReport::of(&page, plan);
    let warnings: Vec<&'static str> = limit_warnings(&page).collect();
    let more = unreturned(&page);
    let hits = filtered(&mut page, plan);
    if !hits.is_empty() {
        return found(
            strategy,
            hits,
            Evidence {
                pages_scanned: page.pages_scanned,
                candidates_scanned: scanned,
                truncated: page.truncated || more,
                warnings,
                canary_matched: false,
                scan,
            },
            plan,
        );
    }
    let (status, confidence) = if incomplete {
        (SearchStatus::SearchIncomplete, Confidence::Low)
    } else {
        (SearchStatus::NotFound, absent)
    };
    SearchOutcome {
        status,
        strategy,
        confidence,
        pages_scanned: page.pages_scanned,
        candidates_scanned: scanned,
        truncated: page.truncated,
        canary_matched: false,
        warnings,
        messages: Vec::new(),
        scan,
    }
}

/// What the backend's own search and its canary said, for the fallback to weigh.
#[derive(Clone, Copy, Debug, Default)]
struct Trust {
    /// The backend's search answered (ok) with candidates.
    answered_with_candidates: bool,
    /// The backend's search answered at all.
    answered: bool,
    canary_matched: bool,
    canary_failed: bool,
    pages: u32,
    scanned: usize,
}

async fn relevance<S: SearchSource>(source: &S, plan: &SearchPlan, query: &str) -> SearchOutcome {
    let req = plan.scan_request();
    let canary = canary_term(query);
    let (real, canary_page) = futures::join!(
        source.scan(&req, Some(query)),
        source.scan(&req, Some(&canary))
    );

    let mut warnings = Vec::new();
    let canary_matched = matches!(&canary_page, Ok(p) if !p.items.is_empty());
    let canary_failed = canary_page.is_err();
    if canary_matched {
        warnings.push(warning::CANARY_MATCHED);
    }
    if canary_failed {
        warnings.push(warning::CANARY_FAILED);
    }
    let mut trust = Trust {
        canary_matched,
        canary_failed,
        ..Trust::default()
    };
    match real {
        Ok(mut page) => {
            trust.answered = true;
            trust.answered_with_candidates = !page.items.is_empty();
            trust.pages = page.pages_scanned;
            trust.scanned = page.items.len();
            if trust.answered_with_candidates && !canary_matched && !canary_failed {
                let truncated = page.truncated || unreturned(&page);
                let scan = ScanReport::of(&page, plan);
                let hits = filtered(&mut page, plan);
                if !hits.is_empty() {
                    return found(
                        Strategy::BackendSearch,
                        hits,
                        Evidence {
                            pages_scanned: trust.pages,
                            candidates_scanned: trust.scanned,
                            truncated,
                            warnings,
                            canary_matched: false,
                            scan,
                        },
                        plan,
                    );
                }
            }
            if !trust.answered_with_candidates {
                warnings.push(warning::BACKEND_EMPTY);
            }
        }
        Err(err) => {
            warnings.push(warning::BACKEND_FAILED);
            warnings.extend(error_warning(&err));
        }
    }
    fallback(source, plan, query, warnings, trust).await
}

/// The bounded local scan of recent messages (search.md rules 4–8): a listing within the plan's
/// window, matched by exact tokens; a body is fetched only for a message its summary does not
/// match, and a body that cannot be fetched leaves the answer unproven.
async fn fallback<S: SearchSource>(
    source: &S,
    plan: &SearchPlan,
    query: &str,
    mut warnings: Vec<&'static str>,
    trust: Trust,
) -> SearchOutcome {
    let untrusted_backend =
        trust.answered_with_candidates && (trust.canary_matched || trust.canary_failed);
    let mut req = plan.scan_request();
    // The window, not the result count, bounds a listing the engine filters itself.
    req.keep = plan.scan_limit;
    let mut page = match source.scan(&req, None).await {
        Err(err) => {
            warnings.push(warning::LOCAL_SCAN_FAILED);
            warnings.extend(error_warning(&err));
            let status = if trust.answered && (trust.canary_matched || trust.canary_failed) {
                SearchStatus::SearchUntrusted
            } else {
                SearchStatus::SearchFailed
            };
            return SearchOutcome {
                status,
                strategy: Strategy::LocalScan,
                confidence: Confidence::Low,
                pages_scanned: trust.pages,
                candidates_scanned: trust.scanned,
                truncated: true,
                canary_matched: trust.canary_matched,
                warnings,
                messages: Vec::new(),
                scan: ScanReport::default(),
            };
        }
        Ok(p) => p,
    };
    let matcher = TokenQuery::new(query);
    let scanned = page.items.len();
    let candidates = filtered(&mut page, plan);
    let (hits, bodies_missing) =
        match_with_bodies(source, &matcher, candidates, plan, &mut page.gaps).await;
    if bodies_missing {
        page.gaps.add(ContentGap::Unreadable);
        warnings.push(warning::BODY_UNREAD);
    }
    let scan = ScanReport::of(&page, plan);
    let incomplete = page.is_incomplete();
    warnings.extend(limit_warnings(&page));
    if !hits.is_empty() {
        return found(
            Strategy::LocalScan,
            hits,
            Evidence {
                pages_scanned: page.pages_scanned,
                candidates_scanned: scanned,
                truncated: page.truncated,
                warnings,
                canary_matched: trust.canary_matched,
                scan,
            },
            plan,
        );
    }
    let (status, confidence) = if untrusted_backend {
        (SearchStatus::SearchUntrusted, Confidence::Low)
    } else if incomplete {
        (SearchStatus::SearchIncomplete, Confidence::Low)
    } else {
        warnings.push(warning::EXACT_TOKEN);
        (SearchStatus::NotFound, Confidence::Medium)
    };
    SearchOutcome {
        status,
        strategy: Strategy::LocalScan,
        confidence,
        pages_scanned: page.pages_scanned,
        candidates_scanned: scanned,
        truncated: page.truncated,
        canary_matched: trust.canary_matched,
        warnings,
        messages: Vec::new(),
        scan,
    }
}

/// The candidates `matcher` matches, fetching a body only where the summary does not settle it;
/// `true` when a body could not be fetched (or the deadline passed first), so a non-match among
/// them is unproven. A fetched body that does not hold the whole message adds its gap to
/// `gaps`, so the answer names the limit.
async fn match_with_bodies<S: SearchSource>(
    source: &S,
    matcher: &TokenQuery,
    candidates: Vec<MessageSummary>,
    plan: &SearchPlan,
    gaps: &mut Gaps,
) -> (Vec<MessageSummary>, bool) {
    let (mut hits, need_body): (Vec<_>, Vec<_>) = candidates
        .into_iter()
        .partition(|c| matcher.matches(c, None));
    let wanted: Vec<&MessageSummary> = need_body.iter().collect();
    let texts = source.texts(&wanted, plan.deadline).await;
    let mut missing = texts.len() != need_body.len();
    for (mut c, text) in need_body.into_iter().zip(texts) {
        match text {
            Ok(text) => {
                // A listing that left attachments out gets them now: names match too.
                if !c.attachments_listed {
                    c.attachments = text.attachments;
                    c.attachments_listed = true;
                }
                if matcher.matches(&c, Some(&text.body)) {
                    hits.push(c);
                } else if let Some(gap) = text.gap
                    && c.gap.is_none()
                {
                    // The words may be in what the body does not hold (a gap the listing
                    // named is counted already).
                    gaps.add(gap);
                }
            }
            Err(_) => missing = true,
        }
    }
    (hits, missing)
}

/// The evidence fields of a `FOUND` answer.
struct Evidence {
    pages_scanned: u32,
    candidates_scanned: usize,
    truncated: bool,
    warnings: Vec<&'static str>,
    canary_matched: bool,
    scan: ScanReport,
}

fn found(
    strategy: Strategy,
    mut hits: Vec<MessageSummary>,
    evidence: Evidence,
    plan: &SearchPlan,
) -> SearchOutcome {
    let order = Order {
        by: plan.sort_by,
        direction: plan.sort_order,
    };
    hits.sort_by(|a, b| order.compare(a, b));
    let cut = hits.len() > plan.max_results;
    hits.truncate(plan.max_results);
    let truncated = evidence.truncated || cut;
    SearchOutcome {
        status: SearchStatus::Found,
        strategy,
        confidence: if truncated {
            Confidence::Medium
        } else {
            Confidence::High
        },
        pages_scanned: evidence.pages_scanned,
        candidates_scanned: evidence.candidates_scanned,
        truncated,
        canary_matched: evidence.canary_matched,
        warnings: evidence.warnings,
        messages: hits,
        scan: evidence.scan,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::backends::model::{Capabilities, Filters, ScanRequest, SortBy, SortOrder};
    use crate::backends::{BackendError, MessageText};
    use crate::search::gap_warning;

    pub(crate) fn candidate(id: &str, subject: &str) -> MessageSummary {
        MessageSummary {
            subject: Some(subject.into()),
            ..MessageSummary::blank(id, "INBOX")
        }
    }

    /// A scripted backend with a remote relevance search: each field is what the corresponding
    /// call answers; every message's body is empty.
    struct Fake {
        real: Result<Page, ()>,
        canary: Result<Page, ()>,
        list: Result<Page, ()>,
    }

    fn page(items: Vec<MessageSummary>, truncated: bool) -> Result<Page, ()> {
        Ok(Page {
            items,
            pages_scanned: 1,
            truncated,
            ..Page::default()
        })
    }

    /// A complete, untruncated page in which one message was not wholly read.
    fn page_with_gap(items: Vec<MessageSummary>, gap: ContentGap) -> Result<Page, ()> {
        let mut gaps = Gaps::default();
        gaps.add(gap);
        Ok(Page {
            items,
            pages_scanned: 1,
            gaps,
            ..Page::default()
        })
    }

    impl SearchSource for Fake {
        fn capabilities(&self) -> Capabilities {
            Capabilities {
                search: SearchKind::RemoteRelevance,
                ids_survive_move: false,
            }
        }
        async fn scan(
            &self,
            _req: &ScanRequest,
            query: Option<&str>,
        ) -> Result<Page, BackendError> {
            let r = match query {
                None => &self.list,
                Some(q) if q.starts_with("__mailgate_canary_") => &self.canary,
                Some(_) => &self.real,
            };
            r.clone().map_err(|()| BackendError::Unavailable)
        }
        async fn texts(
            &self,
            wanted: &[&MessageSummary],
            _deadline: std::time::Instant,
        ) -> Vec<Result<MessageText, BackendError>> {
            wanted
                .iter()
                .map(|_| {
                    Ok(MessageText {
                        body: String::new(),
                        attachments: Vec::new(),
                        gap: None,
                    })
                })
                .collect()
        }
        async fn attachments(&self, _id: &str) -> Result<Vec<AttachmentMeta>, BackendError> {
            unreachable!("every scripted summary lists its attachments")
        }
    }

    /// `Fake` whose bodies hold `body`, or cannot be fetched (`None`).
    /// `Fake` whose bodies hold `.1` (or cannot be fetched: `None`), cut by a bound when `.2`.
    struct WithBodies(Fake, Option<&'static str>, bool);

    impl SearchSource for WithBodies {
        fn capabilities(&self) -> Capabilities {
            self.0.capabilities()
        }
        async fn scan(&self, req: &ScanRequest, query: Option<&str>) -> Result<Page, BackendError> {
            self.0.scan(req, query).await
        }
        async fn texts(
            &self,
            wanted: &[&MessageSummary],
            _deadline: std::time::Instant,
        ) -> Vec<Result<MessageText, BackendError>> {
            wanted
                .iter()
                .map(|_| {
                    self.1
                        .map(|body| MessageText {
                            body: body.to_owned(),
                            attachments: Vec::new(),
                            gap: self.2.then_some(ContentGap::Body),
                        })
                        .ok_or(BackendError::Timeout)
                })
                .collect()
        }
        async fn attachments(&self, _id: &str) -> Result<Vec<AttachmentMeta>, BackendError> {
            unreachable!("every scripted summary lists its attachments")
        }
    }

    /// Issue 10: summaries carry no body; the fallback fetches one only for a message whose
    /// summary does not match, and a body it cannot fetch leaves the answer unproven.
    #[tokio::test]
    async fn the_fallback_reads_bodies_lazily_and_never_proves_absence_without_them() {
        let fake = || Fake {
            real: page(vec![], false),
            canary: page(vec![], false),
            list: page(vec![candidate("1", "other")], false),
        };
        let o = run(
            &WithBodies(fake(), Some("the invoice is attached"), false),
            &plan(Some("invoice")),
        )
        .await;
        assert_eq!(
            (o.status, o.strategy),
            (SearchStatus::Found, Strategy::LocalScan)
        );
        let o = run(
            &WithBodies(fake(), Some("nothing here"), false),
            &plan(Some("invoice")),
        )
        .await;
        assert_eq!(o.status, SearchStatus::NotFound);
        let o = run(&WithBodies(fake(), None, false), &plan(Some("invoice"))).await;
        assert_eq!(o.status, SearchStatus::SearchIncomplete);
        assert!(
            o.warnings.contains(&warning::BODY_UNREAD),
            "{:?}",
            o.warnings
        );
        // A body a bound cut proves nothing about the words beyond the cut.
        let o = run(
            &WithBodies(fake(), Some("nothing here"), true),
            &plan(Some("invoice")),
        )
        .await;
        assert_eq!(o.status, SearchStatus::SearchIncomplete);
        // A match in the part that was read is still a match.
        let o = run(
            &WithBodies(fake(), Some("the invoice is attached"), true),
            &plan(Some("invoice")),
        )
        .await;
        assert_eq!(o.status, SearchStatus::Found);
    }

    fn plan(query: Option<&str>) -> SearchPlan {
        SearchPlan {
            query: query.map(str::to_owned),
            folder: None,
            filters: Filters::default(),
            max_results: 5,
            scan_limit: 15,
            max_pages: 10,
            sort_by: SortBy::ReceivedDateTime,
            sort_order: SortOrder::Desc,
            deadline: std::time::Instant::now() + crate::search::SEARCH_DEADLINE,
            attachment_names: false,
        }
    }

    async fn outcome(fake: Fake, query: Option<&str>) -> SearchOutcome {
        run(&fake, &plan(query)).await
    }

    #[tokio::test]
    async fn backend_hits_with_clean_canary_are_found_high() {
        let o = outcome(
            Fake {
                real: page(vec![candidate("1", "x")], false),
                canary: page(vec![], false),
                list: Err(()),
            },
            Some("invoice"),
        )
        .await;
        assert_eq!(o.status, SearchStatus::Found);
        assert_eq!(o.strategy, Strategy::BackendSearch);
        assert_eq!(o.confidence, Confidence::High);
    }

    #[tokio::test]
    async fn canary_match_forces_fallback_and_untrusted_when_scan_finds_nothing() {
        let o = outcome(
            Fake {
                real: page(vec![candidate("1", "unrelated")], false),
                canary: page(vec![candidate("1", "unrelated")], false),
                list: page(vec![candidate("1", "unrelated")], false),
            },
            Some("invoice"),
        )
        .await;
        assert_eq!(o.status, SearchStatus::SearchUntrusted);
        assert_eq!(o.confidence, Confidence::Low);
        assert!(o.canary_matched);
        assert!(o.warnings.contains(&warning::CANARY_MATCHED));
    }

    #[tokio::test]
    async fn canary_match_but_local_scan_verifies_is_found_by_local_scan() {
        let o = outcome(
            Fake {
                real: page(vec![candidate("1", "invoice 7")], false),
                canary: page(vec![candidate("1", "invoice 7")], false),
                list: page(vec![candidate("1", "invoice 7")], false),
            },
            Some("invoice"),
        )
        .await;
        assert_eq!(o.status, SearchStatus::Found);
        assert_eq!(o.strategy, Strategy::LocalScan);
    }

    #[tokio::test]
    async fn empty_backend_and_complete_scan_is_not_found_medium() {
        let o = outcome(
            Fake {
                real: page(vec![], false),
                canary: page(vec![], false),
                list: page(vec![candidate("1", "other")], false),
            },
            Some("invoice"),
        )
        .await;
        assert_eq!(o.status, SearchStatus::NotFound);
        assert_eq!(o.confidence, Confidence::Medium);
        assert!(o.warnings.contains(&warning::EXACT_TOKEN));
        assert!(o.warnings.contains(&warning::BACKEND_EMPTY));
    }

    #[tokio::test]
    async fn truncated_scan_without_match_is_incomplete() {
        let o = outcome(
            Fake {
                real: page(vec![], true),
                canary: page(vec![], false),
                list: page(vec![candidate("1", "other")], true),
            },
            Some("invoice"),
        )
        .await;
        assert_eq!(o.status, SearchStatus::SearchIncomplete);
        assert_eq!(o.confidence, Confidence::Low);
    }

    /// Issue 9: an incomplete answer says which limit stopped the scan and what lifts it, and
    /// is truthful about `maxPages` on a backend whose window is reached first.
    #[tokio::test]
    async fn a_limit_stop_is_named_with_its_lift() {
        let stopped = |stop| {
            Ok(Page {
                items: vec![candidate("1", "other")],
                pages_scanned: 1,
                truncated: true,
                stop: Some(stop),
                examined: 15,
                folder_total: Some(240),
                page_size: Some(50),
                ..Page::default()
            })
        };
        let o = outcome(
            Fake {
                real: page(vec![], false),
                canary: page(vec![], false),
                list: stopped(crate::backends::model::ScanStop::Window),
            },
            Some("invoice"),
        )
        .await;
        assert_eq!(o.status, SearchStatus::SearchIncomplete);
        assert!(o.warnings.contains(&warning::SCAN_WINDOW_REACHED));
        let note = o.limit_note().expect("a note");
        assert!(
            note.starts_with("scanned the newest 15 of 240 messages"),
            "{note}"
        );
        assert!(note.contains("scan window of 15 messages (3 × maxResults, at most 100)"));
        assert!(note.contains("raise maxResults") && note.contains("maxPages does not lift it"));

        let o = outcome(
            Fake {
                real: page(vec![], false),
                canary: page(vec![], false),
                list: stopped(crate::backends::model::ScanStop::Pages),
            },
            Some("invoice"),
        )
        .await;
        assert!(o.warnings.contains(&warning::MAX_PAGES_REACHED));
        let note = o.limit_note().expect("a note");
        assert!(note.contains("maxPages (10 pages of 50 messages) was reached; raise maxPages"));

        // Without a limit stop there is nothing to say (a deadline has its own warning).
        let o = outcome(
            Fake {
                real: page(vec![], false),
                canary: page(vec![], false),
                list: page(vec![candidate("1", "other")], false),
            },
            Some("invoice"),
        )
        .await;
        assert_eq!(o.status, SearchStatus::NotFound);
        assert_eq!(o.limit_note(), None);
    }

    #[tokio::test]
    async fn both_failing_is_search_failed() {
        let o = outcome(
            Fake {
                real: Err(()),
                canary: Err(()),
                list: Err(()),
            },
            Some("invoice"),
        )
        .await;
        assert_eq!(o.status, SearchStatus::SearchFailed);
        assert!(o.truncated);
        assert!(o.warnings.contains(&warning::LOCAL_SCAN_FAILED));
    }

    #[tokio::test]
    async fn backend_ok_canary_failed_scan_failed_is_untrusted() {
        let o = outcome(
            Fake {
                real: page(vec![candidate("1", "x")], false),
                canary: Err(()),
                list: Err(()),
            },
            Some("invoice"),
        )
        .await;
        assert_eq!(o.status, SearchStatus::SearchUntrusted);
    }

    #[tokio::test]
    async fn deterministic_outcomes() {
        let found = outcome(
            Fake {
                real: Err(()),
                canary: Err(()),
                list: page(vec![candidate("1", "a")], false),
            },
            None,
        )
        .await;
        assert_eq!(
            (found.status, found.confidence),
            (SearchStatus::Found, Confidence::High)
        );
        let none = outcome(
            Fake {
                real: Err(()),
                canary: Err(()),
                list: page(vec![], false),
            },
            None,
        )
        .await;
        assert_eq!(
            (none.status, none.confidence),
            (SearchStatus::NotFound, Confidence::High)
        );
        let cut = outcome(
            Fake {
                real: Err(()),
                canary: Err(()),
                list: page(vec![], true),
            },
            None,
        )
        .await;
        assert_eq!(cut.status, SearchStatus::SearchIncomplete);
        let failed = outcome(
            Fake {
                real: Err(()),
                canary: Err(()),
                list: Err(()),
            },
            None,
        )
        .await;
        assert_eq!(failed.status, SearchStatus::SearchFailed);
        assert_eq!(
            failed.warnings,
            vec![warning::FILTER_FAILED, warning::UNAVAILABLE]
        );
    }

    #[tokio::test]
    async fn found_cut_to_max_results_is_truncated_medium() {
        let many: Vec<MessageSummary> = (0..9).map(|i| candidate(&i.to_string(), "a")).collect();
        let o = outcome(
            Fake {
                real: Err(()),
                canary: Err(()),
                list: page(many, false),
            },
            None,
        )
        .await;
        assert_eq!(o.messages.len(), 5);
        assert!(o.truncated);
        assert_eq!(o.confidence, Confidence::Medium);
    }

    /// Issue 8 finding 2: a message the scan did not wholly read (too large, unreadable, cut
    /// by a parser or matching bound) turns what would be NOT_FOUND into SEARCH_INCOMPLETE,
    /// naming the limit; on both the relevance and the filter-only path.
    #[tokio::test]
    async fn a_message_not_wholly_read_is_never_proven_absent() {
        for gap in crate::index::stored::GAPS {
            let fake = Fake {
                real: page(vec![], false),
                canary: page(vec![], false),
                list: page_with_gap(vec![candidate("a", "unrelated")], gap),
            };
            let o = outcome(fake, Some("invoice")).await;
            assert_eq!(o.status, SearchStatus::SearchIncomplete, "{gap:?}");
            assert_eq!(o.confidence, Confidence::Low);
            assert!(o.warnings.contains(&gap_warning(gap)), "{:?}", o.warnings);
            assert!(!o.warnings.contains(&warning::EXACT_TOKEN));

            let fake = Fake {
                real: page(vec![], false),
                canary: page(vec![], false),
                list: page_with_gap(vec![], gap),
            };
            let mut p = plan(None);
            p.filters.is_read = Some(true);
            let o = run(&fake, &p).await;
            assert_eq!(o.status, SearchStatus::SearchIncomplete, "{gap:?}");
            assert!(o.warnings.contains(&gap_warning(gap)));
        }
    }

    #[tokio::test]
    async fn a_deadline_stop_is_incomplete_and_says_so() {
        let timed_out = Ok(Page {
            timed_out: true,
            truncated: true,
            ..Page::default()
        });
        let fake = Fake {
            real: page(vec![], false),
            canary: page(vec![], false),
            list: timed_out,
        };
        let o = outcome(fake, Some("invoice")).await;
        assert_eq!(o.status, SearchStatus::SearchIncomplete);
        assert!(o.warnings.contains(&warning::DEADLINE));
    }

    #[test]
    fn aggregate_precedence() {
        use SearchStatus::*;
        assert_eq!(SearchStatus::worst([NotFound, Found]), Found);
        assert_eq!(
            SearchStatus::worst([Found, SearchIncomplete]),
            SearchIncomplete
        );
        assert_eq!(
            SearchStatus::worst([SearchIncomplete, SearchUntrusted]),
            SearchUntrusted
        );
        assert_eq!(
            SearchStatus::worst([SearchUntrusted, SearchFailed, NotFound]),
            SearchFailed
        );
    }

    #[test]
    fn limit_derivation_matches_reference() {
        assert_eq!(SearchPlan::derive_limits(Some("q"), Some(5), 20), (5, 15));
        assert_eq!(
            SearchPlan::derive_limits(Some("q"), Some(100), 100),
            (50, 100)
        );
        assert_eq!(SearchPlan::derive_limits(None, None, 20), (20, 100));
        assert_eq!(SearchPlan::derive_limits(None, Some(100), 100), (100, 500));
    }

    #[test]
    fn canary_is_stable_and_query_bound() {
        assert_eq!(canary_term("a"), canary_term("a"));
        assert_ne!(canary_term("a"), canary_term("b"));
    }

    /// A backend whose search is exhaustive: counts its scans.
    struct Exhaustive(Result<Page, ()>, std::sync::atomic::AtomicUsize);

    impl SearchSource for Exhaustive {
        fn capabilities(&self) -> Capabilities {
            Capabilities {
                search: SearchKind::ExhaustiveLocal,
                ids_survive_move: false,
            }
        }
        async fn scan(
            &self,
            _req: &ScanRequest,
            query: Option<&str>,
        ) -> Result<Page, BackendError> {
            assert!(
                !query.is_some_and(|q| q.starts_with("__mailgate_canary_")),
                "no canary for an exhaustive search"
            );
            self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.0.clone().map_err(|()| BackendError::Unavailable)
        }
        async fn texts(
            &self,
            _wanted: &[&MessageSummary],
            _deadline: std::time::Instant,
        ) -> Vec<Result<MessageText, BackendError>> {
            unreachable!("an exhaustive search matched bodies itself")
        }
        async fn attachments(&self, _id: &str) -> Result<Vec<AttachmentMeta>, BackendError> {
            unreachable!("every scripted summary lists its attachments")
        }
    }

    /// Issue 10, item 3: an exhaustive local search is one scan — no canary, no fallback — and
    /// its complete non-match is NOT_FOUND; a deadline stop or a failure never is.
    #[tokio::test]
    async fn an_exhaustive_search_is_one_scan_without_canary_or_fallback() {
        let run_on = |page: Result<Page, ()>| async move {
            let source = Exhaustive(page, std::sync::atomic::AtomicUsize::new(0));
            let outcome = run(&source, &plan(Some("invoice"))).await;
            (outcome, source.1.into_inner())
        };
        let (o, scans) = run_on(page(vec![candidate("1", "invoice")], false)).await;
        assert_eq!(
            (o.status, o.strategy, scans),
            (SearchStatus::Found, Strategy::LocalScan, 1)
        );
        assert!(o.warnings.is_empty(), "{:?}", o.warnings);
        let (o, scans) = run_on(page(vec![], false)).await;
        assert_eq!(
            (o.status, o.confidence, scans),
            (SearchStatus::NotFound, Confidence::Medium, 1)
        );
        assert!(!o.warnings.contains(&warning::EXACT_TOKEN));
        let (o, _) = run_on(Ok(Page {
            timed_out: true,
            truncated: true,
            stop: Some(crate::backends::model::ScanStop::Deadline),
            ..Page::default()
        }))
        .await;
        assert_eq!(o.status, SearchStatus::SearchIncomplete);
        assert!(o.warnings.contains(&warning::DEADLINE));
        let (o, _) = run_on(Err(())).await;
        assert_eq!(o.status, SearchStatus::SearchFailed);
        assert_eq!(
            o.warnings,
            vec![warning::LOCAL_SCAN_FAILED, warning::UNAVAILABLE]
        );
    }
}
