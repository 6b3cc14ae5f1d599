//! A tantivy [`Directory`] over a cap-std [`Dir`]: the index reaches the disk only through the
//! capability of its own folder (dependency rule 1), never through an ambient path. Files are
//! read with positional reads instead of mmap (no `unsafe` in this crate, and pages of a mapped
//! index would count in the server's RSS), written `0600` without following symlinks, replaced
//! atomically by write-then-rename, and locked with `flock` so that a `kill -9` releases the
//! writer lock with the process (tantivy's default lock is a file that would outlive it).
//! Every file is checked on its opened descriptor before a byte of it is used
//! ([`check_private_file`]): a regular file owned by the user mailgate runs as, with no group or
//! other bits and exactly one hard link, as `path_guard` checks the state folder's other files.
//! A file planted by another user, opened up to others (`0666`), or hard-linked from a folder
//! another user controls is refused, so the index is never read from it.

use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt, OpenOptionsMaybeDirExt as _};
use cap_std::fs::OpenOptionsExt as _;
use cap_std::fs::{Dir, OpenOptions};
use tantivy::directory::error::{DeleteError, LockError, OpenReadError, OpenWriteError};
use tantivy::directory::{
    AntiCallToken, Directory, DirectoryLock, FileHandle, Lock, OwnedBytes, TerminatingWrite,
    WatchCallback, WatchHandle, WritePtr,
};

/// The index folder of one alias, shared by the reader and the writer of one process.
#[derive(Clone, Debug)]
pub(crate) struct CapDirectory {
    dir: Arc<Dir>,
}

impl CapDirectory {
    pub(crate) fn new(dir: Dir) -> Self {
        Self { dir: Arc::new(dir) }
    }
}

/// A file name inside the folder: tantivy's names are flat (`meta.json`, `<uuid>.idx`, …);
/// anything with a separator or a parent step is refused rather than resolved.
fn name(path: &Path) -> io::Result<&str> {
    let name = path
        .to_str()
        .filter(|n| !n.is_empty() && !n.contains('/') && *n != "." && *n != "..")
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a flat index file name"))?;
    Ok(name)
}

fn read_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.read(true).follow(FollowSymlinks::No);
    options
}

/// Why an index file was refused; the message names the rule, never the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum FileRefusal {
    #[error("an index file must be a regular file")]
    NotRegularFile,
    #[error("an index file must be owned by the user mailgate runs as")]
    NotOwned,
    #[error("an index file must not be readable or writable by group or others (chmod 600)")]
    TooPermissive,
    #[error("an index file must have exactly one hard link")]
    HardLinked,
}

impl From<FileRefusal> for io::Error {
    fn from(refusal: FileRefusal) -> Self {
        io::Error::new(io::ErrorKind::PermissionDenied, refusal)
    }
}

/// The checks every file of an index passes on its opened descriptor (`fstat`, so there is no
/// check-then-open race): a regular file, owned by the effective user (root included: root
/// reading a file another user planted is the case that matters), no group or other bits, one
/// hard link (a second name could sit in a folder another user controls).
pub(crate) fn check_private_file(file: &std::fs::File) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(FileRefusal::NotRegularFile.into());
    }
    if meta.uid() != rustix::process::geteuid().as_raw() {
        return Err(FileRefusal::NotOwned.into());
    }
    if meta.mode() & 0o077 != 0 {
        return Err(FileRefusal::TooPermissive.into());
    }
    if meta.nlink() != 1 {
        return Err(FileRefusal::HardLinked.into());
    }
    Ok(())
}

fn open_file(dir: &Dir, path: &Path) -> Result<std::fs::File, OpenReadError> {
    let n = name(path).map_err(|e| OpenReadError::wrap_io_error(e, path.to_owned()))?;
    let file = match dir.open_with(n, &read_options()) {
        Ok(f) => f.into_std(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(OpenReadError::FileDoesNotExist(path.to_owned()));
        }
        Err(e) => return Err(OpenReadError::wrap_io_error(e, path.to_owned())),
    };
    check_private_file(&file).map_err(|e| OpenReadError::wrap_io_error(e, path.to_owned()))?;
    Ok(file)
}

/// Writes `0600`, never through a symlink, and syncs on terminate (tantivy calls it before it
/// records a file in a commit).
struct SyncedFile(std::fs::File);

impl Write for SyncedFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl TerminatingWrite for SyncedFile {
    fn terminate_ref(&mut self, _: AntiCallToken) -> io::Result<()> {
        self.0.flush()?;
        self.0.sync_data()
    }
}

fn write_options(create_new: bool) -> OpenOptions {
    let mut options = OpenOptions::new();
    options.write(true).mode(0o600).follow(FollowSymlinks::No);
    if create_new {
        options.create_new(true);
    } else {
        options.create(true).truncate(true);
    }
    options
}

/// A file read by positional reads (a commit's files never change once written).
#[derive(Debug)]
struct ReadAtFile {
    file: std::fs::File,
    len: usize,
}

impl tantivy::HasLen for ReadAtFile {
    fn len(&self) -> usize {
        self.len
    }
}

impl FileHandle for ReadAtFile {
    fn read_bytes(&self, range: std::ops::Range<usize>) -> io::Result<OwnedBytes> {
        use std::os::unix::fs::FileExt as _;
        let end = range.end.min(self.len);
        if range.start > end {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "range past the end",
            ));
        }
        let mut buffer = vec![0; end - range.start];
        self.file.read_exact_at(&mut buffer, range.start as u64)?;
        Ok(OwnedBytes::new(buffer))
    }
}

/// The held writer or meta lock: an open descriptor with an `flock`, released when dropped or
/// when the process dies.
struct HeldLock(#[expect(dead_code, reason = "held for its flock until dropped")] std::fs::File);

impl Directory for CapDirectory {
    fn get_file_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        let file = open_file(&self.dir, path)?;
        let len = file
            .metadata()
            .map_err(|e| OpenReadError::wrap_io_error(e, path.to_owned()))?
            .len();
        Ok(Arc::new(ReadAtFile {
            file,
            len: usize::try_from(len).unwrap_or(usize::MAX),
        }))
    }

    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        let n = name(path).map_err(|e| DeleteError::IoError {
            io_error: Arc::new(e),
            filepath: path.to_owned(),
        })?;
        match self.dir.remove_file(n) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                Err(DeleteError::FileDoesNotExist(path.to_owned()))
            }
            Err(e) => Err(DeleteError::IoError {
                io_error: Arc::new(e),
                filepath: path.to_owned(),
            }),
        }
    }

    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        let n = name(path).map_err(|e| OpenReadError::wrap_io_error(e, path.to_owned()))?;
        Ok(self.dir.symlink_metadata(n).is_ok())
    }

    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        let n = name(path).map_err(|e| OpenWriteError::wrap_io_error(e, path.to_owned()))?;
        let file = match self.dir.open_with(n, &write_options(true)) {
            Ok(f) => f.into_std(),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(OpenWriteError::FileAlreadyExists(path.to_owned()));
            }
            Err(e) => return Err(OpenWriteError::wrap_io_error(e, path.to_owned())),
        };
        Ok(BufWriter::new(Box::new(SyncedFile(file))))
    }

    fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
        use std::io::Read as _;
        let mut file = open_file(&self.dir, path)?;
        let mut out = Vec::new();
        file.read_to_end(&mut out)
            .map_err(|e| OpenReadError::wrap_io_error(e, path.to_owned()))?;
        Ok(out)
    }

    fn atomic_write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        let n = name(path)?;
        let tmp = format!(".{n}.tmp");
        let mut file = self.dir.open_with(&tmp, &write_options(false))?.into_std();
        file.write_all(data)?;
        file.sync_data()?;
        self.dir.rename(&tmp, &self.dir, n)?;
        self.sync_directory()
    }

    fn sync_directory(&self) -> io::Result<()> {
        let mut options = OpenOptions::new();
        options.read(true).maybe_dir(true);
        self.dir.open_with(".", &options)?.into_std().sync_all()
    }

    fn acquire_lock(&self, lock: &Lock) -> Result<DirectoryLock, LockError> {
        let n = name(&lock.filepath).map_err(|e| LockError::IoError(Arc::new(e)))?;
        let mut options = OpenOptions::new();
        options
            .write(true)
            .create(true)
            .mode(0o600)
            .follow(FollowSymlinks::No);
        let file = self
            .dir
            .open_with(n, &options)
            .map_err(|e| LockError::IoError(Arc::new(e)))?
            .into_std();
        if lock.is_blocking {
            file.lock().map_err(|e| LockError::IoError(Arc::new(e)))?;
        } else {
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => return Err(LockError::LockBusy),
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(LockError::IoError(Arc::new(e)));
                }
            }
        }
        Ok(DirectoryLock::from(Box::new(HeldLock(file))))
    }

    fn watch(&self, _: WatchCallback) -> tantivy::Result<WatchHandle> {
        // Readers reload on demand (each search checks for a newer commit), so nothing watches.
        Ok(WatchHandle::empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> (tempfile::TempDir, CapDirectory) {
        let tmp = tempfile::tempdir().expect("tmp");
        let d = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).expect("dir");
        (tmp, CapDirectory::new(d))
    }

    #[test]
    fn names_with_separators_or_parent_steps_are_refused() {
        let (_tmp, d) = dir();
        for bad in ["../x", "a/b", "..", "/etc/passwd", ""] {
            assert!(d.open_write(Path::new(bad)).is_err(), "{bad}");
            assert!(d.atomic_read(Path::new(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_writer_lock_is_exclusive_and_dies_with_its_holder() {
        let (_tmp, d) = dir();
        let lock = Lock {
            filepath: ".tantivy-writer.lock".into(),
            is_blocking: false,
        };
        let held = d.acquire_lock(&lock).expect("first");
        assert!(matches!(d.acquire_lock(&lock), Err(LockError::LockBusy)));
        drop(held);
        d.acquire_lock(&lock).expect("free again once dropped");
    }

    #[test]
    fn atomic_write_replaces_and_files_are_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let (tmp, d) = dir();
        d.atomic_write(Path::new("meta.json"), b"one")
            .expect("write");
        d.atomic_write(Path::new("meta.json"), b"two")
            .expect("write");
        assert_eq!(d.atomic_read(Path::new("meta.json")).expect("read"), b"two");
        #[expect(
            clippy::disallowed_methods,
            reason = "the test inspects its own tempdir"
        )]
        let mode = std::fs::metadata(tmp.path().join("meta.json"))
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[expect(
        clippy::disallowed_methods,
        reason = "the test changes its own tempdir's files as another user would"
    )]
    fn chmod(path: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    #[test]
    fn files_open_to_others_or_with_a_second_name_are_refused() {
        let (tmp, d) = dir();
        d.atomic_write(Path::new("meta.json"), b"{}")
            .expect("write");
        let read = |d: &CapDirectory| {
            let handle = d.get_file_handle(Path::new("meta.json")).map(|_| ());
            let whole = d.atomic_read(Path::new("meta.json")).map(|_| ());
            (handle.is_ok(), whole.is_ok())
        };
        assert_eq!(read(&d), (true, true));
        for mode in [0o666, 0o644, 0o640, 0o604] {
            chmod(&tmp.path().join("meta.json"), mode);
            assert_eq!(read(&d), (false, false), "{mode:o}");
        }
        chmod(&tmp.path().join("meta.json"), 0o600);
        assert_eq!(read(&d), (true, true));
        let other = tempfile::tempdir().expect("tmp");
        #[expect(clippy::disallowed_methods, reason = "the test plants a second name")]
        std::fs::hard_link(tmp.path().join("meta.json"), other.path().join("x")).expect("link");
        assert_eq!(read(&d), (false, false), "hard-linked");
        let error = d.atomic_read(Path::new("meta.json")).expect_err("refused");
        assert!(format!("{error:?}").contains("HardLinked"), "{error}");
        assert!(
            !error
                .to_string()
                .contains(&tmp.path().display().to_string())
        );
    }

    #[test]
    fn files_of_another_user_are_refused_even_for_root() {
        if !rustix::process::geteuid().is_root() {
            return;
        }
        let (tmp, d) = dir();
        d.atomic_write(Path::new("meta.json"), b"{}")
            .expect("write");
        std::os::unix::fs::lchown(tmp.path().join("meta.json"), Some(65534), Some(65534))
            .expect("chown");
        let error = d.atomic_read(Path::new("meta.json")).expect_err("refused");
        assert!(format!("{error:?}").contains("NotOwned"), "{error}");
    }
}
