//! The search algorithm for one mailbox (spec/search.md rules 1–10, reference §6.2–6.3).
//!
//! Invariant: every path that ends in `NOT_FOUND` has passed through a complete scan (not
//! truncated, not stopped by the deadline, and every message in it wholly read); every error or
//! limit ends in `SEARCH_INCOMPLETE`, `SEARCH_FAILED` or `SEARCH_UNTRUSTED`, with warning codes
//! that name the limit.

use sha2::{Digest, Sha256};

use super::matcher::TokenQuery;
use super::{
    Candidate, Confidence, Page, ScanReport, SearchOutcome, SearchPlan, SearchSource, SearchStatus,
    SortBy, SortOrder, Strategy, warning,
};

/// A term that cannot occur in real mail, derived from the query so that a backend which ignores
/// the query returns the same "hits" for it.
pub(crate) fn canary_term(query: &str) -> String {
    let digest = Sha256::digest(query.as_bytes());
    format!("__mailgate_canary_{}__", &hex::encode(digest)[..16])
}

pub(crate) async fn run<S: SearchSource>(source: &S, plan: &SearchPlan) -> SearchOutcome {
    match plan.query.as_deref() {
        None => deterministic(source, plan).await,
        Some(q) => relevance(source, plan, q).await,
    }
}

async fn deterministic<S: SearchSource>(source: &S, plan: &SearchPlan) -> SearchOutcome {
    match source.list(&plan.scan_request()).await {
        Err(_) => SearchOutcome {
            warnings: vec![warning::FILTER_FAILED],
            ..SearchOutcome::failed(warning::FILTER_FAILED)
        },
        Ok(page) => {
            let scanned = page.items.len();
            let incomplete = page.is_incomplete();
            let scan = ScanReport::of(&page, plan);
            let warnings: Vec<&'static str> = page.limit_warnings().collect();
            let hits: Vec<Candidate> = page
                .items
                .into_iter()
                .filter(|c| plan.filters.matches(c))
                .collect();
            if hits.is_empty() {
                let (status, confidence) = if incomplete {
                    (SearchStatus::SearchIncomplete, Confidence::Low)
                } else {
                    (SearchStatus::NotFound, Confidence::High)
                };
                return SearchOutcome {
                    status,
                    strategy: Strategy::BackendSearch,
                    confidence,
                    pages_scanned: page.pages_scanned,
                    candidates_scanned: scanned,
                    truncated: page.truncated,
                    canary_matched: false,
                    warnings,
                    messages: Vec::new(),
                    scan,
                };
            }
            found(
                Strategy::BackendSearch,
                hits,
                page.pages_scanned,
                scanned,
                page.truncated,
                warnings,
                false,
                plan,
                scan,
            )
        }
    }
}

async fn relevance<S: SearchSource>(source: &S, plan: &SearchPlan, query: &str) -> SearchOutcome {
    let req = plan.scan_request();
    let canary = canary_term(query);
    let (real, canary_page) =
        futures::join!(source.search(&req, query), source.search(&req, &canary));

    let mut warnings = Vec::new();
    let canary_matched = matches!(&canary_page, Ok(p) if !p.items.is_empty());
    let canary_failed = canary_page.is_err();
    if canary_matched {
        warnings.push(warning::CANARY_MATCHED);
    }
    if canary_failed {
        warnings.push(warning::CANARY_FAILED);
    }

    let (real_ok, real_had_candidates, real_pages, real_scanned) = match &real {
        Ok(p) => (true, !p.items.is_empty(), p.pages_scanned, p.items.len()),
        Err(_) => (false, false, 0, 0),
    };
    if let Ok(page) = real
        && !page.items.is_empty()
        && !canary_matched
        && !canary_failed
    {
        let truncated = page.truncated;
        let scan = ScanReport::of(&page, plan);
        let hits: Vec<Candidate> = page
            .items
            .into_iter()
            .filter(|c| plan.filters.matches(c))
            .collect();
        if !hits.is_empty() {
            return found(
                Strategy::BackendSearch,
                hits,
                real_pages,
                real_scanned,
                truncated,
                warnings,
                false,
                plan,
                scan,
            );
        }
    }
    if !real_ok {
        warnings.push(warning::BACKEND_FAILED);
    } else if !real_had_candidates {
        warnings.push(warning::BACKEND_EMPTY);
    }

    let untrusted_backend = real_ok && real_had_candidates && (canary_matched || canary_failed);
    let fallback = source.list(&req).await;
    let page: Page = match fallback {
        Err(_) => {
            warnings.push(warning::LOCAL_SCAN_FAILED);
            let status = if real_ok && (canary_matched || canary_failed) {
                SearchStatus::SearchUntrusted
            } else {
                SearchStatus::SearchFailed
            };
            return SearchOutcome {
                status,
                strategy: Strategy::LocalScan,
                confidence: Confidence::Low,
                pages_scanned: real_pages,
                candidates_scanned: real_scanned,
                truncated: true,
                canary_matched,
                warnings,
                messages: Vec::new(),
                scan: ScanReport::default(),
            };
        }
        Ok(p) => p,
    };
    let scan = ScanReport::of(&page, plan);
    let matcher = TokenQuery::new(query);
    let scanned = page.items.len();
    let incomplete = page.is_incomplete();
    warnings.extend(page.limit_warnings());
    let hits: Vec<Candidate> = page
        .items
        .into_iter()
        .filter(|c| plan.filters.matches(c) && matcher.matches(c))
        .collect();
    if !hits.is_empty() {
        return found(
            Strategy::LocalScan,
            hits,
            page.pages_scanned,
            scanned,
            page.truncated,
            warnings,
            canary_matched,
            plan,
            scan,
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
        canary_matched,
        warnings,
        messages: Vec::new(),
        scan,
    }
}

#[expect(
    clippy::too_many_arguments,
    reason = "one constructor for the FOUND evidence fields"
)]
fn found(
    strategy: Strategy,
    mut hits: Vec<Candidate>,
    pages_scanned: u32,
    candidates_scanned: usize,
    scan_truncated: bool,
    warnings: Vec<&'static str>,
    canary_matched: bool,
    plan: &SearchPlan,
    scan: ScanReport,
) -> SearchOutcome {
    sort(&mut hits, plan.sort_by, plan.sort_order);
    let cut = hits.len() > plan.max_results;
    hits.truncate(plan.max_results);
    let truncated = scan_truncated || cut;
    SearchOutcome {
        status: SearchStatus::Found,
        strategy,
        confidence: if truncated {
            Confidence::Medium
        } else {
            Confidence::High
        },
        pages_scanned,
        candidates_scanned,
        truncated,
        canary_matched,
        warnings,
        messages: hits,
        scan,
    }
}

pub(crate) fn sort(items: &mut [Candidate], by: SortBy, order: SortOrder) {
    items.sort_by(|a, b| {
        let ord = match by {
            SortBy::ReceivedDateTime => a.received.cmp(&b.received),
            SortBy::Subject => a
                .subject
                .as_deref()
                .unwrap_or("")
                .to_lowercase()
                .cmp(&b.subject.as_deref().unwrap_or("").to_lowercase()),
        }
        .then_with(|| a.id.cmp(&b.id));
        match order {
            SortOrder::Asc => ord,
            SortOrder::Desc => ord.reverse(),
        }
    });
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::backends::BackendError;
    use crate::search::{ContentGap, Filters, Gaps, ScanRequest};

    pub(crate) fn candidate(id: &str, subject: &str) -> Candidate {
        Candidate {
            id: id.into(),
            folder_id: "INBOX".into(),
            subject: Some(subject.into()),
            from: None,
            received: None,
            sent: None,
            is_read: false,
            is_flagged: false,
            is_answered: false,
            has_attachments: false,
            preview: String::new(),
            body: String::new(),
            attachments: Vec::new(),
            gap: None,
        }
    }

    /// A scripted backend: each field is what the corresponding call answers.
    struct Fake {
        real: Result<Page, ()>,
        canary: Result<Page, ()>,
        list: Result<Page, ()>,
    }

    fn page(items: Vec<Candidate>, truncated: bool) -> Result<Page, ()> {
        Ok(Page {
            items,
            pages_scanned: 1,
            truncated,
            ..Page::default()
        })
    }

    /// A complete, untruncated page in which one message was not wholly read.
    fn page_with_gap(items: Vec<Candidate>, gap: ContentGap) -> Result<Page, ()> {
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
        async fn search(&self, _req: &ScanRequest, query: &str) -> Result<Page, BackendError> {
            let r = if query.starts_with("__mailgate_canary_") {
                &self.canary
            } else {
                &self.real
            };
            r.clone().map_err(|()| BackendError::NotFound)
        }
        async fn list(&self, _req: &ScanRequest) -> Result<Page, BackendError> {
            self.list.clone().map_err(|()| BackendError::NotFound)
        }
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
                list: stopped(crate::search::ScanStop::Window),
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
                list: stopped(crate::search::ScanStop::Pages),
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
        assert_eq!(failed.warnings, vec![warning::FILTER_FAILED]);
    }

    #[tokio::test]
    async fn found_cut_to_max_results_is_truncated_medium() {
        let many: Vec<Candidate> = (0..9).map(|i| candidate(&i.to_string(), "a")).collect();
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
        for gap in [
            ContentGap::TooLarge,
            ContentGap::Unreadable,
            ContentGap::Structure,
            ContentGap::Header,
            ContentGap::Body,
        ] {
            let fake = Fake {
                real: page(vec![], false),
                canary: page(vec![], false),
                list: page_with_gap(vec![candidate("a", "unrelated")], gap),
            };
            let o = outcome(fake, Some("invoice")).await;
            assert_eq!(o.status, SearchStatus::SearchIncomplete, "{gap:?}");
            assert_eq!(o.confidence, Confidence::Low);
            assert!(o.warnings.contains(&gap.warning()), "{:?}", o.warnings);
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
            assert!(o.warnings.contains(&gap.warning()));
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
}
