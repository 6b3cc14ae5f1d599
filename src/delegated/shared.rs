//! Grants in the shared database (issue 37, item 3): when instances share a PostgreSQL store
//! (`MAILGATE_INDEX_URL`) instead of a state folder, each alias's grant is a row of that
//! database, sealed as a grant file is ([`super::grants`]: the same header, binding and
//! XChaCha20-Poly1305 seal, under `MAILGATE_GRANT_KEY_FILE`'s key, which every instance must
//! hold), kept under the index's row-level security (the row names its mailbox identity, and a
//! session sees only the mailbox it names).
//!
//! A refresh flight holds the row's lock (`SELECT … FOR UPDATE` in a transaction) from its load
//! to its save, so a second instance's flight waits on the row, then finds the token the first
//! saved: two instances refresh once, as two processes on one folder do with its `flock`. The
//! transaction is the fence: a holder whose connection broke or whose process died has its
//! transaction rolled back by the server, so it can commit nothing after another holder took
//! the row; and a save commits only while the row is at the version it loaded (a row replaced
//! meanwhile, by a path that did not take the lock, fails the save rather than being
//! overwritten).
//!
//! This module knows the seal, not the database: the rows are a [`GrantRows`], implemented over
//! PostgreSQL by `index::store::postgres::grant_rows` and handed in at startup, so `delegated`
//! never imports the index (the index's sync reaches the backends, which hold the token
//! sources).

use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;

use super::grants::{self, Grant, GrantBinding, GrantError, GrantKey};

/// The most a sealed grant row may hold (a grant file's bound).
pub(crate) const MAX_SEALED_BYTES: usize = 64 * 1024;

/// The rows of the shared database's grant table, one per mailbox identity.
pub(crate) trait GrantRows: Send + Sync {
    /// Opens a transaction and locks `mailbox`'s row (waiting while another holder has it);
    /// the row is released when the returned value is dropped or its replacement committed.
    fn lock<'a>(&'a self, mailbox: &'a str) -> BoxFuture<'a, Result<Box<dyn HeldRow>, RowError>>;
    /// The row's sealed bytes, without a lock (`mailgate auth status`).
    fn read<'a>(&'a self, mailbox: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>, RowError>>;
    /// Removes the row (logout); `false` when there was none.
    fn remove<'a>(&'a self, mailbox: &'a str) -> BoxFuture<'a, Result<bool, RowError>>;
}

/// A locked row: what it held when locked, and the one write its holder may make.
pub(crate) trait HeldRow: Send {
    fn sealed(&self) -> Option<&[u8]>;
    /// Writes `sealed` as the row (inserting it when there was none) and commits, if the row is
    /// still at the version it was locked at.
    fn replace(self: Box<Self>, sealed: Vec<u8>) -> BoxFuture<'static, Result<(), RowError>>;
}

/// Why the rows could not be used: metadata only (a SQLSTATE, a class), never a row's bytes.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RowError {
    #[error("{0}")]
    Store(String),
    #[error("the grant row changed while it was held")]
    Changed,
    #[error("the grant row is larger than a grant may be")]
    TooLarge,
}

/// The grant store of a shared database: its rows and the key that seals them.
pub(crate) struct SharedGrants {
    rows: Arc<dyn GrantRows>,
    key: GrantKey,
}

impl fmt::Debug for SharedGrants {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SharedGrants(..)")
    }
}

/// The lock on one alias's row, from a flight's load to its save.
pub(crate) struct SharedLock {
    alias: String,
    row: Box<dyn HeldRow>,
}

impl fmt::Debug for SharedLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedLock")
            .field("alias", &self.alias)
            .finish_non_exhaustive()
    }
}

impl SharedGrants {
    pub(crate) fn new(rows: Arc<dyn GrantRows>, key: GrantKey) -> SharedGrants {
        SharedGrants { rows, key }
    }

    /// Locks the row of `mailbox` and opens the grant it holds for `binding` (`None`: no row).
    pub(crate) async fn lock_load(
        &self,
        mailbox: &str,
        binding: &GrantBinding,
    ) -> Result<(SharedLock, Option<Grant>), GrantError> {
        let alias = binding.alias.as_str();
        let row = self
            .rows
            .lock(mailbox)
            .await
            .map_err(|e| shared_error(alias, &e))?;
        let grant = row
            .sealed()
            .map(|bytes| self.open(binding, bytes))
            .transpose()?;
        Ok((
            SharedLock {
                alias: alias.to_owned(),
                row,
            },
            grant,
        ))
    }

    /// Replaces the locked row with `grant` and commits (a caller bug, not a state of the
    /// database: the lock must be this grant's alias's).
    pub(crate) async fn save_locked(
        &self,
        lock: SharedLock,
        grant: &Grant,
    ) -> Result<(), GrantError> {
        if lock.alias != grant.binding.alias {
            return Err(GrantError::InvalidAlias);
        }
        let sealed = grants::seal(&self.key, grant)?;
        lock.row
            .replace(sealed)
            .await
            .map_err(|e| shared_error(&lock.alias, &e))
    }

    /// A sign-in's save: locks the row (waiting for a flight of another instance) and replaces it.
    pub(crate) async fn save(&self, mailbox: &str, grant: &Grant) -> Result<(), GrantError> {
        let alias = grant.binding.alias.as_str();
        let row = self
            .rows
            .lock(mailbox)
            .await
            .map_err(|e| shared_error(alias, &e))?;
        let lock = SharedLock {
            alias: alias.to_owned(),
            row,
        };
        self.save_locked(lock, grant).await
    }

    /// The grant of `mailbox` for `binding`, without a lock (`mailgate auth status`).
    pub(crate) async fn load(
        &self,
        mailbox: &str,
        binding: &GrantBinding,
    ) -> Result<Option<Grant>, GrantError> {
        let alias = binding.alias.as_str();
        let sealed = self
            .rows
            .read(mailbox)
            .await
            .map_err(|e| shared_error(alias, &e))?;
        sealed.map(|bytes| self.open(binding, &bytes)).transpose()
    }

    /// Removes the grant of `mailbox` (logout); `false` when there was none.
    pub(crate) async fn delete(&self, mailbox: &str, alias: &str) -> Result<bool, GrantError> {
        self.rows
            .remove(mailbox)
            .await
            .map_err(|e| shared_error(alias, &e))
    }

    fn open(&self, binding: &GrantBinding, bytes: &[u8]) -> Result<Grant, GrantError> {
        if bytes.len() > MAX_SEALED_BYTES {
            return Err(shared_error(&binding.alias, &RowError::TooLarge));
        }
        grants::open_sealed(&self.key, binding, bytes)
    }
}

fn shared_error(alias: &str, error: &RowError) -> GrantError {
    GrantError::Shared {
        alias: alias.to_owned(),
        why: error.to_string(),
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Grant rows in memory, with the database's locking (one holder per row, waiting) and its
    //! fence (a replace at a version no longer current fails), for the token source's tests.

    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    use futures::FutureExt as _;
    use tokio::sync::OwnedMutexGuard;

    use super::{BoxFuture, GrantRows, HeldRow, RowError};

    #[derive(Default)]
    pub(crate) struct MemoryRows {
        rows: Mutex<BTreeMap<String, (u64, Vec<u8>)>>,
        locks: Mutex<BTreeMap<String, Arc<tokio::sync::Mutex<()>>>>,
    }

    impl MemoryRows {
        fn row_lock(&self, mailbox: &str) -> Arc<tokio::sync::Mutex<()>> {
            let mut locks = self.locks.lock().expect("locks");
            Arc::clone(locks.entry(mailbox.to_owned()).or_default())
        }

        /// Replaces a row behind every holder's back (the fence's test).
        pub(crate) fn overwrite(&self, mailbox: &str, sealed: Vec<u8>) {
            let mut rows = self.rows.lock().expect("rows");
            let version = rows.get(mailbox).map_or(0, |r| r.0) + 1;
            rows.insert(mailbox.to_owned(), (version, sealed));
        }
    }

    struct MemoryHeld {
        rows: Arc<MemoryRows>,
        mailbox: String,
        version: u64,
        sealed: Option<Vec<u8>>,
        _guard: OwnedMutexGuard<()>,
    }

    impl HeldRow for MemoryHeld {
        fn sealed(&self) -> Option<&[u8]> {
            self.sealed.as_deref()
        }

        fn replace(self: Box<Self>, sealed: Vec<u8>) -> BoxFuture<'static, Result<(), RowError>> {
            async move {
                let mut rows = self.rows.rows.lock().expect("rows");
                let now = rows.get(&self.mailbox).map_or(0, |r| r.0);
                if now != self.version {
                    return Err(RowError::Changed);
                }
                rows.insert(self.mailbox.clone(), (now + 1, sealed));
                Ok(())
            }
            .boxed()
        }
    }

    /// `Arc<MemoryRows>` is the rows; each lock holds the `Arc` so a held row outlives nothing.
    pub(crate) struct SharedMemoryRows(pub(crate) Arc<MemoryRows>);

    impl GrantRows for SharedMemoryRows {
        fn lock<'a>(
            &'a self,
            mailbox: &'a str,
        ) -> BoxFuture<'a, Result<Box<dyn HeldRow>, RowError>> {
            async move {
                let guard = self.0.row_lock(mailbox).lock_owned().await;
                let (version, sealed) = {
                    let rows = self.0.rows.lock().expect("rows");
                    rows.get(mailbox)
                        .map_or((0, None), |(v, s)| (*v, Some(s.clone())))
                };
                Ok(Box::new(MemoryHeld {
                    rows: Arc::clone(&self.0),
                    mailbox: mailbox.to_owned(),
                    version,
                    sealed,
                    _guard: guard,
                }) as Box<dyn HeldRow>)
            }
            .boxed()
        }

        fn read<'a>(
            &'a self,
            mailbox: &'a str,
        ) -> BoxFuture<'a, Result<Option<Vec<u8>>, RowError>> {
            async move {
                let rows = self.0.rows.lock().expect("rows");
                Ok(rows.get(mailbox).map(|r| r.1.clone()))
            }
            .boxed()
        }

        fn remove<'a>(&'a self, mailbox: &'a str) -> BoxFuture<'a, Result<bool, RowError>> {
            async move {
                let _guard = self.0.row_lock(mailbox).lock_owned().await;
                let mut rows = self.0.rows.lock().expect("rows");
                Ok(rows.remove(mailbox).is_some())
            }
            .boxed()
        }
    }
}
