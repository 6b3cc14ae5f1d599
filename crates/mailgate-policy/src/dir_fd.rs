//! Real descriptors for cap-std directories.
//!
//! On Linux a `cap_std::fs::Dir` holds an `O_PATH` descriptor: enough to resolve names beneath
//! it, but `fsync`, `flock` and `fchmod` on it fail with `EBADF`. Code that needs one of those on
//! a directory opens `.` through the `Dir` for reading here, which stays inside the capability
//! and yields an ordinary descriptor of the same directory.

use std::io;

use cap_std::fs::{Dir, OpenOptions};

/// An ordinary read-only descriptor of `dir` itself.
pub fn open(dir: &Dir) -> io::Result<std::fs::File> {
    let mut opts = OpenOptions::new();
    opts.read(true);
    Ok(dir.open_with(".", &opts)?.into_std())
}

/// `fstat` of `dir`: works on the `O_PATH` descriptor itself, so no read permission is needed.
pub fn stat(dir: &Dir) -> io::Result<std::fs::Metadata> {
    dir.try_clone()?.into_std_file().metadata()
}

/// `fsync`s `dir`, so renames and new entries in it survive a crash.
pub fn sync(dir: &Dir) -> io::Result<()> {
    open(dir)?.sync_all()
}

/// As [`sync`], logging (metadata only) instead of failing: for callers whose data is already
/// safely written and for whom the directory fsync only adds durability of the name.
pub fn sync_best_effort(dir: &Dir) {
    if let Err(e) = sync(dir) {
        tracing::warn!(kind = ?e.kind(), "a directory could not be fsynced");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cap_std_dir_can_be_synced_locked_and_statted() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = crate::path_guard::open_dir(tmp.path()).expect("open");
        // The raw capability descriptor cannot be fsynced: the reason this module exists.
        assert!(
            dir.try_clone()
                .expect("clone")
                .into_std_file()
                .sync_all()
                .is_err()
        );
        sync(&dir).expect("fsync through a real descriptor");
        let fd = open(&dir).expect("real fd");
        fd.try_lock().expect("flock");
        assert!(fd.metadata().expect("fstat").is_dir());
    }
}
