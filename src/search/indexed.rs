//! Searches through the local index: `source: "index"` runs the engine over the index as an
//! exhaustive source, `source: "hybrid"` runs it and the live backend at once and merges. What
//! the index adds to the engine's rules is freshness: an index answer carries `indexedThrough`,
//! and a `NOT_FOUND` from a stale or partial index is `SEARCH_INCOMPLETE` with `index_stale` /
//! `index_partial`, because the index can only vouch for what it held when it was last wholly
//! synced. A hybrid answer is `NOT_FOUND` only when one side proved it and neither found
//! anything; hits are deduplicated by Internet Message-ID (then backend id), each recording
//! whether the live backend, the index or both returned it.

use std::collections::HashMap;
use std::time::Instant;

use chrono::{DateTime, Utc};

use super::{Confidence, SearchOutcome, SearchPlan, SearchSource, SearchStatus, Strategy, engine};
use crate::backends::model::{
    AttachmentMeta, Capabilities, FolderSelector, Gaps, MessageSummary, MessageText, Order, Page,
    ScanRequest, SearchKind,
};
use crate::backends::{Backend, BackendError};
use crate::embed::Semantic;
use crate::index::source::{Freshness, IndexReader};
use crate::index::status::IndexStatus;
use crate::index::{IndexError, IndexQuery, TextIndex};

/// Warning codes of index answers.
pub(crate) mod warning {
    /// The index is older than `MAILGATE_INDEX_MAX_STALENESS`: its absence proves nothing.
    pub(crate) const INDEX_STALE: &str = "index_stale";
    /// A folder of the scope is mid-sync, was never wholly synced, or has messages pending.
    pub(crate) const INDEX_PARTIAL: &str = "index_partial";
    /// The mailbox has no local index (the operator has not synced it).
    pub(crate) const INDEX_MISSING: &str = "index_missing";
    /// The index could not be read.
    pub(crate) const INDEX_FAILED: &str = "index_failed";
    /// The embeddings endpoint did not answer (down, slow, refused): lexical results only.
    pub(crate) const SEMANTIC_UNAVAILABLE: &str = "semantic_unavailable";
    /// The index holds no vectors yet (synced without an endpoint, or vectors pending).
    pub(crate) const SEMANTIC_NOT_INDEXED: &str = "semantic_not_indexed";
    /// No message holds every query word; the messages listed are the closest in meaning,
    /// ranked, never proof either way: read them before relying on the answer.
    pub(crate) const SEMANTIC_ONLY: &str = "semantic_matches_only";
}

/// Where one mailbox's search runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    Live,
    Index,
    Hybrid,
}

/// Which side returned a hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HitSource {
    Live,
    Index,
    Both,
    /// The index's vectors only: close in meaning, not an exact-token match.
    Semantic,
}

impl HitSource {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            HitSource::Live => "live",
            HitSource::Index => "index",
            HitSource::Both => "both",
            HitSource::Semantic => "semantic",
        }
    }
}

/// One mailbox's answer with what the index adds to it.
#[derive(Clone, Debug)]
pub(crate) struct Answer {
    pub(crate) outcome: SearchOutcome,
    /// When the index's scope was last wholly synced (index and hybrid answers).
    pub(crate) indexed_through: Option<DateTime<Utc>>,
    /// Per message of `outcome.messages`, which side returned it (index and hybrid answers).
    pub(crate) sources: Option<Vec<HitSource>>,
}

impl From<SearchOutcome> for Answer {
    /// A live answer: nothing from an index.
    fn from(outcome: SearchOutcome) -> Self {
        Answer {
            outcome,
            indexed_through: None,
            sources: None,
        }
    }
}

/// What a mailbox offers a search.
#[derive(Clone, Copy)]
pub(crate) struct Target<'a> {
    pub(crate) backend: &'a Backend,
    pub(crate) index: Option<&'a IndexReader>,
    pub(crate) max_staleness: std::time::Duration,
    /// The embeddings endpoint, for the semantic half of an index search.
    pub(crate) semantic: Option<&'a Semantic>,
}

/// Searches one mailbox as `mode` says.
pub(crate) async fn search(target: Target<'_>, plan: &SearchPlan, mode: Mode) -> Answer {
    // The index keeps no categories, and a backend without them cannot filter on them: either
    // would answer as if no message had one. In band, so a fan-out keeps the others' evidence.
    if !plan.filters.categories.is_empty()
        && (mode != Mode::Live || !target.backend.keeps_categories())
    {
        return Answer::from(SearchOutcome::failed(
            super::warning::CATEGORIES_UNSUPPORTED,
        ));
    }
    match (mode, target.index) {
        (Mode::Live, _) => Answer::from(engine::run(target.backend, plan).await),
        (Mode::Index | Mode::Hybrid, None) => {
            // An explicit index search of an alias without one: say so in band, so a fan-out
            // keeps the other mailboxes' evidence.
            let mut outcome = SearchOutcome::failed(warning::INDEX_MISSING);
            outcome.strategy = Strategy::Index;
            Answer::from(outcome)
        }
        (Mode::Index, Some(reader)) => {
            index_only(reader, plan, target.max_staleness, target.semantic).await
        }
        (Mode::Hybrid, Some(reader)) => {
            let (live, indexed) = tokio::join!(
                engine::run(target.backend, plan),
                index_only(reader, plan, target.max_staleness, target.semantic)
            );
            merge(live, indexed, reader, plan)
        }
    }
}

/// The engine over the index, with the freshness rule applied.
async fn index_only(
    reader: &IndexReader,
    plan: &SearchPlan,
    max_staleness: std::time::Duration,
    semantic: Option<&Semantic>,
) -> Answer {
    let status = match reader.status() {
        Ok(status) => status,
        Err(e) => {
            let code = match e {
                IndexError::Missing => warning::INDEX_MISSING,
                _ => warning::INDEX_FAILED,
            };
            let mut outcome = SearchOutcome::failed(code);
            outcome.strategy = Strategy::Index;
            return Answer::from(outcome);
        }
    };
    let source = IndexSource {
        reader,
        status: &status,
    };
    let folder = source
        .folder_id(&FolderSelector::parse(plan.folder.as_deref()))
        .ok();
    let mut outcome = engine::run(&source, plan).await;
    outcome.strategy = Strategy::Index;
    let max_staleness = chrono::Duration::from_std(max_staleness).unwrap_or(chrono::Duration::MAX);
    let fresh = Freshness::of(&status, folder.as_deref(), max_staleness, Utc::now());
    if fresh.stale {
        outcome.warnings.push(warning::INDEX_STALE);
    }
    if fresh.partial {
        outcome.warnings.push(warning::INDEX_PARTIAL);
    }
    if outcome.status == SearchStatus::NotFound && (fresh.stale || fresh.partial) {
        outcome.status = SearchStatus::SearchIncomplete;
        outcome.confidence = Confidence::Low;
    }
    let n = outcome.messages.len();
    let mut sources = vec![HitSource::Index; n];
    if let (Some(semantic), Some(query), Some(folder)) = (semantic, plan.query.as_deref(), folder)
        && matches!(
            outcome.status,
            SearchStatus::Found | SearchStatus::NotFound | SearchStatus::SearchIncomplete
        )
    {
        match semantic_ranking(reader, semantic, plan, query, &folder).await {
            Err(code) => outcome.warnings.push(code),
            Ok(fused) => sources = fuse(&mut outcome, fused, plan),
        }
    }
    Answer {
        outcome,
        indexed_through: fresh.indexed_through,
        sources: Some(sources),
    }
}

/// Vector hits below this cosine similarity are not offered. Embedding models score unrelated
/// text well above zero (multilingual-e5 puts most unrelated pairs at 0.72–0.80 and related
/// ones at 0.82–0.90), so without a floor every query would list its nearest neighbours. It
/// is a noise filter, not a proof: an unrelated message can pass it, which is why semantic
/// hits never set the status.
const MIN_SIMILARITY: f32 = 0.80;
/// Candidates each ranking contributes to the fusion.
const FUSION_DEPTH: usize = 50;

/// The fused ranking of one search: the lexical ranking (BM25, the exact-token matches) and
/// the vector ranking (cosine over the folder's passages, above [`MIN_SIMILARITY`]), by
/// reciprocal rank fusion; each entry says whether the lexical side had it.
async fn semantic_ranking(
    reader: &IndexReader,
    semantic: &Semantic,
    plan: &SearchPlan,
    query: &str,
    folder: &str,
) -> Result<Vec<(MessageSummary, bool)>, &'static str> {
    // The endpoint first: an operator whose endpoint is down hears that, whatever the index
    // holds (a query vector is cached per process, so the common case costs nothing).
    let vector = semantic
        .embedder
        .embed_query(query)
        .await
        .map_err(|_| warning::SEMANTIC_UNAVAILABLE)?;
    let Some(store) = reader.vectors(&semantic.model) else {
        return Err(warning::SEMANTIC_NOT_INDEXED);
    };
    if store.len() == 0 {
        return Err(warning::SEMANTIC_NOT_INDEXED);
    }
    let depth = FUSION_DEPTH.max(3 * plan.max_results);
    let prefix = crate::index::doc_key(folder, "");
    let nearest = store.search_where(&vector, depth, |key| key.starts_with(&prefix));
    let index = reader.index();
    let lexical = index
        .search(&IndexQuery {
            folder_id: Some(folder.to_owned()),
            words: vec![query.to_owned()],
            filters: plan.filters.clone(),
            limit: depth,
            order: None,
        })
        .map_err(|_| warning::INDEX_FAILED)?;
    let mut by_key: HashMap<String, (MessageSummary, bool)> = HashMap::new();
    let mut lexical_keys = Vec::new();
    for (m, _) in lexical.hits {
        let key = crate::index::doc_key(folder, &m.id);
        lexical_keys.push(key.clone());
        by_key.insert(key, (m, true));
    }
    let close: Vec<String> = nearest
        .into_iter()
        .filter(|(_, score)| *score >= MIN_SIMILARITY)
        .map(|(key, _)| key)
        .collect();
    // The vector-only hits' summaries, from one view of the index.
    let missing: Vec<&str> = close
        .iter()
        .filter(|k| !by_key.contains_key(*k))
        .filter_map(|k| k.strip_prefix(&prefix))
        .collect();
    let found = index
        .summaries_in(folder, &missing)
        .map_err(|_| warning::INDEX_FAILED)?;
    let mut found: HashMap<&str, MessageSummary> = missing
        .iter()
        .copied()
        .zip(found)
        .filter_map(|(id, m)| Some((id, m?)))
        .collect();
    let mut vector_keys = Vec::new();
    for key in &close {
        if !by_key.contains_key(key) {
            let Some(id) = key.strip_prefix(&prefix) else {
                continue;
            };
            // A vector whose message left the index (a sync between the two commits).
            let Some(m) = found.remove(id) else {
                continue;
            };
            if !plan.filters.matches(&m) {
                continue;
            }
            by_key.insert(key.clone(), (m, false));
        }
        vector_keys.push(key.clone());
    }
    let fused = crate::embed::fusion::rrf(
        &[lexical_keys.as_slice(), vector_keys.as_slice()],
        crate::embed::fusion::RRF_K,
    );
    Ok(fused
        .into_iter()
        .filter_map(|(key, _)| by_key.remove(&key))
        .collect())
}

/// Replaces the lexical answer's messages with the fused ranking's best `maxResults` (shown
/// in the plan's order). Semantic hits add to an answer and never decide its status: with no
/// exact match the status stays (`NOT_FOUND` means no message holds every query word), the
/// close messages are listed with `source: "semantic"`, the confidence is low and the warning
/// `semantic_matches_only` says to read them.
fn fuse(
    outcome: &mut SearchOutcome,
    fused: Vec<(MessageSummary, bool)>,
    plan: &SearchPlan,
) -> Vec<HitSource> {
    let semantic_only = fused.iter().all(|(_, lexical)| !lexical);
    if fused.is_empty() {
        return vec![HitSource::Index; outcome.messages.len()];
    }
    if outcome.status != SearchStatus::Found {
        if !semantic_only {
            // Lexical hits the engine did not report cannot happen; keep its answer.
            return vec![HitSource::Index; outcome.messages.len()];
        }
        // The status stays what exact matching proved: no message holds every word. The
        // close messages come with it, and the absence is weak.
        outcome.confidence = Confidence::Low;
        outcome.warnings.push(warning::SEMANTIC_ONLY);
    }
    let cut = fused.len() > plan.max_results;
    let mut best: Vec<(MessageSummary, bool)> = fused.into_iter().take(plan.max_results).collect();
    let order = Order {
        by: plan.sort_by,
        direction: plan.sort_order,
    };
    best.sort_by(|a, b| order.compare(&a.0, &b.0));
    outcome.truncated |= cut;
    let (messages, sources): (Vec<_>, Vec<_>) = best
        .into_iter()
        .map(|(m, lexical)| {
            (
                m,
                if lexical {
                    HitSource::Index
                } else {
                    HitSource::Semantic
                },
            )
        })
        .unzip();
    outcome.messages = messages;
    sources
}

/// The better-proven of two statuses for the same question: any hit wins, then a proven
/// absence, then the worst failure (neither side proved anything).
fn merged_status(a: &SearchOutcome, b: &SearchOutcome) -> (SearchStatus, Confidence) {
    let found = [a, b]
        .into_iter()
        .filter(|o| o.status == SearchStatus::Found)
        .map(|o| o.confidence)
        .max();
    if let Some(confidence) = found {
        return (SearchStatus::Found, confidence);
    }
    let proven = [a, b]
        .into_iter()
        .filter(|o| o.status == SearchStatus::NotFound)
        .map(|o| o.confidence)
        .max();
    if let Some(confidence) = proven {
        return (SearchStatus::NotFound, confidence);
    }
    let worst = SearchStatus::worst([a.status, b.status]);
    (worst, Confidence::Low)
}

fn merge(live: SearchOutcome, indexed: Answer, reader: &IndexReader, plan: &SearchPlan) -> Answer {
    let index_outcome = indexed.outcome;
    let (status, confidence) = merged_status(&live, &index_outcome);
    // The Internet Message-ID of every hit, from the index (live listings do not carry it).
    let mid = |m: &MessageSummary| -> Option<String> {
        reader
            .index()
            .message_id(&m.folder_id, &m.id)
            .ok()
            .flatten()
    };
    let mut merged: Vec<(MessageSummary, HitSource)> = Vec::new();
    let mut by_key: HashMap<String, usize> = HashMap::new();
    let key_of = |m: &MessageSummary| mid(m).unwrap_or_else(|| format!("id:{}", m.id));
    let index_sources = indexed.sources.unwrap_or_default();
    for (i, m) in index_outcome.messages.iter().enumerate() {
        let key = key_of(m);
        if by_key.contains_key(&key) {
            continue;
        }
        by_key.insert(key, merged.len());
        let source = index_sources.get(i).copied().unwrap_or(HitSource::Index);
        merged.push((m.clone(), source));
    }
    for m in live.messages.iter() {
        let key = key_of(m);
        match by_key.get(&key) {
            // The live copy is the current state of the message: prefer it.
            Some(&i) => merged[i] = (m.clone(), HitSource::Both),
            None => {
                by_key.insert(key, merged.len());
                merged.push((m.clone(), HitSource::Live));
            }
        }
    }
    let order = Order {
        by: plan.sort_by,
        direction: plan.sort_order,
    };
    merged.sort_by(|a, b| order.compare(&a.0, &b.0));
    let cut = merged.len() > plan.max_results;
    merged.truncate(plan.max_results);
    let mut warnings = live.warnings.clone();
    for w in &index_outcome.warnings {
        if !warnings.contains(w) {
            warnings.push(w);
        }
    }
    let (messages, sources): (Vec<_>, Vec<_>) = merged.into_iter().unzip();
    Answer {
        outcome: SearchOutcome {
            status,
            strategy: Strategy::Hybrid,
            confidence,
            pages_scanned: live.pages_scanned + index_outcome.pages_scanned,
            candidates_scanned: live
                .candidates_scanned
                .max(index_outcome.candidates_scanned),
            truncated: live.truncated || index_outcome.truncated || cut,
            canary_matched: live.canary_matched,
            warnings,
            messages,
            scan: index_outcome.scan,
        },
        indexed_through: indexed.indexed_through,
        sources: Some(sources),
    }
}

/// The index as a search source for one search, with the status read when the search began
/// (a sync committing meanwhile cannot mix two states into one answer's freshness).
struct IndexSource<'a> {
    reader: &'a IndexReader,
    status: &'a IndexStatus,
}

impl IndexSource<'_> {
    fn folder_id(&self, folder: &FolderSelector) -> Result<String, BackendError> {
        self.status.folder_for(folder).ok_or(BackendError::NotFound)
    }
}

fn store_error(e: IndexError) -> BackendError {
    BackendError::Io(std::io::Error::other(e.to_string()))
}

impl SearchSource for IndexSource<'_> {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            search: SearchKind::ExhaustiveLocal,
            ids_survive_move: false,
        }
    }

    async fn scan(&self, req: &ScanRequest, query: Option<&str>) -> Result<Page, BackendError> {
        let folder = self.folder_id(&req.folder)?;
        let q = IndexQuery {
            folder_id: Some(folder),
            words: query.map(|q| vec![q.to_owned()]).unwrap_or_default(),
            filters: req.filters.clone(),
            limit: req.keep,
            order: if query.is_some() {
                None
            } else {
                Some(req.order)
            },
        };
        // A search of the index takes milliseconds: run inline rather than hop threads.
        let hits = self.reader.index().search(&q).map_err(store_error)?;
        let mut gaps = Gaps::default();
        for (gap, n) in &hits.gaps {
            for _ in 0..*n {
                gaps.add(*gap);
            }
        }
        Ok(Page {
            items: hits.hits.into_iter().map(|(m, _)| m).collect(),
            matched: hits.matched,
            pages_scanned: 1,
            truncated: false,
            timed_out: false,
            gaps,
            stop: None,
            examined: hits.in_scope,
            folder_total: Some(hits.in_scope),
            page_size: None,
        })
    }

    async fn texts(
        &self,
        wanted: &[&MessageSummary],
        _deadline: Instant,
    ) -> Vec<Result<MessageText, BackendError>> {
        // The index matched bodies itself: the engine never asks an exhaustive source for
        // texts. Answer honestly if it ever does.
        wanted
            .iter()
            .map(|_| Err(BackendError::Unsupported("index texts")))
            .collect()
    }

    async fn attachments(&self, id: &str) -> Result<Vec<AttachmentMeta>, BackendError> {
        match self.reader.index().summary(id).map_err(store_error)? {
            Some(m) => Ok(m.attachments),
            None => Err(BackendError::NotFound),
        }
    }
}
