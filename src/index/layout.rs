//! Where an alias's index lives: `<state>/index/<alias>/`, holding `text/` (the full-text
//! index), `sync.redb` (the sync process's cursors and versions), `status.json` (what the
//! server and `index status` read) and `vectors/` (semantic recall). Every folder is private
//! (`0700`, owned by the user, opened without following symlinks through `path_guard`) like
//! the rest of the state folder; the alias, a validated name of `[a-z0-9_-]`, is the only name
//! joined, and only as one component inside an opened `Dir`. A folder that fails its check is
//! an error naming the rule, never "missing"; only `index purge --force` opens one anyway
//! ([`open_owned`]: a real folder of this user, whatever its mode), to remove it.

use cap_std::fs::Dir;

use super::IndexError;
use crate::alias::Alias;
use crate::path_guard::{self, PrivateDirError};

/// The folder of the indexes inside the state folder.
pub(crate) const ROOT: &str = "index";
/// The full-text index inside an alias's folder.
pub(crate) const TEXT: &str = "text";
/// The vectors inside an alias's folder.
pub(crate) const VECTORS: &str = "vectors";

fn refused(what: &str, e: PrivateDirError) -> IndexError {
    match e {
        PrivateDirError::Missing => IndexError::Missing,
        other => IndexError::Folder(format!("{what}: {other}")),
    }
}

/// What the refusals of [`open_root`] and [`open_alias`] call their folder.
pub(crate) const ROOT_NAME: &str = "index folder";
pub(crate) const ALIAS_NAME: &str = "alias index folder";

/// `<state>/index`, created `0700` when `create`.
pub(crate) fn open_root(state: &Dir, create: bool) -> Result<Dir, IndexError> {
    path_guard::open_private_child(state, ROOT, create).map_err(|e| refused(ROOT_NAME, e))
}

/// `<state>/index/<alias>`, created when `create`.
pub(crate) fn open_alias(root: &Dir, alias: &Alias, create: bool) -> Result<Dir, IndexError> {
    path_guard::open_private_child(root, alias.as_str(), create).map_err(|e| refused(ALIAS_NAME, e))
}

/// A private child folder of an alias's folder (`text`, `vectors`).
pub(crate) fn open_part(alias_dir: &Dir, part: &str, create: bool) -> Result<Dir, IndexError> {
    path_guard::open_private_child(alias_dir, part, create).map_err(|e| refused(part, e))
}

/// The names of the alias folders on disk (allowlisted or not), sorted.
pub(crate) fn aliases_on_disk(root: &Dir) -> Result<Vec<String>, IndexError> {
    let mut out = Vec::new();
    for entry in root
        .entries()
        .map_err(|e| IndexError::Folder(e.kind().to_string()))?
    {
        let entry = entry.map_err(|e| IndexError::Folder(e.kind().to_string()))?;
        if let Ok(name) = entry.file_name().into_string()
            && entry.file_type().is_ok_and(|t| t.is_dir())
        {
            out.push(name);
        }
    }
    out.sort();
    Ok(out)
}

/// Removes a part of an alias's folder (`text`, `vectors`) with everything in it, when present:
/// the first step of a rebuild, taken while the sync state's lock is held.
pub(crate) fn remove_part(alias_dir: &Dir, part: &str) -> Result<(), IndexError> {
    match alias_dir.remove_dir_all(part) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(IndexError::Folder(format!("{part}: {}", e.kind()))),
    }
}

/// Opens the folder `name` of `parent` for `index purge --force` only: a real directory (a
/// symlink is never followed) owned by the user mailgate runs as, whatever its mode. That is
/// the one case where removing what a refused folder holds is the operator's remedy (mail text
/// others may read); another user's folder is refused even then.
pub(crate) fn open_owned(parent: &Dir, name: &str, what: &str) -> Result<Dir, IndexError> {
    use cap_fs_ext::DirExt as _;
    use std::os::unix::fs::MetadataExt as _;
    let dir = match parent.open_dir_nofollow(name) {
        Ok(dir) => dir,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(IndexError::Missing),
        Err(_) => return Err(refused(what, PrivateDirError::NotADirectory)),
    };
    let meta =
        crate::dir_fd::stat(&dir).map_err(|e| refused(what, PrivateDirError::Io(e.kind())))?;
    if meta.uid() != rustix::process::geteuid().as_raw() {
        return Err(refused(what, PrivateDirError::NotOwned));
    }
    Ok(dir)
}

/// Removes an alias's whole index folder: text, vectors, sync state and status. Nothing of it
/// is left. A name that is not an alias (a stray folder) can be purged too: `name` is one
/// component inside the opened root, never a path.
pub(crate) fn purge(root: &Dir, name: &str) -> Result<bool, IndexError> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(IndexError::Folder("not an index folder name".to_owned()));
    }
    match root.remove_dir_all(name) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(IndexError::Folder(e.kind().to_string())),
    }
}

/// Size on disk of everything under `dir`, in bytes.
pub(crate) fn size_of(dir: &Dir) -> u64 {
    let mut total = 0;
    let Ok(entries) = dir.entries() else {
        return 0;
    };
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        if meta.is_dir() {
            if let Ok(sub) = entry.open_dir() {
                total += size_of(&sub);
            }
        } else {
            total += meta.len();
        }
    }
    total
}
