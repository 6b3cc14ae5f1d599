//! The operator's commands on a mailbox's index in the shared store: pause and resume (a flag
//! the running sync's lease task sees), and purge (under the mailbox's lease, so never from
//! under a running sync).

use std::time::Duration;

use super::lease::{self, Taken};
use super::{PgSettings, connect, store_error};
use crate::index::IndexError;

/// Sets or clears the pause of `mailbox` (a mailbox never synced is recorded paused).
pub(crate) async fn set_paused(
    settings: &PgSettings,
    mailbox: &str,
    paused: bool,
) -> Result<(), IndexError> {
    let mut client = connect(settings).await.map_err(store_error)?;
    let tx = client.transaction().await.map_err(store_error)?;
    lease::scope_to(&tx, mailbox).await.map_err(store_error)?;
    let analyzer = i32::try_from(crate::text::ANALYZER_VERSION)
        .map_err(|_| IndexError::Store("analyzer version".to_owned()))?;
    tx.execute(
        "INSERT INTO mailgate_mailboxes (mailbox, analyzer, paused) VALUES ($1, $2, $3)
         ON CONFLICT (mailbox) DO UPDATE SET paused = EXCLUDED.paused",
        &[&mailbox, &analyzer, &paused],
    )
    .await
    .map_err(store_error)?;
    tx.commit().await.map_err(store_error)
}

/// What a purge did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Purged {
    Removed,
    /// The store holds nothing of the mailbox.
    Nothing,
}

/// Removes everything the store holds of `mailbox`; a running sync (its lease held) is
/// [`IndexError::Busy`] and nothing is removed.
pub(crate) async fn purge(settings: &PgSettings, mailbox: &str) -> Result<Purged, IndexError> {
    let mut client = connect(settings).await.map_err(store_error)?;
    let held = match lease::take(&mut client, mailbox, "purge", Duration::from_secs(60))
        .await
        .map_err(store_error)?
    {
        Taken::Held(lease) => lease,
        Taken::Busy => return Err(IndexError::Busy),
    };
    let tx = client.transaction().await.map_err(store_error)?;
    let fenced = held.fence(&tx).await;
    let removed = match fenced {
        Ok(()) => tx
            .execute(
                "DELETE FROM mailgate_mailboxes WHERE mailbox = current_setting('mailgate.mailbox')",
                &[],
            )
            .await
            .map_err(store_error),
        Err(_) => Err(IndexError::Busy),
    };
    let removed = match removed {
        Ok(n) => {
            tx.commit().await.map_err(store_error)?;
            n
        }
        Err(e) => {
            drop(tx);
            let _ = held.release(&mut client).await;
            return Err(e);
        }
    };
    held.release(&mut client).await.map_err(store_error)?;
    Ok(if removed > 0 {
        Purged::Removed
    } else {
        Purged::Nothing
    })
}
