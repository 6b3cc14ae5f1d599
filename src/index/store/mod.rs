//! The index stores: the closed set of places an alias's index can live, as `Backend` is for
//! mailboxes. A reader ([`ReadStore`]) answers everything the server asks of an index, the
//! status a sync left and the vectors included, through async calls that take whole batches
//! (a page of ids, a list of hits), so a store across the network pays one round trip per
//! answer rather than one per message. Nothing outside `index` names what a store is made of:
//! `reader` decides what an answer may claim from the status a store returns, and searches,
//! investigations, resources and `index status` call the store through it.
//!
//! A writer ([`WriteStore`]) is the sync's side: the sync's position per folder, the messages it
//! puts and removes, and a commit that makes them durable and records what they hold as one
//! step (on the local store: the index, then its state, in the order that makes a sync killed
//! at any point resumable without duplicates).
//!
//! [`local`] is the embedded default: tantivy for text, the int8 vector file, the sync state
//! (redb) and `status.json`, under `<state>/index/<alias>/`.

pub(crate) mod local;
pub(crate) mod postgres;

use std::collections::{HashMap, HashSet};

use super::state::{FolderCursor, StateBatch};
use super::status::IndexStatus;
use super::{CandidateQuery, IndexError, IndexHits, IndexQuery, IndexedMessage, TextIndex as _};
use crate::backends::model::MessageSummary;
use crate::embed::vectors::SyncVectors;

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
    Postgres,
}

impl StoreKind {
    pub(crate) fn describe(self) -> &'static str {
        match self {
            StoreKind::Local => "local (tantivy and the vector file in the state folder)",
            StoreKind::Postgres => "postgres (the shared database MAILGATE_INDEX_URL names)",
        }
    }
}

/// One alias's index, read side.
pub(crate) enum ReadStore {
    Local(local::LocalRead),
    Postgres(postgres::read::PgRead),
}

impl ReadStore {
    /// The status as the last sync committed it (a store reopens what a sync replaced first,
    /// so a running server sees a newer index without a restart).
    pub(crate) async fn status(&self) -> Result<IndexStatus, IndexError> {
        match self {
            ReadStore::Local(store) => store.status(),
            ReadStore::Postgres(store) => store.status().await,
        }
    }

    /// Whether the store holds an index of the mailbox at all (a local reader exists only for
    /// an index on disk; the shared store is asked until it has answered one status).
    pub(crate) async fn present(&self) -> bool {
        match self {
            ReadStore::Local(_) => true,
            ReadStore::Postgres(store) => store.present().await,
        }
    }

    /// Whether the text index was built by another text analysis than this binary's: then
    /// nothing of it may be served, whatever the status says.
    pub(crate) fn outdated(&self) -> bool {
        match self {
            ReadStore::Local(store) => store.outdated(),
            ReadStore::Postgres(store) => store.outdated(),
        }
    }

    /// Runs `query` against the latest committed state.
    pub(crate) async fn search(&self, query: &IndexQuery) -> Result<IndexHits, IndexError> {
        match self {
            ReadStore::Local(store) => store.text()?.search(query),
            ReadStore::Postgres(store) => store.search(query).await,
        }
    }

    /// The messages of a folder that may hold a clue, newest first (scores are 0).
    pub(crate) async fn candidates(&self, query: &CandidateQuery) -> Result<IndexHits, IndexError> {
        match self {
            ReadStore::Local(store) => store.text()?.candidates(query),
            ReadStore::Postgres(store) => store.candidates(query).await,
        }
    }

    /// One message's summary by backend id, in whichever folder, when indexed.
    pub(crate) async fn summary(&self, id: &str) -> Result<Option<MessageSummary>, IndexError> {
        match self {
            ReadStore::Local(store) => store.text()?.summary(id),
            ReadStore::Postgres(store) => store.summary(id).await,
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
            ReadStore::Postgres(store) => store.summaries_in(folder_id, ids).await,
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
            ReadStore::Postgres(store) => store.message_ids(messages).await,
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
            ReadStore::Postgres(store) => store.nearest(model, query, k, folder_id).await,
        }
    }
}

/// Why opening an index for a sync started it over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rebuild {
    /// Built by another text analysis (`None`: before versions were recorded).
    Analyzer { was: Option<u32> },
    /// Its mailbox was never recorded (an index older than the binding, or a lost status).
    Unbound,
}

/// What opening an alias's index for a sync found.
pub(crate) enum Opened<W> {
    Ready(Box<W>),
    /// The index holds another mailbox than the alias names now: nothing is touched, and only
    /// `mailgate index rebuild` starts it over.
    MailboxChanged,
    /// `mailgate index pause` holds the alias: nothing is touched.
    Paused,
}

impl<W> Opened<W> {
    /// The same outcome, the store it opened made into another.
    fn map<T>(self, ready: impl FnOnce(Box<W>) -> T) -> Opened<T> {
        match self {
            Opened::Ready(store) => Opened::Ready(Box::new(ready(store))),
            Opened::MailboxChanged => Opened::MailboxChanged,
            Opened::Paused => Opened::Paused,
        }
    }
}

/// One alias's index, write side: the only writer (a sync).
pub(crate) enum WriteStore {
    Local(Box<local::LocalWrite>),
    Postgres(Box<postgres::write::PgWrite>),
}

impl WriteStore {
    /// Opens the local index of an alias folder for a sync ([`local::LocalWrite::open`]).
    pub(crate) fn open_local(
        alias_dir: cap_std::fs::Dir,
        mailbox: &str,
        semantic_model: Option<&str>,
    ) -> Result<Opened<Self>, IndexError> {
        Ok(local::LocalWrite::open(alias_dir, mailbox, semantic_model)?.map(WriteStore::Local))
    }

    /// Opens a mailbox's index in the shared database for a sync, under its lease
    /// ([`postgres::write::PgWrite::open`]).
    pub(crate) async fn open_postgres(
        settings: &postgres::PgSettings,
        mailbox: &str,
        semantic_model: Option<&str>,
    ) -> Result<Opened<Self>, IndexError> {
        Ok(
            postgres::write::PgWrite::open(settings, mailbox, semantic_model)
                .await?
                .map(WriteStore::Postgres),
        )
    }

    /// Why the index was started over when it was opened, if it was.
    pub(crate) fn rebuilt(&self) -> Option<Rebuild> {
        match self {
            WriteStore::Local(store) => store.rebuilt(),
            WriteStore::Postgres(store) => store.rebuilt(),
        }
    }

    /// Set when the operator pauses the mailbox during the sync, where the store learns of it
    /// itself (the shared store; the local one's pause is a file the caller reads).
    pub(crate) fn pause_flag(&self) -> Option<std::sync::Arc<std::sync::atomic::AtomicBool>> {
        match self {
            WriteStore::Local(_) => None,
            WriteStore::Postgres(store) => Some(store.pause_flag()),
        }
    }

    /// Ends the sync's hold on the index (the shared store's lease is given up at once rather
    /// than left to expire).
    pub(crate) async fn close(self) {
        match self {
            WriteStore::Local(_) => {}
            WriteStore::Postgres(store) => store.close().await,
        }
    }

    /// The status the last commit left (`None`: never synced).
    pub(crate) async fn status(&self) -> Result<Option<IndexStatus>, IndexError> {
        match self {
            WriteStore::Local(store) => store.status(),
            WriteStore::Postgres(store) => store.status().await,
        }
    }

    pub(crate) async fn write_status(&mut self, status: &IndexStatus) -> Result<(), IndexError> {
        match self {
            WriteStore::Local(store) => store.write_status(status),
            WriteStore::Postgres(store) => store.write_status(status).await,
        }
    }

    /// The folders the sync state knows.
    pub(crate) async fn folders(&self) -> Result<Vec<String>, IndexError> {
        match self {
            WriteStore::Local(store) => store.state().folders(),
            WriteStore::Postgres(store) => store.folders().await,
        }
    }

    /// A folder's messages as indexed: id and version.
    pub(crate) async fn versions(
        &self,
        folder: &str,
    ) -> Result<HashMap<String, String>, IndexError> {
        match self {
            WriteStore::Local(store) => store.state().versions(folder),
            WriteStore::Postgres(store) => store.versions(folder).await,
        }
    }

    /// A folder's messages listed but not fetched yet: id and listed version.
    pub(crate) async fn pending(
        &self,
        folder: &str,
    ) -> Result<HashMap<String, String>, IndexError> {
        match self {
            WriteStore::Local(store) => store.state().pending(folder),
            WriteStore::Postgres(store) => store.pending(folder).await,
        }
    }

    /// A folder's change-feed position.
    pub(crate) async fn cursor(&self, folder: &str) -> Result<FolderCursor, IndexError> {
        match self {
            WriteStore::Local(store) => store.state().cursor(folder),
            WriteStore::Postgres(store) => store.cursor(folder).await,
        }
    }

    /// What the folder's inventory round under way listed so far.
    pub(crate) async fn seen(&self, folder: &str) -> Result<HashSet<String>, IndexError> {
        match self {
            WriteStore::Local(store) => store.state().seen(folder),
            WriteStore::Postgres(store) => store.seen(folder).await,
        }
    }

    /// Adds or replaces one message (visible at the next commit).
    pub(crate) fn put(&mut self, message: &IndexedMessage) -> Result<(), IndexError> {
        match self {
            WriteStore::Local(store) => store.put(message),
            WriteStore::Postgres(store) => store.put(message),
        }
    }

    /// Removes a message of a folder, its text and vectors (at the next commit).
    pub(crate) fn remove(&mut self, folder: &str, id: &str) -> Result<(), IndexError> {
        match self {
            WriteStore::Local(store) => store.remove(folder, id),
            WriteStore::Postgres(store) => {
                store.remove(folder, id);
                Ok(())
            }
        }
    }

    /// Commits what was put and removed, then records `batch` (what the commit holds): one
    /// step. `between` runs after the messages are durable and before the record (the crash
    /// tests' worst moment); a store that commits both in one transaction runs it after.
    pub(crate) async fn commit(
        &mut self,
        batch: &StateBatch,
        between: impl Future<Output = ()>,
    ) -> Result<(), IndexError> {
        match self {
            WriteStore::Local(store) => {
                store.commit_index()?;
                between.await;
                store.record(batch)
            }
            WriteStore::Postgres(store) => {
                store.commit(batch).await?;
                between.await;
                Ok(())
            }
        }
    }

    /// Records `batch` alone (a folder's position reset: nothing to commit).
    pub(crate) async fn record(&mut self, batch: &StateBatch) -> Result<(), IndexError> {
        match self {
            WriteStore::Local(store) => store.record(batch),
            WriteStore::Postgres(store) => store.record(batch).await,
        }
    }

    /// Forgets a folder the mailbox no longer lists (its messages were removed and committed).
    pub(crate) async fn drop_folder(&mut self, folder: &str) -> Result<(), IndexError> {
        match self {
            WriteStore::Local(store) => store.state().drop_folder(folder),
            WriteStore::Postgres(store) => store.drop_folder(folder).await,
        }
    }

    /// The vectors, when this sync embeds.
    pub(crate) fn vectors(&self) -> Option<&dyn SyncVectors> {
        match self {
            WriteStore::Local(store) => store.vectors().map(|v| v as &dyn SyncVectors),
            WriteStore::Postgres(store) => store.vectors().map(|v| v as &dyn SyncVectors),
        }
    }

    pub(crate) fn vectors_mut(&mut self) -> Option<&mut dyn SyncVectors> {
        match self {
            WriteStore::Local(store) => store.vectors_mut().map(|v| v as &mut dyn SyncVectors),
            WriteStore::Postgres(store) => store.vectors_mut().map(|v| v as &mut dyn SyncVectors),
        }
    }

    /// Makes the vectors upserted so far durable (the fill pass commits them without text).
    pub(crate) async fn commit_vectors(&mut self) -> Result<(), IndexError> {
        match self {
            WriteStore::Local(store) => store.commit_vectors(),
            WriteStore::Postgres(store) => store.commit_vectors().await,
        }
    }
}
