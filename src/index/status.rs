//! `status.json`: what one alias's index holds and how fresh it is, written atomically by the
//! sync process after each commit and read by the server (for `indexedThrough` and the
//! freshness of an answer) and by `mailgate index status`. The server never opens the sync
//! state (the sync process holds it exclusively), so this small file is the one thing the two
//! share besides the committed index. It never claims more than the index holds: it is written
//! only after the commit it describes. It also says what built the index: the mailbox it holds
//! ([`mailbox_identity`], a digest) and the text analysis ([`crate::text::ANALYZER_VERSION`]);
//! an index whose mailbox or analyzer differs from what the server runs with is never served
//! (`index::reader::Coverage`). Pausing is a file of its own ([`PAUSED`]), never a field a
//! running sync could write back over.

use std::collections::BTreeMap;
use std::io::Write as _;

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt as _};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::IndexError;
use crate::backends::model::FolderSelector;
use crate::config::{BackendSpec, MailboxEntry};
use crate::path_guard::{self, ModeRule};

pub(crate) const FILE: &str = "status.json";
/// The pause marker: present while `mailgate index pause` holds the alias. Only the CLI's
/// `pause`/`resume` create and remove it, so a sync rewriting `status.json` cannot lose it.
pub(crate) const PAUSED: &str = "paused";
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
    /// `mailgate index pause` was run: syncs skip this alias until `resume`. Read from the
    /// [`PAUSED`] marker (or, for an index paused before the marker existed, from this field of
    /// the file), never written into `status.json`.
    #[serde(default, skip_serializing)]
    pub(crate) paused: bool,
    /// The mailbox the index was synced from ([`mailbox_identity`]); absent in an index synced
    /// before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) mailbox: Option<String>,
    /// The text analysis that built the index ([`crate::text::ANALYZER_VERSION`]); absent in an
    /// index built before versions were recorded (version 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) analyzer: Option<u32>,
    /// Vectors are kept (an embeddings endpoint was configured for the last sync).
    pub(crate) semantic: bool,
    /// Messages indexed without their vectors yet (the endpoint was down): filled later.
    pub(crate) vectors_pending: u64,
    /// The last sync stopped because the alias's delegated sign-in expired or was revoked
    /// (issue 37); the next sync that reaches the mailbox clears it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) sign_in_required: bool,
}

/// The format of `status.json`. 2: `mailbox`, `analyzer`, and the pause in its own file.
pub(crate) const VERSION: u32 = 2;

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

/// What names a mailbox, as a digest: `sha256:` and the hex SHA-256 of the backend kind and,
/// for Maildir, the folder's path as configured; for IMAP, the host, port and login (the
/// `username`, else the address); for Graph, the tenant and the address. Each part is
/// length-prefixed, so no two identities spell the same bytes. A digest rather than the names
/// themselves: `status.json` is read by `index status` and shown to whoever debugs it, and the
/// comparison needs only equality. (It is no secret: an address is easy to guess and hash.)
pub(crate) fn mailbox_identity(entry: &MailboxEntry, graph_tenant: Option<&str>) -> String {
    use sha2::Digest as _;
    use std::os::unix::ffi::OsStrExt as _;
    let mut hash = sha2::Sha256::new();
    let mut part = |bytes: &[u8]| {
        hash.update((bytes.len() as u64).to_be_bytes());
        hash.update(bytes);
    };
    match &entry.backend {
        BackendSpec::Maildir { path, .. } => {
            part(b"maildir");
            part(path.as_os_str().as_bytes());
        }
        BackendSpec::Imap { imap, .. } => {
            part(b"imap");
            part(imap.host.as_bytes());
            part(&imap.port.to_be_bytes());
            part(
                imap.username
                    .as_deref()
                    .unwrap_or(entry.address.as_str())
                    .as_bytes(),
            );
        }
        BackendSpec::Graph { .. } => {
            part(b"graph");
            part(graph_tenant.unwrap_or_default().as_bytes());
            part(entry.address.as_str().as_bytes());
        }
    }
    format!("sha256:{}", hex::encode(hash.finalize()))
}

/// Reads `status.json` of an alias's folder; `None` when there is none yet. `paused` is the
/// [`PAUSED`] marker's presence (or an older file's own flag). An alias paused before its first
/// sync holds the marker alone and reads as `None` here: whoever must honour a pause of an
/// index that may not exist yet (a sync about to open it) asks [`is_paused`].
pub(crate) fn read(alias_dir: &Dir) -> Result<Option<IndexStatus>, IndexError> {
    let bytes = path_guard::read_file_in(alias_dir, FILE, ModeRule::Private, MAX_BYTES)
        .map_err(|e| IndexError::Folder(format!("{FILE}: {e}")))?;
    match bytes {
        None => Ok(None),
        Some(bytes) => {
            let mut status: IndexStatus = serde_json::from_slice(&bytes)
                .map_err(|_| IndexError::State(format!("{FILE} is unreadable")))?;
            status.paused |= is_paused(alias_dir)?;
            Ok(Some(status))
        }
    }
}

/// Whether `mailgate index pause` holds the alias: the [`PAUSED`] marker exists (a private
/// file, checked like every file of the index).
pub(crate) fn is_paused(alias_dir: &Dir) -> Result<bool, IndexError> {
    path_guard::read_file_in(alias_dir, PAUSED, ModeRule::Private, 64)
        .map(|m| m.is_some())
        .map_err(|e| IndexError::Folder(format!("{PAUSED}: {e}")))
}

/// Creates or removes the [`PAUSED`] marker. A running sync notices it at its next durable
/// point; `status.json` is not touched (a sync rewrites it from its own copy), except to clear
/// the flag an index paused before the marker existed still carries in it.
pub(crate) fn set_paused(alias_dir: &Dir, paused: bool) -> Result<(), IndexError> {
    let io = |e: std::io::Error| IndexError::State(format!("{PAUSED}: {}", e.kind()));
    if paused {
        write_synced(alias_dir, PAUSED, b"paused\n").map_err(io)?;
        // A marker that fails the file checks would read as an error, never as "not paused".
        return is_paused(alias_dir).map(|_| ());
    }
    match alias_dir.remove_file(PAUSED) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    if let Some(mut legacy) = read(alias_dir)?
        && legacy.paused
    {
        // `paused` is never serialized: rewriting drops the old flag.
        legacy.paused = false;
        write(alias_dir, &legacy)?;
    }
    Ok(())
}

/// Replaces `status.json` atomically (`0600`, write, sync, rename).
pub(crate) fn write(alias_dir: &Dir, status: &IndexStatus) -> Result<(), IndexError> {
    let io = |e: std::io::Error| IndexError::State(format!("{FILE}: {}", e.kind()));
    let bytes = serde_json::to_vec_pretty(status).map_err(|e| IndexError::State(e.to_string()))?;
    let tmp = format!(".{FILE}.tmp");
    write_synced(alias_dir, &tmp, &bytes).map_err(io)?;
    alias_dir.rename(&tmp, alias_dir, FILE).map_err(io)
}

/// Writes `bytes` as the private file `name` (`0600`, created or truncated, never through a
/// symlink) and syncs its data: every file this module writes goes through here.
fn write_synced(alias_dir: &Dir, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let mut options = OpenOptions::new();
    options
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .follow(FollowSymlinks::No);
    let mut file = alias_dir.open_with(name, &options)?.into_std();
    file.write_all(bytes)?;
    file.sync_data()
}

#[cfg(test)]
pub(crate) mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::address::EmailAddress;
    use crate::alias::Alias;
    use crate::config::{Access, Security, ServerSpec};

    fn entry(address: &str, backend: BackendSpec) -> MailboxEntry {
        MailboxEntry {
            alias: Alias::parse("box").expect("alias"),
            address: EmailAddress::try_from(address).expect("address"),
            access: Access::Full,
            backend,
        }
    }

    fn imap(host: &str, port: u16, username: Option<&str>) -> BackendSpec {
        BackendSpec::Imap {
            imap: ServerSpec {
                host: host.to_owned(),
                port,
                security: Security::Tls,
                username: username.map(str::to_owned),
                password_env: Some("BOX_IMAP_PASSWORD".to_owned()),
                oauth2_token_env: None,
                ca_file: None,
                rate_limit: None,
            },
            smtp: None,
            auth: None,
        }
    }

    fn maildir(path: &str) -> BackendSpec {
        BackendSpec::Maildir {
            path: PathBuf::from(path),
            smtp: None,
        }
    }

    #[test]
    fn the_identity_changes_with_what_names_the_mailbox_and_nothing_else() {
        let id = |e: &MailboxEntry, tenant: Option<&str>| mailbox_identity(e, tenant);
        let a = entry("ana@example.com", maildir("/srv/mail/ana"));
        // Stable, a digest: no path or address in clear.
        assert_eq!(id(&a, None), id(&a.clone(), Some("t")));
        assert!(id(&a, None).starts_with("sha256:"));
        assert!(!id(&a, None).contains("ana"));
        // Maildir: the path decides; the address is only a label.
        assert_ne!(
            id(&a, None),
            id(&entry("ana@example.com", maildir("/srv/mail/bo")), None)
        );
        assert_eq!(
            id(&a, None),
            id(&entry("bo@example.com", maildir("/srv/mail/ana")), None)
        );
        // IMAP: host, port and login (the address when no username is set).
        let i = entry("ana@example.com", imap("imap.example.com", 993, None));
        for other in [
            entry("ana@example.com", imap("imap.example.net", 993, None)),
            entry("ana@example.com", imap("imap.example.com", 143, None)),
            entry("bo@example.com", imap("imap.example.com", 993, None)),
            entry("ana@example.com", imap("imap.example.com", 993, Some("bo"))),
        ] {
            assert_ne!(id(&i, None), id(&other, None), "{:?}", other.backend);
        }
        assert_eq!(
            id(&i, None),
            id(
                &entry(
                    "ana@example.com",
                    imap("imap.example.com", 993, Some("ana@example.com"))
                ),
                None
            )
        );
        // Graph: tenant and address.
        let g = entry("ana@example.com", BackendSpec::Graph { auth: None });
        assert_ne!(id(&g, Some("t1")), id(&g, Some("t2")));
        assert_ne!(
            id(&g, Some("t1")),
            id(
                &entry("bo@example.com", BackendSpec::Graph { auth: None }),
                Some("t1")
            )
        );
        // Kinds never collide, even spelling the same parts.
        assert_ne!(id(&g, None), id(&a, None));
    }

    /// An empty alias folder in a temporary folder (kept alive by the returned guard).
    pub(crate) fn alias_dir() -> (tempfile::TempDir, Dir) {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).expect("dir");
        (tmp, dir)
    }

    #[test]
    fn a_pause_survives_a_status_written_over_it_until_resume() {
        let (_tmp, dir) = alias_dir();
        write(&dir, &IndexStatus::default()).expect("write");
        set_paused(&dir, true).expect("pause");
        assert!(read(&dir).expect("read").expect("status").paused);
        // A sync writes the copy it read before the pause: the pause stays.
        write(&dir, &IndexStatus::default()).expect("write");
        assert!(is_paused(&dir).expect("marker"));
        assert!(read(&dir).expect("read").expect("status").paused);
        set_paused(&dir, false).expect("resume");
        assert!(!read(&dir).expect("read").expect("status").paused);
    }

    #[test]
    fn a_pause_recorded_in_an_older_status_holds_and_resume_clears_it() {
        let (_tmp, dir) = alias_dir();
        let mut file = dir
            .open_with(
                FILE,
                OpenOptions::new().write(true).create(true).mode(0o600),
            )
            .expect("open")
            .into_std();
        file.write_all(br#"{"version":1,"backend":"maildir","folders":{},"wellKnown":{},"syncing":false,"paused":true,"semantic":false,"vectorsPending":0}"#)
            .expect("write");
        drop(file);
        let status = read(&dir).expect("read").expect("status");
        assert!(status.paused);
        assert_eq!((status.mailbox, status.analyzer), (None, None));
        set_paused(&dir, false).expect("resume");
        assert!(!read(&dir).expect("read").expect("status").paused);
        // Never written again: the marker is the pause.
        let bytes = path_guard::read_file_in(&dir, FILE, ModeRule::Private, MAX_BYTES)
            .expect("read")
            .expect("file");
        assert!(!String::from_utf8_lossy(&bytes).contains("paused"));
    }
}
