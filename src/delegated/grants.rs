//! The grant store (issue 37, item 2 "Grants kept like policy"): one encrypted, owner-checked
//! file per alias in `<state folder>/grants/`, holding what a delegated sign-in obtained (the
//! refresh token, the signed-in account, the granted scopes), the last access token (so a second
//! instance sharing the folder uses it instead of refreshing again) and whether the provider
//! refused the grant.
//!
//! Layout of `grants/` (a private folder: 0700, owned by the effective user, see
//! `path_guard::open_private_child`):
//! - `<alias>.grant`: the sealed grant of one alias (0600).
//! - `key`: the store key, 32 random bytes (0600), created at the first save when the operator
//!   keeps no key outside the state folder ([`GRANT_KEY_FILE_VAR`]); never replaced.
//! - `.lock`: an `flock` that serializes writers (save, delete, key creation) across processes.
//! - `<alias>.lock`: the alias's `flock`, held across a whole load-refresh-save by the token
//!   source ([`GrantStore::lock_alias`]) and by [`GrantStore::save`] and [`GrantStore::delete`],
//!   so a refresh, a login and a logout of one alias never interleave (a refresh that loaded the
//!   old grant cannot save it over a new login's, nor bring back a logged-out one). Taken before
//!   `.lock`, never after it. Never removed: unlinking a lock file someone holds would let a
//!   second holder lock a new file of the same name.
//! - `<alias>.grant.tmp`, `key.tmp`: what a writer stages before its rename.
//!
//! File format: one header line `mailgate-grant v1 key=<16 hex> binding=<32 hex>\n`, then a
//! 24-byte random nonce, then the XChaCha20-Poly1305 ciphertext (tag included) of the grant as
//! JSON (fields added since v1 are optional, so older files still load). The associated data is the header line followed by a canonical, length-prefixed
//! encoding of the [`GrantBinding`] (alias, provider, client id, tenant or issuer), so a file
//! copied to another alias's name, or left over from another app registration or tenant, fails
//! authentication. The header's `key` (a digest of the key) and `binding` (a digest of the
//! binding) only let a refusal name the rule that failed without a decryption attempt; they prove
//! nothing by themselves (both are covered by the tag, and a header edited to match is
//! `Corrupt`).
//!
//! Invariants:
//! - A grant is only returned for the binding it was sealed for, under the key it was sealed
//!   with; anything else is a typed refusal ([`GrantError`]), never a silently used token.
//! - Every file is opened without following a symlink and checked on the opened descriptor
//!   (`path_guard::read_file_in` / `read_private_file` with the private rule): a regular file
//!   owned by the effective user, no group or other bits, one hard link.
//! - Writes are atomic: under the store lock, the new file is written to `<alias>.grant.tmp`
//!   (create-new, 0600), fsynced, renamed over `<alias>.grant`, and the folder is fsynced. A crash
//!   at any point leaves the old file or the new one whole, never a torn or missing one, so a
//!   rotated refresh token is never lost with the only valid copy. A temp file found by the next
//!   writer is a crashed writer's (the lock says nobody else is writing) and is removed.
//! - The store key is created once, under the lock, and never replaced or repaired: a key that
//!   exists but is refused fails the store (a replaced key would orphan every grant).
//! - Secrets stay here: the refresh token, the access token and the key are zeroized on drop,
//!   `Debug` prints none of them (nor the account's address), and error messages name the alias
//!   and the rule only.
//!
//! Who may call it: the `mailgate auth` commands (login saves, status lists and loads, logout
//! deletes) and the token source (`delegated::source`: locks the alias, loads, saves a refreshed
//! or rotated grant). The I/O is blocking: async
//! callers run it on a blocking thread.

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use cap_std::fs::Dir;
use chacha20poly1305::aead::{Aead as _, Generate as _, KeyInit as _, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use zeroize::Zeroizing;

use crate::dir_fd;
use crate::path_guard::{self, ModeRule, PrivateDirError, PrivateFileError};

/// The environment variable naming a key file kept outside the state folder. Read by the
/// caller (through `config::env`) and handed to [`GrantStore::open`] as a path.
pub(crate) const GRANT_KEY_FILE_VAR: &str = "MAILGATE_GRANT_KEY_FILE";
/// The store's folder inside the state folder.
pub(crate) const GRANTS_DIR: &str = "grants";

const KEY_FILE: &str = "key";
const KEY_TMP: &str = "key.tmp";
const LOCK_FILE: &str = ".lock";
const ALIAS_LOCK_SUFFIX: &str = ".lock";
const GRANT_SUFFIX: &str = ".grant";
const TMP_SUFFIX: &str = ".grant.tmp";
const KEY_LEN: usize = 32;
const NONCE_LEN: usize = 24;
/// Poly1305's tag, appended to the ciphertext.
const TAG_LEN: usize = 16;
/// A key file is 32 bytes or 65 at most; the bound only keeps a wrong file from being read
/// whole (a longer one is refused as too large, a shorter wrong one as malformed).
const MAX_KEY_FILE_BYTES: u64 = 128;
/// A grant is a token, an address and a few scopes: far below this.
const MAX_GRANT_BYTES: u64 = 64 * 1024;
/// The longest header line a reader looks for (ours is 80 bytes).
const MAX_HEADER_BYTES: usize = 128;
/// Aliases are at most 64 characters (`mailgate_policy::alias`); a longer name is not one.
const MAX_ALIAS_BYTES: usize = 64;
const MAGIC: &str = "mailgate-grant";
const VERSION: &str = "v1";
/// Domain separation for the two digests in the header, so neither can be mistaken for the
/// other or for anything else mailgate hashes.
const KEY_ID_CONTEXT: &[u8] = b"mailgate grant key id v1\n";
const BINDING_CONTEXT: &[u8] = b"mailgate grant binding v1\n";

/// What a grant is for. Sealed into the file's associated data: a grant is only ever opened for
/// the binding it was saved with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct GrantBinding {
    /// The mailbox alias; also the file name.
    pub(crate) alias: String,
    /// `microsoft`, `google` or `oidc`.
    pub(crate) provider: String,
    /// The app registration's client id.
    pub(crate) client_id: String,
    /// The Microsoft tenant or the OIDC issuer (Google: its fixed issuer).
    pub(crate) authority: String,
}

/// A refresh token: wiped from memory on drop, never printed. Deliberately not `Clone`, so a
/// copy cannot outlive the refresh that needs it by accident.
#[derive(PartialEq, Eq)]
pub(crate) struct RefreshToken(Zeroizing<String>);

impl RefreshToken {
    pub(crate) fn new(token: String) -> RefreshToken {
        RefreshToken(Zeroizing::new(token))
    }

    /// The token itself, for the token endpoint's refresh request.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for RefreshToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RefreshToken(<redacted>)")
    }
}

impl Serialize for RefreshToken {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for RefreshToken {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(RefreshToken::new)
    }
}

/// A delegated access token: what the backends send (Graph's `Bearer`, IMAP/SMTP's XOAUTH2 or
/// OAUTHBEARER). Cheap to clone (one shared buffer, wiped when the last clone is dropped); never
/// printed. The one access-token type: Graph's app-only tokens are this type too.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct AccessToken(Arc<Zeroizing<String>>);

impl AccessToken {
    pub(crate) fn new(token: String) -> AccessToken {
        AccessToken(Arc::new(Zeroizing::new(token)))
    }

    /// The token itself, for the request that carries it.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AccessToken(<redacted>)")
    }
}

impl<'de> Deserialize<'de> for AccessToken {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(AccessToken::new)
    }
}

/// The last access token a refresh (or the sign-in) obtained, kept in the grant file so another
/// instance sharing the folder uses it rather than refreshing again. Times are whole seconds, as
/// stored.
#[derive(PartialEq, Eq)]
pub(crate) struct CachedAccess {
    pub(crate) token: AccessToken,
    /// When the request that obtained it was sent (the lifetime counts from here).
    pub(crate) obtained_at: DateTime<Utc>,
    pub(crate) expires_at: DateTime<Utc>,
}

/// The times only.
impl fmt::Debug for CachedAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedAccess")
            .field("token", &self.token)
            .field("obtained_at", &self.obtained_at)
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// What one grant file holds.
#[derive(PartialEq, Eq)]
pub(crate) struct Grant {
    pub(crate) binding: GrantBinding,
    pub(crate) refresh_token: RefreshToken,
    /// The signed-in account's address (checked at login against the alias's configuration).
    pub(crate) account: String,
    /// The scopes the provider granted.
    pub(crate) scopes: Vec<String>,
    pub(crate) obtained_at: DateTime<Utc>,
    pub(crate) refreshed_at: DateTime<Utc>,
    /// The last access token, `None` before the first refresh (or when the sign-in kept none).
    pub(crate) access: Option<CachedAccess>,
    /// When the token endpoint refused the refresh token (`invalid_grant`: revoked, expired,
    /// consent withdrawn). A refused grant is kept, so `mailgate auth status` can say so, and
    /// never sent again: the token source answers `AUTH_REQUIRED` until a new sign-in replaces
    /// the file.
    pub(crate) refused_at: Option<DateTime<Utc>>,
}

/// Neither the token nor the address: a grant may be logged at debug level by a caller.
impl fmt::Debug for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Grant")
            .field("binding", &self.binding)
            .field("refresh_token", &self.refresh_token)
            .field("account", &format_args!("<redacted>"))
            .field("scopes", &self.scopes)
            .field("obtained_at", &self.obtained_at)
            .field("refreshed_at", &self.refreshed_at)
            .field("access", &self.access)
            .field("refused_at", &self.refused_at)
            .finish()
    }
}

/// The plaintext as written (borrowing the grant, so the tokens are not copied once more). The
/// optional fields are left out when empty, so a grant without them stays readable by a
/// mailgate from before they existed.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SealedOut<'a> {
    binding: &'a GrantBinding,
    refresh_token: &'a RefreshToken,
    account: &'a str,
    scopes: &'a [String],
    obtained_at: i64,
    refreshed_at: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    access: Option<SealedAccessOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    refused_at: Option<i64>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SealedAccessOut<'a> {
    token: &'a str,
    obtained_at: i64,
    expires_at: i64,
}

/// The plaintext as read back. `access` and `refusedAt` came after the first files were
/// written: absent, they are `None`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SealedIn {
    binding: GrantBinding,
    refresh_token: RefreshToken,
    account: String,
    scopes: Vec<String>,
    obtained_at: i64,
    refreshed_at: i64,
    #[serde(default)]
    access: Option<SealedAccessIn>,
    #[serde(default)]
    refused_at: Option<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SealedAccessIn {
    token: AccessToken,
    obtained_at: i64,
    expires_at: i64,
}

/// Which key a refusal is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeySource {
    /// The file named by [`GRANT_KEY_FILE_VAR`].
    External,
    /// `grants/key` in the state folder.
    InStore,
}

impl fmt::Display for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeySource::External => "the file named by MAILGATE_GRANT_KEY_FILE",
            KeySource::InStore => "grants/key in the state folder",
        })
    }
}

/// Why the store or a grant is refused. Messages name the alias and the rule; never a token, an
/// address, a key byte or a host path.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum GrantError {
    #[error(
        "the alias cannot name a grant file (it must be 1-64 bytes, not start with '.', and hold \
         no '/', '\\' or NUL)"
    )]
    InvalidAlias,
    #[error("the grants folder (grants/ in the state folder) is refused: {0}")]
    Dir(PrivateDirError),
    #[error("the grant file of alias {alias} is refused: {error}")]
    File {
        alias: String,
        error: PrivateFileError,
    },
    #[error("the grant key ({which}) is refused: {error}")]
    Key {
        which: KeySource,
        error: PrivateFileError,
    },
    #[error(
        "the grant key ({which}) must be 32 raw bytes, or 64 hex digits with an optional \
         trailing newline"
    )]
    KeyFormat { which: KeySource },
    #[error("the grants folder's lock file (.lock) is refused: {0}")]
    Lock(PrivateFileError),
    #[error(
        "the lock file of alias {alias} ({alias}.lock in the grants folder) is refused: {error}"
    )]
    AliasLock {
        alias: String,
        error: PrivateFileError,
    },
    #[error(
        "alias {alias} has a grant file but the grants folder has no key (removed, or the grant \
         was sealed with MAILGATE_GRANT_KEY_FILE's key): sign in again with `mailgate auth login \
         {alias}`"
    )]
    KeyMissing { alias: String },
    #[error(
        "the grant of alias {alias} was sealed with another grant key (MAILGATE_GRANT_KEY_FILE \
         changed, or the file was copied from another state folder): sign in again with \
         `mailgate auth login {alias}`"
    )]
    WrongKey { alias: String },
    #[error(
        "the grant file of alias {alias} is not this alias's grant (it was sealed for another \
         alias, provider, client id, tenant or issuer): sign in again with `mailgate auth login \
         {alias}`"
    )]
    NotThisAliasGrant { alias: String },
    #[error("the grant file of alias {alias} is corrupt: {why}")]
    Corrupt { alias: String, why: &'static str },
    #[error("the grant store could not {op} ({kind})")]
    Io {
        op: &'static str,
        kind: io::ErrorKind,
    },
    #[error("the grant store could not {op} for alias {alias} ({kind})")]
    GrantIo {
        alias: String,
        op: &'static str,
        kind: io::ErrorKind,
    },
    #[error("the operating system's random number generator failed")]
    Random,
    #[error("the grant of alias {alias} could not be encoded")]
    Encode { alias: String },
    /// The shared database's grant rows (`delegated::shared`): unreachable, refused, or a row
    /// that changed while it was held. Metadata only, as the store's own errors are.
    #[error("the shared grant store, for alias {alias}: {why}")]
    Shared { alias: String, why: String },
}

fn store_io(op: &'static str) -> impl FnOnce(io::Error) -> GrantError {
    move |e| GrantError::Io { op, kind: e.kind() }
}

fn grant_io(alias: &str, op: &'static str) -> impl FnOnce(io::Error) -> GrantError {
    let alias = alias.to_owned();
    move |e| GrantError::GrantIo {
        alias,
        op,
        kind: e.kind(),
    }
}

/// The key that seals every grant file. Wiped on drop; deliberately neither `Clone` nor
/// printable.
pub(crate) struct GrantKey(Zeroizing<[u8; KEY_LEN]>);

impl fmt::Debug for GrantKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("GrantKey(..)")
    }
}

impl GrantKey {
    /// 32 raw bytes, or 64 hex digits with one optional trailing `\n`; `None` for anything else.
    fn parse(bytes: &[u8]) -> Option<GrantKey> {
        let mut key = Zeroizing::new([0u8; KEY_LEN]);
        if bytes.len() == KEY_LEN {
            key.copy_from_slice(bytes);
            return Some(GrantKey(key));
        }
        let digits = bytes.strip_suffix(b"\n").unwrap_or(bytes);
        if digits.len() != 2 * KEY_LEN {
            return None;
        }
        hex::decode_to_slice(digits, &mut key[..]).ok()?;
        Some(GrantKey(key))
    }

    /// The key in [`GRANT_KEY_FILE_VAR`]'s file, read through `path_guard` (regular, owned by
    /// this user, private, one link).
    pub(crate) fn read_external(path: &Path) -> Result<GrantKey, GrantError> {
        let which = KeySource::External;
        let bytes = path_guard::read_private_file(path, MAX_KEY_FILE_BYTES)
            .map(Zeroizing::new)
            .map_err(|error| GrantError::Key { which, error })?;
        GrantKey::parse(&bytes).ok_or(GrantError::KeyFormat { which })
    }

    /// A fixed key for tests (every byte `byte`).
    #[cfg(test)]
    pub(crate) fn for_test(byte: u8) -> GrantKey {
        GrantKey(Zeroizing::new([byte; KEY_LEN]))
    }

    fn random() -> Result<GrantKey, GrantError> {
        let bytes = <[u8; KEY_LEN]>::try_generate().map_err(|_| GrantError::Random)?;
        Ok(GrantKey(Zeroizing::new(bytes)))
    }

    /// The header's `key=` field: names the key without revealing it.
    fn id(&self) -> String {
        let digest = Sha256::new()
            .chain_update(KEY_ID_CONTEXT)
            .chain_update(&self.0[..])
            .finalize();
        hex::encode(&digest[..8])
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new_from_slice(&self.0[..])
            .expect("invariant: the key is KEY_LEN (32) bytes, XChaCha20-Poly1305's key size")
    }
}

/// Where the key comes from.
enum KeyHolder {
    /// Loaded at open from [`GRANT_KEY_FILE_VAR`]'s file.
    External(GrantKey),
    /// `grants/key`, loaded at first use (created by the first save) and kept once loaded: it is
    /// never replaced, so a cached copy cannot go stale.
    InStore(OnceLock<GrantKey>),
}

/// The grants folder as a capability, with the key that seals its files.
pub(crate) struct GrantStore {
    dir: Dir,
    key: KeyHolder,
}

impl fmt::Debug for GrantStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("GrantStore(..)")
    }
}

impl GrantStore {
    /// Opens `grants/` in the (already checked) state folder as a private folder, creating it
    /// 0700 only when `create` is set (login; status and the token source pass `false`). With
    /// `key_file` (the value of [`GRANT_KEY_FILE_VAR`], resolved by the caller), that file is
    /// the key: read now, through `path_guard` (regular, owned by this user, private, one link),
    /// so a wrong key file fails at startup rather than at the first refresh.
    pub(crate) fn open(
        state: &Dir,
        key_file: Option<&Path>,
        create: bool,
    ) -> Result<GrantStore, GrantError> {
        let dir =
            path_guard::open_private_child(state, GRANTS_DIR, create).map_err(GrantError::Dir)?;
        let key = match key_file {
            Some(path) => KeyHolder::External(GrantKey::read_external(path)?),
            None => KeyHolder::InStore(OnceLock::new()),
        };
        Ok(GrantStore { dir, key })
    }

    /// The grant of `binding.alias`, `None` when the alias has no grant file. A file that is not
    /// private, not this binding's, sealed with another key or damaged is refused.
    pub(crate) fn load(&self, binding: &GrantBinding) -> Result<Option<Grant>, GrantError> {
        let alias = binding.alias.as_str();
        let name = grant_file_name(alias)?;
        let Some(bytes) =
            path_guard::read_file_in(&self.dir, &name, ModeRule::Private, MAX_GRANT_BYTES)
                .map_err(|error| GrantError::File {
                    alias: alias.to_owned(),
                    error,
                })?
        else {
            return Ok(None);
        };
        let key = self.key_for_reading(alias)?;
        open_sealed(key, binding, &bytes).map(Some)
    }

    /// Replaces the grant of `grant.binding.alias` atomically (see the module invariants),
    /// creating the store key first when the folder has none. Takes the alias's lock, so it waits
    /// for a refresh of that alias in progress (here or in another process).
    pub(crate) fn save(&self, grant: &Grant) -> Result<(), GrantError> {
        let lock = self.lock_alias(&grant.binding.alias)?;
        self.save_locked(&lock, grant)
    }

    /// [`save`](Self::save) for a caller that already holds the alias's lock (the token source,
    /// between its load and its save).
    pub(crate) fn save_locked(&self, lock: &AliasLock, grant: &Grant) -> Result<(), GrantError> {
        let alias = grant.binding.alias.as_str();
        let name = grant_file_name(alias)?;
        // A caller bug, not a state of the disk: the lock held must be this grant's.
        if lock.alias != alias {
            return Err(GrantError::InvalidAlias);
        }
        let _lock = self.lock()?;
        let tmp = self.stage(grant)?;
        self.dir
            .rename(&tmp, &self.dir, &name)
            .map_err(grant_io(alias, "rename the new grant into place"))?;
        dir_fd::sync(&self.dir).map_err(grant_io(alias, "fsync the grants folder"))
    }

    /// Removes the grant of `alias` (logout). `false` when there was none.
    pub(crate) fn delete(&self, alias: &str) -> Result<bool, GrantError> {
        let name = grant_file_name(alias)?;
        let _alias_lock = self.lock_alias(alias)?;
        let _lock = self.lock()?;
        remove_if_present(&self.dir, &format!("{alias}{TMP_SUFFIX}"))
            .map_err(grant_io(alias, "remove a stale temporary grant"))?;
        let removed = remove_if_present(&self.dir, &name)
            .map_err(grant_io(alias, "remove the grant file"))?;
        dir_fd::sync(&self.dir).map_err(grant_io(alias, "fsync the grants folder"))?;
        Ok(removed)
    }

    /// The aliases that have a grant file, sorted (for `mailgate auth status`). Names that are
    /// not `<alias>.grant` (the key, the lock, temp files, anything planted) are skipped; each
    /// listed grant is checked when it is loaded.
    pub(crate) fn list(&self) -> Result<Vec<String>, GrantError> {
        let mut aliases = Vec::new();
        for entry in self
            .dir
            .entries()
            .map_err(store_io("list the grants folder"))?
        {
            let entry = entry.map_err(store_io("list the grants folder"))?;
            let name = entry.file_name();
            let Some(alias) = name.to_str().and_then(|n| n.strip_suffix(GRANT_SUFFIX)) else {
                continue;
            };
            if grant_file_name(alias).is_ok() {
                aliases.push(alias.to_owned());
            }
        }
        aliases.sort();
        Ok(aliases)
    }

    /// Writes the sealed grant to its temp name (create-new, 0600, fsynced) and returns that
    /// name. The caller holds the store lock and renames it into place.
    fn stage(&self, grant: &Grant) -> Result<String, GrantError> {
        let alias = grant.binding.alias.as_str();
        let key = self.key_for_writing()?;
        let sealed = seal(key, grant)?;
        let tmp = format!("{alias}{TMP_SUFFIX}");
        // Under the lock nobody else is writing: a temp file here is a crashed writer's.
        remove_if_present(&self.dir, &tmp)
            .map_err(grant_io(alias, "remove a stale temporary grant"))?;
        path_guard::write_new_private(&self.dir, &tmp, &sealed)
            .map_err(grant_io(alias, "write the temporary grant"))?;
        Ok(tmp)
    }

    fn key_for_reading(&self, alias: &str) -> Result<&GrantKey, GrantError> {
        match &self.key {
            KeyHolder::External(key) => Ok(key),
            KeyHolder::InStore(cell) => {
                if let Some(key) = cell.get() {
                    return Ok(key);
                }
                let key = self.read_store_key()?.ok_or(GrantError::KeyMissing {
                    alias: alias.to_owned(),
                })?;
                Ok(cell.get_or_init(|| key))
            }
        }
    }

    /// The key, creating `grants/key` when it does not exist yet. The caller holds the lock, so
    /// two first saves in two processes agree on one key.
    fn key_for_writing(&self) -> Result<&GrantKey, GrantError> {
        let cell = match &self.key {
            KeyHolder::External(key) => return Ok(key),
            KeyHolder::InStore(cell) => cell,
        };
        if let Some(key) = cell.get() {
            return Ok(key);
        }
        let key = match self.read_store_key()? {
            Some(key) => key,
            None => {
                let key = GrantKey::random()?;
                remove_if_present(&self.dir, KEY_TMP)
                    .map_err(store_io("remove a stale temporary key"))?;
                path_guard::write_new_private(&self.dir, KEY_TMP, &key.0[..])
                    .map_err(store_io("write the new grant key"))?;
                self.dir
                    .rename(KEY_TMP, &self.dir, KEY_FILE)
                    .map_err(store_io("rename the new grant key into place"))?;
                dir_fd::sync(&self.dir).map_err(store_io("fsync the grants folder"))?;
                key
            }
        };
        Ok(cell.get_or_init(|| key))
    }

    fn read_store_key(&self) -> Result<Option<GrantKey>, GrantError> {
        let which = KeySource::InStore;
        let bytes =
            path_guard::read_file_in(&self.dir, KEY_FILE, ModeRule::Private, MAX_KEY_FILE_BYTES)
                .map_err(|error| GrantError::Key { which, error })?;
        let Some(bytes) = bytes.map(Zeroizing::new) else {
            return Ok(None);
        };
        GrantKey::parse(&bytes)
            .map(Some)
            .ok_or(GrantError::KeyFormat { which })
    }

    /// The lock of `alias`: an exclusive `flock` on `grants/<alias>.lock` (created 0600, checked
    /// like every private file), held until the returned guard is dropped. Blocks while another
    /// holder (a refresh, a login, a logout; this process or another) has it.
    pub(crate) fn lock_alias(&self, alias: &str) -> Result<AliasLock, GrantError> {
        grant_file_name(alias)?;
        let file =
            path_guard::append_private_file(&self.dir, &format!("{alias}{ALIAS_LOCK_SUFFIX}"))
                .map_err(|error| GrantError::AliasLock {
                    alias: alias.to_owned(),
                    error,
                })?;
        file.lock()
            .map_err(grant_io(alias, "take the alias's lock"))?;
        Ok(AliasLock {
            alias: alias.to_owned(),
            _file: file,
        })
    }

    /// The store lock: an exclusive `flock` on `grants/.lock` (created 0600, checked like every
    /// private file), held until the returned file is dropped.
    fn lock(&self) -> Result<std::fs::File, GrantError> {
        let file =
            path_guard::append_private_file(&self.dir, LOCK_FILE).map_err(GrantError::Lock)?;
        file.lock().map_err(store_io("take the store lock"))?;
        Ok(file)
    }
}

/// An alias's lock (see [`GrantStore::lock_alias`]); released when dropped.
#[derive(Debug)]
pub(crate) struct AliasLock {
    alias: String,
    _file: std::fs::File,
}

/// `<alias>.grant`, after refusing what could leave the folder or hide in it.
fn grant_file_name(alias: &str) -> Result<String, GrantError> {
    let refused = alias.is_empty()
        || alias.len() > MAX_ALIAS_BYTES
        || alias.starts_with('.')
        || alias.contains(['/', '\\', '\0']);
    if refused {
        return Err(GrantError::InvalidAlias);
    }
    Ok(format!("{alias}{GRANT_SUFFIX}"))
}

/// The binding as the associated data sees it: a context, then each field length-prefixed in a
/// fixed order, so no two bindings encode alike (`("ab", "c")` vs `("a", "bc")`).
fn canonical_binding(binding: &GrantBinding) -> Vec<u8> {
    let mut out = BINDING_CONTEXT.to_vec();
    for field in [
        &binding.alias,
        &binding.provider,
        &binding.client_id,
        &binding.authority,
    ] {
        out.extend_from_slice(&(field.len() as u64).to_be_bytes());
        out.extend_from_slice(field.as_bytes());
    }
    out
}

/// The header's `binding=` field.
fn binding_digest(binding: &GrantBinding) -> String {
    hex::encode(&Sha256::digest(canonical_binding(binding))[..16])
}

fn header_line(key: &GrantKey, binding: &GrantBinding) -> String {
    format!(
        "{MAGIC} {VERSION} key={} binding={}\n",
        key.id(),
        binding_digest(binding)
    )
}

fn associated_data(header: &[u8], binding: &GrantBinding) -> Vec<u8> {
    let mut aad = header.to_vec();
    aad.extend_from_slice(&canonical_binding(binding));
    aad
}

/// Header, nonce and ciphertext of `grant`.
pub(super) fn seal(key: &GrantKey, grant: &Grant) -> Result<Vec<u8>, GrantError> {
    let alias = grant.binding.alias.as_str();
    let wire = SealedOut {
        binding: &grant.binding,
        refresh_token: &grant.refresh_token,
        account: &grant.account,
        scopes: &grant.scopes,
        obtained_at: grant.obtained_at.timestamp(),
        refreshed_at: grant.refreshed_at.timestamp(),
        access: grant.access.as_ref().map(|a| SealedAccessOut {
            token: a.token.expose(),
            obtained_at: a.obtained_at.timestamp(),
            expires_at: a.expires_at.timestamp(),
        }),
        refused_at: grant.refused_at.map(|t| t.timestamp()),
    };
    // Sized for the worst case of JSON escaping (6 bytes per input byte), so the buffer holding
    // the tokens is never reallocated and no unwiped copy is left behind in freed memory.
    let text_len = grant.refresh_token.expose().len()
        + grant.access.as_ref().map_or(0, |a| a.token.expose().len())
        + grant.account.len()
        + grant.scopes.iter().map(String::len).sum::<usize>()
        + canonical_binding(&grant.binding).len();
    let mut plaintext = Zeroizing::new(Vec::with_capacity(6 * text_len + 512));
    serde_json::to_writer(&mut *plaintext, &wire).map_err(|_| GrantError::Encode {
        alias: alias.to_owned(),
    })?;
    seal_plaintext(key, &grant.binding, &plaintext)
}

/// Header, nonce and ciphertext of a grant's JSON `plaintext`.
fn seal_plaintext(
    key: &GrantKey,
    binding: &GrantBinding,
    plaintext: &[u8],
) -> Result<Vec<u8>, GrantError> {
    let alias = binding.alias.as_str();
    let header = header_line(key, binding);
    let aad = associated_data(header.as_bytes(), binding);
    let nonce = XNonce::try_generate().map_err(|_| GrantError::Random)?;
    let ciphertext = key
        .cipher()
        .encrypt(
            &nonce,
            Payload {
                msg: plaintext,
                aad: &aad,
            },
        )
        .map_err(|_| GrantError::Encode {
            alias: alias.to_owned(),
        })?;
    let mut out = Vec::with_capacity(header.len() + NONCE_LEN + ciphertext.len());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&ciphertext);
    Ok(out)
}

/// Checks and opens a grant file's bytes for `binding`.
pub(super) fn open_sealed(
    key: &GrantKey,
    binding: &GrantBinding,
    bytes: &[u8],
) -> Result<Grant, GrantError> {
    let alias = binding.alias.as_str();
    let corrupt = |why| GrantError::Corrupt {
        alias: alias.to_owned(),
        why,
    };
    let line_end = bytes
        .iter()
        .take(MAX_HEADER_BYTES)
        .position(|b| *b == b'\n')
        .ok_or_else(|| corrupt("it has no mailgate grant header line"))?;
    let (header, body) = bytes.split_at(line_end + 1);
    let text = std::str::from_utf8(&header[..line_end])
        .map_err(|_| corrupt("it has no mailgate grant header line"))?;
    let mut fields = text.split(' ');
    let (key_field, binding_field) = match (
        fields.next(),
        fields.next(),
        fields.next(),
        fields.next(),
        fields.next(),
    ) {
        (Some(MAGIC), Some(VERSION), Some(k), Some(b), None) => (k, b),
        (Some(MAGIC), Some(_), ..) => {
            return Err(corrupt(
                "it is of another format version than this mailgate reads",
            ));
        }
        _ => return Err(corrupt("it has no mailgate grant header line")),
    };
    let (Some(key_id), Some(binding_id)) = (
        key_field.strip_prefix("key="),
        binding_field.strip_prefix("binding="),
    ) else {
        return Err(corrupt("its header line is malformed"));
    };
    // Cheap checks that name the rule; the tag below is what proves it.
    if binding_id != binding_digest(binding) {
        return Err(GrantError::NotThisAliasGrant {
            alias: alias.to_owned(),
        });
    }
    if key_id != key.id() {
        return Err(GrantError::WrongKey {
            alias: alias.to_owned(),
        });
    }
    if body.len() < NONCE_LEN + TAG_LEN {
        return Err(corrupt("it is truncated"));
    }
    let (nonce, ciphertext) = body.split_at(NONCE_LEN);
    let nonce = XNonce::try_from(nonce).map_err(|_| corrupt("it is truncated"))?;
    let aad = associated_data(header, binding);
    let plaintext = key
        .cipher()
        .decrypt(
            &nonce,
            Payload {
                msg: ciphertext,
                aad: &aad,
            },
        )
        .map(Zeroizing::new)
        .map_err(|_| {
            corrupt("it fails authentication (edited, truncated, or its header was rewritten)")
        })?;
    let sealed: SealedIn = serde_json::from_slice(&plaintext)
        .map_err(|_| corrupt("the decrypted grant does not have the expected fields"))?;
    // Implied by the tag (the binding is in the associated data); checked again because the
    // plaintext is what callers read.
    if sealed.binding != *binding {
        return Err(GrantError::NotThisAliasGrant {
            alias: alias.to_owned(),
        });
    }
    let time = |secs| {
        DateTime::from_timestamp(secs, 0).ok_or_else(|| corrupt("a timestamp is out of range"))
    };
    let access = match sealed.access {
        Some(a) => Some(CachedAccess {
            obtained_at: time(a.obtained_at)?,
            expires_at: time(a.expires_at)?,
            token: a.token,
        }),
        None => None,
    };
    Ok(Grant {
        obtained_at: time(sealed.obtained_at)?,
        refreshed_at: time(sealed.refreshed_at)?,
        refused_at: sealed.refused_at.map(time).transpose()?,
        binding: sealed.binding,
        refresh_token: sealed.refresh_token,
        account: sealed.account,
        scopes: sealed.scopes,
        access,
    })
}

/// Removes `name` (never following a symlink: `unlink` removes the link itself). `false` when
/// nothing was there.
fn remove_if_present(dir: &Dir, name: &str) -> io::Result<bool> {
    match dir.remove_file(name) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
#[expect(
    clippy::disallowed_methods,
    reason = "tests tamper with grant files on the real filesystem inside a tempdir"
)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;
    use std::path::PathBuf;

    use super::*;

    /// Appears in every test token: no output may ever contain it.
    const MARKER: &str = "MARKER-refresh-7f3c";

    struct Fixture {
        tmp: tempfile::TempDir,
        state: Dir,
    }

    impl Fixture {
        fn new() -> Fixture {
            let tmp = tempfile::tempdir().expect("tempdir");
            std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o700))
                .expect("chmod");
            let state = path_guard::open_state_dir(&tmp.path().join("state"), true).expect("state");
            Fixture { tmp, state }
        }

        fn store(&self) -> GrantStore {
            GrantStore::open(&self.state, None, true).expect("store")
        }

        fn store_with_key(&self, key: &Path) -> Result<GrantStore, GrantError> {
            GrantStore::open(&self.state, Some(key), true)
        }

        fn grants(&self) -> PathBuf {
            self.tmp.path().join("state").join(GRANTS_DIR)
        }

        /// A key file outside the state folder, with `mode`.
        fn key_file(&self, name: &str, bytes: &[u8], mode: u32) -> PathBuf {
            let path = self.tmp.path().join(name);
            std::fs::write(&path, bytes).expect("write key");
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
            path
        }
    }

    fn binding(alias: &str) -> GrantBinding {
        GrantBinding {
            alias: alias.to_owned(),
            provider: "microsoft".to_owned(),
            client_id: "00000000-0000-0000-0000-00000000c1d0".to_owned(),
            authority: "consumers".to_owned(),
        }
    }

    fn grant(alias: &str, n: u32) -> Grant {
        Grant {
            binding: binding(alias),
            refresh_token: RefreshToken::new(format!("{MARKER}-{n}")),
            account: "robin.example@example.com".to_owned(),
            scopes: vec!["offline_access".to_owned(), "Mail.Read".to_owned()],
            obtained_at: DateTime::from_timestamp(1_796_000_000, 0).expect("time"),
            refreshed_at: DateTime::from_timestamp(1_796_000_000 + i64::from(n), 0).expect("time"),
            access: None,
            refused_at: None,
        }
    }

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path)
            .expect("stat")
            .permissions()
            .mode()
            & 0o777
    }

    #[test]
    fn a_saved_grant_loads_back_and_is_encrypted_at_rest() {
        let fx = Fixture::new();
        let store = fx.store();
        assert_eq!(mode(&fx.grants()), 0o700);
        store.save(&grant("personal", 1)).expect("save");
        let loaded = store.load(&binding("personal")).expect("load");
        assert_eq!(loaded, Some(grant("personal", 1)));
        let file = fx.grants().join("personal.grant");
        assert_eq!(mode(&file), 0o600);
        assert_eq!(mode(&fx.grants().join(KEY_FILE)), 0o600);
        let raw = std::fs::read(&file).expect("read");
        assert!(raw.starts_with(b"mailgate-grant v1 key="));
        let text = String::from_utf8_lossy(&raw);
        assert!(!text.contains(MARKER), "the token is not at rest in clear");
        assert!(!text.contains("example.com"), "nor the account");
        // A second store (another process) reads it with the key the first one created.
        let again = GrantStore::open(&fx.state, None, false).expect("reopen");
        assert_eq!(
            again.load(&binding("personal")).expect("load"),
            Some(grant("personal", 1))
        );
        store.save(&grant("work", 2)).expect("save");
        assert_eq!(store.list().expect("list"), ["personal", "work"]);
        assert!(!fx.grants().join("personal.grant.tmp").exists());
    }

    #[test]
    fn a_missing_grant_is_none_and_creates_nothing() {
        let fx = Fixture::new();
        let store = fx.store();
        assert_eq!(store.load(&binding("personal")), Ok(None));
        assert!(!fx.grants().join(KEY_FILE).exists(), "no key before a save");
        assert_eq!(store.list(), Ok(vec![]));
        assert_eq!(store.delete("personal"), Ok(false));
    }

    #[test]
    fn the_grants_folder_is_created_only_when_asked() {
        let fx = Fixture::new();
        assert_eq!(
            GrantStore::open(&fx.state, None, false).err(),
            Some(GrantError::Dir(PrivateDirError::Missing))
        );
        assert!(!fx.grants().exists());
        std::fs::create_dir(fx.grants()).expect("mkdir");
        std::fs::set_permissions(fx.grants(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        assert_eq!(
            GrantStore::open(&fx.state, None, true).err(),
            Some(GrantError::Dir(PrivateDirError::TooPermissive))
        );
    }

    #[test]
    fn a_grant_copied_to_another_alias_is_refused() {
        let fx = Fixture::new();
        let store = fx.store();
        store.save(&grant("personal", 1)).expect("save");
        let grants = fx.grants();
        std::fs::copy(grants.join("personal.grant"), grants.join("work.grant")).expect("copy");
        std::fs::set_permissions(
            grants.join("work.grant"),
            std::fs::Permissions::from_mode(0o600),
        )
        .expect("chmod");
        assert_eq!(
            store.load(&binding("work")),
            Err(GrantError::NotThisAliasGrant {
                alias: "work".into()
            })
        );
    }

    #[test]
    fn a_grant_of_another_app_registration_or_tenant_is_refused() {
        let fx = Fixture::new();
        let store = fx.store();
        store.save(&grant("personal", 1)).expect("save");
        type Edit = fn(&mut GrantBinding);
        let edits: [(&str, Edit); 3] = [
            ("client id", |b| b.client_id.push('x')),
            ("authority", |b| b.authority = "common".into()),
            ("provider", |b| b.provider = "oidc".into()),
        ];
        for (what, edit) in edits {
            let mut other = binding("personal");
            edit(&mut other);
            assert_eq!(
                store.load(&other),
                Err(GrantError::NotThisAliasGrant {
                    alias: "personal".into()
                }),
                "{what}"
            );
        }
    }

    #[test]
    fn a_rewritten_header_does_not_pass_for_another_binding() {
        // The copy of the test above, with the header's digest edited to the target's: only the
        // tag (the binding in the associated data) stops it.
        let fx = Fixture::new();
        let store = fx.store();
        store.save(&grant("personal", 1)).expect("save");
        let raw = std::fs::read(fx.grants().join("personal.grant")).expect("read");
        let line_end = raw.iter().position(|b| *b == b'\n').expect("header");
        let mut bytes = format!(
            "mailgate-grant v1 key={} binding={}",
            store.key_for_reading("work").expect("key").id(),
            binding_digest(&binding("work"))
        )
        .into_bytes();
        bytes.extend_from_slice(&raw[line_end..]);
        let path = fx.key_file("forged", &bytes, 0o600);
        std::fs::rename(path, fx.grants().join("work.grant")).expect("move");
        assert!(matches!(
            store.load(&binding("work")),
            Err(GrantError::Corrupt { .. })
        ));
    }

    #[test]
    fn a_flipped_byte_is_corrupt() {
        let fx = Fixture::new();
        let store = fx.store();
        store.save(&grant("personal", 1)).expect("save");
        let path = fx.grants().join("personal.grant");
        let raw = std::fs::read(&path).expect("read");
        let header = raw.iter().position(|b| *b == b'\n').expect("header") + 1;
        // The nonce's first byte, a ciphertext byte, the tag's last byte.
        for at in [header, header + NONCE_LEN + 3, raw.len() - 1] {
            let mut bytes = raw.clone();
            bytes[at] ^= 0x01;
            std::fs::write(&path, &bytes).expect("write");
            let err = store.load(&binding("personal")).expect_err("refused");
            assert!(
                matches!(err, GrantError::Corrupt { .. }),
                "byte {at}: {err:?}"
            );
        }
        std::fs::write(&path, &raw[..header + NONCE_LEN]).expect("truncate");
        assert!(matches!(
            store.load(&binding("personal")),
            Err(GrantError::Corrupt { .. })
        ));
        std::fs::write(&path, b"not a grant\n").expect("write");
        assert!(matches!(
            store.load(&binding("personal")),
            Err(GrantError::Corrupt { .. })
        ));
    }

    #[test]
    fn a_grant_sealed_with_another_key_is_refused() {
        let fx = Fixture::new();
        let one = fx.key_file("one.key", &[1; KEY_LEN], 0o600);
        let two = fx.key_file("two.key", &[2; KEY_LEN], 0o600);
        fx.store_with_key(&one)
            .expect("store")
            .save(&grant("personal", 1))
            .expect("save");
        assert!(
            !fx.grants().join(KEY_FILE).exists(),
            "no key in the store when the operator keeps one outside"
        );
        assert_eq!(
            fx.store_with_key(&two)
                .expect("store")
                .load(&binding("personal")),
            Err(GrantError::WrongKey {
                alias: "personal".into()
            })
        );
        // Without the external key, the store has none of its own for this grant.
        assert_eq!(
            fx.store().load(&binding("personal")),
            Err(GrantError::KeyMissing {
                alias: "personal".into()
            })
        );
        // A header whose key id is edited to match the other key still fails the tag.
        let path = fx.grants().join("personal.grant");
        let bytes = std::fs::read(&path).expect("read");
        let raw = String::from_utf8_lossy(&bytes).into_owned();
        let one_id = GrantKey::parse(&[1; KEY_LEN]).expect("key").id();
        let two_id = GrantKey::parse(&[2; KEY_LEN]).expect("key").id();
        assert!(raw.contains(&one_id));
        let at = raw.find(&one_id).expect("key id");
        let mut forged = bytes.clone();
        forged[at..at + one_id.len()].copy_from_slice(two_id.as_bytes());
        std::fs::write(&path, &forged).expect("write");
        assert!(matches!(
            fx.store_with_key(&two)
                .expect("store")
                .load(&binding("personal")),
            Err(GrantError::Corrupt { .. })
        ));
    }

    #[test]
    fn the_key_file_is_32_raw_bytes_or_64_hex_digits() {
        let fx = Fixture::new();
        let raw: Vec<u8> = (0u8..32).collect();
        let hex_key = hex::encode(&raw);
        let raw_file = fx.key_file("raw.key", &raw, 0o600);
        let hex_file = fx.key_file("hex.key", hex_key.as_bytes(), 0o600);
        let hex_nl = fx.key_file("hex-nl.key", format!("{hex_key}\n").as_bytes(), 0o400);
        let upper = fx.key_file("upper.key", hex_key.to_uppercase().as_bytes(), 0o600);
        fx.store_with_key(&raw_file)
            .expect("raw")
            .save(&grant("personal", 1))
            .expect("save");
        // The same key in each spelling opens it.
        for file in [&raw_file, &hex_file, &hex_nl, &upper] {
            let store = fx.store_with_key(file).expect("key accepted");
            assert_eq!(
                store.load(&binding("personal")).expect("load"),
                Some(grant("personal", 1))
            );
        }
        let wrong: [(&str, Vec<u8>); 7] = [
            ("short", vec![7; 31]),
            ("long-raw", vec![7; 33]),
            ("raw-nl", [vec![7; 32], b"\n".to_vec()].concat()),
            ("short-hex", hex_key.as_bytes()[..63].to_vec()),
            ("long-hex", format!("{hex_key}0").into_bytes()),
            ("not-hex", "zz".repeat(32).into_bytes()),
            ("crlf", format!("{hex_key}\r\n").into_bytes()),
        ];
        for (name, bytes) in wrong {
            let file = fx.key_file(name, &bytes, 0o600);
            assert_eq!(
                fx.store_with_key(&file).err(),
                Some(GrantError::KeyFormat {
                    which: KeySource::External
                }),
                "{name}"
            );
        }
        let empty = fx.key_file("empty", b"", 0o600);
        assert!(fx.store_with_key(&empty).is_err());
        // The store's own key is held to the same format.
        let store = fx.store();
        std::fs::write(fx.grants().join(KEY_FILE), [7; 31]).expect("write");
        std::fs::set_permissions(
            fx.grants().join(KEY_FILE),
            std::fs::Permissions::from_mode(0o600),
        )
        .expect("chmod");
        assert_eq!(
            store.save(&grant("personal", 2)),
            Err(GrantError::KeyFormat {
                which: KeySource::InStore
            })
        );
        assert_eq!(
            std::fs::read(fx.grants().join(KEY_FILE)).expect("read"),
            [7; 31],
            "a refused key is never replaced"
        );
    }

    #[test]
    fn group_or_world_readable_grants_and_keys_are_refused() {
        let fx = Fixture::new();
        let store = fx.store();
        store.save(&grant("personal", 1)).expect("save");
        let file = fx.grants().join("personal.grant");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let err = store.load(&binding("personal")).expect_err("refused");
        assert_eq!(
            err,
            GrantError::File {
                alias: "personal".into(),
                error: PrivateFileError::TooPermissive
            }
        );
        assert!(err.to_string().contains("chmod 600"), "{err}");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");

        // The store's key, read afresh by a new store.
        let key = fx.grants().join(KEY_FILE);
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert_eq!(
            fx.store().load(&binding("personal")),
            Err(GrantError::Key {
                which: KeySource::InStore,
                error: PrivateFileError::TooPermissive
            })
        );
        let external = fx.key_file("wide.key", &[1; KEY_LEN], 0o640);
        assert_eq!(
            fx.store_with_key(&external).err(),
            Some(GrantError::Key {
                which: KeySource::External,
                error: PrivateFileError::TooPermissive
            })
        );
    }

    #[test]
    fn a_symlinked_or_hard_linked_grant_is_refused() {
        let fx = Fixture::new();
        let store = fx.store();
        store.save(&grant("personal", 1)).expect("save");
        let file = fx.grants().join("personal.grant");
        std::os::unix::fs::symlink(&file, fx.grants().join("work.grant")).expect("symlink");
        assert_eq!(
            store.load(&binding("work")),
            Err(GrantError::File {
                alias: "work".into(),
                error: PrivateFileError::NotRegularFile
            })
        );
        std::fs::hard_link(&file, fx.tmp.path().join("elsewhere")).expect("link");
        assert_eq!(
            store.load(&binding("personal")),
            Err(GrantError::File {
                alias: "personal".into(),
                error: PrivateFileError::HardLinked
            })
        );
    }

    #[test]
    fn a_grant_or_key_owned_by_another_user_is_refused() {
        if !rustix::process::geteuid().is_root() {
            // Only root can give a file away; CI runs the suite as root.
            return;
        }
        let fx = Fixture::new();
        let store = fx.store();
        store.save(&grant("personal", 1)).expect("save");
        let file = fx.grants().join("personal.grant");
        std::os::unix::fs::lchown(&file, Some(65534), None).expect("chown");
        assert_eq!(
            store.load(&binding("personal")),
            Err(GrantError::File {
                alias: "personal".into(),
                error: PrivateFileError::NotOwned
            })
        );
        let external = fx.key_file("theirs.key", &[1; KEY_LEN], 0o600);
        std::os::unix::fs::lchown(&external, Some(65534), None).expect("chown");
        assert_eq!(
            fx.store_with_key(&external).err(),
            Some(GrantError::Key {
                which: KeySource::External,
                error: PrivateFileError::NotOwned
            })
        );
    }

    #[test]
    fn a_crash_mid_save_keeps_the_previous_grant() {
        let fx = Fixture::new();
        let store = fx.store();
        store.save(&grant("personal", 1)).expect("save");
        // A writer that staged the next grant and died before its rename.
        {
            let _lock = store.lock().expect("lock");
            store.stage(&grant("personal", 2)).expect("stage");
        }
        let tmp = fx.grants().join("personal.grant.tmp");
        assert!(tmp.exists());
        assert_eq!(
            store.load(&binding("personal")).expect("load"),
            Some(grant("personal", 1))
        );
        assert_eq!(store.list().expect("list"), ["personal"]);
        store
            .save(&grant("personal", 3))
            .expect("the next save succeeds");
        assert_eq!(
            store.load(&binding("personal")).expect("load"),
            Some(grant("personal", 3))
        );
        assert!(!tmp.exists());
        // A torn temp file (a crash mid-write) is as harmless.
        std::fs::write(&tmp, b"mailgate-grant v1 key=").expect("write");
        assert_eq!(
            store.load(&binding("personal")).expect("load"),
            Some(grant("personal", 3))
        );
        store
            .save(&grant("personal", 4))
            .expect("save over a torn temp");
        assert_eq!(
            store.load(&binding("personal")).expect("load"),
            Some(grant("personal", 4))
        );
        // A crash after the key's temp was written and before its rename.
        let fresh = Fixture::new();
        std::fs::create_dir(fresh.grants()).expect("mkdir");
        std::fs::set_permissions(fresh.grants(), std::fs::Permissions::from_mode(0o700))
            .expect("chmod");
        std::fs::write(fresh.grants().join(KEY_TMP), [9; 5]).expect("write");
        let store = fresh.store();
        store.save(&grant("personal", 1)).expect("save");
        assert!(!fresh.grants().join(KEY_TMP).exists());
        assert_eq!(
            std::fs::read(fresh.grants().join(KEY_FILE))
                .expect("key")
                .len(),
            KEY_LEN
        );
    }

    #[test]
    fn delete_removes_the_grant() {
        let fx = Fixture::new();
        let store = fx.store();
        store.save(&grant("personal", 1)).expect("save");
        store.save(&grant("work", 1)).expect("save");
        assert_eq!(store.delete("personal"), Ok(true));
        assert_eq!(store.delete("personal"), Ok(false));
        assert_eq!(store.load(&binding("personal")), Ok(None));
        assert_eq!(store.list().expect("list"), ["work"]);
    }

    #[test]
    fn aliases_that_could_leave_or_hide_in_the_folder_are_refused() {
        let fx = Fixture::new();
        let store = fx.store();
        let long = "a".repeat(65);
        for alias in [
            "",
            "../state",
            "a/b",
            "a\\b",
            ".hidden",
            "a\0b",
            long.as_str(),
        ] {
            assert_eq!(
                store.load(&binding(alias)).err(),
                Some(GrantError::InvalidAlias),
                "{alias:?}"
            );
            assert_eq!(
                store.save(&grant(alias, 1)),
                Err(GrantError::InvalidAlias),
                "{alias:?}"
            );
            assert_eq!(store.delete(alias), Err(GrantError::InvalidAlias));
        }
        assert_eq!(
            std::fs::read_dir(fx.grants()).expect("ls").count(),
            0,
            "nothing written"
        );
        // Planted names are not listed as grants.
        std::fs::write(fx.grants().join(".x.grant"), b"").expect("write");
        std::fs::write(fx.grants().join("notes.txt"), b"").expect("write");
        assert_eq!(store.list(), Ok(vec![]));
    }

    #[test]
    fn no_output_shows_the_token_or_the_account() {
        let grant = grant("personal", 1);
        let debug = format!("{grant:?}");
        assert!(!debug.contains(MARKER), "{debug}");
        assert!(!debug.contains("robin.example"), "{debug}");
        assert!(debug.contains("personal"), "{debug}");
        assert_eq!(grant.refresh_token.expose(), format!("{MARKER}-1"));
        assert!(KeySource::External.to_string().contains(GRANT_KEY_FILE_VAR));
        assert_eq!(
            format!("{:?}", GrantKey::parse(&[1; KEY_LEN]).expect("key")),
            "GrantKey(..)"
        );
        let errors = [
            GrantError::Corrupt {
                alias: "personal".into(),
                why: "it is truncated",
            },
            GrantError::NotThisAliasGrant {
                alias: "personal".into(),
            },
            GrantError::WrongKey {
                alias: "personal".into(),
            },
        ];
        for error in errors {
            let text = error.to_string();
            assert!(text.contains("personal"), "{text}");
            assert!(!text.contains(MARKER), "{text}");
        }
    }

    fn access(token: &str, at: i64) -> CachedAccess {
        CachedAccess {
            token: AccessToken::new(token.to_owned()),
            obtained_at: DateTime::from_timestamp(at, 0).expect("time"),
            expires_at: DateTime::from_timestamp(at + 3600, 0).expect("time"),
        }
    }

    #[test]
    fn the_access_token_and_the_refusal_mark_round_trip_sealed() {
        let fx = Fixture::new();
        let store = fx.store();
        let mut saved = grant("personal", 1);
        saved.access = Some(access(&format!("{MARKER}-access"), 1_796_000_100));
        saved.refused_at = DateTime::from_timestamp(1_796_000_200, 0);
        store.save(&saved).expect("save");
        assert_eq!(store.load(&binding("personal")).expect("load"), Some(saved));
        let raw = std::fs::read(fx.grants().join("personal.grant")).expect("read");
        assert!(!String::from_utf8_lossy(&raw).contains(MARKER));
        let loaded = store
            .load(&binding("personal"))
            .expect("load")
            .expect("grant");
        let debug = format!("{loaded:?}");
        assert!(!debug.contains(MARKER), "{debug}");
        assert!(debug.contains("expires_at"), "{debug}");
        let token = loaded.access.expect("access").token;
        assert_eq!(token.expose(), format!("{MARKER}-access"));
        assert_eq!(format!("{token:?}"), "AccessToken(<redacted>)");
    }

    #[test]
    fn a_grant_file_from_before_the_access_token_field_still_loads() {
        let fx = Fixture::new();
        let store = fx.store();
        // Creates the key; the file below is replaced by one in the original v1 shape.
        store.save(&grant("personal", 1)).expect("save");
        let old = serde_json::json!({
            "binding": {
                "alias": "personal",
                "provider": "microsoft",
                "clientId": "00000000-0000-0000-0000-00000000c1d0",
                "authority": "consumers",
            },
            "refreshToken": format!("{MARKER}-1"),
            "account": "robin.example@example.com",
            "scopes": ["offline_access", "Mail.Read"],
            "obtainedAt": 1_796_000_000,
            "refreshedAt": 1_796_000_001,
        });
        let key = store.key_for_reading("personal").expect("key");
        let plaintext = serde_json::to_vec(&old).expect("json");
        let bytes = seal_plaintext(key, &binding("personal"), &plaintext).expect("seal");
        let path = fx.grants().join("personal.grant");
        std::fs::write(&path, bytes).expect("write");
        assert_eq!(
            store.load(&binding("personal")).expect("load"),
            Some(grant("personal", 1))
        );
        // And a grant without the new fields is written without them (an older mailgate, whose
        // reader denies unknown fields, can still read what a login saves).
        store.save(&grant("personal", 2)).expect("save");
        let raw = std::fs::read(&path).expect("read");
        let header = raw.iter().position(|b| *b == b'\n').expect("header") + 1;
        let (nonce, ciphertext) = raw[header..].split_at(NONCE_LEN);
        let plain = key
            .cipher()
            .decrypt(
                &XNonce::try_from(nonce).expect("nonce"),
                Payload {
                    msg: ciphertext,
                    aad: &associated_data(&raw[..header], &binding("personal")),
                },
            )
            .expect("decrypt");
        let text = String::from_utf8(plain).expect("utf-8");
        assert!(
            !text.contains("\"access\"") && !text.contains("\"refusedAt\""),
            "{text}"
        );
    }

    #[test]
    fn an_alias_lock_makes_saves_of_that_alias_wait() {
        let fx = Fixture::new();
        let store = fx.store();
        store.save(&grant("personal", 1)).expect("save");
        let held = store.lock_alias("personal").expect("lock");
        assert_eq!(mode(&fx.grants().join("personal.lock")), 0o600);
        // Another handle (another process, as far as flock is concerned) saving the alias.
        let other = GrantStore::open(&fx.state, None, false).expect("store");
        let saved = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = Arc::clone(&saved);
        let writer = std::thread::spawn(move || {
            other.save(&grant("personal", 2)).expect("save");
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        // Another alias is not held up.
        store.save(&grant("work", 1)).expect("save");
        std::thread::sleep(std::time::Duration::from_millis(150));
        assert!(
            !saved.load(std::sync::atomic::Ordering::SeqCst),
            "waits for the lock"
        );
        // The holder saves through its lock; the same lock never saves another alias.
        store
            .save_locked(&held, &grant("personal", 3))
            .expect("save");
        assert_eq!(
            store.save_locked(&held, &grant("work", 3)),
            Err(GrantError::InvalidAlias)
        );
        drop(held);
        writer.join().expect("writer");
        assert_eq!(
            store.load(&binding("personal")).expect("load"),
            Some(grant("personal", 2))
        );
        assert_eq!(store.list().expect("list"), ["personal", "work"]);
        assert_eq!(
            store.lock_alias("../x").err(),
            Some(GrantError::InvalidAlias)
        );
    }

    #[test]
    fn canonical_bindings_do_not_collide_across_field_boundaries() {
        let mut a = binding("ab");
        a.provider = "c".into();
        let mut b = binding("a");
        b.provider = "bc".into();
        assert_ne!(canonical_binding(&a), canonical_binding(&b));
        assert_ne!(binding_digest(&a), binding_digest(&b));
    }
}
