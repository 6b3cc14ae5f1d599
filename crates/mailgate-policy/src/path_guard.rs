//! The one module with ambient filesystem authority, and the one place that decides whether a
//! file or folder on the host may be trusted.
//!
//! Everything else in the crate works on `cap_std::fs::Dir` capabilities handed out from here
//! (or on bytes read here), so a path that comes from mail content or a tool caller can never
//! reach the host filesystem directly. The clippy `disallowed_methods` list bans `std::fs` outside
//! this file; each ambient call below is marked and documented under `# Ambient Authority`.
//!
//! Invariants (every check is made on the opened descriptor, or on an `lstat` whose inode the
//! opened descriptor must match, so there is no check-then-open race):
//! - Trust follows ownership. A file that sets policy ([`read_private_file`]: `plugin.json`, the
//!   search-memory file; [`read_optional_trusted_file`]: `.env`, the SMTP `caFile`) and every
//!   folder and file of the state folder is accepted only when it is owned by the effective user
//!   (root is not exempt), is not a symlink, and grants nothing that lets another user change
//!   it. Private files (`0600` or stricter) must also have exactly one hard link, so the same
//!   inode cannot be edited through a name elsewhere.
//! - The state folder ([`open_state_dir`]) and everything in it ([`open_private_child`],
//!   [`append_private_file`], [`read_file_in`]) is private: a real directory owned by the
//!   effective user with no group or other bits, and entries opened without following a symlink.
//! - Error values name the rule that failed and carry no path: callers add the subject ("config
//!   file", "state folder") themselves.
//!
//! Who may call it: startup code (config loading, the state folder and what lives in it, the
//! download root, the demo). Request handlers get `Dir`s, never paths.

use std::io::{self, Read, Write as _};
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use cap_fs_ext::{DirExt as _, FollowSymlinks, OpenOptionsFollowExt, OpenOptionsSyncExt};
use cap_std::ambient_authority;
use cap_std::fs::{Dir, DirBuilder, DirBuilderExt as _, File, OpenOptions, OpenOptionsExt as _};
use cap_std::fs::{Permissions, PermissionsExt as _};

/// Why a file was refused. Messages are fragments meant to follow a subject, e.g.
/// "the config file is not usable: {error}", and never contain the path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PrivateFileError {
    #[error("it is not available (missing, or a parent directory is not accessible)")]
    NotAvailable,
    #[error("it must be a regular file (symlinks, directories and devices are refused)")]
    NotRegularFile,
    #[error("it must be owned by the user mailgate runs as (it belongs to another user)")]
    NotOwned,
    #[error("it must have exactly one hard link (copy it to a file of its own)")]
    HardLinked,
    #[error(
        "its permissions are too open (no group/other bits, owner must be able to read: chmod 600)"
    )]
    TooPermissive,
    #[error("its permissions are too open (group and others must not write: chmod go-w)")]
    WritableByOthers,
    #[error("it is larger than allowed")]
    TooLarge,
    #[error("it could not be read")]
    Unreadable,
    #[error("it could not be opened ({0})")]
    Io(io::ErrorKind),
}

/// How strict the permission check is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModeRule {
    /// `mode & 0o077 == 0` and `mode & 0o400 != 0` (the reference plugin's rule for plugin.json),
    /// and, for a file, exactly one hard link.
    Private,
    /// `mode & 0o022 == 0`: anyone may read, only the owner may write. A `.env` can fill unset
    /// gate variables (open a gate), so a group member must not be able to edit it.
    OwnerWriteOnly,
}

impl ModeRule {
    fn allows(self, mode: u32) -> bool {
        match self {
            ModeRule::Private => mode & 0o077 == 0 && mode & 0o400 != 0,
            ModeRule::OwnerWriteOnly => mode & 0o022 == 0,
        }
    }
}

/// The effective user id: the only owner whose files and folders are trusted.
fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// The ownership and permission rules for a file that is trusted (see the module invariants).
/// The order decides which rule a refusal names; each is a reason on its own.
fn check_trusted_file(meta: &std::fs::Metadata, rule: ModeRule) -> Result<(), PrivateFileError> {
    if !meta.is_file() {
        return Err(PrivateFileError::NotRegularFile);
    }
    // Another user's file is theirs to rewrite, whatever its mode says (the mode is theirs to
    // change too), and root gets no exemption: root reading another user's file is the case
    // where a planted file would be trusted.
    if meta.uid() != euid() {
        return Err(PrivateFileError::NotOwned);
    }
    if !rule.allows(meta.mode()) {
        return Err(match rule {
            ModeRule::Private => PrivateFileError::TooPermissive,
            ModeRule::OwnerWriteOnly => PrivateFileError::WritableByOthers,
        });
    }
    // A second name for the same inode can sit in a folder another user controls, and the file
    // would change under us through it.
    if rule == ModeRule::Private && meta.nlink() != 1 {
        return Err(PrivateFileError::HardLinked);
    }
    Ok(())
}

/// Outcome of a failed read: a missing file is distinguished so optional files can be skipped.
enum Failure {
    Missing,
    Refused(PrivateFileError),
}

/// Reads a private file (mode `0600` or stricter, owner-readable, owned by the effective user,
/// one hard link), bounded by `max_bytes`.
///
/// The last path component must not be a symlink (it is opened with `O_NOFOLLOW`), and it is
/// opened with `O_NONBLOCK` so a FIFO planted at the path cannot hang startup; the descriptor is
/// then `fstat`ed, so the checks and the read are about the same file.
///
/// # Ambient Authority
/// Opens `path` relative to the process's current directory with ambient authority.
pub fn read_private_file(path: &Path, max_bytes: u64) -> Result<Vec<u8>, PrivateFileError> {
    match read_checked(path, max_bytes, ModeRule::Private) {
        Ok(bytes) => Ok(bytes),
        Err(Failure::Missing) => Err(PrivateFileError::NotAvailable),
        Err(Failure::Refused(error)) => Err(error),
    }
}

/// Reads an optional operator file (such as `./.env`): `Ok(None)` when nothing exists at the
/// path; otherwise it must be a regular file (not a symlink) owned by the effective user that
/// others cannot write, no larger than `max_bytes`.
///
/// # Ambient Authority
/// Opens `path` relative to the process's current directory with ambient authority.
pub fn read_optional_trusted_file(
    path: &Path,
    max_bytes: u64,
) -> Result<Option<Vec<u8>>, PrivateFileError> {
    match read_checked(path, max_bytes, ModeRule::OwnerWriteOnly) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(Failure::Missing) => Ok(None),
        Err(Failure::Refused(error)) => Err(error),
    }
}

/// Opens an existing directory as a capability. Nothing is created and nothing is checked: for
/// folders that are only read and whose trust is the operator's (Maildir roots, `policy export`).
///
/// # Ambient Authority
/// Resolves `path` with ambient authority; the returned `Dir` confines everything after that.
pub fn open_dir(path: &Path) -> io::Result<Dir> {
    Dir::open_ambient_dir(path, ambient_authority())
}

/// Creates `path` and any missing parents with mode `0700` (existing directories keep their
/// mode), then opens it as a capability.
///
/// # Ambient Authority
/// Creates directories and resolves `path` with ambient authority.
// Only its own tests use it since the fuzz oracles take the scratch directory they are given.
#[cfg(test)]
pub(crate) fn create_private_dir_all(path: &Path) -> io::Result<Dir> {
    create_dirs(path)?;
    open_dir(path)
}

/// `mkdir -p` with mode `0700` for what it creates.
fn create_dirs(path: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    {
        use std::os::unix::fs::DirBuilderExt as _;
        builder.mode(0o700);
    }
    builder.create(path)
}

/// Why a directory was refused. Messages are fragments that follow a subject ("the state
/// folder is refused: …") and name the rule; they never contain the path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PrivateDirError {
    #[error("it does not exist")]
    Missing,
    #[error("it must be a real directory (a symlink or another file type is refused)")]
    NotADirectory,
    #[error("it must be owned by the user mailgate runs as (it belongs to another user)")]
    NotOwned,
    #[error("its permissions are too open (no group/other bits: chmod 700)")]
    TooPermissive,
    #[error("its permissions are too open (group and others must not write: chmod go-w)")]
    WritableByOthers,
    #[error("it was replaced while it was being opened")]
    Replaced,
    #[error("it could not be opened ({0})")]
    Io(io::ErrorKind),
}

fn check_trusted_dir(meta: &std::fs::Metadata, rule: ModeRule) -> Result<(), PrivateDirError> {
    if !meta.is_dir() {
        return Err(PrivateDirError::NotADirectory);
    }
    if meta.uid() != euid() {
        return Err(PrivateDirError::NotOwned);
    }
    if !rule.allows(meta.mode()) {
        return Err(match rule {
            ModeRule::Private => PrivateDirError::TooPermissive,
            ModeRule::OwnerWriteOnly => PrivateDirError::WritableByOthers,
        });
    }
    Ok(())
}

fn dir_io(error: io::Error) -> PrivateDirError {
    match error.kind() {
        io::ErrorKind::NotFound => PrivateDirError::Missing,
        kind => PrivateDirError::Io(kind),
    }
}

/// Opens an operator-named directory after checking it: a real directory (the last component
/// is not a symlink) owned by the effective user whose mode passes `rule`. With `create`,
/// missing directories (and parents) are created `0700` first; an existing one is never
/// chmodded, so a too-open folder is refused rather than silently changed.
///
/// # Ambient Authority
/// Creates, `lstat`s and opens `path` with ambient authority.
#[expect(
    clippy::disallowed_methods,
    reason = "path_guard is the one module allowed to inspect host paths"
)]
pub fn open_checked_dir(path: &Path, rule: ModeRule, create: bool) -> Result<Dir, PrivateDirError> {
    if create {
        create_dirs(path).map_err(dir_io)?;
    }
    let meta = std::fs::symlink_metadata(path).map_err(dir_io)?;
    check_trusted_dir(&meta, rule)?;
    let dir = open_dir(path).map_err(dir_io)?;
    // The path could have been swapped between the lstat and the open: the opened descriptor
    // must be the directory that was checked.
    let opened = crate::dir_fd::stat(&dir).map_err(dir_io)?;
    if (opened.dev(), opened.ino()) != (meta.dev(), meta.ino()) {
        return Err(PrivateDirError::Replaced);
    }
    Ok(dir)
}

/// Opens the state folder (`MAILGATE_HOME`, default `~/.mailgate`): [`open_checked_dir`] with
/// the private rule (no group or other bits), created `0700` when `create` is set.
pub fn open_state_dir(path: &Path, create: bool) -> Result<Dir, PrivateDirError> {
    open_checked_dir(path, ModeRule::Private, create)
}

/// Opens the folder `name` inside an already checked private folder without following a
/// symlink, creating it `0700` first when `create` is set, and checks the opened descriptor:
/// a directory owned by the effective user with no group or other bits.
pub fn open_private_child(parent: &Dir, name: &str, create: bool) -> Result<Dir, PrivateDirError> {
    if create {
        let mut builder = DirBuilder::new();
        builder.mode(0o700);
        match parent.create_dir_with(name, &builder) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(PrivateDirError::Io(e.kind())),
        }
    }
    let dir = match parent.open_dir_nofollow(name) {
        Ok(dir) => dir,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(PrivateDirError::Missing),
        // ELOOP / ENOTDIR: a symlink or a file where the folder should be.
        Err(e) => {
            return Err(match parent.symlink_metadata(name) {
                Ok(meta) if !meta.is_dir() => PrivateDirError::NotADirectory,
                _ => PrivateDirError::Io(e.kind()),
            });
        }
    };
    let meta = crate::dir_fd::stat(&dir).map_err(dir_io)?;
    check_trusted_dir(&meta, ModeRule::Private)?;
    Ok(dir)
}

/// Opens `parent/name` as a capability for a store that must stay private (the handoff root):
/// [`open_state_dir`] on `parent`, then [`open_private_child`]. With `create`, missing folders
/// are created `0700`; without it nothing is created and a missing folder (`parent` or `name`)
/// is [`PrivateDirError::Missing`].
// Only the handoff store's tests and the handoff bench open their roots this way.
#[cfg(any(test, feature = "test-support"))]
pub fn open_private_subdir(
    parent: &Path,
    name: &str,
    create: bool,
) -> Result<Dir, PrivateDirError> {
    let parent = open_state_dir(parent, create)?;
    open_private_child(&parent, name, create)
}

/// Opens (creating `0600` if missing) the file `name` in a checked private folder for
/// appending, without following a symlink and without blocking on a FIFO, and checks the
/// descriptor with the private rule (regular, ours, no group/other bits, one hard link).
pub fn append_private_file(dir: &Dir, name: &str) -> Result<std::fs::File, PrivateFileError> {
    let mut options = OpenOptions::new();
    options
        .append(true)
        .create(true)
        .mode(0o600)
        .follow(FollowSymlinks::No)
        .nonblock(true);
    let file = dir
        .open_with(name, &options)
        .map_err(|e| match dir.symlink_metadata(name) {
            Ok(meta) if !meta.is_file() => PrivateFileError::NotRegularFile,
            _ => PrivateFileError::Io(e.kind()),
        })?
        .into_std();
    let meta = file.metadata().map_err(|_| PrivateFileError::Unreadable)?;
    check_trusted_file(&meta, ModeRule::Private)?;
    Ok(file)
}

/// Reads the file `name` in a checked private folder, `Ok(None)` when it does not exist;
/// otherwise it must be a regular file (not a symlink) owned by the effective user whose mode
/// passes `rule` (with [`ModeRule::Private`], also one hard link), at most `max_bytes` long.
pub fn read_file_in(
    dir: &Dir,
    name: &str,
    rule: ModeRule,
    max_bytes: u64,
) -> Result<Option<Vec<u8>>, PrivateFileError> {
    let mut options = OpenOptions::new();
    options.read(true).follow(FollowSymlinks::No).nonblock(true);
    let file = match dir.open_with(name, &options) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(match dir.symlink_metadata(name) {
                Ok(meta) if !meta.is_file() => PrivateFileError::NotRegularFile,
                _ => PrivateFileError::Io(e.kind()),
            });
        }
    };
    let file = file.into_std();
    let meta = file.metadata().map_err(|_| PrivateFileError::Unreadable)?;
    check_trusted_file(&meta, rule)?;
    read_bounded(file, meta.len(), max_bytes).map(Some)
}

fn read_bounded(
    file: std::fs::File,
    len: u64,
    max_bytes: u64,
) -> Result<Vec<u8>, PrivateFileError> {
    if len > max_bytes {
        return Err(PrivateFileError::TooLarge);
    }
    // The file may grow between fstat and read: read one byte past the bound to notice.
    let mut bytes = Vec::new();
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|_| PrivateFileError::Unreadable)?;
    if u64::try_from(bytes.len()).map_or(true, |len| len > max_bytes) {
        return Err(PrivateFileError::TooLarge);
    }
    Ok(bytes)
}

fn read_checked(path: &Path, max_bytes: u64, rule: ModeRule) -> Result<Vec<u8>, Failure> {
    let mut options = OpenOptions::new();
    options.read(true).follow(FollowSymlinks::No).nonblock(true);
    let file = match File::open_ambient_with(path, &options, ambient_authority()) {
        Ok(file) => file,
        Err(error) => return Err(classify_open_failure(path, &error, rule)),
    };
    let file = file.into_std();
    let metadata = file
        .metadata()
        .map_err(|_| Failure::Refused(PrivateFileError::Unreadable))?;
    check_trusted_file(&metadata, rule).map_err(Failure::Refused)?;
    read_bounded(file, metadata.len(), max_bytes).map_err(Failure::Refused)
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
    // Includes the symlink case: O_NOFOLLOW made the open fail with ELOOP.
    match check_trusted_file(&metadata, rule) {
        Err(refusal) => Failure::Refused(refusal),
        Ok(()) => Failure::Refused(PrivateFileError::Unreadable),
    }
}

/// Creates the file `name` in `dir` exclusively (`O_CREAT|O_EXCL`, so neither an existing file
/// nor a symlink is ever written through), mode `0600`, writes `bytes` and fsyncs it. The callers
/// stage a temp file this way and rename it into place (the grant store, the handoff store and
/// its key); the folder's own fsync after the rename is theirs.
pub fn write_new_private(dir: &Dir, name: &str, bytes: &[u8]) -> io::Result<()> {
    let mut options = OpenOptions::new();
    options
        .write(true)
        .create_new(true)
        .mode(0o600)
        .follow(FollowSymlinks::No);
    let mut file: File = dir.open_with(name, &options)?;
    // The umask may have narrowed the mode; readers require exactly 0600 (owner read and no
    // group or other bits, see `ModeRule::Private`).
    file.set_permissions(Permissions::from_mode(0o600))?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(test)]
#[expect(
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
            Err(PrivateFileError::WritableByOthers)
        );
        let world_writable = file_with_mode(&dir, "world.env", b"A=1\n", 0o666);
        assert_eq!(
            read_optional_trusted_file(&world_writable, 1024),
            Err(PrivateFileError::WritableByOthers)
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

    /// A uid that is not ours (`nobody`): fixtures are given to it with `chown`.
    const OTHER_UID: u32 = 65534;

    /// Only root can give a file away, so the ownership tests run only as root (as CI does);
    /// elsewhere they say why they did nothing.
    #[expect(clippy::print_stderr, reason = "a skipped test says why")]
    fn running_as_root(test: &str) -> bool {
        let root = rustix::process::geteuid().is_root();
        if !root {
            eprintln!("skipping {test}: it needs root to chown a fixture to uid {OTHER_UID}");
        }
        root
    }

    fn give_away(path: &Path) {
        std::os::unix::fs::lchown(path, Some(OTHER_UID), None).expect("chown as root");
    }

    fn private_tempdir() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
            .expect("chmod");
        dir
    }

    fn mkdir_mode(path: &Path, mode: u32) {
        std::fs::create_dir(path).expect("mkdir");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    #[test]
    fn policy_files_owned_by_another_user_are_refused_even_for_root() {
        if !running_as_root("policy_files_owned_by_another_user_are_refused_even_for_root") {
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        // A plugin.json that passes every other rule (0600, one link), owned by someone else.
        let config = file_with_mode(&dir, "plugin.json", b"{}", 0o600);
        give_away(&config);
        assert_eq!(
            read_private_file(&config, 1024),
            Err(PrivateFileError::NotOwned)
        );
        // A shared .env: 0644, nobody else may write it by mode, but its owner can.
        let dotenv = file_with_mode(&dir, ".env", b"PLUGIN_ALLOW_WRITES=true\n", 0o644);
        give_away(&dotenv);
        assert_eq!(
            read_optional_trusted_file(&dotenv, 1024),
            Err(PrivateFileError::NotOwned)
        );
        let message = PrivateFileError::NotOwned.to_string();
        assert!(
            message.contains("owned by the user mailgate runs as"),
            "{message}"
        );
    }

    #[test]
    fn a_hard_linked_private_file_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = file_with_mode(&dir, "plugin.json", b"{}", 0o600);
        std::fs::hard_link(&config, dir.path().join("elsewhere.json")).expect("link");
        assert_eq!(
            read_private_file(&config, 1024),
            Err(PrivateFileError::HardLinked)
        );
        // The one-link rule is for private files; a shared .env may have several names.
        let dotenv = file_with_mode(&dir, ".env", b"A=1\n", 0o644);
        std::fs::hard_link(&dotenv, dir.path().join("copy.env")).expect("link");
        assert!(read_optional_trusted_file(&dotenv, 1024).is_ok());
    }

    #[test]
    fn the_state_folder_must_be_a_private_real_directory() {
        let tmp = private_tempdir();
        let fresh = tmp.path().join("fresh").join("state");
        open_state_dir(&fresh, true).expect("created");
        let mode = std::fs::symlink_metadata(&fresh)
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        assert_eq!(
            open_state_dir(&tmp.path().join("absent"), false).err(),
            Some(PrivateDirError::Missing)
        );
        assert!(!tmp.path().join("absent").exists(), "nothing created");

        let open = tmp.path().join("open");
        mkdir_mode(&open, 0o777);
        assert_eq!(
            open_state_dir(&open, true).err(),
            Some(PrivateDirError::TooPermissive)
        );
        let mode = std::fs::symlink_metadata(&open)
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(
            mode & 0o777,
            0o777,
            "never chmodded behind the operator's back"
        );

        let link = tmp.path().join("link");
        symlink(&fresh, &link).expect("symlink");
        assert_eq!(
            open_state_dir(&link, true).err(),
            Some(PrivateDirError::NotADirectory)
        );
        let file = file_with_mode(&tmp, "file", b"", 0o600);
        assert_eq!(
            open_state_dir(&file, false).err(),
            Some(PrivateDirError::NotADirectory)
        );
        // The explicit download folder may be readable by others, never writable by them.
        let shared = tmp.path().join("shared");
        mkdir_mode(&shared, 0o755);
        assert!(open_checked_dir(&shared, ModeRule::OwnerWriteOnly, false).is_ok());
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o775)).expect("chmod");
        assert_eq!(
            open_checked_dir(&shared, ModeRule::OwnerWriteOnly, false).err(),
            Some(PrivateDirError::WritableByOthers)
        );
    }

    #[test]
    fn a_state_folder_owned_by_another_user_is_refused_even_for_root() {
        if !running_as_root("a_state_folder_owned_by_another_user_is_refused_even_for_root") {
            return;
        }
        let tmp = private_tempdir();
        let theirs = tmp.path().join("theirs");
        mkdir_mode(&theirs, 0o700);
        give_away(&theirs);
        assert_eq!(
            open_state_dir(&theirs, true).err(),
            Some(PrivateDirError::NotOwned)
        );
        // A private child owned by someone else, inside our own state folder.
        let state = tmp.path().join("state");
        let state_dir = open_state_dir(&state, true).expect("state");
        mkdir_mode(&state.join("store"), 0o700);
        give_away(&state.join("store"));
        assert_eq!(
            open_private_child(&state_dir, "store", true).err(),
            Some(PrivateDirError::NotOwned)
        );
        let journal = file_with_mode(&tmp, "state/journal.jsonl", b"", 0o600);
        give_away(&journal);
        assert_eq!(
            append_private_file(&state_dir, "journal.jsonl").err(),
            Some(PrivateFileError::NotOwned)
        );
    }

    #[test]
    fn children_of_the_state_folder_are_opened_without_following_symlinks() {
        let tmp = private_tempdir();
        let state = tmp.path().join("state");
        let dir = open_state_dir(&state, true).expect("state");
        let elsewhere = tmp.path().join("elsewhere");
        mkdir_mode(&elsewhere, 0o700);
        symlink(&elsewhere, state.join("store")).expect("symlink");
        assert_eq!(
            open_private_child(&dir, "store", true).err(),
            Some(PrivateDirError::NotADirectory)
        );
        std::fs::write(state.join("plain"), b"").expect("file");
        assert_eq!(
            open_private_child(&dir, "plain", false).err(),
            Some(PrivateDirError::NotADirectory)
        );
        mkdir_mode(&state.join("wide"), 0o755);
        assert_eq!(
            open_private_child(&dir, "wide", true).err(),
            Some(PrivateDirError::TooPermissive)
        );
        assert_eq!(
            open_private_child(&dir, "absent", false).err(),
            Some(PrivateDirError::Missing)
        );
        open_private_child(&dir, "made", true).expect("created");
        let mode = std::fs::symlink_metadata(state.join("made"))
            .expect("stat")
            .permissions();
        assert_eq!(mode.mode() & 0o777, 0o700);
        // The convenience form checks both levels.
        assert_eq!(
            open_private_subdir(&state, "store", false).err(),
            Some(PrivateDirError::NotADirectory)
        );
    }

    #[test]
    fn private_files_in_the_state_folder() {
        use std::io::Write as _;
        let tmp = private_tempdir();
        let state = tmp.path().join("state");
        let dir = open_state_dir(&state, true).expect("state");
        let mut journal = append_private_file(&dir, "journal.jsonl").expect("created");
        journal.write_all(b"line\n").expect("append");
        let meta = std::fs::symlink_metadata(state.join("journal.jsonl")).expect("stat");
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(
            read_file_in(&dir, "journal.jsonl", ModeRule::Private, 1024),
            Ok(Some(b"line\n".to_vec()))
        );
        assert_eq!(
            read_file_in(&dir, "absent", ModeRule::Private, 1024),
            Ok(None)
        );
        assert_eq!(
            read_file_in(&dir, "journal.jsonl", ModeRule::Private, 2),
            Err(PrivateFileError::TooLarge)
        );

        let outside = file_with_mode(&tmp, "outside.jsonl", b"", 0o600);
        symlink(&outside, state.join("linked.jsonl")).expect("symlink");
        assert_eq!(
            append_private_file(&dir, "linked.jsonl").err(),
            Some(PrivateFileError::NotRegularFile)
        );
        assert_eq!(
            read_file_in(&dir, "linked.jsonl", ModeRule::Private, 1024),
            Err(PrivateFileError::NotRegularFile)
        );
        assert_eq!(
            std::fs::read(&outside).expect("read"),
            b"",
            "nothing appended"
        );
        file_with_mode(&tmp, "state/open.jsonl", b"", 0o666);
        assert_eq!(
            append_private_file(&dir, "open.jsonl").err(),
            Some(PrivateFileError::TooPermissive)
        );
        std::fs::hard_link(state.join("journal.jsonl"), tmp.path().join("alias.jsonl"))
            .expect("link");
        assert_eq!(
            append_private_file(&dir, "journal.jsonl").err(),
            Some(PrivateFileError::HardLinked)
        );
    }

    #[test]
    fn write_new_private_creates_a_private_file_and_never_writes_through_a_name() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let state = tmp.path().join("state");
        let dir = create_private_dir_all(&state).expect("create");
        write_new_private(&dir, "new.tmp", b"sealed").expect("write");
        assert_eq!(
            std::fs::read(state.join("new.tmp")).expect("read"),
            b"sealed"
        );
        let mode = std::fs::metadata(state.join("new.tmp"))
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            read_file_in(&dir, "new.tmp", ModeRule::Private, 1024),
            Ok(Some(b"sealed".to_vec()))
        );
        // An existing file is not replaced, and a symlink is not followed.
        let err = write_new_private(&dir, "new.tmp", b"other").expect_err("exists");
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(
            std::fs::read(state.join("new.tmp")).expect("read"),
            b"sealed"
        );
        let outside = file_with_mode(&tmp, "outside", b"", 0o600);
        symlink(&outside, state.join("linked.tmp")).expect("symlink");
        assert!(write_new_private(&dir, "linked.tmp", b"x").is_err());
        assert_eq!(std::fs::read(&outside).expect("read"), b"");
    }
}
