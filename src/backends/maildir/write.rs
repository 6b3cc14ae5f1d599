//! Maildir writes (reached only through `backends::Writer` and `backends::SentFolder`). There is
//! no delete: a move is one rename, a copy writes a new file through `tmp/`, a mark renames the
//! file to change its flags, and an append publishes through `tmp/` then a rename, so a reader
//! never sees a partial message.

use std::collections::{BTreeSet, HashSet};
use std::io::Write;

use cap_std::fs::{Dir, DirBuilder, DirBuilderExt, OpenOptions, OpenOptionsExt};
use chrono::Utc;
use rand::RngExt;

use super::{
    INBOX, MAX_MESSAGE_BYTES, MaildirStore, MessageFile, encode_id, folder_dir, list_files, locate,
    read_file, resolve_folder, well_known,
};
use crate::backends::model::{Flags, FolderSelector, ItemResult, WellKnown};
use crate::backends::{BackendError, MailWrite};

/// Where a newly written file is published inside a folder.
#[derive(Clone, Copy)]
enum Publish<'a> {
    /// `new/<unique>`: not yet seen by any client.
    New,
    /// `cur/<unique>:2,<flags>`.
    Cur(&'a str),
}

/// Maildir's flag letters for `flags`, sorted as Maildir requires.
fn letters(flags: Flags) -> String {
    let mut out = String::new();
    if flags.draft {
        out.push('D');
    }
    if flags.seen {
        out.push('S');
    }
    out
}

impl MailWrite for MaildirStore {
    /// Appends `raw` as a new message to the well-known `folder` and returns its id. A folder
    /// that does not exist yet is created as a Maildir++ folder (`.Sent`, `.Drafts`, …:
    /// `cur/ new/ tmp/` mode 0700 and a `maildirfolder` marker); `Inbox` creates the root's own
    /// `cur/ new/ tmp/`. No caller string ever names a new directory: the folder is one of the
    /// well-known names, and `flags` are named, so neither can be malformed.
    ///
    /// The message is written to `tmp/<unique>` (created exclusively, mode 0600), fsynced, then
    /// renamed to `cur/<unique>:2,<flags>` (or `new/<unique>` without flags), so a reader never
    /// sees a partial message. A message over the backend's 64 MiB read bound is `TooLarge` (it
    /// could never be read back).
    async fn append(
        &self,
        folder: WellKnown,
        raw: &[u8],
        flags: Flags,
    ) -> Result<String, BackendError> {
        let flags = letters(flags);
        if raw.len() as u64 > MAX_MESSAGE_BYTES {
            return Err(BackendError::TooLarge);
        }
        let raw = raw.to_vec();
        self.blocking(move |root| {
            let id = ensure_folder(root, folder)?;
            let dir = folder_dir(root, &id)?;
            let publish = if flags.is_empty() {
                Publish::New
            } else {
                Publish::Cur(&flags)
            };
            let unique = store_message(&dir, &raw, Utc::now().timestamp(), publish)?;
            Ok(encode_id(&id, &unique))
        })
        .await
    }

    /// Moves each message to `destination` (a well-known name or the id of an existing folder;
    /// never created here) with one rename per message. The outer error is the whole call's
    /// (unknown destination, unreadable mailbox); each item answers its new id or its error.
    /// A message already in the destination succeeds unchanged.
    async fn move_messages(
        &self,
        ids: &[String],
        destination: &FolderSelector,
    ) -> Result<Vec<ItemResult<String>>, BackendError> {
        let ids = ids.to_vec();
        let destination = destination.clone();
        self.blocking(move |root| {
            let (dest, dest_dir) = open_destination(root, &destination)?;
            let mut taken: HashSet<String> = list_files(&dest_dir)?
                .into_iter()
                .map(|f| f.unique)
                .collect();
            Ok(ids
                .iter()
                .map(|id| move_one(root, id, &dest, &dest_dir, &mut taken))
                .collect())
        })
        .await
    }

    /// Copies each message into `destination` (resolved as for a move) as a new file with a new
    /// unique name, keeping its flags and its delivery time; the source is untouched.
    async fn copy_messages(
        &self,
        ids: &[String],
        destination: &FolderSelector,
    ) -> Result<Vec<ItemResult<String>>, BackendError> {
        let ids = ids.to_vec();
        let destination = destination.clone();
        self.blocking(move |root| {
            let (dest, dest_dir) = open_destination(root, &destination)?;
            Ok(ids
                .iter()
                .map(|id| copy_one(root, id, &dest, &dest_dir))
                .collect())
        })
        .await
    }

    /// Sets (`read`) or clears the seen flag of each message by renaming its file; a message in
    /// `new/` moves to `cur/` when marked read. Ids do not change (they hold no flags).
    async fn mark_messages(
        &self,
        ids: &[String],
        read: bool,
    ) -> Result<Vec<ItemResult<()>>, BackendError> {
        let ids = ids.to_vec();
        self.blocking(move |root| Ok(ids.iter().map(|id| mark_one(root, id, read)).collect()))
            .await
    }
}

/// An existing destination folder of a move or copy (never created here), with its
/// `cur/ new/ tmp/` present.
fn open_destination(
    root: &Dir,
    destination: &FolderSelector,
) -> Result<(String, Dir), BackendError> {
    let dest = resolve_folder(root, destination)?;
    let dest_dir = folder_dir(root, &dest)?;
    ensure_subdirs(&dest_dir)?;
    Ok((dest, dest_dir))
}

/// The existing folder for `wanted`, or a newly created one when `wanted` is well known.
fn ensure_folder(root: &Dir, wanted: WellKnown) -> Result<String, BackendError> {
    match resolve_folder(root, &FolderSelector::WellKnown(wanted)) {
        Ok(id) => {
            ensure_subdirs(&folder_dir(root, &id)?)?;
            Ok(id)
        }
        Err(BackendError::NotFound) => {
            let Some(&id) = well_known(wanted).first() else {
                return Err(BackendError::NotFound);
            };
            if id == INBOX {
                ensure_subdirs(root)?;
            } else {
                let name = format!(".{id}");
                create_private_dir(root, &name)?;
                let dir = root.open_dir(&name)?;
                ensure_subdirs(&dir)?;
                let mut opts = OpenOptions::new();
                opts.write(true).create_new(true).mode(0o600);
                match dir.open_with("maildirfolder", &opts) {
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Ok(id.to_owned())
        }
        Err(e) => Err(e),
    }
}

/// Creates the folder's `tmp/ new/ cur/` (0700) where missing; `cur/` last, because a folder is
/// discovered by its `cur/`.
fn ensure_subdirs(dir: &Dir) -> Result<(), BackendError> {
    for sub in ["tmp", "new", "cur"] {
        if !dir.is_dir(sub) {
            create_private_dir(dir, sub)?;
        }
    }
    Ok(())
}

fn create_private_dir(dir: &Dir, name: &str) -> std::io::Result<()> {
    let mut builder = DirBuilder::new();
    builder.mode(0o700);
    match dir.create_dir_with(name, &builder) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    }
}

/// A fresh unique name: `<secs>.M<micros>P<pid>R<random hex>.mailgate`. `secs` leads because
/// [`list_files`] reads the delivery time from it.
fn new_unique(secs: i64) -> String {
    let random: [u8; 8] = rand::rng().random();
    format!(
        "{secs}.M{}P{}R{}.mailgate",
        Utc::now().timestamp_subsec_micros(),
        std::process::id(),
        hex::encode(random)
    )
}

/// Writes `raw` to `tmp/<unique>` exclusively (0600), fsyncs it, and renames it into place.
/// Any failure after the file was created removes it, so nothing partial is ever published.
fn store_message(
    dir: &Dir,
    raw: &[u8],
    secs: i64,
    publish: Publish<'_>,
) -> Result<String, BackendError> {
    let unique = new_unique(secs);
    let tmp = format!("tmp/{unique}");
    let mut opts = OpenOptions::new();
    opts.write(true).create_new(true).mode(0o600);
    // A failed exclusive open created nothing of ours, so there is nothing to remove.
    let mut file = dir.open_with(&tmp, &opts)?;
    let written = file.write_all(raw).and_then(|()| file.sync_all());
    drop(file);
    if let Err(e) = written {
        let _ = dir.remove_file(&tmp);
        return Err(e.into());
    }
    let (sub, target) = match publish {
        Publish::New => ("new", format!("new/{unique}")),
        Publish::Cur(flags) => ("cur", format!("cur/{unique}:2,{flags}")),
    };
    if let Err(e) = dir.rename(&tmp, dir, &target) {
        let _ = dir.remove_file(&tmp);
        return Err(e.into());
    }
    sync_dir(dir, sub);
    Ok(unique)
}

/// Best-effort fsync of a folder's subdirectory, so a published rename survives a crash.
fn sync_dir(dir: &Dir, sub: &str) {
    match dir.open_dir(sub) {
        Ok(d) => crate::dir_fd::sync_best_effort(&d),
        Err(e) => tracing::warn!(kind = ?e.kind(), "a maildir folder could not be opened to fsync"),
    }
}

/// The flags part of a file name (`unique:2,FLAGS` → `FLAGS`), as stored.
fn stored_flags(file: &MessageFile) -> &str {
    file.file_name
        .get(file.unique.len()..)
        .and_then(|rest| rest.strip_prefix(":2,"))
        .unwrap_or("")
}

fn move_one(
    root: &Dir,
    id: &str,
    dest: &str,
    dest_dir: &Dir,
    taken: &mut HashSet<String>,
) -> ItemResult<String> {
    let (folder, dir, file) = locate(root, id)?;
    if folder == dest {
        return Ok(id.to_owned());
    }
    // Keep the unique name (the new id is then predictable) unless the destination already has
    // it: `rename` replaces an existing target, and a move must never clobber a message.
    let (unique, name) = if taken.contains(&file.unique) {
        let unique = new_unique(file.received);
        let suffix = file.file_name.get(file.unique.len()..).unwrap_or("");
        let name = format!("{unique}{suffix}");
        (unique, name)
    } else {
        (file.unique.clone(), file.file_name.clone())
    };
    dir.rename(
        format!("{}/{}", file.sub, file.file_name),
        dest_dir,
        format!("{}/{name}", file.sub),
    )?;
    sync_dir(dest_dir, file.sub);
    taken.insert(unique.clone());
    Ok(encode_id(dest, &unique))
}

fn copy_one(root: &Dir, id: &str, dest: &str, dest_dir: &Dir) -> ItemResult<String> {
    let (_, dir, file) = locate(root, id)?;
    let raw = read_file(&dir, &file)?;
    let publish = if file.sub == "new" {
        Publish::New
    } else {
        Publish::Cur(stored_flags(&file))
    };
    // The copy keeps the original delivery time, so it sorts and dates like its source.
    let unique = store_message(dest_dir, &raw, file.received, publish)?;
    Ok(encode_id(dest, &unique))
}

fn mark_one(root: &Dir, id: &str, read: bool) -> ItemResult<()> {
    let (_, dir, file) = locate(root, id)?;
    if file.sub == "new" && !read {
        // A message in new/ reads as unread whatever its name says.
        return Ok(());
    }
    let current = stored_flags(&file);
    let mut flags: BTreeSet<char> = current.chars().filter(|&c| c != 'S').collect();
    if read {
        flags.insert('S');
    }
    let flags: String = flags.into_iter().collect();
    if file.sub == "cur" && flags == current && file.file_name.contains(":2,") {
        return Ok(());
    }
    dir.rename(
        format!("{}/{}", file.sub, file.file_name),
        &dir,
        format!("cur/{}:2,{flags}", file.unique),
    )?;
    sync_dir(&dir, "cur");
    Ok(())
}
