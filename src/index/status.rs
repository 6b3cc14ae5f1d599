//! `status.json`: what one alias's index holds and how fresh it is, written atomically by the
//! sync process after each commit and read by the server (for `indexedThrough` and the
//! freshness of an answer) and by `mailgate index status`. The server never opens the sync
//! state (the sync process holds it exclusively), so this small file is the one thing the two
//! share besides the committed index. It never claims more than the index holds: it is written
//! only after the commit it describes.

use std::collections::BTreeMap;
use std::io::Write as _;

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt as _};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::IndexError;
use crate::backends::model::FolderSelector;
use crate::path_guard::{self, ModeRule};

pub(crate) const FILE: &str = "status.json";
const MAX_BYTES: u64 = 4 * 1024 * 1024;

/// One folder's sync state as the server sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FolderStatus {
    /// The folder's last round ended: every message it listed is indexed or pending.
    pub(crate) complete: bool,
    /// When the last complete round of this folder started (every change before it is in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) through: Option<DateTime<Utc>>,
    /// Messages indexed in the folder.
    pub(crate) messages: u64,
    /// Messages listed but not indexed (a fetch failed): retried by the next sync.
    pub(crate) pending: u64,
}

/// The whole status of one alias's index.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct IndexStatus {
    pub(crate) version: u32,
    /// The backend kind the index was synced from (`maildir`, `graph`, `imap`).
    pub(crate) backend: String,
    pub(crate) folders: BTreeMap<String, FolderStatus>,
    /// Well-known folder names (`inbox`, `sentitems`, …) → folder ids, as the backend resolved
    /// them at the last sync.
    pub(crate) well_known: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) last_sync_started: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) last_sync_finished: Option<DateTime<Utc>>,
    /// A sync is running or was killed before it finished (set at start, cleared at the end).
    pub(crate) syncing: bool,
    /// `mailgate index pause` was run: syncs skip this alias until `resume`.
    pub(crate) paused: bool,
    /// Vectors are kept (an embeddings endpoint was configured for the last sync).
    pub(crate) semantic: bool,
    /// Messages indexed without their vectors yet (the endpoint was down): filled later.
    pub(crate) vectors_pending: u64,
}

pub(crate) const VERSION: u32 = 1;

impl IndexStatus {
    pub(crate) fn messages(&self) -> u64 {
        self.folders.values().map(|f| f.messages).sum()
    }

    /// When every folder had last been wholly synced: the oldest folder's `through`.
    pub(crate) fn indexed_through(&self) -> Option<DateTime<Utc>> {
        if self.folders.is_empty() {
            return None;
        }
        self.folders
            .values()
            .map(|f| f.through)
            .collect::<Option<Vec<_>>>()?
            .into_iter()
            .min()
    }

    /// A folder's freshness for a search of it: when it was last wholly synced, and whether
    /// anything of it is missing (an unfinished round, pending messages).
    pub(crate) fn folder(&self, id: &str) -> Option<&FolderStatus> {
        self.folders.get(id)
    }

    /// The folder id a selector names in this index: a well-known name as the backend
    /// resolved it at the last sync, or a folder id (exact, else ignoring ASCII case).
    pub(crate) fn folder_for(&self, folder: &FolderSelector) -> Option<String> {
        match folder {
            FolderSelector::WellKnown(name) => self.well_known.get(name.label()).cloned(),
            FolderSelector::Id(id) => {
                if self.folders.contains_key(id) {
                    return Some(id.clone());
                }
                self.folders
                    .keys()
                    .find(|k| k.eq_ignore_ascii_case(id))
                    .cloned()
            }
        }
    }
}

/// Reads `status.json` of an alias's folder; `None` when there is none yet.
pub(crate) fn read(alias_dir: &Dir) -> Result<Option<IndexStatus>, IndexError> {
    let bytes = path_guard::read_file_in(alias_dir, FILE, ModeRule::Private, MAX_BYTES)
        .map_err(|e| IndexError::Folder(format!("{FILE}: {e}")))?;
    match bytes {
        None => Ok(None),
        Some(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|_| IndexError::State(format!("{FILE} is unreadable"))),
    }
}

/// Replaces `status.json` atomically (`0600`, write, sync, rename).
pub(crate) fn write(alias_dir: &Dir, status: &IndexStatus) -> Result<(), IndexError> {
    let io = |e: std::io::Error| IndexError::State(format!("{FILE}: {}", e.kind()));
    let bytes = serde_json::to_vec_pretty(status).map_err(|e| IndexError::State(e.to_string()))?;
    let tmp = format!(".{FILE}.tmp");
    let mut options = OpenOptions::new();
    options
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .follow(FollowSymlinks::No);
    let mut file = alias_dir.open_with(&tmp, &options).map_err(io)?.into_std();
    file.write_all(&bytes).map_err(io)?;
    file.sync_data().map_err(io)?;
    alias_dir.rename(&tmp, alias_dir, FILE).map_err(io)
}
