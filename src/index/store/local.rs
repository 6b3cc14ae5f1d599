//! The local store, read side: an alias's index under `<state>/index/<alias>/` as the server
//! reads it (read-only, never created here): tantivy in `text/`, the vectors in `vectors/`, the
//! status the last sync left in `status.json`. The folders are looked up again at each answer,
//! so a sync that rebuilt the index in place (another text analysis) or an `index rebuild` (a
//! new alias folder) is served as soon as it has committed, without a restart.

use std::sync::{Arc, Mutex};

use cap_std::fs::Dir;

use super::Nearest;
use crate::alias::Alias;
use crate::embed::vectors::VectorStore;
use crate::index::status::{self, IndexStatus};
use crate::index::tantivy_index::TantivyIndex;
use crate::index::{IndexError, layout};

/// One alias's local index as the server reads it.
pub(crate) struct LocalRead {
    /// `<state>/index`.
    root: Dir,
    alias: Alias,
    held: Mutex<Held>,
    /// The vectors as last loaded, with the file's (length, mtime) they were loaded at: a
    /// sync's commit replaces the file, and the next search loads the new one.
    vectors: Mutex<Option<(VectorStamp, Arc<VectorStore>)>>,
}

type VectorStamp = (u64, Option<std::time::SystemTime>);

/// A folder's identity on disk: a folder removed and created again is another one.
type FolderId = (u64, u64);

fn folder_id(dir: &Dir) -> Option<FolderId> {
    use std::os::unix::fs::MetadataExt as _;
    crate::dir_fd::stat(dir).ok().map(|m| (m.dev(), m.ino()))
}

struct Held {
    alias_dir: Arc<Dir>,
    alias_id: Option<FolderId>,
    text: Text,
}

/// The full-text index of an alias folder, as last opened.
enum Text {
    Ready(Option<FolderId>, Arc<TantivyIndex>),
    /// Built by another text analysis (its schema names another analyzer).
    Outdated(Option<FolderId>),
    /// Not there (mid-rebuild, purged) or unreadable: reads fail with this.
    Unavailable(IndexError),
}

impl Text {
    fn open(dir: Dir) -> Self {
        let id = folder_id(&dir);
        match TantivyIndex::open(crate::index::capdir::CapDirectory::new(dir), false) {
            Ok(index) => Text::Ready(id, Arc::new(index)),
            // Kept, so its answers say `index_rebuild_needed` rather than the alias looking
            // never indexed.
            Err(IndexError::Outdated) => Text::Outdated(id),
            Err(e) => Text::Unavailable(e),
        }
    }

    fn folder(&self) -> Option<FolderId> {
        match self {
            Text::Ready(id, _) | Text::Outdated(id) => *id,
            Text::Unavailable(_) => None,
        }
    }
}

impl LocalRead {
    /// Opens the index of `alias` under `<state>/index`, `Ok(None)` when the operator never
    /// synced it (or purged it).
    pub(crate) fn open(state: &Dir, alias: &Alias) -> Result<Option<Self>, IndexError> {
        let root = match layout::open_root(state, false) {
            Ok(root) => root,
            Err(IndexError::Missing) => return Ok(None),
            Err(e) => return Err(e),
        };
        let alias_dir = match layout::open_alias(&root, alias, false) {
            Ok(dir) => dir,
            Err(IndexError::Missing) => return Ok(None),
            Err(e) => return Err(e),
        };
        let text = match layout::open_part(&alias_dir, layout::TEXT, false) {
            Ok(dir) => dir,
            Err(IndexError::Missing) => return Ok(None),
            Err(e) => return Err(e),
        };
        let text = match Text::open(text) {
            Text::Unavailable(IndexError::Missing) => return Ok(None),
            Text::Unavailable(e) => return Err(e),
            opened => opened,
        };
        Ok(Some(Self {
            root,
            alias: alias.clone(),
            held: Mutex::new(Held {
                alias_id: folder_id(&alias_dir),
                alias_dir: Arc::new(alias_dir),
                text,
            }),
            vectors: Mutex::new(None),
        }))
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        // A panic while holding it left a consistent value (every write is one assignment).
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The alias's folder as last looked up.
    fn alias_dir(&self) -> Arc<Dir> {
        Arc::clone(&self.held().alias_dir)
    }

    /// Looks the alias's folder and its `text` folder up again, and reopens what a sync
    /// replaced. A folder that cannot be opened now leaves the last one (a purged index then
    /// reads as missing, through the removed folder).
    fn refresh(&self) {
        let mut held = self.held();
        if let Ok(dir) = layout::open_alias(&self.root, &self.alias, false) {
            let id = folder_id(&dir);
            if id != held.alias_id {
                held.alias_id = id;
                held.alias_dir = Arc::new(dir);
                held.text = Text::Unavailable(IndexError::Missing);
            }
        }
        match layout::open_part(&held.alias_dir, layout::TEXT, false) {
            Ok(text) => {
                let id = folder_id(&text);
                if id.is_none() || held.text.folder() != id {
                    held.text = Text::open(text);
                }
            }
            Err(e) => held.text = Text::Unavailable(e),
        }
    }

    /// The status as the last sync left it; reopens first what a sync replaced.
    pub(crate) fn status(&self) -> Result<IndexStatus, IndexError> {
        self.refresh();
        status::read(&self.alias_dir())?.ok_or(IndexError::Missing)
    }

    pub(crate) fn outdated(&self) -> bool {
        matches!(self.held().text, Text::Outdated(_))
    }

    /// The text index to read. One built by another text analysis answers every read with
    /// [`IndexError::Outdated`].
    pub(crate) fn text(&self) -> Result<Arc<TantivyIndex>, IndexError> {
        match &self.held().text {
            Text::Ready(_, index) => Ok(Arc::clone(index)),
            Text::Outdated(_) => Err(IndexError::Outdated),
            Text::Unavailable(e) => Err(match e {
                IndexError::Missing => IndexError::Missing,
                IndexError::Busy => IndexError::Busy,
                IndexError::Outdated => IndexError::Outdated,
                other => IndexError::Store(other.to_string()),
            }),
        }
    }

    /// The nearest messages of a folder by their committed vectors of `model` (reloaded when a
    /// sync committed new ones).
    pub(crate) fn nearest(&self, model: &str, query: &[f32], k: usize, folder_id: &str) -> Nearest {
        let Some(store) = self.vectors(model) else {
            return Nearest::NotIndexed;
        };
        // Vectors of another size than the endpoint now answers came from another model behind
        // the same name: stale, never compared (the next sync embeds them again).
        if store.len() == 0 || store.dimension() != query.len() {
            return Nearest::NotIndexed;
        }
        let prefix = crate::index::doc_key(folder_id, "");
        let hits = store
            .search_where(query, k, |key| key.starts_with(&prefix))
            .into_iter()
            .filter_map(|(key, score)| Some((key.strip_prefix(&prefix)?.to_owned(), score)))
            .collect();
        Nearest::Found(hits)
    }

    fn vectors(&self, model: &str) -> Option<Arc<VectorStore>> {
        let dir = layout::open_part(&self.alias_dir(), layout::VECTORS, false).ok()?;
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
