//! The local store: an alias's index under `<state>/index/<alias>/`: tantivy in `text/`, the
//! vectors in `vectors/`, the sync's position in `state.redb`, and the status the last sync left
//! in `status.json`. [`LocalRead`] is the server's side (read-only, never created here; the
//! folders are looked up again at each answer, so a sync that rebuilt the index in place or an
//! `index rebuild` is served as soon as it has committed, without a restart); [`LocalWrite`]
//! is the sync's, the only writer (an exclusive lock on the state).

use std::sync::{Arc, Mutex};

use cap_std::fs::Dir;

use super::{Nearest, Opened, Rebuild};
use crate::alias::Alias;
use crate::embed::vectors::VectorStore;
use crate::index::state::{StateBatch, SyncState};
use crate::index::status::{self, IndexStatus};
use crate::index::tantivy_index::{TantivyIndex, TantivyWriter};
use crate::index::{IndexError, IndexedMessage, TextIndexWriter as _, layout};

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

/// One alias's local index opened for writing: the sync process's side.
pub(crate) struct LocalWrite {
    alias_dir: Dir,
    writer: TantivyWriter,
    state: SyncState,
    /// Why the index was started over when it was opened, if it was.
    rebuilt: Option<Rebuild>,
    /// The vectors, when an embeddings endpoint is configured for this sync.
    vectors: Option<VectorStore>,
}

impl LocalWrite {
    /// Opens (creating) the index and sync state of an alias folder for the mailbox whose
    /// identity is `mailbox`; another sync holding them is [`IndexError::Busy`]. An index of
    /// another mailbox is left alone ([`Opened::MailboxChanged`]); one built by another text
    /// analysis, or whose mailbox was never recorded, is started over in place ([`Rebuild`]):
    /// under the sync state's lock, its text, vectors and state are removed before anything
    /// says it is this analysis's, so a sync killed meanwhile rebuilds it again.
    pub(crate) fn open(
        alias_dir: Dir,
        mailbox: &str,
        semantic_model: Option<&str>,
    ) -> Result<Opened<Self>, IndexError> {
        let state = SyncState::open(&alias_dir)?;
        let recorded = status::read(&alias_dir)?;
        if recorded.as_ref().is_some_and(|s| s.paused) {
            return Ok(Opened::Paused);
        }
        let holds_anything = recorded.as_ref().is_some_and(|s| !s.folders.is_empty())
            || !state.folders()?.is_empty();
        // A sync records its mailbox before its first commit, so even an index that lists no
        // folder yet may hold another mailbox's messages (a first sync killed early).
        let why = match &recorded {
            Some(s) if s.mailbox.as_deref().is_some_and(|m| m != mailbox) => {
                return Ok(Opened::MailboxChanged);
            }
            Some(s) if s.analyzer != Some(crate::text::ANALYZER_VERSION) => {
                Some(Rebuild::Analyzer { was: s.analyzer })
            }
            Some(s) if s.mailbox.is_none() => Some(Rebuild::Unbound),
            Some(_) => None,
            None if holds_anything => Some(Rebuild::Unbound),
            None => None,
        };
        if why.is_some() {
            start_over(&alias_dir, &state)?;
        }
        // Said to the operator only when there was something to rebuild.
        let mut rebuilt = why.filter(|_| holds_anything);
        let text = layout::open_part(&alias_dir, layout::TEXT, true)?;
        let index = match TantivyIndex::open(crate::index::capdir::CapDirectory::new(text), true) {
            // The schema names another analyzer, whatever the status said.
            Err(IndexError::Outdated) if rebuilt.is_none() => {
                rebuilt = Some(Rebuild::Analyzer {
                    was: recorded.as_ref().and_then(|s| s.analyzer),
                });
                start_over(&alias_dir, &state)?;
                let text = layout::open_part(&alias_dir, layout::TEXT, true)?;
                TantivyIndex::open(crate::index::capdir::CapDirectory::new(text), true)?
            }
            other => other?,
        };
        let writer = index.writer()?;
        let vectors = match semantic_model {
            Some(model) => {
                let dir = layout::open_part(&alias_dir, layout::VECTORS, true)?;
                Some(VectorStore::open(dir, model).map_err(|e| IndexError::Store(e.to_string()))?)
            }
            None => None,
        };
        Ok(Opened::Ready(Box::new(Self {
            alias_dir,
            writer,
            state,
            rebuilt,
            vectors,
        })))
    }

    pub(crate) fn rebuilt(&self) -> Option<Rebuild> {
        self.rebuilt
    }

    pub(crate) fn status(&self) -> Result<Option<IndexStatus>, IndexError> {
        status::read(&self.alias_dir)
    }

    pub(crate) fn write_status(&self, status: &IndexStatus) -> Result<(), IndexError> {
        status::write(&self.alias_dir, status)
    }

    pub(crate) fn state(&self) -> &SyncState {
        &self.state
    }

    pub(crate) fn put(&mut self, message: &IndexedMessage) -> Result<(), IndexError> {
        self.writer.put(message)
    }

    /// Removes a message's text and vectors (at the next commit).
    pub(crate) fn remove(&mut self, folder: &str, id: &str) -> Result<(), IndexError> {
        self.writer.remove(folder, id)?;
        if let Some(v) = &mut self.vectors {
            v.remove(&crate::index::doc_key(folder, id));
        }
        Ok(())
    }

    /// Makes the text and vectors put and removed so far durable and visible.
    pub(crate) fn commit_index(&mut self) -> Result<(), IndexError> {
        self.writer.commit()?;
        self.commit_vectors()
    }

    pub(crate) fn commit_vectors(&mut self) -> Result<(), IndexError> {
        match &mut self.vectors {
            Some(v) => v.commit().map_err(|e| IndexError::Store(e.to_string())),
            None => Ok(()),
        }
    }

    pub(crate) fn record(&self, batch: &StateBatch) -> Result<(), IndexError> {
        self.state.apply(batch)
    }

    pub(crate) fn vectors(&self) -> Option<&VectorStore> {
        self.vectors.as_ref()
    }

    pub(crate) fn vectors_mut(&mut self) -> Option<&mut VectorStore> {
        self.vectors.as_mut()
    }
}

/// Removes everything an alias's index holds but the folder itself: text, vectors, sync state,
/// then the status (last: until it is gone, the status still says what must be rebuilt). The
/// caller holds the sync state's lock. The pause marker is the operator's and stays.
fn start_over(alias_dir: &Dir, state: &SyncState) -> Result<(), IndexError> {
    layout::remove_part(alias_dir, layout::TEXT)?;
    layout::remove_part(alias_dir, layout::VECTORS)?;
    state.clear()?;
    match alias_dir.remove_file(status::FILE) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(IndexError::State(format!("{}: {}", status::FILE, e.kind()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alias_dir() -> (tempfile::TempDir, Dir) {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).expect("dir");
        (tmp, dir)
    }

    fn open(dir: &Dir, mailbox: &str) -> Opened<LocalWrite> {
        LocalWrite::open(dir.try_clone().expect("dir"), mailbox, None).expect("open")
    }

    /// A status that says the index holds a folder of `mailbox`, built by `analyzer`.
    fn recorded(dir: &Dir, mailbox: Option<&str>, analyzer: Option<u32>) {
        let mut s = IndexStatus {
            mailbox: mailbox.map(str::to_owned),
            analyzer,
            ..IndexStatus::default()
        };
        s.folders
            .insert("INBOX".to_owned(), status::FolderStatus::default());
        status::write(dir, &s).expect("status");
    }

    #[test]
    fn another_mailboxs_index_is_refused_and_left_as_it_is() {
        let (_tmp, dir) = alias_dir();
        recorded(
            &dir,
            Some("sha256:first"),
            Some(crate::text::ANALYZER_VERSION),
        );
        assert!(matches!(
            open(&dir, "sha256:second"),
            Opened::MailboxChanged
        ));
        let kept = status::read(&dir).expect("read").expect("status");
        assert_eq!(kept.mailbox.as_deref(), Some("sha256:first"));
        assert!(matches!(open(&dir, "sha256:first"), Opened::Ready(t) if t.rebuilt().is_none()));
    }

    #[test]
    fn another_analysiss_or_an_unbound_index_is_started_over_in_place() {
        let old = crate::text::ANALYZER_VERSION - 1;
        for (mailbox, analyzer, why) in [
            (
                Some("sha256:box"),
                Some(old),
                Rebuild::Analyzer { was: Some(old) },
            ),
            (Some("sha256:box"), None, Rebuild::Analyzer { was: None }),
            (None, Some(crate::text::ANALYZER_VERSION), Rebuild::Unbound),
        ] {
            let (_tmp, dir) = alias_dir();
            recorded(&dir, mailbox, analyzer);
            let Opened::Ready(target) = open(&dir, "sha256:box") else {
                panic!("{why:?}: not opened");
            };
            assert_eq!(target.rebuilt(), Some(why));
            // Nothing of the old index is left to say what it was.
            assert_eq!(status::read(&dir).expect("read"), None, "{why:?}");
            assert!(target.state().folders().expect("folders").is_empty());
            drop(target);
            assert!(matches!(open(&dir, "sha256:box"), Opened::Ready(t) if t.rebuilt().is_none()));
        }
    }

    #[test]
    fn a_first_sync_of_another_mailbox_killed_before_any_folder_is_refused_too() {
        let (_tmp, dir) = alias_dir();
        // What a sync writes before its first commit: the mailbox, no folder yet.
        let s = IndexStatus {
            mailbox: Some("sha256:first".to_owned()),
            analyzer: Some(crate::text::ANALYZER_VERSION),
            syncing: true,
            ..IndexStatus::default()
        };
        status::write(&dir, &s).expect("status");
        assert!(matches!(
            open(&dir, "sha256:second"),
            Opened::MailboxChanged
        ));
    }

    #[test]
    fn a_paused_index_is_not_touched() {
        let (_tmp, dir) = alias_dir();
        recorded(&dir, Some("sha256:box"), None);
        status::set_paused(&dir, true).expect("pause");
        assert!(matches!(open(&dir, "sha256:box"), Opened::Paused));
        assert!(
            status::read(&dir).expect("read").is_some(),
            "not rebuilt while paused"
        );
    }
}
