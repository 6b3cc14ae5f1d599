//! Upstream accounts' "at once" limits shared by every instance on the database: an account's
//! N slots are N rows of `mailgate_account_slots`, and a request or connection holds one while
//! it runs. Taking one claims a free row (`FOR UPDATE SKIP LOCKED`, so takers never queue on
//! each other's locks); a held row expires after [`HOLD`], so the slots of an instance killed
//! mid-request come back on their own. Giving one back is done when its guard drops.

use std::sync::Arc;
use std::time::Duration;

use super::buckets::account_digest;
use super::{PgError, Pool};

/// How long a slot stays taken without being given back: far beyond an operation's deadline
/// (30 s), so only a dead holder's slot ever expires.
const HOLD: Duration = Duration::from_secs(120);
/// The longest pause between two attempts while every slot is taken.
const MAX_POLL: Duration = Duration::from_millis(250);

/// One account's slots in the shared database.
#[derive(Clone)]
pub(crate) struct SharedSlots {
    pool: Arc<Pool>,
    account: Vec<u8>,
    count: i32,
}

impl std::fmt::Debug for SharedSlots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedSlots")
            .field("count", &self.count)
            .finish_non_exhaustive()
    }
}

const CLAIM: &str = "UPDATE mailgate_account_slots s
       SET holder = $2, expires_at = clock_timestamp() + make_interval(secs => $3)
     WHERE (s.account, s.slot) = (
        SELECT account, slot FROM mailgate_account_slots
         WHERE account = $1 AND slot <= $4 AND expires_at <= clock_timestamp()
         ORDER BY slot LIMIT 1 FOR UPDATE SKIP LOCKED)
    RETURNING s.slot";

impl SharedSlots {
    /// The `count` slots of the account `key` names (its text is digested, never stored).
    pub(crate) fn new(pool: Arc<Pool>, key: &str, count: usize) -> Self {
        Self {
            pool,
            account: account_digest(key),
            count: i32::try_from(count.max(1)).unwrap_or(i32::MAX),
        }
    }

    /// Waits for a free slot and takes it (the caller bounds the wait by its deadline). A
    /// database that cannot be asked is an error: nothing runs unaccounted.
    pub(crate) async fn enter(&self) -> Result<SharedSlot, PgError> {
        let holder = super::write::holder();
        let conn = self.pool.get().await?;
        conn.execute(
            "INSERT INTO mailgate_account_slots (account, slot, holder, expires_at)
             SELECT $1, n, '', '-infinity' FROM generate_series(1, $2::int) AS n
             ON CONFLICT (account, slot) DO NOTHING",
            &[&self.account, &self.count],
        )
        .await?;
        let mut pause = Duration::from_millis(10);
        loop {
            let row = conn
                .query_opt(
                    CLAIM,
                    &[&self.account, &holder, &HOLD.as_secs_f64(), &self.count],
                )
                .await?;
            if let Some(row) = row {
                return Ok(SharedSlot {
                    pool: Arc::clone(&self.pool),
                    account: self.account.clone(),
                    slot: row.try_get(0)?,
                    holder,
                });
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_POLL);
        }
    }
}

impl crate::coordination::upstream::SharedSlots for SharedSlots {
    fn enter(
        &self,
    ) -> futures::future::BoxFuture<
        '_,
        Result<Box<dyn Send + Sync>, crate::coordination::upstream::GateUnavailable>,
    > {
        Box::pin(async move {
            match SharedSlots::enter(self).await {
                Ok(slot) => Ok(Box::new(slot) as Box<dyn Send + Sync>),
                Err(e) => {
                    tracing::warn!(error = %e, "the shared request gate could not be entered");
                    Err(crate::coordination::upstream::GateUnavailable)
                }
            }
        })
    }
}

/// A slot this instance holds; given back when dropped.
pub(crate) struct SharedSlot {
    pool: Arc<Pool>,
    account: Vec<u8>,
    slot: i32,
    holder: String,
}

impl Drop for SharedSlot {
    fn drop(&mut self) {
        let (pool, account, slot, holder) = (
            Arc::clone(&self.pool),
            std::mem::take(&mut self.account),
            self.slot,
            std::mem::take(&mut self.holder),
        );
        // Given back in the background: a slot that is not (the runtime is shutting down)
        // expires on its own.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Ok(conn) = pool.get().await {
                    let _ = conn
                        .execute(
                            "UPDATE mailgate_account_slots SET expires_at = '-infinity'
                              WHERE account = $1 AND slot = $2 AND holder = $3",
                            &[&account, &slot, &holder],
                        )
                        .await;
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn instances_on_one_database_hold_an_accounts_slots_together() {
        let Some((settings, admin)) =
            super::super::testdb::fresh_settings("slots", Duration::from_secs(60)).await
        else {
            return;
        };
        let slots = |_| {
            let pool = Arc::new(super::super::pool(&settings, 3).expect("pool"));
            SharedSlots::new(pool, "graph\0box@example.org", 2)
        };
        let (a, b) = (slots(0), slots(1));
        let first = a.enter().await.expect("a free slot");
        let second = b.enter().await.expect("the other free slot");
        assert_ne!(first.slot, second.slot);
        // Both taken: a third waits until one is given back, on either instance.
        let waiting = tokio::spawn({
            let a = a.clone();
            async move { a.enter().await.map(|s| s.slot) }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "no third slot");
        let freed = second.slot;
        drop(second);
        let third = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("given a slot once one is back")
            .expect("task")
            .expect("slot");
        assert_eq!(third, freed);
        // A dead holder's slot comes back when it expires.
        admin
            .execute(
                "UPDATE mailgate_account_slots SET expires_at = clock_timestamp() - interval '1 s'
                  WHERE slot = $1",
                &[&first.slot],
            )
            .await
            .expect("age the slot");
        std::mem::forget(first);
        let again = tokio::time::timeout(Duration::from_secs(10), b.enter())
            .await
            .expect("an expired slot is free")
            .expect("slot");
        assert_eq!(again.slot, 1);
    }
}
