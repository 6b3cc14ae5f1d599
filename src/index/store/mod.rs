//! The index stores: the closed set of places an alias's index can live, as `Backend` is for
//! mailboxes. A reader ([`ReadStore`]) answers everything the server asks of an index, the
//! status a sync left and the vectors included, through async calls that take whole batches
//! (a page of ids, a list of hits), so a store across the network pays one round trip per
//! answer rather than one per message. Nothing outside `index` names what a store is made of:
//! `reader` decides what an answer may claim from the status a store returns, and searches,
//! investigations, resources and `index status` call the store through it.
//!
//! [`local`] is the embedded default: tantivy for text, the int8 vector file, and the sync's
//! `status.json`, under `<state>/index/<alias>/`.

pub(crate) mod local;
pub(crate) mod postgres;

use super::status::IndexStatus;
use super::{CandidateQuery, IndexError, IndexHits, IndexQuery, TextIndex as _};
use crate::backends::model::MessageSummary;

/// What the nearest-vector search of a folder found.
#[derive(Debug, PartialEq)]
pub(crate) enum Nearest {
    /// The index holds no vectors of this model and size: it was synced without an embeddings
    /// endpoint, with another model, or the model now answers in another size.
    NotIndexed,
    /// The messages of the folder whose best passage is closest, best first: (backend id,
    /// cosine similarity).
    Found(Vec<(String, f32)>),
}

/// Which store an index lives in, for `index status` and the resources.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StoreKind {
    Local,
}

impl StoreKind {
    pub(crate) fn describe(self) -> &'static str {
        match self {
            StoreKind::Local => "local (tantivy and the vector file in the state folder)",
        }
    }
}

/// One alias's index, read side.
pub(crate) enum ReadStore {
    Local(local::LocalRead),
}

impl ReadStore {
    /// The status as the last sync committed it (a store reopens what a sync replaced first,
    /// so a running server sees a newer index without a restart).
    pub(crate) async fn status(&self) -> Result<IndexStatus, IndexError> {
        match self {
            ReadStore::Local(store) => store.status(),
        }
    }

    /// Whether the text index was built by another text analysis than this binary's: then
    /// nothing of it may be served, whatever the status says.
    pub(crate) fn outdated(&self) -> bool {
        match self {
            ReadStore::Local(store) => store.outdated(),
        }
    }

    /// Runs `query` against the latest committed state.
    pub(crate) async fn search(&self, query: &IndexQuery) -> Result<IndexHits, IndexError> {
        match self {
            ReadStore::Local(store) => store.text()?.search(query),
        }
    }

    /// The messages of a folder that may hold a clue, newest first (scores are 0).
    pub(crate) async fn candidates(&self, query: &CandidateQuery) -> Result<IndexHits, IndexError> {
        match self {
            ReadStore::Local(store) => store.text()?.candidates(query),
        }
    }

    /// One message's summary by backend id, in whichever folder, when indexed.
    pub(crate) async fn summary(&self, id: &str) -> Result<Option<MessageSummary>, IndexError> {
        match self {
            ReadStore::Local(store) => store.text()?.summary(id),
        }
    }

    /// The summaries of several messages of a folder, in order, from one view of the index
    /// (`None` for one not indexed).
    pub(crate) async fn summaries_in(
        &self,
        folder_id: &str,
        ids: &[&str],
    ) -> Result<Vec<Option<MessageSummary>>, IndexError> {
        match self {
            ReadStore::Local(store) => store.text()?.summaries_in(folder_id, ids),
        }
    }

    /// The Internet Message-IDs of several messages, each as (folder id, backend id), in
    /// order (`None` when not indexed or without one).
    pub(crate) async fn message_ids(
        &self,
        messages: &[(&str, &str)],
    ) -> Result<Vec<Option<String>>, IndexError> {
        match self {
            ReadStore::Local(store) => {
                let text = store.text()?;
                messages
                    .iter()
                    .map(|(folder, id)| text.message_id(folder, id))
                    .collect()
            }
        }
    }

    /// The `k` messages of `folder_id` whose best passage is closest to `query`, embedded by
    /// `model`.
    pub(crate) async fn nearest(
        &self,
        model: &str,
        query: &[f32],
        k: usize,
        folder_id: &str,
    ) -> Result<Nearest, IndexError> {
        match self {
            ReadStore::Local(store) => Ok(store.nearest(model, query, k, folder_id)),
        }
    }
}
