//! The delegated grants' rows in the shared database (`mailgate_grants`, schema version 3): the
//! [`GrantRows`] that `delegated::shared` seals and opens. Each lock is a transaction on a
//! connection of its own, vetted like every connection ([`super::connect`]), scoped to its
//! mailbox (row-level security) and naming it in every statement too; dropping a held row closes
//! that connection, and the server rolls its transaction back.
//!
//! A connection per lock, not a pooled one: a pooled connection dropped mid-transaction would go
//! back to the pool still inside it. Refreshes are rare (one per access token's lifetime per
//! alias), so the connection's cost is paid rarely.

use std::time::Duration;

use futures::FutureExt as _;
use futures::future::BoxFuture;

use super::lease::scope_to;
use super::{PgError, PgSettings, connect};
use crate::delegated::shared::{GrantRows, HeldRow, MAX_SEALED_BYTES, RowError};

/// How long a lock waits for another holder (a refresh in flight elsewhere: one request to a
/// token endpoint, bounded well below this).
const LOCK_WAIT: Duration = Duration::from_secs(60);

/// The grant rows of the database `settings` names.
pub(crate) struct PgGrantRows {
    settings: PgSettings,
}

impl PgGrantRows {
    pub(crate) fn new(settings: PgSettings) -> PgGrantRows {
        PgGrantRows { settings }
    }

    /// A vetted connection inside a transaction scoped to `mailbox`.
    async fn begin(&self, mailbox: &str) -> Result<tokio_postgres::Client, PgError> {
        let client = connect(&self.settings).await?;
        client.batch_execute("BEGIN").await?;
        scope_to(&client, mailbox).await?;
        client
            .execute(
                "SELECT set_config('lock_timeout', $1, true)",
                &[&format!("{}ms", LOCK_WAIT.as_millis())],
            )
            .await?;
        Ok(client)
    }
}

fn row_error(e: impl Into<PgError>) -> RowError {
    RowError::Store(e.into().to_string())
}

/// A locked row: its connection, inside the transaction that holds the lock.
struct PgHeld {
    client: tokio_postgres::Client,
    mailbox: String,
    /// The version locked; 0 when there was no row.
    version: i64,
    sealed: Option<Vec<u8>>,
}

impl GrantRows for PgGrantRows {
    fn lock<'a>(&'a self, mailbox: &'a str) -> BoxFuture<'a, Result<Box<dyn HeldRow>, RowError>> {
        async move {
            let client = self.begin(mailbox).await.map_err(row_error)?;
            let row = client
                .query_opt(
                    "SELECT version, sealed FROM mailgate_grants
                      WHERE mailbox = $1 AND mailbox = current_setting('mailgate.mailbox')
                      FOR UPDATE",
                    &[&mailbox],
                )
                .await
                .map_err(row_error)?;
            let (version, sealed) = match row {
                Some(row) => {
                    let sealed: Vec<u8> = row.try_get(1).map_err(row_error)?;
                    if sealed.len() > MAX_SEALED_BYTES {
                        return Err(RowError::TooLarge);
                    }
                    (row.try_get(0).map_err(row_error)?, Some(sealed))
                }
                None => (0, None),
            };
            Ok(Box::new(PgHeld {
                client,
                mailbox: mailbox.to_owned(),
                version,
                sealed,
            }) as Box<dyn HeldRow>)
        }
        .boxed()
    }

    fn read<'a>(&'a self, mailbox: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>, RowError>> {
        async move {
            let client = self.begin(mailbox).await.map_err(row_error)?;
            let row = client
                .query_opt(
                    "SELECT sealed FROM mailgate_grants
                      WHERE mailbox = $1 AND mailbox = current_setting('mailgate.mailbox')",
                    &[&mailbox],
                )
                .await
                .map_err(row_error)?;
            client.batch_execute("COMMIT").await.map_err(row_error)?;
            row.map(|r| r.try_get::<_, Vec<u8>>(0))
                .transpose()
                .map_err(row_error)
        }
        .boxed()
    }

    fn remove<'a>(&'a self, mailbox: &'a str) -> BoxFuture<'a, Result<bool, RowError>> {
        async move {
            let client = self.begin(mailbox).await.map_err(row_error)?;
            let removed = client
                .execute(
                    "DELETE FROM mailgate_grants
                      WHERE mailbox = $1 AND mailbox = current_setting('mailgate.mailbox')",
                    &[&mailbox],
                )
                .await
                .map_err(row_error)?;
            client.batch_execute("COMMIT").await.map_err(row_error)?;
            Ok(removed > 0)
        }
        .boxed()
    }
}

impl HeldRow for PgHeld {
    fn sealed(&self) -> Option<&[u8]> {
        self.sealed.as_deref()
    }

    fn replace(self: Box<Self>, sealed: Vec<u8>) -> BoxFuture<'static, Result<(), RowError>> {
        async move {
            if sealed.len() > MAX_SEALED_BYTES {
                return Err(RowError::TooLarge);
            }
            // An insert when the lock found no row; otherwise an update at the version locked.
            // Either writes nothing when the row is not what was locked (another writer's row
            // appeared, or the row moved on), and nothing is committed then.
            let written = self
                .client
                .execute(
                    "INSERT INTO mailgate_grants AS g (mailbox, version, sealed, updated_at)
                     VALUES ($1, $2::bigint + 1, $3, clock_timestamp())
                     ON CONFLICT (mailbox) DO UPDATE
                        SET version = g.version + 1,
                            sealed = EXCLUDED.sealed,
                            updated_at = EXCLUDED.updated_at
                        WHERE g.version = $2::bigint
                          AND g.mailbox = current_setting('mailgate.mailbox')",
                    &[&self.mailbox, &self.version, &sealed],
                )
                .await
                .map_err(row_error)?;
            if written != 1 {
                return Err(RowError::Changed);
            }
            self.client.batch_execute("COMMIT").await.map_err(row_error)
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn rows(test: &str) -> Option<(PgGrantRows, tokio_postgres::Client)> {
        let (settings, owner) =
            super::super::testdb::fresh_settings(test, Duration::from_secs(60)).await?;
        Some((PgGrantRows::new(settings), owner))
    }

    #[tokio::test]
    async fn a_row_is_written_once_per_lock_and_only_its_mailbox_sees_it() {
        let Some((rows, _admin)) = rows("grant_rows").await else {
            return;
        };
        let held = rows.lock("sha256:a").await.expect("lock");
        assert!(held.sealed().is_none(), "no row yet");
        held.replace(b"first".to_vec()).await.expect("insert");
        let held = rows.lock("sha256:a").await.expect("lock");
        assert_eq!(held.sealed(), Some(&b"first"[..]));
        held.replace(b"second".to_vec()).await.expect("update");
        assert_eq!(
            rows.read("sha256:a").await.expect("read").as_deref(),
            Some(&b"second"[..])
        );
        assert_eq!(rows.read("sha256:b").await.expect("read"), None);
        // Row security: a session scoped to another mailbox sees no row, whatever it asks.
        let client = rows.begin("sha256:b").await.expect("begin");
        let seen = client
            .query("SELECT mailbox FROM mailgate_grants", &[])
            .await
            .expect("select");
        assert!(seen.is_empty(), "another mailbox's grant is hidden");
        drop(client);
        assert!(!rows.remove("sha256:b").await.expect("remove"));
        assert!(rows.remove("sha256:a").await.expect("remove"));
        assert_eq!(rows.read("sha256:a").await.expect("read"), None);
    }

    #[tokio::test]
    async fn a_second_holder_waits_and_a_dropped_holder_commits_nothing() {
        let Some((rows, owner)) = rows("grant_rows_lock").await else {
            return;
        };
        let rows = std::sync::Arc::new(rows);
        rows.lock("sha256:m")
            .await
            .expect("lock")
            .replace(b"v1".to_vec())
            .await
            .expect("insert");
        let first = rows.lock("sha256:m").await.expect("lock");
        let second = {
            let rows = std::sync::Arc::clone(&rows);
            tokio::spawn(async move {
                let held = rows.lock("sha256:m").await.expect("lock");
                held.sealed().map(<[u8]>::to_vec)
            })
        };
        // The second waits on the row while the first holds it: the server shows a session
        // waiting for a lock (polled, with a deadline) ...
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let waiting: i64 = owner
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity
                      WHERE datname = current_database() AND wait_event_type = 'Lock'",
                    &[],
                )
                .await
                .expect("pg_stat_activity")
                .get(0);
            if waiting == 1 {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the second lock never waited"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!second.is_finished());
        first.replace(b"v2".to_vec()).await.expect("update");
        // ... and reads what the first committed.
        assert_eq!(second.await.expect("join").as_deref(), Some(&b"v2"[..]));
        // A holder dropped before its write (a process killed mid-flight) leaves the row as it
        // was, and releases it.
        let dropped = rows.lock("sha256:m").await.expect("lock");
        drop(dropped);
        let held = rows
            .lock("sha256:m")
            .await
            .expect("lock after a dropped holder");
        assert_eq!(held.sealed(), Some(&b"v2"[..]));
    }

    #[tokio::test]
    async fn a_save_over_a_row_that_moved_on_commits_nothing() {
        let Some((rows, owner)) = rows("grant_rows_fence").await else {
            return;
        };
        let absent = rows.lock("sha256:f").await.expect("lock");
        // Another writer inserts the row behind the holder's back (no lock to wait on: there
        // was no row to lock).
        owner
            .batch_execute(
                "BEGIN; SELECT set_config('mailgate.mailbox', 'sha256:f', true);
                 INSERT INTO mailgate_grants VALUES ('sha256:f', 7, 'theirs', now()); COMMIT",
            )
            .await
            .expect("insert");
        assert!(matches!(
            absent.replace(b"mine".to_vec()).await,
            Err(RowError::Changed)
        ));
        assert_eq!(
            rows.read("sha256:f").await.expect("read").as_deref(),
            Some(&b"theirs"[..])
        );
    }

    /// Two instances on one database (their own connections and caches, one grant row): ten
    /// concurrent calls each, one refresh, and the rotated refresh token in the row.
    #[tokio::test]
    async fn two_instances_on_one_database_refresh_once() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};

        use crate::delegated::grants::{Grant, GrantBinding, GrantKey, RefreshToken};
        use crate::delegated::shared::SharedGrants;
        use crate::delegated::source::{DelegatedTokens, GrantPlace, RefreshFault, Refresher};
        use crate::delegated::wire::{self, TokenOutcome};

        struct Counting(AtomicUsize);
        impl Refresher for Counting {
            fn refresh<'a>(
                &'a self,
                token: &'a RefreshToken,
                _scopes: &'a [String],
            ) -> BoxFuture<'a, Result<TokenOutcome, RefreshFault>> {
                async move {
                    let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
                    assert_eq!(token.expose(), format!("rt-{n}"), "the latest refresh token");
                    let body = format!(
                        r#"{{"access_token":"at-{n}","token_type":"Bearer","expires_in":3600,"refresh_token":"rt-{}"}}"#,
                        n + 1
                    );
                    Ok(wire::parse_token_response(200, Some("application/json"), body.as_bytes())
                        .expect("a grant"))
                }
                .boxed()
            }
        }

        let Some((settings, _owner)) =
            super::super::testdb::fresh_settings("grant_rows_two", Duration::from_secs(60)).await
        else {
            return;
        };
        let binding = GrantBinding {
            alias: "personal".to_owned(),
            provider: "oidc".to_owned(),
            client_id: "mailgate-test".to_owned(),
            authority: "https://id.example.com".to_owned(),
        };
        let place = || GrantPlace::Shared {
            grants: Arc::new(SharedGrants::new(
                Arc::new(PgGrantRows::new(settings.clone())),
                GrantKey::for_test(3),
            )),
            mailbox: "sha256:personal".to_owned(),
        };
        let now = chrono::Utc::now();
        place()
            .save(Grant {
                binding: binding.clone(),
                refresh_token: RefreshToken::new("rt-1".to_owned()),
                account: "robin.example@example.com".to_owned(),
                scopes: vec!["openid".to_owned()],
                obtained_at: now,
                refreshed_at: now,
                access: None,
                refused_at: None,
            })
            .await
            .expect("login");
        let refresher = Arc::new(Counting(AtomicUsize::new(0)));
        let instance = || {
            DelegatedTokens::new(
                place(),
                binding.clone(),
                vec!["openid".to_owned()],
                Arc::clone(&refresher) as Arc<dyn Refresher>,
            )
        };
        let (a, b) = (instance(), instance());
        let (xs, ys) = tokio::join!(
            futures::future::join_all((0..10).map(|_| a.get())),
            futures::future::join_all((0..10).map(|_| b.get()))
        );
        for token in xs.iter().chain(&ys) {
            assert_eq!(token.as_ref().map(|t| t.expose()), Ok("at-1"));
        }
        assert_eq!(refresher.0.load(Ordering::SeqCst), 1, "one refresh in all");
        let row = place().load(&binding).await.expect("load").expect("a row");
        assert_eq!(
            row.refresh_token.expose(),
            "rt-2",
            "the rotation is in the row"
        );
    }
}
