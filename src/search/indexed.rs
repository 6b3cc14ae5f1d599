//! Searches through the local index: `source: "index"` runs the engine over the index as an
//! exhaustive source, `source: "hybrid"` runs it and the live backend at once and merges. What
//! the index adds to the engine's rules is freshness: an index answer carries `indexedThrough`,
//! and a `NOT_FOUND` from a stale or partial index is `SEARCH_INCOMPLETE` with `index_stale` /
//! `index_partial`, because the index can only vouch for what it held when it was last wholly
//! synced. A hybrid answer is `NOT_FOUND` only when one side proved it and neither found
//! anything. Merging never hides a message: a live hit and an index hit are one message only
//! with the same backend id, or the same Internet Message-ID *and* the same summary digest (a
//! Message-ID alone is the sender's choice), each recording whether the live backend, the
//! index or both returned it; and an index hit the live side proved gone (a whole-scope live
//! listing without it, or a live lookup answering not found) is not listed. Answers listing
//! only semantic matches have confidence `low` on every path.

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
use crate::index::reader::{IndexReader, Scope};
use crate::index::status::IndexStatus;
use crate::index::store::Nearest;
use crate::index::{IndexError, IndexQuery};

/// Warning codes of index answers.
pub(crate) mod warning {
    // `index_stale`, `index_partial`, `index_mailbox_changed`, `index_rebuild_needed`: the
    // doubts of `index::reader::Coverage`, which owns their codes.
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
    /// Messages the index matched are no longer in the folder (deleted or moved since the last
    /// sync, as the live side proved) and are not listed: the index is behind the mailbox.
    pub(crate) const INDEX_HITS_GONE: &str = "index_hits_gone";
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
            merge(live, indexed, reader, target.backend, plan).await
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
    let status = match reader.status().await {
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
    let max_staleness = chrono::Duration::from_std(max_staleness).unwrap_or(chrono::Duration::MAX);
    let coverage = reader.coverage(
        &status,
        Scope::Folder(folder.as_deref()),
        max_staleness,
        Utc::now(),
    );
    if !coverage.serves() {
        // Another mailbox's index, or another analysis's tokens: nothing of it is listed.
        let mut outcome = SearchOutcome::failed(warning::INDEX_FAILED);
        outcome.status = SearchStatus::SearchIncomplete;
        outcome.strategy = Strategy::Index;
        outcome.warnings = coverage.codes().collect();
        return Answer {
            outcome,
            indexed_through: None,
            sources: Some(Vec::new()),
        };
    }
    let mut outcome = engine::run(&source, plan).await;
    outcome.strategy = Strategy::Index;
    outcome.warnings.extend(coverage.codes());
    if outcome.status == SearchStatus::NotFound && !coverage.proves_absence() {
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
        indexed_through: coverage.indexed_through,
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
    let depth = FUSION_DEPTH.max(3 * plan.max_results);
    let store = reader.store();
    let nearest = match store.nearest(&semantic.model, &vector, depth, folder).await {
        Ok(Nearest::Found(hits)) => hits,
        Ok(Nearest::NotIndexed) => return Err(warning::SEMANTIC_NOT_INDEXED),
        Err(_) => return Err(warning::INDEX_FAILED),
    };
    let prefix = crate::index::doc_key(folder, "");
    let lexical = store
        .search(&IndexQuery {
            folder_id: Some(folder.to_owned()),
            words: vec![query.to_owned()],
            filters: plan.filters.clone(),
            limit: depth,
            order: None,
        })
        .await
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
        .map(|(id, _)| crate::index::doc_key(folder, &id))
        .collect();
    // The vector-only hits' summaries, from one view of the index.
    let missing: Vec<&str> = close
        .iter()
        .filter(|k| !by_key.contains_key(*k))
        .filter_map(|k| k.strip_prefix(&prefix))
        .collect();
    let found = store
        .summaries_in(folder, &missing)
        .await
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

/// What a summary shows of a message's content, as a digest: subject, sender, sent date,
/// preview and attachments (their list only where the summary holds it whole). Flags, folder,
/// id and delivery time are left out: they change, or differ, for one message seen twice. Two
/// messages with equal digests look the same in an answer up to their preview; hybrid merging
/// folds them into one only when they also share a Message-ID (see [`pair`]).
pub(crate) fn summary_digest(m: &MessageSummary) -> [u8; 32] {
    use sha2::{Digest as _, Sha256};
    let mut h = Sha256::new();
    // Every field length-prefixed (and absent distinct from empty), so no two summaries
    // whose fields differ feed the same bytes.
    let mut field = |value: Option<&[u8]>| match value {
        None => h.update([0u8]),
        Some(bytes) => {
            h.update([1u8]);
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        }
    };
    field(m.subject.as_deref().map(str::as_bytes));
    let from = m.from.as_ref();
    field(from.and_then(|f| f.name.as_deref()).map(str::as_bytes));
    field(from.and_then(|f| f.address.as_deref()).map(str::as_bytes));
    let sent = m.sent.map(|t| t.timestamp_micros().to_le_bytes());
    field(sent.as_ref().map(<[u8; 8]>::as_slice));
    field(Some(&[u8::from(m.has_attachments)]));
    field(Some(m.preview.as_bytes()));
    if m.attachments_listed {
        field(Some(&(m.attachments.len() as u64).to_le_bytes()));
        for a in &m.attachments {
            field(a.name.as_deref().map(str::as_bytes));
            field(Some(a.content_type.as_bytes()));
            field(Some(&a.size.to_le_bytes()));
        }
    } else {
        field(None);
    }
    h.finalize().into()
}

/// One entry of a hybrid answer: the summary shown and which sides returned the message.
#[derive(Clone, Debug)]
struct Merged {
    summary: MessageSummary,
    /// How the index returned it (`Index` or `Semantic`), when it did.
    index: Option<HitSource>,
    live: bool,
}

impl Merged {
    fn source(&self) -> HitSource {
        match (self.index, self.live) {
            (Some(_), true) => HitSource::Both,
            (Some(source), false) => source,
            (None, _) => HitSource::Live,
        }
    }
}

/// Folds the index's and the live side's hits into one list (unsorted). A live hit is the
/// same message as an index hit only when it has the same backend id in the same folder, or
/// else the same Internet Message-ID *and* the same [`summary_digest`]; each index hit stands
/// for at most one live hit. A Message-ID alone is chosen by the sender, so two messages that
/// share one (a look-alike sent under a real invoice's id) are both listed. The live copy of a
/// pair is shown: it is the message's current state.
fn pair(
    index: Vec<(MessageSummary, HitSource)>,
    live: Vec<MessageSummary>,
    message_id: impl Fn(&MessageSummary) -> Option<String>,
) -> Vec<Merged> {
    let mut merged: Vec<Merged> = index
        .into_iter()
        .map(|(summary, source)| Merged {
            summary,
            index: Some(source),
            live: false,
        })
        .collect();
    let mut by_id: HashMap<String, usize> = HashMap::new();
    for (i, m) in merged.iter().enumerate() {
        by_id
            .entry(crate::index::doc_key(&m.summary.folder_id, &m.summary.id))
            .or_insert(i);
    }
    // First every pair by backend id, so that a live look-alike cannot take, by Message-ID,
    // the index hit of the message whose own id comes later in the live list.
    let mut unpaired = Vec::new();
    for m in live {
        let key = crate::index::doc_key(&m.folder_id, &m.id);
        match by_id.get(&key).copied() {
            Some(i) if !merged[i].live => {
                merged[i].summary = m;
                merged[i].live = true;
            }
            _ => unpaired.push(m),
        }
    }
    // Then by Message-ID and digest, among the index hits no live hit took.
    let index_keys: Vec<Option<(String, [u8; 32])>> = if unpaired.is_empty() {
        Vec::new()
    } else {
        merged
            .iter()
            .map(|m| {
                let s = &m.summary;
                (!m.live)
                    .then(|| message_id(s).map(|mid| (mid, summary_digest(s))))
                    .flatten()
            })
            .collect()
    };
    // No index hit left to pair with (none, or a withheld index): no live hit's Message-ID
    // needs looking up.
    let pairable = index_keys.iter().any(Option::is_some);
    for m in unpaired {
        let twin = pairable.then(|| message_id(&m)).flatten().and_then(|mid| {
            let key = (mid, summary_digest(&m));
            (0..index_keys.len()).find(|&i| !merged[i].live && index_keys[i].as_ref() == Some(&key))
        });
        match twin {
            Some(i) => {
                merged[i].summary = m;
                merged[i].live = true;
            }
            None => merged.push(Merged {
                summary: m,
                index: None,
                live: true,
            }),
        }
    }
    merged
}

/// The live side listed every message of the folder that the plan selects, as the message is
/// now: a complete listing (no query words: the index and the live side then select by the
/// same summary fields), the whole folder read, nothing cut, no warning. An index hit it did
/// not list is gone from the folder or no longer matches. With query words the index matches
/// fields the live scan does not read (recipients, attachment text) and meaning (semantic
/// hits), so there only a lookup proves a message gone.
fn live_lists_the_whole_scope(live: &SearchOutcome, plan: &SearchPlan) -> bool {
    plan.query.is_none()
        && matches!(live.status, SearchStatus::Found | SearchStatus::NotFound)
        && !live.truncated
        && live.warnings.is_empty()
        && live.scan.whole_folder().is_some()
}

/// Drops from `merged` (sorted) the index hits the live side proved gone: every one it did not
/// list when it listed the whole scope, else those among the first `maxResults` a live lookup
/// answers `NotFound` for (looked up in rounds, as dropping one brings the next into view). A
/// lookup that fails otherwise, or that the deadline cuts, proves nothing and keeps the hit.
/// Returns whether any was dropped.
async fn drop_gone<S: SearchSource>(
    merged: &mut Vec<Merged>,
    live: &SearchOutcome,
    source: &S,
    plan: &SearchPlan,
) -> bool {
    let before = merged.len();
    if live_lists_the_whole_scope(live, plan) {
        merged.retain(|m| m.live);
        return merged.len() != before;
    }
    // A live side that failed outright would fail the lookups too, after the deadline.
    if live.status == SearchStatus::SearchFailed {
        return false;
    }
    let mut checked: std::collections::HashSet<String> = std::collections::HashSet::new();
    loop {
        let wanted: Vec<&MessageSummary> = merged
            .iter()
            .take(plan.max_results)
            .filter(|m| !m.live && !checked.contains(&m.summary.id))
            .map(|m| &m.summary)
            .collect();
        if wanted.is_empty() {
            break;
        }
        let answers = source.texts(&wanted, plan.deadline).await;
        let gone: std::collections::HashSet<String> = wanted
            .iter()
            .zip(&answers)
            .filter(|(_, r)| matches!(r, Err(BackendError::NotFound)))
            .map(|(m, _)| m.id.clone())
            .collect();
        checked.extend(wanted.iter().map(|m| m.id.clone()));
        if gone.is_empty() {
            break;
        }
        merged.retain(|m| m.live || !gone.contains(&m.summary.id));
    }
    merged.len() != before
}

async fn merge<S: SearchSource>(
    live: SearchOutcome,
    indexed: Answer,
    reader: &IndexReader,
    backend: &S,
    plan: &SearchPlan,
) -> Answer {
    // The Internet Message-IDs of the index hits, from the index (live listings do not carry
    // them), in one batch; only needed when a live hit is not an index hit by backend id.
    let key = |m: &MessageSummary| crate::index::doc_key(&m.folder_id, &m.id);
    let index_keys: std::collections::HashSet<String> =
        indexed.outcome.messages.iter().map(key).collect();
    let mut message_ids: HashMap<String, String> = HashMap::new();
    if live.messages.iter().any(|m| !index_keys.contains(&key(m))) {
        let wanted: Vec<(&str, &str)> = indexed
            .outcome
            .messages
            .iter()
            .map(|m| (m.folder_id.as_str(), m.id.as_str()))
            .collect();
        // A failed lookup pairs by backend id alone, as a hit without a Message-ID does.
        if let Ok(found) = reader.store().message_ids(&wanted).await {
            for (m, id) in indexed.outcome.messages.iter().zip(found) {
                if let Some(id) = id {
                    message_ids.insert(key(m), id);
                }
            }
        }
    }
    let message_id = |m: &MessageSummary| message_ids.get(&key(m)).cloned();
    merge_with(live, indexed, message_id, backend, plan).await
}

/// [`merge`] with the Message-ID lookup given (unit tests script it).
async fn merge_with<S: SearchSource>(
    live: SearchOutcome,
    indexed: Answer,
    message_id: impl Fn(&MessageSummary) -> Option<String>,
    backend: &S,
    plan: &SearchPlan,
) -> Answer {
    let mut index_outcome = indexed.outcome;
    let index_sources = indexed.sources.unwrap_or_default();
    let index_hits: Vec<(MessageSummary, HitSource)> = std::mem::take(&mut index_outcome.messages)
        .into_iter()
        .enumerate()
        .map(|(i, m)| (m, index_sources.get(i).copied().unwrap_or(HitSource::Index)))
        .collect();
    let mut merged = pair(index_hits, live.messages.clone(), message_id);
    let order = Order {
        by: plan.sort_by,
        direction: plan.sort_order,
    };
    merged.sort_by(|a, b| order.compare(&a.summary, &b.summary));
    let dropped = drop_gone(&mut merged, &live, backend, plan).await;
    // An index `FOUND` stands on its exact-token hits: when the live side proved every one of
    // them gone, the index is behind the mailbox and proves nothing either way.
    if index_outcome.status == SearchStatus::Found
        && !merged.iter().any(|m| m.index == Some(HitSource::Index))
    {
        index_outcome.status = SearchStatus::SearchIncomplete;
        index_outcome.confidence = Confidence::Low;
    }
    let (status, mut confidence) = merged_status(&live, &index_outcome);
    let cut = merged.len() > plan.max_results;
    merged.truncate(plan.max_results);
    let semantic_listed = merged.iter().any(|m| m.source() == HitSource::Semantic);
    let mut warnings = live.warnings.clone();
    for w in &index_outcome.warnings {
        // Only an answer that lists a semantic match may say it lists them.
        if !warnings.contains(w) && (*w != warning::SEMANTIC_ONLY || semantic_listed) {
            warnings.push(w);
        }
    }
    if dropped {
        warnings.push(warning::INDEX_HITS_GONE);
    }
    if status != SearchStatus::Found && semantic_listed {
        // No message holds every query word; what is listed is close in meaning only, on
        // every path (the index alone says the same).
        confidence = Confidence::Low;
        if !warnings.contains(&warning::SEMANTIC_ONLY) {
            warnings.push(warning::SEMANTIC_ONLY);
        }
    }
    let (messages, sources): (Vec<_>, Vec<_>) = merged
        .into_iter()
        .map(|m| {
            let source = m.source();
            (m.summary, source)
        })
        .unzip();
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
        let hits = self.reader.store().search(&q).await.map_err(store_error)?;
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

    fn unanswerable(&self, query: &str) -> Option<&'static str> {
        crate::index::analyzer::unrepresentable(query)
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
        match self.reader.store().summary(id).await.map_err(store_error)? {
            Some(m) => Ok(m.attachments),
            None => Err(BackendError::NotFound),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::backends::model::{Capabilities, SortBy, SortOrder};
    use crate::search::ScanReport;
    use crate::search::engine::tests::candidate;

    fn plan(query: Option<&str>, max_results: usize) -> SearchPlan {
        SearchPlan {
            query: query.map(str::to_owned),
            folder: None,
            filters: crate::backends::model::Filters::default(),
            max_results,
            scan_limit: 3 * max_results,
            max_pages: 10,
            sort_by: SortBy::ReceivedDateTime,
            sort_order: SortOrder::Desc,
            deadline: Instant::now() + crate::search::SEARCH_DEADLINE,
            attachment_names: false,
        }
    }

    /// A message `id` received at minute `minute` (newest first in answers).
    fn message(id: &str, subject: &str, minute: u32) -> MessageSummary {
        let mut m = candidate(id, subject);
        m.received = chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 11, 2, 10, minute, 0).single();
        m.preview = format!("{subject} body");
        m
    }

    fn outcome(
        status: SearchStatus,
        confidence: Confidence,
        messages: Vec<MessageSummary>,
    ) -> SearchOutcome {
        SearchOutcome {
            status,
            strategy: Strategy::LocalScan,
            confidence,
            pages_scanned: 1,
            candidates_scanned: 5,
            truncated: false,
            canary_matched: false,
            warnings: Vec::new(),
            messages,
            scan: ScanReport::default(),
        }
    }

    fn indexed(outcome: SearchOutcome, sources: Vec<HitSource>) -> Answer {
        Answer {
            outcome,
            indexed_through: None,
            sources: Some(sources),
        }
    }

    /// The index's `FOUND` (confidence high) listing `messages`, every one an index hit.
    fn index_found(messages: Vec<MessageSummary>) -> Answer {
        let sources = vec![HitSource::Index; messages.len()];
        indexed(
            outcome(SearchStatus::Found, Confidence::High, messages),
            sources,
        )
    }

    /// Message-IDs as the index would hold them: `mid-<n>` for ids `<n>` or `<n>b` (a
    /// look-alike sent under the same id).
    fn mid(m: &MessageSummary) -> Option<String> {
        Some(format!("mid-{}", m.id.trim_end_matches('b')))
    }

    /// The live side's lookups: `NotFound` for the ids in `gone`, the text otherwise; every
    /// id asked is recorded. `None`: a lookup must not happen.
    struct Live {
        gone: Option<Vec<&'static str>>,
        asked: Mutex<Vec<String>>,
    }

    impl Live {
        fn new(gone: &[&'static str]) -> Self {
            Live {
                gone: Some(gone.to_vec()),
                asked: Mutex::new(Vec::new()),
            }
        }

        fn never() -> Self {
            Live {
                gone: None,
                asked: Mutex::new(Vec::new()),
            }
        }

        fn asked(&self) -> Vec<String> {
            self.asked.lock().expect("lock").clone()
        }
    }

    impl SearchSource for Live {
        fn capabilities(&self) -> Capabilities {
            Capabilities {
                search: SearchKind::ExhaustiveLocal,
                ids_survive_move: false,
            }
        }

        async fn scan(&self, _: &ScanRequest, _: Option<&str>) -> Result<Page, BackendError> {
            unreachable!("merging never scans")
        }

        async fn texts(
            &self,
            wanted: &[&MessageSummary],
            _deadline: Instant,
        ) -> Vec<Result<MessageText, BackendError>> {
            let gone = self.gone.as_ref().expect("no lookup expected here");
            wanted
                .iter()
                .map(|m| {
                    self.asked.lock().expect("lock").push(m.id.clone());
                    if gone.contains(&m.id.as_str()) {
                        Err(BackendError::NotFound)
                    } else {
                        Ok(MessageText {
                            body: String::new(),
                            attachments: Vec::new(),
                            gap: None,
                        })
                    }
                })
                .collect()
        }

        async fn attachments(&self, _: &str) -> Result<Vec<AttachmentMeta>, BackendError> {
            unreachable!("merging never lists attachments")
        }
    }

    fn shown(answer: &Answer) -> Vec<(&str, HitSource)> {
        let sources = answer.sources.as_ref().expect("sources");
        answer
            .outcome
            .messages
            .iter()
            .zip(sources)
            .map(|(m, s)| (m.id.as_str(), *s))
            .collect()
    }

    #[test]
    fn one_backend_id_is_one_message_and_the_live_copy_is_shown() {
        let mut fresh = message("1", "Invoice", 1);
        fresh.is_read = true;
        let merged = pair(
            vec![(message("1", "Invoice", 1), HitSource::Index)],
            vec![fresh],
            mid,
        );
        assert_eq!(merged.len(), 1);
        assert_eq!(merged[0].source(), HitSource::Both);
        assert!(merged[0].summary.is_read, "the live copy");
    }

    /// Issue 27: a look-alike sent under a real invoice's Message-ID never hides it, in either
    /// order, and whether the index returned one, both or neither of them.
    #[test]
    fn a_shared_message_id_alone_never_folds_two_messages() {
        let real = message("1", "Invoice 4711", 1);
        let fake = message("1b", "Invoice 4711 (new bank details)", 2);
        for (index, live) in [
            (vec![&real, &fake], vec![&real, &fake]),
            (vec![&real, &fake], vec![&fake, &real]),
            (vec![&real], vec![&fake, &real]),
            (vec![&fake], vec![&fake, &real]),
            (vec![&real], vec![&fake]),
            (vec![], vec![&fake, &real]),
        ] {
            let merged = pair(
                index
                    .iter()
                    .map(|m| ((*m).clone(), HitSource::Index))
                    .collect(),
                live.iter().map(|m| (*m).clone()).collect(),
                mid,
            );
            let mut ids: Vec<&str> = merged.iter().map(|m| m.summary.id.as_str()).collect();
            ids.sort_unstable();
            assert_eq!(ids, ["1", "1b"], "{index:?} {live:?}");
        }
    }

    #[test]
    fn a_shared_message_id_and_digest_is_one_message_seen_twice() {
        // The same message under a new backend id (moved out and back): one entry, marked both.
        let old = message("1", "Invoice 4711", 1);
        let mut moved = old.clone();
        moved.id = "1b".into();
        let merged = pair(vec![(old.clone(), HitSource::Index)], vec![moved], mid);
        assert_eq!(merged.len(), 1);
        assert_eq!(merged[0].source(), HitSource::Both);
        assert_eq!(merged[0].summary.id, "1b", "the live copy");
        // Each index hit stands for one live hit: two live twins are two entries.
        let mut twin = old.clone();
        twin.id = "1bb".into();
        let mut other = old.clone();
        other.id = "1bbb".into();
        let merged = pair(
            vec![(old.clone(), HitSource::Index)],
            vec![twin, other],
            mid,
        );
        assert_eq!(merged.len(), 2);
        // Any difference a summary shows keeps them apart.
        let variants: [fn(&mut MessageSummary); 7] = [
            |m| m.subject = Some("Invoice 4712".into()),
            |m| m.preview.push('!'),
            |m| {
                m.from = Some(crate::mime::Mailbox {
                    name: None,
                    address: Some("billing@example.net".into()),
                });
            },
            |m| m.sent = m.received,
            |m| m.has_attachments = true,
            |m| {
                m.attachments.push(AttachmentMeta {
                    id: "a1".into(),
                    name: Some("invoice.pdf".into()),
                    content_type: "application/pdf".into(),
                    size: 10,
                    size_is_estimate: false,
                    is_inline: false,
                });
            },
            |m| m.attachments_listed = false,
        ];
        for change in variants {
            let mut look_alike = old.clone();
            look_alike.id = "1b".into();
            change(&mut look_alike);
            assert_ne!(summary_digest(&old), summary_digest(&look_alike));
            let merged = pair(vec![(old.clone(), HitSource::Index)], vec![look_alike], mid);
            assert_eq!(merged.len(), 2);
        }
        // Flags and delivery time are not content.
        let mut reflagged = old.clone();
        reflagged.is_read = true;
        reflagged.is_flagged = true;
        reflagged.received = None;
        assert_eq!(summary_digest(&old), summary_digest(&reflagged));
    }

    /// Issue 27: an index hit that a live lookup answers `NotFound` for is not listed; an index
    /// `FOUND` that stood only on such hits proves nothing, and the live absence decides.
    #[tokio::test]
    async fn an_index_hit_the_live_lookup_proves_gone_is_not_listed() {
        let live = Live::new(&["2"]);
        let answer = merge_with(
            outcome(SearchStatus::NotFound, Confidence::Medium, vec![]),
            index_found(vec![message("2", "Report", 2)]),
            mid,
            &live,
            &plan(Some("report"), 5),
        )
        .await;
        assert_eq!(shown(&answer), []);
        assert_eq!(answer.outcome.status, SearchStatus::NotFound);
        assert_eq!(answer.outcome.confidence, Confidence::Medium);
        assert!(answer.outcome.warnings.contains(&warning::INDEX_HITS_GONE));
        assert_eq!(live.asked(), ["2"]);

        // Hits the lookup finds stay, and so does the index's FOUND; gone ones go, and the
        // next ones come into view and are looked up in turn.
        let live = Live::new(&["5", "4"]);
        let answer = merge_with(
            outcome(
                SearchStatus::Found,
                Confidence::High,
                vec![message("1", "Report", 1)],
            ),
            index_found(vec![
                message("5", "Report", 5),
                message("4", "Report", 4),
                message("3", "Report", 3),
                message("1", "Report", 1),
            ]),
            mid,
            &live,
            &plan(Some("report"), 2),
        )
        .await;
        assert_eq!(
            shown(&answer),
            [("3", HitSource::Index), ("1", HitSource::Both)]
        );
        assert_eq!(answer.outcome.status, SearchStatus::Found);
        assert_eq!(live.asked(), ["5", "4", "3"], "only what would be shown");
    }

    /// Issue 27: a live listing of the whole scope (no query words, every message read, nothing
    /// cut) proves an index hit it does not hold gone without a lookup.
    #[tokio::test]
    async fn a_whole_scope_live_listing_drops_index_hits_it_does_not_hold() {
        let mut listing = outcome(
            SearchStatus::Found,
            Confidence::High,
            vec![message("1", "Lunch", 1)],
        );
        listing.scan = ScanReport {
            examined: 1,
            folder_total: Some(1),
            ..ScanReport::default()
        };
        let answer = merge_with(
            listing.clone(),
            index_found(vec![message("2", "Report", 2), message("1", "Lunch", 1)]),
            mid,
            &Live::never(),
            &plan(None, 5),
        )
        .await;
        assert_eq!(shown(&answer), [("1", HitSource::Both)]);
        assert!(answer.outcome.warnings.contains(&warning::INDEX_HITS_GONE));
        // With query words the live listing proves nothing about fields it does not read: the
        // hit is looked up and, found, kept.
        let live = Live::new(&[]);
        let answer = merge_with(
            listing,
            index_found(vec![message("2", "Report", 2), message("1", "Lunch", 1)]),
            mid,
            &live,
            &plan(Some("lunch"), 5),
        )
        .await;
        assert_eq!(
            shown(&answer),
            [("2", HitSource::Index), ("1", HitSource::Both)]
        );
        assert_eq!(live.asked(), ["2"]);
    }

    #[tokio::test]
    async fn a_failed_live_side_looks_nothing_up_and_keeps_the_index_hits() {
        let answer = merge_with(
            SearchOutcome::failed(crate::search::warning::UNAVAILABLE),
            index_found(vec![message("2", "Report", 2)]),
            mid,
            &Live::never(),
            &plan(Some("report"), 5),
        )
        .await;
        assert_eq!(shown(&answer), [("2", HitSource::Index)]);
        assert_eq!(answer.outcome.status, SearchStatus::Found);
    }

    /// Issue 27: semantic-only answers are confidence `low` on the hybrid path as on the index
    /// one, whatever the live side's absence is worth; when no semantic match is left to list,
    /// the answer no longer says it lists them.
    #[tokio::test]
    async fn a_semantic_only_hybrid_answer_is_low_confidence() {
        let mut semantic = outcome(
            SearchStatus::NotFound,
            Confidence::Low,
            vec![message("7", "Lease payment", 7)],
        );
        semantic.warnings.push(warning::SEMANTIC_ONLY);
        let live = outcome(SearchStatus::NotFound, Confidence::Medium, vec![]);
        let answer = merge_with(
            live.clone(),
            indexed(semantic.clone(), vec![HitSource::Semantic]),
            mid,
            &Live::new(&[]),
            &plan(Some("rent invoice"), 5),
        )
        .await;
        assert_eq!(shown(&answer), [("7", HitSource::Semantic)]);
        assert_eq!(answer.outcome.status, SearchStatus::NotFound);
        assert_eq!(answer.outcome.confidence, Confidence::Low);
        assert!(answer.outcome.warnings.contains(&warning::SEMANTIC_ONLY));

        // The semantic match was deleted since the sync: nothing close is listed, and the live
        // absence keeps its own confidence.
        let answer = merge_with(
            live,
            indexed(semantic, vec![HitSource::Semantic]),
            mid,
            &Live::new(&["7"]),
            &plan(Some("rent invoice"), 5),
        )
        .await;
        assert_eq!(shown(&answer), []);
        assert_eq!(answer.outcome.confidence, Confidence::Medium);
        assert!(!answer.outcome.warnings.contains(&warning::SEMANTIC_ONLY));
    }
}
