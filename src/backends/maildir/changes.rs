//! The Maildir change feed for the local index: a folder's cursor is the modification times of
//! its `cur/` and `new/` directories (a delivery, a flag change, a move or a removal renames or
//! unlinks an entry, which updates them), so an untouched folder costs two `stat`s; a touched
//! one answers its whole inventory, whose versions are the file names (flags live there), and
//! the index diffs it. A directory changed within [`SETTLE`] of the listing is not trusted to
//! have settled (mtimes are coarse), so no cursor is stored for it and the next sync lists it
//! again.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use cap_std::fs::Dir;
use rayon::prelude::*;

use super::super::BackendError;
use super::super::changes::{AttachmentWant, FolderDelta, FolderSync, IndexFetch, SyncItem};
use super::super::model::MessageDetail;
use super::{
    MaildirStore, MessageFile, attachment_metas, decode_id, encode_id, folder_dir, list_files,
    message_file, read_file, to_summary,
};
use crate::mime;

/// How long after a directory's last change its listing is trusted to be the settled state.
const SETTLE: Duration = Duration::from_secs(2);

const CURSOR_PREFIX: &str = "md1:";

/// The cursor of a folder directory: its `cur/` and `new/` modification times, or `None` while
/// either changed too recently to be trusted.
fn folder_cursor(dir: &Dir) -> Result<Option<String>, BackendError> {
    let now = SystemTime::now();
    let mut parts = Vec::with_capacity(2);
    for sub in ["cur", "new"] {
        let stamp = match dir.dir_metadata_of(sub) {
            Ok(modified) => modified,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                parts.push("-".to_owned());
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        if now.duration_since(stamp).map_or(true, |age| age < SETTLE) {
            return Ok(None);
        }
        let since = stamp
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        parts.push(format!("{}.{:09}", since.as_secs(), since.subsec_nanos()));
    }
    Ok(Some(format!("{CURSOR_PREFIX}{}", parts.join(","))))
}

trait DirMtime {
    fn dir_metadata_of(&self, sub: &str) -> std::io::Result<SystemTime>;
}

impl DirMtime for Dir {
    fn dir_metadata_of(&self, sub: &str) -> std::io::Result<SystemTime> {
        Ok(self.metadata(sub)?.modified()?.into_std())
    }
}

fn version(file: &MessageFile) -> String {
    format!("{}/{}", file.sub, file.file_name)
}

pub(super) fn folder_changes(
    root: &Dir,
    folder_id: &str,
    cursor: Option<&str>,
) -> Result<FolderSync, BackendError> {
    // A cursor this version did not write (another layout, a damaged state): start over.
    if cursor.is_some_and(|c| !c.starts_with(CURSOR_PREFIX)) {
        return Ok(FolderSync {
            delta: FolderDelta::Reset,
            cursor: None,
            more: false,
        });
    }
    let dir = folder_dir(root, folder_id).map_err(|_| BackendError::NotFound)?;
    // Read the cursor before the listing: a change after it moves the mtime past the stored
    // cursor, so the next sync lists again.
    let now = folder_cursor(&dir)?;
    if let (Some(old), Some(new)) = (cursor, now.as_deref())
        && old == new
    {
        return Ok(FolderSync {
            delta: FolderDelta::Changes {
                changed: Vec::new(),
                removed: Vec::new(),
                present: None,
            },
            cursor: now,
            more: false,
        });
    }
    let items = list_files(&dir)?
        .iter()
        .map(|f| SyncItem {
            id: encode_id(folder_id, &f.unique),
            version: version(f),
        })
        .collect();
    Ok(FolderSync {
        delta: FolderDelta::Inventory(items),
        cursor: now,
        more: false,
    })
}

/// Reads the messages of `items`. The version the feed gave (`cur/<file name>`) names the file
/// directly; it is checked against the id (same unique name, a `cur` or `new` file, a valid
/// name) and opened inside the folder's `Dir` like any listed file, so a version from the sync
/// state can reach no other file. A message renamed since (a flag change) is found by listing its
/// folder, once per folder and call. Files are read in parallel on the worker pool.
pub(super) fn index_fetch(
    root: &Dir,
    items: &[SyncItem],
    want: AttachmentWant,
) -> Vec<Result<IndexFetch, BackendError>> {
    let mut dirs: HashMap<String, Option<Dir>> = HashMap::new();
    // (folder, the file the version names when it names one of this id)
    let located: Vec<Result<(String, Option<MessageFile>), BackendError>> = items
        .iter()
        .map(|item| {
            let (folder, unique) = decode_id(&item.id)?;
            dirs.entry(folder.clone())
                .or_insert_with(|| folder_dir(root, &folder).ok());
            Ok((folder, named_file(&item.version, &unique)))
        })
        .collect();
    let read: Vec<Result<IndexFetch, BackendError>> = located
        .par_iter()
        .map(|found| {
            let (folder, file) = found.as_ref().map_err(|_| BackendError::BadId)?;
            let (Some(Some(dir)), Some(file)) = (dirs.get(folder), file) else {
                return Err(BackendError::NotFound);
            };
            let raw = read_file(dir, file)?;
            Ok(fetch_one(folder, file, &raw, want))
        })
        .collect();
    // Renamed since the feed listed them: find them by their unique name in a listing.
    let mut listings: HashMap<String, HashMap<String, MessageFile>> = HashMap::new();
    read.into_iter()
        .zip(items)
        .map(|(result, item)| match result {
            Err(BackendError::NotFound) => {
                let (folder, unique) = decode_id(&item.id)?;
                let Some(Some(dir)) = dirs.get(&folder) else {
                    return Err(BackendError::NotFound);
                };
                let files = match listings.entry(folder.clone()) {
                    std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                    std::collections::hash_map::Entry::Vacant(e) => e.insert(
                        list_files(dir)?
                            .into_iter()
                            .map(|f| (f.unique.clone(), f))
                            .collect(),
                    ),
                };
                let file = files.get(&unique).ok_or(BackendError::NotFound)?;
                let raw = read_file(dir, file)?;
                Ok(fetch_one(&folder, file, &raw, want))
            }
            other => other,
        })
        .collect()
}

/// The file a feed version (`cur/<name>` or `new/<name>`) names, when it is a message file of
/// the message `unique`.
fn named_file(version: &str, unique: &str) -> Option<MessageFile> {
    let (sub, name) = version.split_once('/')?;
    let sub = match sub {
        "cur" => "cur",
        "new" => "new",
        _ => return None,
    };
    if name.contains('/') {
        return None;
    }
    message_file(sub, name.to_owned(), || None).filter(|f| f.unique == unique)
}

fn fetch_one(folder: &str, file: &MessageFile, raw: &[u8], want: AttachmentWant) -> IndexFetch {
    let parsed = mime::parse(raw);
    let metas = attachment_metas(&parsed);
    let picked = want.pick(&metas);
    let attachments = metas
        .iter()
        .enumerate()
        .map(|(i, meta)| {
            let bytes = picked
                .contains(&i)
                .then(|| mime::parse_with_attachment(raw, i).1)
                .flatten()
                .filter(|b| b.len() as u64 <= want.max_bytes);
            (meta.clone(), bytes)
        })
        .collect();
    let summary = to_summary(folder, file, &parsed);
    IndexFetch {
        detail: MessageDetail {
            summary,
            recipients_cut: parsed.cuts.addresses,
            to: parsed.to,
            cc: parsed.cc,
            body_text: parsed.body_text,
            body_is_html: parsed.body_is_html,
            internet_message_id: parsed.message_id,
            in_reply_to: parsed.in_reply_to,
            references: parsed.references,
        },
        attachments,
    }
}

impl MaildirStore {
    pub(super) async fn changes_of(
        &self,
        folder_id: &str,
        cursor: Option<&str>,
    ) -> Result<FolderSync, BackendError> {
        let (folder_id, cursor) = (folder_id.to_owned(), cursor.map(str::to_owned));
        self.blocking(move |root| folder_changes(root, &folder_id, cursor.as_deref()))
            .await
    }

    pub(super) async fn fetch_for_index(
        &self,
        items: &[SyncItem],
        want: AttachmentWant,
    ) -> Vec<Result<IndexFetch, BackendError>> {
        let owned = items.to_vec();
        let n = owned.len();
        match self
            .blocking(move |root| Ok(index_fetch(root, &owned, want)))
            .await
        {
            Ok(results) => results,
            Err(_) => (0..n)
                .map(|_| {
                    Err(BackendError::Io(std::io::Error::other(
                        "maildir worker stopped",
                    )))
                })
                .collect(),
        }
    }
}

#[cfg(test)]
#[expect(
    clippy::disallowed_methods,
    reason = "tests build their Maildir with std::fs under a tempdir"
)]
mod tests {
    use super::*;
    use crate::backends::model::AttachmentMeta;

    fn want() -> AttachmentWant {
        fn any(_: &AttachmentMeta) -> bool {
            true
        }
        AttachmentWant {
            max_bytes: 1 << 20,
            max_count: 4,
            wants: any,
        }
    }

    fn put_message(root: &std::path::Path, name: &str) {
        std::fs::write(
            root.join("cur").join(name),
            b"From: a@example.com\r\nSubject: hello\r\n\r\nbody text\r\n",
        )
        .expect("write");
    }

    #[test]
    fn inventory_then_unchanged_then_inventory_again() {
        let tmp = tempfile::tempdir().expect("tmp");
        for sub in ["cur", "new", "tmp"] {
            std::fs::create_dir(tmp.path().join(sub)).expect("mkdir");
        }
        put_message(tmp.path(), "100.M1P1.host:2,S");
        let root = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).expect("dir");
        let first = folder_changes(&root, "INBOX", None).expect("changes");
        let FolderDelta::Inventory(items) = &first.delta else {
            panic!("first sync lists the folder: {first:?}");
        };
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].version, "cur/100.M1P1.host:2,S");
        // Just written: the directory has not settled, so there is no cursor to trust.
        assert_eq!(first.cursor, None);
        // Once the directories have settled, the cursor is stored, and a second call with it
        // answers no changes without listing.
        let past = SystemTime::now() - Duration::from_secs(60);
        for sub in ["cur", "new"] {
            std::fs::File::open(tmp.path().join(sub))
                .and_then(|d| d.set_modified(past))
                .expect("age the directory");
        }
        let settled = folder_changes(&root, "INBOX", None)
            .expect("changes")
            .cursor
            .expect("a settled folder has a cursor");
        let quiet = folder_changes(&root, "INBOX", Some(&settled)).expect("changes");
        assert_eq!(
            quiet.delta,
            FolderDelta::Changes {
                changed: vec![],
                removed: vec![],
                present: None,
            }
        );
        // A delivery moves the mtime, so the same cursor lists again.
        put_message(tmp.path(), "200.M2P1.host");
        let fetched = index_fetch(&root, &items[..1], want());
        let fetch = fetched.into_iter().next().expect("one").expect("read");
        assert_eq!(fetch.detail.summary.subject.as_deref(), Some("hello"));
        assert!(fetch.detail.body_text.contains("body text"));
        let again = folder_changes(&root, "INBOX", Some(&settled)).expect("changes");
        assert!(matches!(again.delta, FolderDelta::Inventory(_)));
        let foreign = folder_changes(&root, "INBOX", Some("imap1:1:2:3")).expect("changes");
        assert_eq!(foreign.delta, FolderDelta::Reset);
        let missing = index_fetch(
            &root,
            &[SyncItem {
                id: encode_id("INBOX", "nope"),
                version: "cur/nope".to_owned(),
            }],
            want(),
        );
        assert!(matches!(missing[0], Err(BackendError::NotFound)));
        // A version that names another message's file, a path, or a renamed file: the id
        // decides, found by listing; nothing outside the folder is reachable.
        put_message(tmp.path(), "300.M3P1.host:2,");
        let id = encode_id("INBOX", "100.M1P1.host");
        for version in [
            "cur/300.M3P1.host:2,",
            "cur/../../../etc/passwd",
            "tmp/100.M1P1.host:2,S",
            "cur/100.M1P1.host:2,",
        ] {
            let got = index_fetch(
                &root,
                &[SyncItem {
                    id: id.clone(),
                    version: version.to_owned(),
                }],
                want(),
            );
            let fetch = got.into_iter().next().expect("one").expect(version);
            assert_eq!(fetch.detail.summary.id, id, "{version}");
            assert!(
                fetch.detail.summary.is_read,
                "the listed file, flags S: {version}"
            );
        }
    }
}
