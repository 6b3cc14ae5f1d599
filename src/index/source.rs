//! The server's side of the indexes: each alias's index opened read-only at startup when the
//! operator has synced it (the server never creates one), and how far an answer from it can be
//! trusted ([`Freshness`], from `status.json` as the last sync left it). `search::indexed`
//! searches it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use cap_std::fs::Dir;
use chrono::{DateTime, Duration, Utc};

use super::IndexError;
use super::status::{self, IndexStatus};
use super::tantivy_index::TantivyIndex;
use crate::alias::Alias;
use crate::embed::vectors::VectorStore;

/// One alias's index as the server reads it.
pub(crate) struct IndexReader {
    alias_dir: Dir,
    index: TantivyIndex,
    /// The vectors as last loaded, with the file's (length, mtime) they were loaded at: a
    /// sync's commit replaces the file, and the next search loads the new one.
    vectors: Mutex<Option<(VectorStamp, Arc<VectorStore>)>>,
}

type VectorStamp = (u64, Option<std::time::SystemTime>);

impl IndexReader {
    /// Opens the index of `alias` under `<state>/index`, `Ok(None)` when the operator never
    /// synced it (or purged it).
    pub(crate) fn open(state: &Dir, alias: &Alias) -> Result<Option<Self>, IndexError> {
        let root = match super::layout::open_root(state, false) {
            Ok(root) => root,
            Err(IndexError::Missing) => return Ok(None),
            Err(e) => return Err(e),
        };
        let alias_dir = match super::layout::open_alias(&root, alias, false) {
            Ok(dir) => dir,
            Err(IndexError::Missing) => return Ok(None),
            Err(e) => return Err(e),
        };
        let text = match super::layout::open_part(&alias_dir, super::layout::TEXT, false) {
            Ok(dir) => dir,
            Err(IndexError::Missing) => return Ok(None),
            Err(e) => return Err(e),
        };
        match TantivyIndex::open(super::capdir::CapDirectory::new(text), false) {
            Ok(index) => Ok(Some(Self {
                alias_dir,
                index,
                vectors: Mutex::new(None),
            })),
            Err(IndexError::Missing) => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub(crate) fn status(&self) -> Result<IndexStatus, IndexError> {
        status::read(&self.alias_dir)?.ok_or(IndexError::Missing)
    }

    pub(crate) fn index(&self) -> &TantivyIndex {
        &self.index
    }

    /// The committed vectors for `model` (reloaded when a sync committed new ones), `None`
    /// when the index has none (it was synced without an embeddings endpoint).
    pub(crate) fn vectors(&self, model: &str) -> Option<Arc<VectorStore>> {
        let dir = super::layout::open_part(&self.alias_dir, super::layout::VECTORS, false).ok()?;
        let stamp: VectorStamp = dir
            .metadata(crate::embed::vectors::FILE)
            .map(|m| (m.len(), m.modified().ok().map(|t| t.into_std())))
            .ok()?;
        let mut held = self.vectors.lock().ok()?;
        if let Some((at, store)) = held.as_ref()
            && *at == stamp
        {
            return Some(Arc::clone(store));
        }
        let store = Arc::new(VectorStore::open_readonly(dir, model).ok()?);
        *held = Some((stamp, Arc::clone(&store)));
        Some(store)
    }
}

/// How far an index answer can be trusted for absence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Freshness {
    /// When the scope was last wholly synced.
    pub(crate) indexed_through: Option<DateTime<Utc>>,
    /// Older than the staleness bound.
    pub(crate) stale: bool,
    /// A folder of the scope is mid-round, has pending messages, or was never synced.
    pub(crate) partial: bool,
}

impl Freshness {
    /// The freshness of `folder` (a folder id; `None`: every folder) in `status`, against
    /// `max_staleness` at `now`.
    pub(crate) fn of(
        status: &IndexStatus,
        folder: Option<&str>,
        max_staleness: Duration,
        now: DateTime<Utc>,
    ) -> Self {
        let (through, partial) = match folder {
            Some(id) => match status.folder(id) {
                Some(f) => (f.through, !f.complete || f.pending > 0),
                None => (None, true),
            },
            None => (
                status.indexed_through(),
                status
                    .folders
                    .values()
                    .any(|f| !f.complete || f.pending > 0),
            ),
        };
        Freshness {
            indexed_through: through,
            stale: through.is_none_or(|t| now - t > max_staleness),
            partial: partial || through.is_none(),
        }
    }
}

/// Every allowlisted alias's index that exists, opened at startup, and the staleness bound.
pub(crate) struct Indexes {
    readers: BTreeMap<Alias, IndexReader>,
    pub(crate) max_staleness: std::time::Duration,
}

impl Indexes {
    /// No index at all (no state folder, or nothing synced).
    pub(crate) fn none(max_staleness: std::time::Duration) -> Self {
        Self {
            readers: BTreeMap::new(),
            max_staleness,
        }
    }

    /// Opens the index of each of `aliases` that exists under the state folder. An index that
    /// cannot be opened is left out with a warning (the alias then searches live): it must not
    /// stop the server.
    pub(crate) fn open<'a>(
        state: &Dir,
        aliases: impl IntoIterator<Item = &'a Alias>,
        max_staleness: std::time::Duration,
    ) -> Self {
        let mut readers = BTreeMap::new();
        for alias in aliases {
            match IndexReader::open(state, alias) {
                Ok(Some(reader)) => {
                    readers.insert(alias.clone(), reader);
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(alias = alias.as_str(), error = %e, "a local index could not be opened; the mailbox searches live");
                }
            }
        }
        Self {
            readers,
            max_staleness,
        }
    }

    pub(crate) fn get(&self, alias: &Alias) -> Option<&IndexReader> {
        self.readers.get(alias)
    }
}
