//! The one module with ambient filesystem authority.
//!
//! Everything else in the crate works on `cap_std::fs::Dir` capabilities handed out from here
//! (or on bytes read here), so a path that comes from mail content or a tool caller can never
//! reach the host filesystem directly. The clippy `disallowed_methods` list bans `std::fs` outside
//! this file; each ambient call below is marked and documented under `# Ambient Authority`.
//!
//! Invariants:
//! - [`read_private_file`] only returns the bytes of a regular file that was opened without
//!   following a symlink in its last component, whose mode (checked on the opened descriptor,
//!   not on the path, so there is no check-then-open race) grants nothing to group or others and
//!   lets the owner read, and that is no larger than the caller's bound.
//! - [`read_optional_trusted_file`] is the looser variant for operator files that may be shared
//!   read-only (`.env`): regular, not a symlink, not writable by others, bounded.
//! - Error values carry no path: callers add the context ("config file", ".env") themselves.
//!
//! Who may call it: startup code (config loading, state and download roots, the handoff store).
//! Request handlers get `Dir`s, never paths.

use std::io::{self, Read};
use std::path::Path;

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt, OpenOptionsSyncExt};
use cap_std::ambient_authority;
use cap_std::fs::{Dir, File, OpenOptions};

/// Why a file was refused. Messages are fragments meant to follow a subject, e.g.
/// "the config file is not usable: {error}", and never contain the path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PrivateFileError {
    #[error("it is not available (missing, or a parent directory is not accessible)")]
    NotAvailable,
    #[error("it must be a regular file (symlinks, directories and devices are refused)")]
    NotRegularFile,
    #[error(
        "its permissions are too open (no group/other bits, owner must be able to read: chmod 600)"
    )]
    TooPermissive,
    #[error("it is larger than allowed")]
    TooLarge,
    #[error("it could not be read")]
    Unreadable,
}

/// How strict the permission check is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ModeRule {
    /// `mode & 0o077 == 0` and `mode & 0o400 != 0` (the reference plugin's rule for plugin.json).
    Private,
    /// `mode & 0o022 == 0`: anyone may read, only the owner may write. A `.env` can fill unset
    /// gate variables (open a gate), so a group member must not be able to edit it.
    OwnerWriteOnly,
}

impl ModeRule {
    #[cfg(unix)]
    fn allows(self, mode: u32) -> bool {
        match self {
            ModeRule::Private => mode & 0o077 == 0 && mode & 0o400 != 0,
            ModeRule::OwnerWriteOnly => mode & 0o022 == 0,
        }
    }
}

/// Outcome of a failed read: a missing file is distinguished so optional files can be skipped.
enum Failure {
    Missing,
    Refused(PrivateFileError),
}

/// Reads a private file (mode `0600` or stricter, owner-readable), bounded by `max_bytes`.
///
/// The last path component must not be a symlink (it is opened with `O_NOFOLLOW`), and it is
/// opened with `O_NONBLOCK` so a FIFO planted at the path cannot hang startup; the descriptor is
/// then `fstat`ed, so the checks and the read are about the same file.
///
/// # Ambient Authority
/// Opens `path` relative to the process's current directory with ambient authority.
pub(crate) fn read_private_file(path: &Path, max_bytes: u64) -> Result<Vec<u8>, PrivateFileError> {
    match read_checked(path, max_bytes, ModeRule::Private) {
        Ok(bytes) => Ok(bytes),
        Err(Failure::Missing) => Err(PrivateFileError::NotAvailable),
        Err(Failure::Refused(error)) => Err(error),
    }
}

/// Reads an optional operator file (such as `./.env`): `Ok(None)` when nothing exists at the
/// path; otherwise it must be a regular file (not a symlink) that others cannot write, no larger
/// than `max_bytes`.
///
/// # Ambient Authority
/// Opens `path` relative to the process's current directory with ambient authority.
pub(crate) fn read_optional_trusted_file(
    path: &Path,
    max_bytes: u64,
) -> Result<Option<Vec<u8>>, PrivateFileError> {
    match read_checked(path, max_bytes, ModeRule::OwnerWriteOnly) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(Failure::Missing) => Ok(None),
        Err(Failure::Refused(error)) => Err(error),
    }
}

/// Opens an existing directory as a capability. Nothing is created.
///
/// # Ambient Authority
/// Resolves `path` with ambient authority; the returned `Dir` confines everything after that.
pub(crate) fn open_dir(path: &Path) -> io::Result<Dir> {
    Dir::open_ambient_dir(path, ambient_authority())
}

/// Creates `path` and any missing parents with mode `0700` (existing directories keep their
/// mode), then opens it as a capability.
///
/// # Ambient Authority
/// Creates directories and resolves `path` with ambient authority.
pub(crate) fn create_private_dir_all(path: &Path) -> io::Result<Dir> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        builder.mode(0o700);
    }
    builder.create(path)?;
    open_dir(path)
}

/// Why a private directory was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PrivateDirError {
    #[error("it does not exist")]
    Missing,
    #[error(
        "it or its parent is a symlink, is not owned by this user, or grants group/other access"
    )]
    NotPrivate,
    #[error("it could not be opened ({0})")]
    Io(io::ErrorKind),
}

/// Opens `parent/name` as a capability for a store that must stay private (the handoff root).
/// `parent` must be a real directory (not a symlink) owned by this user with no group or other
/// permission bits; `name` is opened without following a symlink. With `create`, missing
/// directories are created 0700 first; without it nothing is created and a missing directory
/// is [`PrivateDirError::Missing`]. The returned `Dir`'s own mode and owner are the caller's to
/// check (on the descriptor).
///
/// # Ambient Authority
/// Creates and `lstat`s `parent` and opens it with ambient authority.
#[expect(
    clippy::disallowed_methods,
    reason = "path_guard is the one module allowed to inspect host paths"
)]
pub(crate) fn open_private_subdir(
    parent: &Path,
    name: &str,
    create: bool,
) -> Result<Dir, PrivateDirError> {
    use cap_fs_ext::DirExt as _;
    use std::os::unix::fs::MetadataExt as _;
    let io = |e: io::Error| match e.kind() {
        io::ErrorKind::NotFound => PrivateDirError::Missing,
        kind => PrivateDirError::Io(kind),
    };
    if create {
        create_private_dir_all(parent).map_err(io)?;
    }
    let meta = std::fs::symlink_metadata(parent).map_err(io)?;
    let euid = rustix::process::geteuid().as_raw();
    if !meta.is_dir() || meta.uid() != euid || meta.mode() & 0o077 != 0 {
        return Err(PrivateDirError::NotPrivate);
    }
    let parent_dir = open_dir(parent).map_err(io)?;
    // The path could have been swapped between the lstat and the open: the opened descriptor
    // must be the directory that was checked.
    let opened = crate::dir_fd::stat(&parent_dir).map_err(io)?;
    if (opened.dev(), opened.ino()) != (meta.dev(), meta.ino()) {
        return Err(PrivateDirError::NotPrivate);
    }
    if create {
        let mut builder = cap_std::fs::DirBuilder::new();
        cap_std::fs::DirBuilderExt::mode(&mut builder, 0o700);
        match parent_dir.create_dir_with(name, &builder) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io(e)),
        }
    }
    match parent_dir.open_dir_nofollow(name) {
        Ok(dir) => Ok(dir),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(PrivateDirError::Missing),
        // ELOOP / ENOTDIR: a symlink or a file where the directory should be.
        Err(_) => Err(PrivateDirError::NotPrivate),
    }
}

fn read_checked(path: &Path, max_bytes: u64, rule: ModeRule) -> Result<Vec<u8>, Failure> {
    let mut options = OpenOptions::new();
    options.read(true).follow(FollowSymlinks::No).nonblock(true);
    let file = match File::open_ambient_with(path, &options, ambient_authority()) {
        Ok(file) => file,
        Err(error) => return Err(classify_open_failure(path, &error, rule)),
    };
    let mut file = file.into_std();
    let metadata = file
        .metadata()
        .map_err(|_| Failure::Refused(PrivateFileError::Unreadable))?;
    if !metadata.is_file() {
        return Err(Failure::Refused(PrivateFileError::NotRegularFile));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        if !rule.allows(metadata.mode()) {
            return Err(Failure::Refused(PrivateFileError::TooPermissive));
        }
    }
    if metadata.len() > max_bytes {
        return Err(Failure::Refused(PrivateFileError::TooLarge));
    }
    // The file may grow between fstat and read: read one byte past the bound to notice.
    let mut bytes = Vec::new();
    (&mut file)
        .take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|_| Failure::Refused(PrivateFileError::Unreadable))?;
    if u64::try_from(bytes.len()).map_or(true, |len| len > max_bytes) {
        return Err(Failure::Refused(PrivateFileError::TooLarge));
    }
    Ok(bytes)
}

/// Explains a failed open. Only used to pick the error message: nothing is opened through the
/// path after a failure, so a race here cannot change what gets read.
///
/// # Ambient Authority
/// `lstat`s `path` with ambient authority.
#[expect(
    clippy::disallowed_methods,
    reason = "path_guard is the one module allowed to inspect host paths"
)]
fn classify_open_failure(path: &Path, error: &io::Error, rule: ModeRule) -> Failure {
    let metadata = match std::fs::symlink_metadata(path) {
        Ok(metadata) => metadata,
        Err(_) if error.kind() == io::ErrorKind::NotFound => return Failure::Missing,
        Err(_) => return Failure::Refused(PrivateFileError::NotAvailable),
    };
    if !metadata.file_type().is_file() {
        // Includes the symlink case: O_NOFOLLOW made the open fail with ELOOP.
        return Failure::Refused(PrivateFileError::NotRegularFile);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        if !rule.allows(metadata.mode()) {
            return Failure::Refused(PrivateFileError::TooPermissive);
        }
    }
    #[cfg(not(unix))]
    let _ = rule;
    Failure::Refused(PrivateFileError::Unreadable)
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    reason = "tests build fixtures on the real filesystem inside a tempdir"
)]
mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt as _, symlink};
    use std::path::PathBuf;

    fn file_with_mode(dir: &tempfile::TempDir, name: &str, body: &[u8], mode: u32) -> PathBuf {
        let path = dir.path().join(name);
        std::fs::write(&path, body).expect("write fixture");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        path
    }

    #[test]
    fn accepts_0600_and_0400() {
        let dir = tempfile::tempdir().expect("tempdir");
        for (name, mode) in [("rw.json", 0o600), ("ro.json", 0o400)] {
            let path = file_with_mode(&dir, name, b"{\"ok\":1}", mode);
            assert_eq!(read_private_file(&path, 1024).expect(name), b"{\"ok\":1}");
        }
    }

    #[test]
    fn refuses_group_or_other_bits_and_missing_owner_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        for mode in [0o644, 0o640, 0o604, 0o660, 0o601, 0o200, 0o000] {
            let path = file_with_mode(&dir, &format!("m{mode:o}.json"), b"{}", mode);
            assert_eq!(
                read_private_file(&path, 1024),
                Err(PrivateFileError::TooPermissive),
                "mode {mode:o}"
            );
        }
    }

    #[test]
    fn refuses_a_symlink_even_to_a_private_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let target = file_with_mode(&dir, "real.json", b"{}", 0o600);
        let link = dir.path().join("link.json");
        symlink(&target, &link).expect("symlink");
        assert_eq!(
            read_private_file(&link, 1024),
            Err(PrivateFileError::NotRegularFile)
        );
        let dangling = dir.path().join("dangling.json");
        symlink(dir.path().join("nowhere"), &dangling).expect("symlink");
        assert_eq!(
            read_private_file(&dangling, 1024),
            Err(PrivateFileError::NotRegularFile)
        );
    }

    #[test]
    fn refuses_a_directory_and_a_fifo() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).expect("mkdir");
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        assert_eq!(
            read_private_file(&sub, 1024),
            Err(PrivateFileError::NotRegularFile)
        );

        let fifo = dir.path().join("fifo");
        let status = std::process::Command::new("mkfifo")
            .arg("-m")
            .arg("600")
            .arg(&fifo)
            .status()
            .expect("mkfifo runs");
        assert!(status.success());
        // Must return promptly (O_NONBLOCK) instead of waiting for a writer.
        assert_eq!(
            read_private_file(&fifo, 1024),
            Err(PrivateFileError::NotRegularFile)
        );
    }

    #[test]
    fn missing_file_is_not_available() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("absent.json");
        assert_eq!(
            read_private_file(&path, 1024),
            Err(PrivateFileError::NotAvailable)
        );
        let below_a_file = file_with_mode(&dir, "plain", b"x", 0o600).join("child.json");
        assert_eq!(
            read_private_file(&below_a_file, 1024),
            Err(PrivateFileError::NotAvailable)
        );
        assert_eq!(read_optional_trusted_file(&path, 1024), Ok(None));
    }

    #[test]
    fn enforces_the_size_bound() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = file_with_mode(&dir, "big.json", &[b'x'; 100], 0o600);
        assert_eq!(
            read_private_file(&path, 99),
            Err(PrivateFileError::TooLarge)
        );
        assert_eq!(read_private_file(&path, 100).expect("fits").len(), 100);
    }

    #[test]
    fn error_messages_carry_no_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = file_with_mode(&dir, "secretname.json", b"{}", 0o644);
        let message = read_private_file(&path, 1024)
            .expect_err("too open")
            .to_string();
        assert!(!message.contains("secretname"), "{message}");
    }

    #[test]
    fn trusted_file_rules() {
        let dir = tempfile::tempdir().expect("tempdir");
        let shared = file_with_mode(&dir, "shared.env", b"A=1\n", 0o644);
        assert_eq!(
            read_optional_trusted_file(&shared, 1024),
            Ok(Some(b"A=1\n".to_vec()))
        );
        let group_writable = file_with_mode(&dir, "group.env", b"A=1\n", 0o664);
        assert_eq!(
            read_optional_trusted_file(&group_writable, 1024),
            Err(PrivateFileError::TooPermissive)
        );
        let world_writable = file_with_mode(&dir, "world.env", b"A=1\n", 0o666);
        assert_eq!(
            read_optional_trusted_file(&world_writable, 1024),
            Err(PrivateFileError::TooPermissive)
        );
        let link = dir.path().join("link.env");
        symlink(&shared, &link).expect("symlink");
        assert_eq!(
            read_optional_trusted_file(&link, 1024),
            Err(PrivateFileError::NotRegularFile)
        );
        assert_eq!(
            read_optional_trusted_file(&shared, 2),
            Err(PrivateFileError::TooLarge)
        );
    }

    #[test]
    fn creates_private_dirs_and_keeps_existing_modes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let existing = dir.path().join("existing");
        std::fs::create_dir(&existing).expect("mkdir");
        std::fs::set_permissions(&existing, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let nested = existing.join("a").join("b");
        let opened = create_private_dir_all(&nested).expect("create");
        opened.write("probe", b"x").expect("the Dir is usable");
        let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode(&existing), 0o755);
        assert_eq!(mode(&existing.join("a")), 0o700);
        assert_eq!(mode(&nested), 0o700);
        // Idempotent on an existing directory.
        create_private_dir_all(&nested).expect("second create");
        assert!(open_dir(&nested).is_ok());
        assert!(open_dir(&dir.path().join("missing")).is_err());
    }
}
