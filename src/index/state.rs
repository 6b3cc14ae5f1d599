//! The sync process's own state of one alias, in redb (`sync.redb` in the alias's index
//! folder): each folder's change-feed cursor and round, the version of every message indexed,
//! the messages a failed fetch left pending, and the ids seen so far by an inventory round that
//! spans several pages. redb because it is pure Rust (no C build on CI's two cores), ACID with
//! one writer, small, and opened here from a descriptor `path_guard` checked. Its writes follow
//! the index commit they describe, so a crash between the two leaves versions that are older
//! than the index: the next sync refetches those messages and replaces them by id, never
//! duplicating one.

use std::collections::HashMap;

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt as _};
use redb::{Database, ReadableDatabase as _, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

use super::IndexError;

pub(crate) const FILE: &str = "sync.redb";

const FOLDERS: TableDefinition<'_, &str, &str> = TableDefinition::new("folders");
const VERSIONS: TableDefinition<'_, &str, &str> = TableDefinition::new("versions");
const PENDING: TableDefinition<'_, &str, &str> = TableDefinition::new("pending");
const SEEN: TableDefinition<'_, &str, ()> = TableDefinition::new("seen");

/// One folder's change-feed position.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FolderCursor {
    /// The backend's opaque cursor (`None`: start from scratch).
    pub(crate) cursor: Option<String>,
    /// An inventory round spanning pages is under way: `SEEN` holds what it listed so far.
    pub(crate) in_inventory: bool,
}

fn key(folder: &str, id: &str) -> String {
    format!("{folder}\u{0}{id}")
}

fn prefix_range(folder: &str) -> (String, String) {
    (format!("{folder}\u{0}"), format!("{folder}\u{1}"))
}

fn err(e: impl std::fmt::Display) -> IndexError {
    IndexError::State(e.to_string())
}

/// The open sync state (exclusive to one process).
pub(crate) struct SyncState {
    db: Database,
}

/// Everything one step of a sync records, in one transaction.
#[derive(Debug, Default)]
pub(crate) struct StateBatch {
    pub(crate) folder: String,
    /// Indexed now, with their versions.
    pub(crate) indexed: Vec<(String, String)>,
    /// Removed from the index.
    pub(crate) removed: Vec<String>,
    /// Listed but not fetched (retried later), with the version listed.
    pub(crate) pending: Vec<(String, String)>,
    /// Seen by the current inventory round.
    pub(crate) seen: Vec<String>,
    /// The folder's new position, when this step ends a page.
    pub(crate) cursor: Option<FolderCursor>,
    /// The inventory round ended: forget what it saw.
    pub(crate) clear_seen: bool,
}

impl SyncState {
    /// Opens (creating `0600`) the state of an alias folder. Another process holding it is
    /// [`IndexError::Busy`].
    pub(crate) fn open(alias_dir: &Dir) -> Result<Self, IndexError> {
        let mut options = OpenOptions::new();
        options
            .read(true)
            .write(true)
            .create(true)
            .mode(0o600)
            .follow(FollowSymlinks::No);
        let file = alias_dir
            .open_with(FILE, &options)
            .map_err(|e| IndexError::State(format!("{FILE}: {}", e.kind())))?
            .into_std();
        // The same checks as every index file (owner, mode, one link), on the descriptor.
        super::capdir::check_private_file(&file)
            .map_err(|e| IndexError::Folder(format!("{FILE}: {e}")))?;
        let db = redb::Builder::new()
            .create_with_backend(redb::backends::FileBackend::new(file))
            .map_err(|e| match e {
                redb::DatabaseError::DatabaseAlreadyOpen => IndexError::Busy,
                other => err(other),
            })?;
        let tx = db.begin_write().map_err(err)?;
        {
            tx.open_table(FOLDERS).map_err(err)?;
            tx.open_table(VERSIONS).map_err(err)?;
            tx.open_table(PENDING).map_err(err)?;
            tx.open_table(SEEN).map_err(err)?;
        }
        tx.commit().map_err(err)?;
        Ok(Self { db })
    }

    pub(crate) fn cursor(&self, folder: &str) -> Result<FolderCursor, IndexError> {
        let tx = self.db.begin_read().map_err(err)?;
        let table = tx.open_table(FOLDERS).map_err(err)?;
        match table.get(folder).map_err(err)? {
            Some(v) => serde_json::from_str(v.value()).map_err(err),
            None => Ok(FolderCursor::default()),
        }
    }

    /// The folders with any state.
    pub(crate) fn folders(&self) -> Result<Vec<String>, IndexError> {
        let tx = self.db.begin_read().map_err(err)?;
        let table = tx.open_table(FOLDERS).map_err(err)?;
        let mut out = Vec::new();
        for row in table.iter().map_err(err)? {
            let (k, _) = row.map_err(err)?;
            out.push(k.value().to_owned());
        }
        Ok(out)
    }

    fn read_map(
        &self,
        def: TableDefinition<'_, &str, &str>,
        folder: &str,
    ) -> Result<HashMap<String, String>, IndexError> {
        let tx = self.db.begin_read().map_err(err)?;
        let table = tx.open_table(def).map_err(err)?;
        let (lo, hi) = prefix_range(folder);
        let mut out = HashMap::new();
        for row in table.range(lo.as_str()..hi.as_str()).map_err(err)? {
            let (k, v) = row.map_err(err)?;
            if let Some((_, id)) = k.value().split_once('\u{0}') {
                out.insert(id.to_owned(), v.value().to_owned());
            }
        }
        Ok(out)
    }

    /// id → version of every message of `folder` in the index.
    pub(crate) fn versions(&self, folder: &str) -> Result<HashMap<String, String>, IndexError> {
        self.read_map(VERSIONS, folder)
    }

    /// id → version of the messages of `folder` a failed fetch left out.
    pub(crate) fn pending(&self, folder: &str) -> Result<HashMap<String, String>, IndexError> {
        self.read_map(PENDING, folder)
    }

    /// The ids the current inventory round of `folder` has listed so far.
    pub(crate) fn seen(
        &self,
        folder: &str,
    ) -> Result<std::collections::HashSet<String>, IndexError> {
        let tx = self.db.begin_read().map_err(err)?;
        let table = tx.open_table(SEEN).map_err(err)?;
        let (lo, hi) = prefix_range(folder);
        let mut out = std::collections::HashSet::new();
        for row in table.range(lo.as_str()..hi.as_str()).map_err(err)? {
            let (k, _) = row.map_err(err)?;
            if let Some((_, id)) = k.value().split_once('\u{0}') {
                out.insert(id.to_owned());
            }
        }
        Ok(out)
    }

    /// Records one step, atomically.
    pub(crate) fn apply(&self, batch: &StateBatch) -> Result<(), IndexError> {
        let f = batch.folder.as_str();
        let tx = self.db.begin_write().map_err(err)?;
        {
            let mut versions = tx.open_table(VERSIONS).map_err(err)?;
            let mut pending = tx.open_table(PENDING).map_err(err)?;
            for (id, version) in &batch.indexed {
                let k = key(f, id);
                versions.insert(k.as_str(), version.as_str()).map_err(err)?;
                pending.remove(k.as_str()).map_err(err)?;
            }
            for id in &batch.removed {
                let k = key(f, id);
                versions.remove(k.as_str()).map_err(err)?;
                pending.remove(k.as_str()).map_err(err)?;
            }
            for (id, version) in &batch.pending {
                pending
                    .insert(key(f, id).as_str(), version.as_str())
                    .map_err(err)?;
            }
            let mut seen = tx.open_table(SEEN).map_err(err)?;
            if batch.clear_seen {
                let (lo, hi) = prefix_range(f);
                seen.retain_in(lo.as_str()..hi.as_str(), |_, _| false)
                    .map_err(err)?;
            }
            for id in &batch.seen {
                seen.insert(key(f, id).as_str(), ()).map_err(err)?;
            }
            if let Some(cursor) = &batch.cursor {
                let mut folders = tx.open_table(FOLDERS).map_err(err)?;
                let json = serde_json::to_string(cursor).map_err(err)?;
                folders.insert(f, json.as_str()).map_err(err)?;
            }
        }
        tx.commit().map_err(err)
    }

    /// Forgets everything: every folder's cursor, versions, pending and seen ids (a rebuild).
    pub(crate) fn clear(&self) -> Result<(), IndexError> {
        let tx = self.db.begin_write().map_err(err)?;
        {
            for def in [FOLDERS, VERSIONS, PENDING] {
                tx.open_table(def)
                    .map_err(err)?
                    .retain(|_, _| false)
                    .map_err(err)?;
            }
            tx.open_table(SEEN)
                .map_err(err)?
                .retain(|_, _| false)
                .map_err(err)?;
        }
        tx.commit().map_err(err)
    }

    /// Forgets a folder entirely (it is gone from the mailbox).
    pub(crate) fn drop_folder(&self, folder: &str) -> Result<(), IndexError> {
        let tx = self.db.begin_write().map_err(err)?;
        {
            let (lo, hi) = prefix_range(folder);
            for def in [VERSIONS, PENDING] {
                let mut t = tx.open_table(def).map_err(err)?;
                t.retain_in(lo.as_str()..hi.as_str(), |_, _| false)
                    .map_err(err)?;
            }
            let mut seen = tx.open_table(SEEN).map_err(err)?;
            seen.retain_in(lo.as_str()..hi.as_str(), |_, _| false)
                .map_err(err)?;
            tx.open_table(FOLDERS)
                .map_err(err)?
                .remove(folder)
                .map_err(err)?;
        }
        tx.commit().map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::status::tests::alias_dir;

    #[test]
    fn clear_forgets_every_folder() {
        let (_tmp, dir) = alias_dir();
        let state = SyncState::open(&dir).expect("open");
        for folder in ["INBOX", "Archive"] {
            state
                .apply(&StateBatch {
                    folder: folder.to_owned(),
                    indexed: vec![("1".to_owned(), "v1".to_owned())],
                    pending: vec![("2".to_owned(), "v2".to_owned())],
                    seen: vec!["1".to_owned()],
                    cursor: Some(FolderCursor {
                        cursor: Some("c".to_owned()),
                        in_inventory: true,
                    }),
                    ..StateBatch::default()
                })
                .expect("apply");
        }
        assert_eq!(state.folders().expect("folders").len(), 2);
        state.clear().expect("clear");
        assert!(state.folders().expect("folders").is_empty());
        for folder in ["INBOX", "Archive"] {
            assert!(state.versions(folder).expect("versions").is_empty());
            assert!(state.pending(folder).expect("pending").is_empty());
            assert!(state.seen(folder).expect("seen").is_empty());
            assert_eq!(
                state.cursor(folder).expect("cursor"),
                FolderCursor::default()
            );
        }
    }

    #[test]
    fn a_state_file_open_to_others_is_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        let (tmp, dir) = alias_dir();
        drop(SyncState::open(&dir).expect("open"));
        #[expect(
            clippy::disallowed_methods,
            reason = "the test opens its own tempdir's file up"
        )]
        std::fs::set_permissions(
            tmp.path().join(FILE),
            std::fs::Permissions::from_mode(0o644),
        )
        .expect("chmod");
        let Err(IndexError::Folder(why)) = SyncState::open(&dir) else {
            panic!("a state others may read was opened");
        };
        assert!(why.contains("group or others"), "{why}");
    }
}
