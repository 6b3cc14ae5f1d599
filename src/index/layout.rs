//! Where an alias's index lives: `<state>/index/<alias>/`, holding `text/` (the full-text
//! index), `sync.redb` (the sync process's cursors and versions), `status.json` (what the
//! server and `index status` read) and `vectors/` (semantic recall). Every folder is private
//! (`0700`, owned by the user, opened without following symlinks through `path_guard`) like
//! the rest of the state folder; the alias, a validated name of `[a-z0-9_-]`, is the only name
//! joined, and only as one component inside an opened `Dir`.

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

/// `<state>/index`, created `0700` when `create`.
pub(crate) fn open_root(state: &Dir, create: bool) -> Result<Dir, IndexError> {
    path_guard::open_private_child(state, ROOT, create).map_err(|e| refused("index folder", e))
}

/// `<state>/index/<alias>`, created when `create`.
pub(crate) fn open_alias(root: &Dir, alias: &Alias, create: bool) -> Result<Dir, IndexError> {
    path_guard::open_private_child(root, alias.as_str(), create)
        .map_err(|e| refused("alias index folder", e))
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
