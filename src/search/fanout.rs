//! Fan-out of one search plan over several mailboxes with bounded concurrency.
//!
//! Invariant: one mailbox's failure is recorded in its own outcome and never erases another's;
//! results keep the request order; at most `concurrency` mailboxes are searched at once, so total
//! latency tracks the slowest mailbox rather than the sum.

use futures::StreamExt;

use super::{SearchOutcome, SearchPlan, engine};
use crate::alias::Alias;
use crate::backends::Registry;

/// Searches every alias (already checked against the allowlist by the caller). With
/// `shared_slots`, each mailbox search also holds a permit of that semaphore.
pub(crate) async fn search_all(
    registry: &Registry,
    aliases: &[Alias],
    plan: &SearchPlan,
    concurrency: usize,
    shared_slots: Option<&tokio::sync::Semaphore>,
) -> Vec<(Alias, SearchOutcome)> {
    let workers = concurrency.clamp(1, aliases.len().max(1));
    futures::stream::iter(aliases.iter().cloned())
        .map(|alias| async move {
            // A batch shares one bound across its labels; a closed semaphore cannot happen
            // because nothing closes it, so a failed acquire just runs unbounded.
            let _slot = match shared_slots {
                Some(s) => s.acquire().await.ok(),
                None => None,
            };
            let outcome = match registry.get(&alias).map(|b| (b, b.ensure_built())) {
                Some((_, Err(err))) => SearchOutcome::failed(
                    super::error_warning(&err).unwrap_or(super::warning::MAILBOX_FAILED),
                ),
                Some((backend, Ok(()))) => engine::run(backend, plan).await,
                None => SearchOutcome::failed(super::warning::MAILBOX_FAILED),
            };
            (alias, outcome)
        })
        .buffered(workers)
        .collect()
        .await
}
