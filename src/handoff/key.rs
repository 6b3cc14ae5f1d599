//! The store key: 32 random bytes in `<handoff root>/.key` with which every manifest is sealed
//! (HMAC-SHA256 over its canonical content), so a bundle cannot be forged or edited by anyone
//! who can write a bundle folder but cannot read the root's key file (issue 8, finding 10).
//!
//! Invariants:
//! - The key file is a regular file of exactly [`KEY_LEN`] bytes, mode 0600, owned by the
//!   effective user, with one link, opened without following a symlink. Anything else refuses
//!   the store ([`KeyError`]); it is never repaired or replaced, because a replaced key silently
//!   invalidates every bundle and a repaired one would hide that someone else wrote it.
//! - It is created once, under the store lock, by the only caller allowed to create
//!   ([`load_or_create`], the server at startup): written to a temporary name, fsynced, then
//!   renamed into place, so a crash leaves no partial key. The `mailgate handoff` CLI only ever
//!   [`load`]s it.
//! - The key never leaves this module: no accessor returns it, its `Debug` prints nothing, and
//!   neither it nor a tag is ever logged. Tags are compared in constant time (`Mac::verify_slice`).
//!
//! Who may call it: `handoff::store` only.

use std::fmt;
use std::io::{self, Read as _};
use std::os::unix::fs::MetadataExt as _;

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt as _, OpenOptionsSyncExt as _};
use cap_std::fs::{Dir, OpenOptions};
use hmac::{Hmac, KeyInit as _, Mac as _};
use rand::RngExt as _;
use sha2::Sha256;

use super::manifest::Manifest;

/// The key file, next to `.lock` in the handoff root (never inside a bundle folder).
pub(crate) const KEY_FILE: &str = ".key";
/// Where a new key is written before it is renamed into place.
pub(crate) const KEY_TMP: &str = ".key.tmp";
/// Key length in bytes: HMAC-SHA256's output size, the length RFC 2104 recommends at least.
pub(crate) const KEY_LEN: usize = 32;
/// Domain separation: a tag over a manifest can never be mistaken for a tag over anything else
/// mailgate might one day seal with the same key.
const CONTEXT: &[u8] = b"mailgate handoff manifest v2\n";

/// Why the key file is refused. Fixed texts: never a path, never a byte of the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum KeyError {
    #[error(
        "the handoff store key (.key in the handoff root) must be a regular 0600 file of 32 \
         bytes owned by this user, with one link"
    )]
    NotPrivate,
    #[error("the handoff store key could not be read or written ({0})")]
    Io(io::ErrorKind),
}

impl From<io::Error> for KeyError {
    fn from(e: io::Error) -> Self {
        KeyError::Io(e.kind())
    }
}

/// The secret that seals manifests. Deliberately neither `Clone` nor printable.
pub(crate) struct StoreKey([u8; KEY_LEN]);

impl fmt::Debug for StoreKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StoreKey(..)")
    }
}

impl StoreKey {
    /// The lower-case hex tag over `manifest`'s sealed content (every field but `mac`).
    pub(crate) fn tag(&self, manifest: &Manifest) -> String {
        hex::encode(self.hmac(manifest).finalize().into_bytes())
    }

    /// Whether `manifest.mac` is the tag of its content under this key (constant-time compare).
    pub(crate) fn verifies(&self, manifest: &Manifest) -> bool {
        let Ok(tag) = hex::decode(&manifest.mac) else {
            return false;
        };
        self.hmac(manifest).verify_slice(&tag).is_ok()
    }

    fn hmac(&self, manifest: &Manifest) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256>>::new_from_slice(&self.0)
            .expect("invariant: HMAC takes a key of any length");
        mac.update(CONTEXT);
        mac.update(&manifest.sealed_bytes());
        mac
    }

    #[cfg(test)]
    pub(crate) fn for_tests(bytes: [u8; KEY_LEN]) -> StoreKey {
        StoreKey(bytes)
    }
}

/// The existing key, or `None` when the root has no key file yet.
pub(crate) fn load(root: &Dir, euid: u32) -> Result<Option<StoreKey>, KeyError> {
    let mut opts = OpenOptions::new();
    opts.read(true).follow(FollowSymlinks::No).nonblock(true);
    let file = match root.open_with(KEY_FILE, &opts) {
        Ok(file) => file.into_std(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        // A symlink (ELOOP) or anything else that will not open as a plain file.
        Err(_) => return Err(KeyError::NotPrivate),
    };
    let meta = file.metadata()?;
    let private = meta.is_file()
        && meta.uid() == euid
        && meta.mode() & 0o7777 == 0o600
        && meta.nlink() == 1
        && meta.len() == KEY_LEN as u64;
    if !private {
        return Err(KeyError::NotPrivate);
    }
    let mut key = [0u8; KEY_LEN];
    let mut rest = Vec::new();
    let mut reader = file.take(KEY_LEN as u64 + 1);
    reader.read_exact(&mut key)?;
    reader.read_to_end(&mut rest)?;
    if !rest.is_empty() {
        return Err(KeyError::NotPrivate);
    }
    Ok(Some(StoreKey(key)))
}

/// The existing key, or a new random one written in place. The caller holds the store lock,
/// so two processes starting at once agree on one key.
pub(crate) fn load_or_create(root: &Dir, euid: u32) -> Result<StoreKey, KeyError> {
    if let Some(key) = load(root, euid)? {
        return Ok(key);
    }
    // A temp file left by a crash between write and rename is ours to replace; anything else
    // under that name (a directory, say) makes the removal and then the store fail.
    match root.remove_file(KEY_TMP) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(_) => return Err(KeyError::NotPrivate),
    }
    let key: [u8; KEY_LEN] = rand::rng().random();
    crate::path_guard::write_new_private(root, KEY_TMP, &key)?;
    root.rename(KEY_TMP, root, KEY_FILE)?;
    crate::dir_fd::sync(root)?;
    Ok(StoreKey(key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handoff::manifest::tests::sample;

    #[test]
    fn a_tag_verifies_under_its_key_only() {
        let key = StoreKey::for_tests([7; KEY_LEN]);
        let mut manifest = sample();
        manifest.mac = key.tag(&manifest);
        assert_eq!(manifest.mac.len(), 64);
        assert!(key.verifies(&manifest));
        assert!(!StoreKey::for_tests([8; KEY_LEN]).verifies(&manifest));
        assert_eq!(format!("{key:?}"), "StoreKey(..)");
    }

    #[test]
    fn every_sealed_field_is_bound() {
        let key = StoreKey::for_tests([7; KEY_LEN]);
        let mut sealed = sample();
        sealed.mac = key.tag(&sealed);
        type Edit = fn(&mut Manifest);
        let edits: [(&str, Edit); 8] = [
            ("size", |m| m.size += 1),
            ("sha256", |m| m.sha256 = "b".repeat(64)),
            ("filename", |m| {
                m.filename = crate::downloads::SafeFileName::from_untrusted("other.pdf");
            }),
            ("contentType", |m| m.content_type = "text/html".into()),
            ("sourceAlias", |m| {
                m.source_alias = crate::alias::Alias::parse("personal").expect("alias");
            }),
            ("createdAt", |m| {
                m.created_at += chrono::Duration::days(365);
            }),
            ("handoffId", |m| m.id = crate::handoff::HandoffId::random()),
            ("mac", |m| m.mac = "0".repeat(64)),
        ];
        for (what, edit) in edits {
            let mut m = sealed.clone();
            edit(&mut m);
            assert!(!key.verifies(&m), "{what} is not bound");
        }
        let mut not_hex = sealed.clone();
        not_hex.mac = "zz".repeat(32);
        assert!(!key.verifies(&not_hex));
    }
}
