//! The cursor key ring: the HMAC keys continuation cursors are signed with (`tools::cursor`).
//!
//! Instances behind one load balancer must accept each other's cursors, and a restart must not
//! expire the cursors a client holds, so the keys can come from a file every instance reads
//! (`MAILGATE_CURSOR_KEYS_FILE`): one base64url secret of at least 32 bytes per line, the first
//! issuing and every line redeeming, so a key is rotated by putting a new line first and
//! dropping the old one once its cursors no longer matter. A key's id is derived from its
//! secret, so instances reading the same file agree on ids without talking. Without a file the
//! ring holds one key drawn at process start: cursors then end with the process, as before.
//! The file is a policy file like `plugin.json`: owned by the user running mailgate and private
//! (`path_guard::read_private_file`), and nothing here ever prints a secret.

use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngExt as _;
use sha2::Digest as _;

use crate::path_guard;

/// Bytes of a key id inside a cursor.
pub(crate) const KEY_ID_BYTES: usize = 8;
/// The shortest secret accepted: HMAC-SHA256 gains nothing from longer, and less is guessable.
const MIN_SECRET_BYTES: usize = 32;
/// The longest secret line accepted (a 1 KiB secret; more is a mistake, not a key).
const MAX_SECRET_BYTES: usize = 1024;
/// Keys in one file: enough for any rotation schedule, few enough to try each on redeem.
const MAX_KEYS: usize = 16;
const MAX_FILE_BYTES: u64 = 64 * 1024;
/// Domain separation: a key id never equals a hash of the secret used for anything else.
const KEY_ID_DOMAIN: &[u8] = b"mailgate cursor key id v1\0";

/// One signing key.
pub(crate) struct CursorKey {
    id: [u8; KEY_ID_BYTES],
    secret: Vec<u8>,
}

impl CursorKey {
    fn from_secret(secret: Vec<u8>) -> Self {
        let digest = sha2::Sha256::new()
            .chain_update(KEY_ID_DOMAIN)
            .chain_update(&secret)
            .finalize();
        let mut id = [0u8; KEY_ID_BYTES];
        id.copy_from_slice(&digest[..KEY_ID_BYTES]);
        Self { id, secret }
    }

    pub(crate) fn id(&self) -> &[u8; KEY_ID_BYTES] {
        &self.id
    }

    pub(crate) fn secret(&self) -> &[u8] {
        &self.secret
    }
}

impl std::fmt::Debug for CursorKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CursorKey")
            .field("id", &URL_SAFE_NO_PAD.encode(self.id))
            .finish_non_exhaustive()
    }
}

/// Where the keys came from, for `index status`-style reports and the startup log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeySource {
    /// Drawn at process start: cursors end with the process.
    Process,
    /// `MAILGATE_CURSOR_KEYS_FILE`: shared by every instance reading the file.
    File,
    /// The shared index store's database (`MAILGATE_INDEX_URL`): shared by every instance on it.
    Database,
}

/// The keys of this process: never empty, the first one issues.
#[derive(Debug)]
pub(crate) struct CursorKeys {
    keys: Vec<CursorKey>,
    source: KeySource,
}

/// Why a key ring file is refused. Names the line, never its content.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum KeyRingError {
    #[error("{0}")]
    File(path_guard::PrivateFileError),
    #[error("it holds no key (one base64url secret of at least 32 bytes per line)")]
    Empty,
    #[error("line {line}: not base64url (A-Z a-z 0-9 - _, no padding)")]
    NotBase64 { line: usize },
    #[error("line {line}: a secret of {bytes} bytes; at least 32 are required")]
    TooShort { line: usize, bytes: usize },
    #[error("line {line}: longer than a secret ({MAX_SECRET_BYTES} bytes at most)")]
    TooLong { line: usize },
    #[error("line {line}: the same secret as line {first}")]
    Duplicate { line: usize, first: usize },
    #[error("more than {MAX_KEYS} keys")]
    TooMany,
}

impl CursorKeys {
    /// One key drawn now: what a process without a key ring file uses.
    pub(crate) fn for_this_process() -> Self {
        let secret: [u8; 32] = rand::rng().random();
        Self {
            keys: vec![CursorKey::from_secret(secret.to_vec())],
            source: KeySource::Process,
        }
    }

    /// The key ring file at `path` (absolute), with the policy-file checks.
    pub(crate) fn load(path: &Path) -> Result<Self, KeyRingError> {
        let bytes =
            path_guard::read_private_file(path, MAX_FILE_BYTES).map_err(KeyRingError::File)?;
        Self::parse(&bytes)
    }

    /// A key ring file's content: blank lines and `#` comments are skipped.
    pub(crate) fn parse(bytes: &[u8]) -> Result<Self, KeyRingError> {
        let text = String::from_utf8_lossy(bytes);
        let mut keys: Vec<(usize, CursorKey)> = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            let entry = raw.trim();
            if entry.is_empty() || entry.starts_with('#') {
                continue;
            }
            if entry.len() > MAX_SECRET_BYTES * 4 / 3 + 4 {
                return Err(KeyRingError::TooLong { line });
            }
            let secret = URL_SAFE_NO_PAD
                .decode(entry)
                .map_err(|_| KeyRingError::NotBase64 { line })?;
            if secret.len() < MIN_SECRET_BYTES {
                return Err(KeyRingError::TooShort {
                    line,
                    bytes: secret.len(),
                });
            }
            if secret.len() > MAX_SECRET_BYTES {
                return Err(KeyRingError::TooLong { line });
            }
            let key = CursorKey::from_secret(secret);
            if let Some((first, _)) = keys.iter().find(|(_, k)| k.secret == key.secret) {
                return Err(KeyRingError::Duplicate {
                    line,
                    first: *first,
                });
            }
            if keys.len() == MAX_KEYS {
                return Err(KeyRingError::TooMany);
            }
            keys.push((line, key));
        }
        if keys.is_empty() {
            return Err(KeyRingError::Empty);
        }
        Ok(Self {
            keys: keys.into_iter().map(|(_, key)| key).collect(),
            source: KeySource::File,
        })
    }

    /// Keys read from the shared database, newest (issuing) first; `None` when there are none.
    pub(crate) fn from_database(secrets: Vec<Vec<u8>>) -> Option<Self> {
        let keys: Vec<CursorKey> = secrets.into_iter().map(CursorKey::from_secret).collect();
        (!keys.is_empty()).then_some(Self {
            keys,
            source: KeySource::Database,
        })
    }

    /// A secret for a new key (what the first instance on a database stores).
    pub(crate) fn new_secret() -> Vec<u8> {
        let secret: [u8; 32] = rand::rng().random();
        secret.to_vec()
    }

    /// The id a secret's key has (the database keeps it beside the secret, for operators).
    pub(crate) fn id_of(secret: &[u8]) -> [u8; KEY_ID_BYTES] {
        CursorKey::from_secret(secret.to_vec()).id
    }

    /// The key new cursors are signed with.
    pub(crate) fn issuing(&self) -> &CursorKey {
        // Never empty: both constructors hold at least one key.
        &self.keys[0]
    }

    /// The key with id `id`, if this ring still holds it.
    pub(crate) fn find(&self, id: &[u8]) -> Option<&CursorKey> {
        self.keys.iter().find(|key| key.id[..] == *id)
    }

    pub(crate) fn source(&self) -> KeySource {
        self.source
    }

    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(byte: u8, len: usize) -> String {
        URL_SAFE_NO_PAD.encode(vec![byte; len])
    }

    #[test]
    fn a_file_ring_issues_with_its_first_key_and_finds_every_key() {
        let text = format!(
            "# rotated 2026-12-01\n{}\n\n{}\n",
            secret(2, 32),
            secret(1, 48)
        );
        let ring = CursorKeys::parse(text.as_bytes()).expect("parses");
        assert_eq!(ring.len(), 2);
        assert_eq!(ring.source(), KeySource::File);
        assert_eq!(ring.issuing().secret(), &[2u8; 32][..]);
        let old = CursorKey::from_secret(vec![1; 48]);
        assert_eq!(
            ring.find(old.id()).map(CursorKey::secret),
            Some(&[1u8; 48][..])
        );
        assert!(ring.find(&[0; KEY_ID_BYTES]).is_none());
    }

    #[test]
    fn key_ids_depend_on_the_secret_alone() {
        // Two instances reading the same file agree without talking.
        let a = CursorKeys::parse(secret(7, 32).as_bytes()).expect("parses");
        let b = CursorKeys::parse(format!("\n{}\n", secret(7, 32)).as_bytes()).expect("parses");
        assert_eq!(a.issuing().id(), b.issuing().id());
        let c = CursorKeys::parse(secret(8, 32).as_bytes()).expect("parses");
        assert_ne!(a.issuing().id(), c.issuing().id());
        // Two processes without a file do not.
        assert_ne!(
            CursorKeys::for_this_process().issuing().id(),
            CursorKeys::for_this_process().issuing().id()
        );
    }

    #[test]
    fn bad_files_are_refused_by_line_without_their_content() {
        let cases: [(String, KeyRingError); 6] = [
            ("# nothing\n\n".into(), KeyRingError::Empty),
            ("not base64!\n".into(), KeyRingError::NotBase64 { line: 1 }),
            (
                format!("\n{}\n", secret(1, 31)),
                KeyRingError::TooShort { line: 2, bytes: 31 },
            ),
            (secret(1, 1025), KeyRingError::TooLong { line: 1 }),
            (
                format!("{}\n{}\n", secret(1, 32), secret(1, 32)),
                KeyRingError::Duplicate { line: 2, first: 1 },
            ),
            (
                (0..=16u8).map(|i| secret(i, 32) + "\n").collect(),
                KeyRingError::TooMany,
            ),
        ];
        for (text, want) in cases {
            let got = CursorKeys::parse(text.as_bytes()).expect_err("refused");
            assert_eq!(got, want);
            let shown = got.to_string();
            assert!(!shown.contains(&secret(1, 32)), "{shown}");
        }
    }
}
