//! The bundle store on a cap-std [`Dir`] (layout and rules in the parent module doc).
//!
//! Invariants:
//! - A bundle is staged (directory, `payload.bin`, a complete manifest temp file, each fsynced)
//!   while the writer holds an exclusive `flock` on the bundle directory, then committed by one
//!   `rename` of the manifest temp to `manifest.json` under the store lock. A crash at any step
//!   leaves at most an uncommitted bundle, which no reader sees and which the next sweep removes
//!   once its lock is gone with the dead writer.
//! - Quotas are checked under the store lock against the committed manifests, immediately before
//!   the commit rename, so concurrent creates (threads or processes) can never overshoot one; a
//!   cheaper unlocked check runs first so an obviously full store refuses before any byte is
//!   written. Accounting reads manifests only; a corrupt or foreign entry is skipped (and logged),
//!   never counted and never a reason to refuse every create.
//! - An idempotency key maps to at most one committed bundle: the key digest is looked up again
//!   under the lock, so two concurrent creates with one key commit once and the other replays.
//! - Nothing is overwritten: files are created with `O_CREAT|O_EXCL`, bundle directories with
//!   `mkdir`, and every open of an existing entry refuses symlinks.
//! - Every committed manifest is sealed with the store key (`handoff::key`), and every read of a
//!   manifest (scan, get, payload reads, accounting) checks the seal: a bundle whose manifest or
//!   payload was replaced consistently (new bytes, new `sha256` and `size`) by someone without
//!   the key reads as corrupt. A store opened without a key (the CLI, before the server ever
//!   created one) serves nothing and creates nothing.

use std::collections::BTreeSet;
use std::io::{self, Read as _};
use std::os::unix::fs::MetadataExt as _;
use std::time::Duration;

use cap_fs_ext::{DirExt as _, FollowSymlinks, OpenOptionsFollowExt as _, OpenOptionsSyncExt as _};
use cap_std::fs::{Dir, DirBuilder, DirBuilderExt as _, OpenOptions, OpenOptionsExt as _};
use chrono::{DateTime, Utc};
use sha2::{Digest as _, Sha256};

use super::id::{HandoffId, HandoffRequest};
use super::key::{self, KEY_FILE, KEY_TMP, KeyError, StoreKey};
use super::manifest::{self, Manifest, ManifestError};
use super::{CrashPoint, HandoffError, Quota};
use crate::dir_fd;
use crate::downloads::SafeFileName;

pub(crate) const PAYLOAD: &str = "payload.bin";
pub(crate) const MANIFEST: &str = "manifest.json";
pub(crate) const LOCK: &str = ".lock";
const PAYLOAD_TMP: &str = ".payload.bin.tmp";
const MANIFEST_TMP: &str = ".manifest.json.tmp";
/// The store lock is retried this often, this far apart, before `HANDOFF_BUSY`.
const LOCK_ATTEMPTS: u32 = 250;
const LOCK_PAUSE: Duration = Duration::from_millis(20);
const READ_CHUNK: usize = 64 * 1024;

/// The operator's limits (plugin.json) and the bundle lifetime.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StoreLimits {
    pub(crate) max_attachment_bytes: u64,
    pub(crate) max_store_bytes: u64,
    pub(crate) max_entries: usize,
    pub(crate) ttl: Duration,
}

impl StoreLimits {
    /// The plugin.json quotas and the bundle lifetime (`MAILGATE_HANDOFF_TTL_HOURS`).
    pub(crate) fn new(limits: &crate::config::Limits, ttl: Duration) -> StoreLimits {
        StoreLimits {
            max_attachment_bytes: limits.max_handoff_attachment_bytes,
            max_store_bytes: limits.max_handoff_store_bytes,
            max_entries: limits.max_handoff_store_entries,
            ttl,
        }
    }
}

/// The handoff root as a capability, with the identity every entry must be owned by and the key
/// that seals its manifests.
pub(crate) struct HandoffStore {
    root: Dir,
    euid: u32,
    limits: StoreLimits,
    crash_at: Option<CrashPoint>,
    /// `None` only for a store opened by [`HandoffStore::open_existing`] whose root has no key
    /// file: then no manifest verifies and nothing can be created.
    key: Option<StoreKey>,
}

/// One root entry as the scan sees it (manifests only, payloads are not read).
#[derive(Debug)]
pub(crate) enum Entry {
    Committed(Manifest),
    /// A bundle directory without `manifest.json` (being written, or left by a crash).
    Uncommitted,
    Corrupt(&'static str),
    /// Not a bundle name at all (mailgate never writes one).
    Foreign,
}

/// A successful create.
#[derive(Debug)]
pub(crate) struct Created {
    pub(crate) manifest: Manifest,
    /// True when the idempotency key already had a bundle (nothing new was written).
    pub(crate) replayed: bool,
}

/// What a sweep removed and what it left.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct SweepReport {
    pub(crate) expired_removed: usize,
    pub(crate) uncommitted_removed: usize,
    /// Uncommitted bundles still locked by a live writer.
    pub(crate) in_progress: usize,
    /// Entries left alone: corrupt bundles, foreign names, bundles holding unexpected files.
    pub(crate) left_in_place: usize,
}

/// Why the root itself is refused at open.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OpenError {
    #[error("the handoff root could not be opened ({0})")]
    Io(io::ErrorKind),
    #[error("the handoff root must be a directory owned by this user with mode 0700")]
    NotPrivate,
    #[error("{0}")]
    Key(#[from] KeyError),
    #[error("the handoff store lock could not be taken to create its key ({0})")]
    Lock(HandoffError),
}

/// What the commit step decided.
enum Verdict {
    Committed,
    /// Another create with the same key and request committed first.
    Replay(HandoffId),
    Refused(HandoffError),
}

/// A staged bundle: its directory and the lock that keeps the sweep away from it.
struct Staged {
    id: HandoffId,
    dir: Dir,
    manifest: Manifest,
    _lock: std::fs::File,
}

impl HandoffStore {
    /// Wraps an opened root after checking it is a 0700 directory owned by this user (the path
    /// checks are `path_guard`'s), and loads its key, creating it under the store lock when the
    /// root has none yet (the server). Does not sweep: see [`HandoffStore::sweep`].
    pub(crate) fn new(
        root: Dir,
        limits: StoreLimits,
        crash_at: Option<CrashPoint>,
    ) -> Result<HandoffStore, OpenError> {
        let mut store = Self::checked(root, limits, crash_at)?;
        let loaded = key::load(&store.root, store.euid)?;
        let key = match loaded {
            Some(key) => key,
            None => {
                let _lock = store.lock().map_err(OpenError::Lock)?;
                key::load_or_create(&store.root, store.euid)?
            }
        };
        store.key = Some(key);
        Ok(store)
    }

    /// As [`HandoffStore::new`] but never creates the key (the operator CLI, which creates
    /// nothing): without one, every bundle reads as corrupt.
    pub(crate) fn open_existing(root: Dir, limits: StoreLimits) -> Result<HandoffStore, OpenError> {
        let mut store = Self::checked(root, limits, None)?;
        store.key = key::load(&store.root, store.euid)?;
        Ok(store)
    }

    fn checked(
        root: Dir,
        limits: StoreLimits,
        crash_at: Option<CrashPoint>,
    ) -> Result<HandoffStore, OpenError> {
        let euid = rustix::process::geteuid().as_raw();
        let meta = dir_fd::stat(&root).map_err(|e| OpenError::Io(e.kind()))?;
        if !meta.is_dir() || meta.uid() != euid || meta.mode() & 0o7777 != 0o700 {
            return Err(OpenError::NotPrivate);
        }
        Ok(HandoffStore {
            root,
            euid,
            limits,
            crash_at,
            key: None,
        })
    }

    /// The store key, or the refusal every read and create gives without one.
    fn key(&self) -> Result<&StoreKey, HandoffError> {
        self.key.as_ref().ok_or(HandoffError::Corrupt(
            "the handoff store has no key (.key), so no bundle can be verified",
        ))
    }

    pub(crate) fn limits(&self) -> &StoreLimits {
        &self.limits
    }

    /// The committed bundle for `request`'s idempotency key, fully revalidated; `None` when the
    /// key is unused (or its bundle expired). A key bound to another request is a mismatch.
    pub(crate) fn find_by_key(
        &self,
        request: &HandoffRequest,
    ) -> Result<Option<Manifest>, HandoffError> {
        let now = Utc::now();
        let key = request.key_digest();
        for (_, entry) in self.scan()? {
            if let Entry::Committed(m) = entry
                && m.key_digest == key
                && !self.is_expired(&m, now)
            {
                if m.fingerprint != request.fingerprint() {
                    return Err(HandoffError::IdempotencyMismatch);
                }
                return self.get(&m.id).map(Some);
            }
        }
        Ok(None)
    }

    /// Creates a bundle for `bytes`, or replays the committed one for the same key.
    pub(crate) fn create(
        &self,
        request: &HandoffRequest,
        filename: SafeFileName,
        content_type: &str,
        bytes: &[u8],
    ) -> Result<Created, HandoffError> {
        let size = bytes.len() as u64;
        if size > self.limits.max_attachment_bytes {
            return Err(HandoffError::QuotaExceeded(Quota::AttachmentBytes));
        }
        self.key()?;
        // Unlocked, so only a hint: the authoritative check is in `commit`.
        let (entries, used) = self.usage(&self.scan()?, Utc::now());
        self.check_room(entries, used, size)?;
        let staged = self.stage(request, filename, content_type, bytes)?;
        self.commit(staged, request)
    }

    /// Full revalidation of one bundle (see the parent module doc).
    pub(crate) fn get(&self, id: &HandoffId) -> Result<Manifest, HandoffError> {
        self.read(id, false).map(|(m, _)| m)
    }

    /// As [`HandoffStore::get`], and returns the payload that was hashed, so the bytes a caller
    /// uses are the bytes that were verified.
    pub(crate) fn read_payload(&self, id: &HandoffId) -> Result<(Manifest, Vec<u8>), HandoffError> {
        self.read(id, true)
    }

    /// Every root entry, by name, sorted; reads manifests only.
    pub(crate) fn scan(&self) -> Result<Vec<(String, Entry)>, HandoffError> {
        let mut out = Vec::new();
        for entry in self.root.entries()? {
            let name = entry?.file_name().to_string_lossy().into_owned();
            if [LOCK, KEY_FILE, KEY_TMP, super::RELEASE].contains(&name.as_str()) {
                continue;
            }
            let state = match HandoffId::parse(&name) {
                Err(_) => Entry::Foreign,
                Ok(id) => match self.read_manifest(&id) {
                    Ok(Some(m)) => Entry::Committed(m),
                    Ok(None) => Entry::Uncommitted,
                    Err(HandoffError::Corrupt(why)) => Entry::Corrupt(why),
                    Err(HandoffError::NotFound) => continue,
                    // One unreadable entry must not make every create fail: it is reported
                    // and skipped like a corrupt one.
                    Err(_) => Entry::Corrupt("the bundle could not be read"),
                },
            };
            out.push((name, state));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// Removes one bundle (operator command): the manifest first, so the bundle stops existing
    /// for readers before its payload goes.
    pub(crate) fn remove(&self, id: &HandoffId) -> Result<(), HandoffError> {
        let _lock = self.lock()?;
        let dir = self.open_bundle(id)?;
        if !remove_residue(&self.root, id, &dir)? {
            return Err(HandoffError::Corrupt(
                "the bundle holds files mailgate did not write; they were left in place",
            ));
        }
        dir_fd::sync_best_effort(&self.root);
        Ok(())
    }

    /// Removes expired bundles and uncommitted ones no live writer holds. Run at startup and by
    /// `mailgate handoff prune`; corrupt and foreign entries are reported, never deleted.
    pub(crate) fn sweep(&self) -> Result<SweepReport, HandoffError> {
        let _lock = self.lock()?;
        let now = Utc::now();
        let mut report = SweepReport::default();
        for (name, entry) in self.scan()? {
            let Ok(id) = HandoffId::parse(&name) else {
                report.left_in_place += 1;
                continue;
            };
            match entry {
                Entry::Committed(m) if self.is_expired(&m, now) => {
                    let dir = self.open_bundle(&id)?;
                    if remove_residue(&self.root, &id, &dir)? {
                        report.expired_removed += 1;
                    } else {
                        report.left_in_place += 1;
                    }
                }
                Entry::Uncommitted => match self.take_abandoned(&id)? {
                    // The bundle lock is held until the removal is over.
                    Some((dir, _lock)) if remove_residue(&self.root, &id, &dir)? => {
                        report.uncommitted_removed += 1;
                    }
                    Some(_) => report.left_in_place += 1,
                    None => report.in_progress += 1,
                },
                Entry::Committed(_) => {}
                Entry::Corrupt(_) | Entry::Foreign => report.left_in_place += 1,
            }
        }
        dir_fd::sync_best_effort(&self.root);
        Ok(report)
    }

    pub(crate) fn is_expired(&self, manifest: &Manifest, now: DateTime<Utc>) -> bool {
        expiry(manifest, self.limits.ttl) <= now
    }

    /// Entries and bytes of the committed, unexpired bundles in `scan`.
    fn usage(&self, scan: &[(String, Entry)], now: DateTime<Utc>) -> (usize, u64) {
        let mut entries = 0usize;
        let mut bytes = 0u64;
        for (_, entry) in scan {
            match entry {
                Entry::Committed(m) if !self.is_expired(m, now) => {
                    entries += 1;
                    bytes = bytes.saturating_add(m.size);
                }
                Entry::Corrupt(why) => {
                    tracing::warn!(reason = why, "a corrupt handoff bundle was skipped");
                }
                Entry::Foreign => {
                    tracing::warn!("a foreign entry in the handoff root was skipped");
                }
                _ => {}
            }
        }
        (entries, bytes)
    }

    fn check_room(&self, entries: usize, used: u64, size: u64) -> Result<(), HandoffError> {
        if entries.saturating_add(1) > self.limits.max_entries {
            return Err(HandoffError::QuotaExceeded(Quota::StoreEntries));
        }
        if used.saturating_add(size) > self.limits.max_store_bytes {
            return Err(HandoffError::QuotaExceeded(Quota::StoreBytes));
        }
        Ok(())
    }

    /// Writes an uncommitted bundle under a fresh id (see the module invariants).
    fn stage(
        &self,
        request: &HandoffRequest,
        filename: SafeFileName,
        content_type: &str,
        bytes: &[u8],
    ) -> Result<Staged, HandoffError> {
        let key = self.key()?;
        let (id, dir, lock) = self.new_bundle_dir()?;
        let staged = (|| {
            crate::path_guard::write_new_private(&dir, PAYLOAD_TMP, bytes)?;
            self.crash_point(CrashPoint::AfterPayloadTemp);
            dir.rename(PAYLOAD_TMP, &dir, PAYLOAD)?;
            dir_fd::sync(&dir)?;
            self.crash_point(CrashPoint::AfterPayloadRename);
            let mut manifest = Manifest {
                id: id.clone(),
                fingerprint: request.fingerprint(),
                key_digest: request.key_digest(),
                source_alias: request.alias.clone(),
                filename,
                content_type: manifest::content_type(content_type),
                size: bytes.len() as u64,
                sha256: hex::encode(Sha256::digest(bytes)),
                created_at: now_seconds(),
                mac: String::new(),
            };
            manifest.mac = key.tag(&manifest);
            let manifest_bytes = manifest.to_bytes();
            if self.crash_at == Some(CrashPoint::DuringManifest) {
                let half = &manifest_bytes[..manifest_bytes.len() / 2];
                crate::path_guard::write_new_private(&dir, MANIFEST_TMP, half)?;
                self.crash_point(CrashPoint::DuringManifest);
            }
            crate::path_guard::write_new_private(&dir, MANIFEST_TMP, &manifest_bytes)?;
            dir_fd::sync(&dir)?;
            Ok(manifest)
        })();
        match staged {
            Ok(manifest) => Ok(Staged {
                id,
                dir,
                manifest,
                _lock: lock,
            }),
            Err(e) => {
                discard(&self.root, &id, &dir);
                Err(e)
            }
        }
    }

    /// Commits a staged bundle under the store lock, or discards it (replay, mismatch, quota,
    /// failure).
    fn commit(&self, staged: Staged, request: &HandoffRequest) -> Result<Created, HandoffError> {
        self.hold_before_lock();
        let verdict = self
            .decide(&staged, request)
            .unwrap_or_else(Verdict::Refused);
        let (id, replayed) = match verdict {
            Verdict::Committed => (staged.id.clone(), false),
            Verdict::Replay(id) => {
                discard(&self.root, &staged.id, &staged.dir);
                (id, true)
            }
            Verdict::Refused(e) => {
                discard(&self.root, &staged.id, &staged.dir);
                return Err(e);
            }
        };
        drop(staged);
        Ok(Created {
            manifest: self.get(&id)?,
            replayed,
        })
    }

    /// Under the store lock: replay for a key that committed meanwhile, refuse over quota, or
    /// commit with the manifest rename.
    fn decide(&self, staged: &Staged, request: &HandoffRequest) -> Result<Verdict, HandoffError> {
        let _lock = self.lock()?;
        let now = Utc::now();
        let scan = self.scan()?;
        let key = request.key_digest();
        let same_key = scan.iter().find_map(|(_, e)| match e {
            Entry::Committed(m) if m.key_digest == key && !self.is_expired(m, now) => Some(m),
            _ => None,
        });
        if let Some(existing) = same_key {
            return Ok(if existing.fingerprint == request.fingerprint() {
                Verdict::Replay(existing.id.clone())
            } else {
                Verdict::Refused(HandoffError::IdempotencyMismatch)
            });
        }
        let (entries, used) = self.usage(&scan, now);
        if let Err(e) = self.check_room(entries, used, staged.manifest.size) {
            return Ok(Verdict::Refused(e));
        }
        self.crash_point(CrashPoint::BeforeCommit);
        staged.dir.rename(MANIFEST_TMP, &staged.dir, MANIFEST)?;
        dir_fd::sync_best_effort(&staged.dir);
        dir_fd::sync_best_effort(&self.root);
        Ok(Verdict::Committed)
    }

    /// A new, empty, locked bundle directory under a fresh random id.
    fn new_bundle_dir(&self) -> Result<(HandoffId, Dir, std::fs::File), HandoffError> {
        let mut builder = DirBuilder::new();
        builder.mode(0o700);
        for _ in 0..4 {
            let id = HandoffId::random();
            match self.root.create_dir_with(id.as_str(), &builder) {
                Ok(()) => {}
                // 256 random bits do not collide; an existing name was planted. Try another.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e.into()),
            }
            let dir = match self.root.open_dir_nofollow(id.as_str()) {
                Ok(dir) => dir,
                // A concurrent sweep saw the empty directory and removed it already.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e.into()),
            };
            let lock = dir_fd::open(&dir)?;
            // A sweep that saw the empty directory may hold its lock or have removed it: give
            // it up to the sweep and take another id.
            if lock.try_lock().is_err() || !self.still_linked(&id, &dir)? {
                continue;
            }
            set_mode(&dir, 0o700)?;
            return Ok((id, dir, lock));
        }
        Err(HandoffError::Busy)
    }

    /// Whether `dir` is still the directory named `id` in the root.
    fn still_linked(&self, id: &HandoffId, dir: &Dir) -> Result<bool, HandoffError> {
        let held = dir_fd::stat(dir)?;
        Ok(match self.root.open_dir_nofollow(id.as_str()) {
            Ok(now) => {
                let now = dir_fd::stat(&now)?;
                (now.dev(), now.ino()) == (held.dev(), held.ino())
            }
            Err(_) => false,
        })
    }

    /// An uncommitted bundle whose writer is gone, with its lock held for the removal; `None`
    /// while a writer still holds it or when it committed meanwhile.
    fn take_abandoned(&self, id: &HandoffId) -> Result<Option<(Dir, std::fs::File)>, HandoffError> {
        let dir = match self.root.open_dir_nofollow(id.as_str()) {
            Ok(dir) => dir,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let lock = dir_fd::open(&dir)?;
        if lock.try_lock().is_err() {
            return Ok(None);
        }
        // Commits happen under the bundle lock: with it held, absence of the manifest is final.
        if exists_nofollow(&dir, MANIFEST)? {
            return Ok(None);
        }
        Ok(Some((dir, lock)))
    }

    /// The store lock: an exclusive `flock` on `<root>/.lock` (created 0600 on first use, never
    /// removed), retried for up to five seconds.
    fn lock(&self) -> Result<std::fs::File, HandoffError> {
        let mut opts = OpenOptions::new();
        opts.read(true)
            .write(true)
            .create(true)
            .mode(0o600)
            .follow(FollowSymlinks::No)
            .nonblock(true);
        let file = self.root.open_with(LOCK, &opts)?.into_std();
        let meta = file.metadata()?;
        if !meta.is_file() || meta.uid() != self.euid || meta.nlink() != 1 {
            return Err(HandoffError::Corrupt("the store lock file is not ours"));
        }
        for _ in 0..LOCK_ATTEMPTS {
            match file.try_lock() {
                Ok(()) => return Ok(file),
                Err(std::fs::TryLockError::WouldBlock) => std::thread::sleep(LOCK_PAUSE),
                Err(std::fs::TryLockError::Error(e)) => return Err(e.into()),
            }
        }
        Err(HandoffError::Busy)
    }

    fn open_bundle(&self, id: &HandoffId) -> Result<Dir, HandoffError> {
        match self.root.open_dir_nofollow(id.as_str()) {
            Ok(dir) => Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(HandoffError::NotFound),
            // A symlink (ELOOP/ENOTDIR) or a plain file under a bundle name.
            Err(_) => Err(HandoffError::Corrupt("the bundle is not a directory")),
        }
    }

    /// The manifest of bundle `id` after the directory and file checks; `None` when the bundle
    /// has no manifest (uncommitted). Does not read the payload.
    fn read_manifest(&self, id: &HandoffId) -> Result<Option<Manifest>, HandoffError> {
        self.manifest_in(id, &self.open_bundle(id)?)
    }

    fn manifest_in(&self, id: &HandoffId, dir: &Dir) -> Result<Option<Manifest>, HandoffError> {
        self.check_owned(&dir_fd::stat(dir)?, Kind::Dir)?;
        let bytes = match self.read_file(dir, MANIFEST, manifest::MAX_BYTES)? {
            Some(bytes) => bytes,
            None => return Ok(None),
        };
        let manifest = Manifest::parse(&bytes).map_err(|e| {
            HandoffError::Corrupt(match e {
                ManifestError::Version => {
                    "the manifest is of another version (a bundle from before sealed manifests \
                     is not served; remove it)"
                }
                _ => "the manifest does not have the version-2 shape",
            })
        })?;
        if manifest.id != *id {
            return Err(HandoffError::Corrupt(
                "the manifest names another handoff id",
            ));
        }
        // After the shape checks, before anything trusts a field: size, sha256, alias, expiry.
        if !self.key()?.verifies(&manifest) {
            return Err(HandoffError::Corrupt(
                "the manifest's MAC does not match the store key (edited or forged)",
            ));
        }
        Ok(Some(manifest))
    }

    /// Full revalidation; with `keep`, also returns the verified payload bytes.
    fn read(&self, id: &HandoffId, keep: bool) -> Result<(Manifest, Vec<u8>), HandoffError> {
        let dir = self.open_bundle(id)?;
        let manifest = self.manifest_in(id, &dir)?.ok_or(HandoffError::NotFound)?;
        let mut names = BTreeSet::new();
        for entry in dir.entries()? {
            names.insert(entry?.file_name().to_string_lossy().into_owned());
        }
        if names != BTreeSet::from([MANIFEST.to_owned(), PAYLOAD.to_owned()]) {
            return Err(HandoffError::Corrupt(
                "the bundle must hold exactly payload.bin and manifest.json",
            ));
        }
        let mut file = self
            .open_checked(&dir, PAYLOAD)?
            .ok_or(HandoffError::Corrupt("the payload is missing"))?;
        let before = file.metadata()?;
        if before.len() != manifest.size {
            return Err(HandoffError::Corrupt(
                "the payload size differs from the manifest",
            ));
        }
        let mut hasher = Sha256::new();
        let mut kept = Vec::new();
        let mut buf = vec![0u8; READ_CHUNK];
        let mut total = 0u64;
        loop {
            let n = file.read(&mut buf)?;
            if n == 0 {
                break;
            }
            total += n as u64;
            if total > manifest.size {
                return Err(HandoffError::Corrupt("the payload grew while it was read"));
            }
            hasher.update(&buf[..n]);
            if keep {
                kept.extend_from_slice(&buf[..n]);
            }
        }
        if total != manifest.size || hex::encode(hasher.finalize()) != manifest.sha256 {
            return Err(HandoffError::Corrupt(
                "the payload does not match the manifest's SHA-256",
            ));
        }
        if self.is_expired(&manifest, Utc::now()) {
            return Err(HandoffError::Expired);
        }
        Ok((manifest, kept))
    }

    /// Opens a file of a bundle without following a symlink and checks it is a regular 0600
    /// file with one link, owned by this user. `None` when it does not exist.
    fn open_checked(&self, dir: &Dir, name: &str) -> Result<Option<std::fs::File>, HandoffError> {
        let mut opts = OpenOptions::new();
        opts.read(true).follow(FollowSymlinks::No).nonblock(true);
        let file = match dir.open_with(name, &opts) {
            Ok(file) => file.into_std(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(_) => {
                return Err(HandoffError::Corrupt(
                    "a bundle file is a symlink or cannot be opened",
                ));
            }
        };
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(HandoffError::Corrupt("a bundle file is not a regular file"));
        }
        self.check_owned(&meta, Kind::File)?;
        if meta.nlink() != 1 {
            return Err(HandoffError::Corrupt("a bundle file has extra hard links"));
        }
        Ok(Some(file))
    }

    fn read_file(&self, dir: &Dir, name: &str, max: u64) -> Result<Option<Vec<u8>>, HandoffError> {
        let Some(file) = self.open_checked(dir, name)? else {
            return Ok(None);
        };
        let mut bytes = Vec::new();
        file.take(max + 1).read_to_end(&mut bytes)?;
        if bytes.len() as u64 > max {
            return Err(HandoffError::Corrupt("the manifest is too large"));
        }
        Ok(Some(bytes))
    }

    fn check_owned(&self, meta: &std::fs::Metadata, kind: Kind) -> Result<(), HandoffError> {
        let (mode, not_ours, bad_mode) = match kind {
            Kind::Dir => (
                0o700,
                "the bundle directory is owned by another user",
                "the bundle directory mode is not 0700",
            ),
            Kind::File => (
                0o600,
                "a bundle file is owned by another user",
                "a bundle file mode is not 0600",
            ),
        };
        if meta.uid() != self.euid {
            return Err(HandoffError::Corrupt(not_ours));
        }
        if meta.mode() & 0o7777 != mode {
            return Err(HandoffError::Corrupt(bad_mode));
        }
        Ok(())
    }

    /// Waits, when a concurrency test asked for it, until the test releases every held create
    /// at once (see [`CrashPoint::HoldBeforeLock`]): a shared `flock` on the release file, which
    /// the test holds exclusively until all creates are parked. Release builds never set
    /// `crash_at`.
    fn hold_before_lock(&self) {
        if self.crash_at == Some(CrashPoint::HoldBeforeLock)
            && let Ok(file) = self.root.open(super::RELEASE)
        {
            let _ = file.into_std().lock_shared();
        }
    }

    /// Aborts the process at `point` when a crash test asked for it.
    fn crash_point(&self, point: CrashPoint) {
        if self.crash_at == Some(point) {
            std::process::abort();
        }
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Dir,
    File,
}

/// When a bundle stops being served.
fn expiry(manifest: &Manifest, ttl: Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(ttl)
        .ok()
        .and_then(|ttl| manifest.created_at.checked_add_signed(ttl))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

fn now_seconds() -> DateTime<Utc> {
    let now = Utc::now();
    DateTime::from_timestamp(now.timestamp(), 0).unwrap_or(now)
}

fn set_mode(dir: &Dir, mode: u32) -> io::Result<()> {
    dir_fd::open(dir)?.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))
}

fn exists_nofollow(dir: &Dir, name: &str) -> io::Result<bool> {
    match dir.symlink_metadata(name) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Removes the files mailgate writes (manifest first, so a committed bundle stops existing for
/// readers before its payload goes) and then the bundle directory. Returns `false`, leaving the
/// directory, when it still holds anything else: only mailgate's own files are ever deleted.
fn remove_residue(root: &Dir, id: &HandoffId, dir: &Dir) -> io::Result<bool> {
    for name in [MANIFEST, MANIFEST_TMP, PAYLOAD, PAYLOAD_TMP] {
        match dir.remove_file(name) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            // A directory planted under one of these names is not ours to remove.
            Err(_) => return Ok(false),
        }
    }
    dir_fd::sync_best_effort(dir);
    match root.remove_dir(id.as_str()) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(true),
        Err(_) => Ok(false),
    }
}

/// Removes a staged bundle after a failure or a decision not to commit (best effort; the sweep
/// catches what is left).
fn discard(root: &Dir, id: &HandoffId, dir: &Dir) {
    if !matches!(remove_residue(root, id, dir), Ok(true)) {
        tracing::warn!("a staged handoff bundle could not be removed; the next sweep will");
    }
}

#[cfg(test)]
mod tests;
