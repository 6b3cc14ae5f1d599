//! Upstream accounts' command budgets shared by every instance on the database: one token
//! bucket per account in `mailgate_account_buckets`, refilled by the database's clock and taken
//! from in one statement under the row's lock, so N instances together send an account no more
//! commands than one would. The account is stored as a digest (its key holds a login).

use std::sync::Arc;
use std::time::Duration;

use sha2::Digest as _;

use super::Pool;

/// Domain separation of the stored account digest.
const ACCOUNT_DOMAIN: &[u8] = b"mailgate upstream account v1\0";

/// One account's bucket in the shared database.
#[derive(Clone)]
pub(crate) struct SharedBucket {
    pool: Arc<Pool>,
    account: Vec<u8>,
    capacity: f64,
    per_second: f64,
}

impl std::fmt::Debug for SharedBucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedBucket")
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

const TAKE: &str = "WITH level AS (
        SELECT least($2::float8, tokens
                   + extract(epoch FROM clock_timestamp() - updated_at)::float8 * $3::float8) AS v
          FROM mailgate_account_buckets WHERE account = $1 FOR UPDATE
    )
    UPDATE mailgate_account_buckets b
       SET tokens = CASE WHEN level.v >= 1 THEN level.v - 1 ELSE level.v END,
           updated_at = clock_timestamp()
      FROM level
     WHERE b.account = $1
    RETURNING level.v";

/// What the database stores of an upstream account's key: a digest (the key holds a login).
pub(crate) fn account_digest(key: &str) -> Vec<u8> {
    sha2::Sha256::new()
        .chain_update(ACCOUNT_DOMAIN)
        .chain_update(key.as_bytes())
        .finalize()
        .to_vec()
}

/// The shared database as the place instances share upstream limits.
pub(crate) struct DatabaseLimits(pub(crate) Arc<Pool>);

impl crate::coordination::upstream::SharedLimits for DatabaseLimits {
    fn budget(
        &self,
        account: &str,
        per_window: u32,
        window: Duration,
    ) -> Box<dyn crate::coordination::upstream::SharedBudget> {
        Box::new(SharedBucket::new(
            Arc::clone(&self.0),
            account,
            per_window,
            window,
        ))
    }

    fn slots(
        &self,
        account: &str,
        count: usize,
    ) -> Box<dyn crate::coordination::upstream::SharedSlots> {
        Box::new(super::slots::SharedSlots::new(
            Arc::clone(&self.0),
            account,
            count,
        ))
    }
}

impl crate::coordination::upstream::SharedBudget for SharedBucket {
    fn try_take(&self) -> futures::future::BoxFuture<'_, Result<(), Duration>> {
        Box::pin(SharedBucket::try_take(self))
    }
}

impl SharedBucket {
    /// The bucket of the account `key` names (its text is digested, never stored), holding
    /// `capacity` commands and refilled at `capacity` per `window`.
    pub(crate) fn new(pool: Arc<Pool>, key: &str, capacity: u32, window: Duration) -> Self {
        let account = account_digest(key);
        let capacity = f64::from(capacity.max(1));
        Self {
            pool,
            account,
            capacity,
            per_second: capacity / window.as_secs_f64().max(1e-3),
        }
    }

    /// Takes one command now, or says how long until one is there. A database that cannot be
    /// asked refuses (fails closed) with a second's wait.
    pub(crate) async fn try_take(&self) -> Result<(), Duration> {
        match self.take().await {
            Ok(level) if level >= 1.0 => Ok(()),
            Ok(level) => Err(Duration::from_secs_f64(
                ((1.0 - level) / self.per_second).max(0.001),
            )),
            Err(e) => {
                tracing::warn!(error = %e, "the shared command budget could not be read; refused");
                Err(Duration::from_secs(1))
            }
        }
    }

    async fn take(&self) -> Result<f64, super::PgError> {
        let conn = self.pool.get().await?;
        conn.execute(
            "INSERT INTO mailgate_account_buckets (account, tokens, updated_at)
             VALUES ($1, $2, clock_timestamp()) ON CONFLICT (account) DO NOTHING",
            &[&self.account, &self.capacity],
        )
        .await?;
        let row = conn
            .query_one(TAKE, &[&self.account, &self.capacity, &self.per_second])
            .await?;
        Ok(row.try_get(0)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn instances_on_one_database_share_an_accounts_budget() {
        let Some((settings, _admin)) =
            super::super::testdb::fresh_settings("buckets", Duration::from_secs(60)).await
        else {
            return;
        };
        // Two instances: two pools, one bucket each for the same account, 5 a minute.
        let bucket = |_| {
            let pool = Arc::new(super::super::pool(&settings, 2).expect("pool"));
            SharedBucket::new(
                pool,
                "imap\0mail.example.org\0993\0team",
                5,
                Duration::from_secs(60),
            )
        };
        let (a, b) = (bucket(0), bucket(1));
        let other = SharedBucket::new(
            Arc::clone(&a.pool),
            "imap\0mail.example.org\0993\0other",
            5,
            Duration::from_secs(60),
        );
        let takes = futures::future::join_all((0..12).map(|i| {
            let bucket = if i % 2 == 0 { a.clone() } else { b.clone() };
            async move { bucket.try_take().await }
        }))
        .await;
        let granted = takes.iter().filter(|t| t.is_ok()).count();
        assert_eq!(granted, 5, "two instances together take the budget once");
        let wait = takes.iter().find_map(|t| t.err()).expect("a refusal");
        assert!(
            wait > Duration::from_secs(5) && wait <= Duration::from_secs(12),
            "a refusal says when the next command may go: {wait:?}"
        );
        assert!(
            other.try_take().await.is_ok(),
            "another account has its own"
        );
    }
}
