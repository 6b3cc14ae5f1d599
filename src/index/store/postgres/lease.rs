//! One sync writer per mailbox across every instance: a lease in `mailgate_leases`, held for a
//! time and renewed by its holder, with an epoch that grows each time the lease changes hands.
//! Every write transaction of a sync first checks, in that transaction, that its holder still
//! holds the lease at the epoch it took ([`Lease::fence`]): a writer that stalled past its
//! expiry, and whose lease another took meanwhile, cannot commit anything (fencing), whatever it
//! believes. The database's clock decides expiry, so instances' clocks need not agree.

use std::time::Duration;

use super::PgError;

/// A lease this process holds on one mailbox's index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Lease {
    mailbox: String,
    holder: String,
    epoch: i64,
}

/// What an attempt to take a lease found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Taken {
    Held(Lease),
    /// Another holder's lease has not expired: its sync is running.
    Busy,
}

/// Why a lease no longer covers a write.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LeaseError {
    #[error("the sync lease was lost (another sync took it after it expired)")]
    Lost,
    #[error(transparent)]
    Store(#[from] PgError),
}

/// Sets the mailbox the transaction may touch (row-level security), for its duration only.
pub(crate) async fn scope_to(
    client: &impl tokio_postgres::GenericClient,
    mailbox: &str,
) -> Result<(), PgError> {
    client
        .execute(
            "SELECT set_config('mailgate.mailbox', $1, true)",
            &[&mailbox],
        )
        .await?;
    Ok(())
}

fn seconds(ttl: Duration) -> f64 {
    ttl.as_secs_f64()
}

/// Takes the lease of `mailbox` for `holder` (a name unique to this sync process) for `ttl`,
/// when nobody holds it or its holder's time ran out; each taking raises the epoch.
pub(crate) async fn take(
    client: &mut tokio_postgres::Client,
    mailbox: &str,
    holder: &str,
    ttl: Duration,
) -> Result<Taken, PgError> {
    let tx = client.transaction().await?;
    scope_to(&tx, mailbox).await?;
    let row = tx
        .query_opt(
            "INSERT INTO mailgate_leases AS l (mailbox, holder, epoch, expires_at)
             VALUES ($1, $2, 1, clock_timestamp() + make_interval(secs => $3))
             ON CONFLICT (mailbox) DO UPDATE
                SET holder = EXCLUDED.holder,
                    epoch = l.epoch + 1,
                    expires_at = EXCLUDED.expires_at
                WHERE l.expires_at <= clock_timestamp()
             RETURNING epoch",
            &[&mailbox, &holder, &seconds(ttl)],
        )
        .await?;
    tx.commit().await?;
    Ok(match row {
        Some(row) => Taken::Held(Lease {
            mailbox: mailbox.to_owned(),
            holder: holder.to_owned(),
            epoch: row.try_get(0)?,
        }),
        None => Taken::Busy,
    })
}

impl Lease {
    #[cfg(test)]
    pub(crate) fn epoch(&self) -> i64 {
        self.epoch
    }

    /// Extends the lease by `ttl` from now, if it is still this holder's at this epoch.
    pub(crate) async fn renew(
        &self,
        client: &mut tokio_postgres::Client,
        ttl: Duration,
    ) -> Result<(), LeaseError> {
        let tx = client.transaction().await.map_err(PgError::from)?;
        scope_to(&tx, &self.mailbox).await?;
        let renewed = tx
            .execute(
                "UPDATE mailgate_leases
                    SET expires_at = clock_timestamp() + make_interval(secs => $4)
                  WHERE mailbox = $1 AND holder = $2 AND epoch = $3
                    AND expires_at > clock_timestamp()",
                &[&self.mailbox, &self.holder, &self.epoch, &seconds(ttl)],
            )
            .await
            .map_err(PgError::from)?;
        tx.commit().await.map_err(PgError::from)?;
        if renewed == 1 {
            Ok(())
        } else {
            Err(LeaseError::Lost)
        }
    }

    /// Inside a write transaction, before its writes: fails unless this holder still holds the
    /// lease at its epoch and it has not expired. The lease row stays locked until the
    /// transaction ends, so no other sync can take the lease between this check and the commit.
    pub(crate) async fn fence(
        &self,
        tx: &tokio_postgres::Transaction<'_>,
    ) -> Result<(), LeaseError> {
        scope_to(tx, &self.mailbox).await?;
        let held = tx
            .query_opt(
                "SELECT 1 FROM mailgate_leases
                  WHERE mailbox = $1 AND holder = $2 AND epoch = $3
                    AND expires_at > clock_timestamp()
                  FOR UPDATE",
                &[&self.mailbox, &self.holder, &self.epoch],
            )
            .await
            .map_err(PgError::from)?;
        held.map(|_| ()).ok_or(LeaseError::Lost)
    }

    /// Gives the lease up (a sync that ends), so the next sync need not wait for its expiry.
    pub(crate) async fn release(self, client: &mut tokio_postgres::Client) -> Result<(), PgError> {
        let tx = client.transaction().await?;
        scope_to(&tx, &self.mailbox).await?;
        tx.execute(
            "UPDATE mailgate_leases SET expires_at = clock_timestamp()
              WHERE mailbox = $1 AND holder = $2 AND epoch = $3",
            &[&self.mailbox, &self.holder, &self.epoch],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Duration = Duration::ZERO;
    const MINUTE: Duration = Duration::from_secs(60);

    #[tokio::test]
    async fn one_holder_at_a_time_and_a_lost_lease_cannot_write() {
        let Some(mut db) = super::super::testdb::fresh("lease", 2).await else {
            return;
        };
        let mut b = db.pop().expect("two connections");
        let mut a = db.pop().expect("two connections");
        let Taken::Held(first) = take(&mut a, "sha256:m", "sync-a", MINUTE).await.unwrap() else {
            panic!("a free lease is taken");
        };
        assert_eq!(first.epoch(), 1);
        assert_eq!(
            take(&mut b, "sha256:m", "sync-b", MINUTE).await.unwrap(),
            Taken::Busy,
            "held and not expired"
        );
        // Another mailbox's lease is another lease.
        assert!(matches!(
            take(&mut b, "sha256:other", "sync-b", MINUTE)
                .await
                .unwrap(),
            Taken::Held(_)
        ));
        first.renew(&mut a, NOW).await.expect("still held: renewed");
        // Expired now (renewed for no time): another sync takes it, at the next epoch.
        let Taken::Held(second) = take(&mut b, "sha256:m", "sync-b", MINUTE).await.unwrap() else {
            panic!("an expired lease is taken over");
        };
        assert_eq!(second.epoch(), 2);
        // The first holder, stalled past its expiry, can neither renew nor write.
        assert!(matches!(
            first.renew(&mut a, MINUTE).await,
            Err(LeaseError::Lost)
        ));
        let tx = a.transaction().await.unwrap();
        assert!(matches!(first.fence(&tx).await, Err(LeaseError::Lost)));
        drop(tx);
        let tx = b.transaction().await.unwrap();
        second.fence(&tx).await.expect("the holder writes");
        tx.commit().await.unwrap();
        // Released: taken at once, without waiting for the expiry.
        second.release(&mut b).await.unwrap();
        let Taken::Held(third) = take(&mut a, "sha256:m", "sync-a", MINUTE).await.unwrap() else {
            panic!("a released lease is taken");
        };
        assert_eq!(third.epoch(), 3);
    }

    #[tokio::test]
    async fn a_session_scoped_to_one_mailbox_never_sees_another_mailboxs_lease() {
        let Some(mut db) = super::super::testdb::fresh("lease_rls", 1).await else {
            return;
        };
        let mut a = db.pop().expect("a connection");
        assert!(matches!(
            take(&mut a, "sha256:one", "sync-a", MINUTE).await.unwrap(),
            Taken::Held(_)
        ));
        let tx = a.transaction().await.unwrap();
        scope_to(&tx, "sha256:two").await.unwrap();
        let seen = tx
            .query("SELECT mailbox FROM mailgate_leases", &[])
            .await
            .unwrap();
        assert!(
            seen.is_empty(),
            "row security hides another mailbox's lease"
        );
    }
}
