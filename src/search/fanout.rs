//! Fan-out of one search plan over several mailboxes with bounded concurrency.
//!
//! Invariant: one mailbox's failure is recorded in its own outcome and never erases another's;
//! results keep the request order; at most `concurrency` mailboxes are searched at once, so total
//! latency tracks the slowest mailbox rather than the sum.

use futures::StreamExt;

use super::indexed::{self, Answer, Mode, Target};
use super::{SearchOutcome, SearchPlan};
use crate::alias::Alias;
use crate::backends::Registry;
use crate::caller::GrantedAlias;
use crate::index::reader::Indexes;

/// Where each mailbox of a fan-out searches: the caller's choice, or by default the index and
/// the live backend together where the alias has an index and the live backend alone where not.
pub(crate) fn mode_for(requested: Option<Mode>, indexed: bool) -> Mode {
    match requested {
        Some(mode) => mode,
        None if indexed => Mode::Hybrid,
        None => Mode::Live,
    }
}

/// What a fan-out searches through: the backends, the local indexes and the embeddings
/// endpoint.
#[derive(Clone, Copy)]
pub(crate) struct Sources<'a> {
    pub(crate) registry: &'a Registry,
    pub(crate) indexes: &'a Indexes,
    pub(crate) semantic: Option<&'a crate::embed::Semantic>,
}

/// Searches every alias (granted to the call's caller, so already checked). With
/// `shared_slots`, each mailbox search also holds a permit of that semaphore.
pub(crate) async fn search_all(
    sources: Sources<'_>,
    requested: Option<Mode>,
    aliases: &[GrantedAlias],
    plan: &SearchPlan,
    concurrency: usize,
    shared_slots: Option<&tokio::sync::Semaphore>,
) -> Vec<(Alias, Answer)> {
    let Sources {
        registry,
        indexes,
        semantic,
    } = sources;
    let workers = concurrency.clamp(1, aliases.len().max(1));
    futures::stream::iter(aliases.iter().cloned())
        .map(|granted| async move {
            // A batch shares one bound across its labels; a closed semaphore cannot happen
            // because nothing closes it, so a failed acquire just runs unbounded.
            let _slot = match shared_slots {
                Some(s) => s.acquire().await.ok(),
                None => None,
            };
            let answer = match registry.get(&granted).map(|b| (b, b.ensure_built())) {
                Some((_, Err(err))) => Answer::from(SearchOutcome::failed(
                    super::error_warning(&err).unwrap_or(super::warning::MAILBOX_FAILED),
                )),
                Some((backend, Ok(()))) => {
                    let index = indexes.get(&granted).await;
                    let target = Target {
                        backend,
                        index,
                        max_staleness: indexes.max_staleness,
                        semantic,
                    };
                    // Categories are the backend's: a default search of them runs live.
                    let indexed = index.is_some() && plan.filters.categories.is_empty();
                    indexed::search(target, plan, mode_for(requested, indexed)).await
                }
                None => Answer::from(SearchOutcome::failed(super::warning::MAILBOX_FAILED)),
            };
            (granted.alias().clone(), answer)
        })
        .buffered(workers)
        .collect()
        .await
}
