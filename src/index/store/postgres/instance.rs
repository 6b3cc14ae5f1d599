//! What an instance reads from the shared database when it starts: that its role is one
//! row-level security binds and the schema is the one this binary reads (a serving process
//! never migrates it), both checked by [`connect`], and the cursor key ring every
//! instance on the database signs and checks cursors with. The first instance on a new
//! database stores the ring's first key; the others read it (under an advisory lock, so two
//! instances starting together store one). A key is retired by setting its `retired_at`: it
//! stops issuing at once and stops redeeming a day later, when no cursor a client still holds
//! can need it.

use super::{PgError, PgSettings, connect};
use crate::coordination::CursorKeys;

/// The advisory lock that serializes creating the ring's first key ("mgkeys").
const KEYS_LOCK: i64 = 0x6d67_6b65_7973;

/// The shared database as an instance uses it beyond the index.
pub(crate) struct SharedDatabase {
    pub(crate) settings: PgSettings,
    pub(crate) cursor_keys: CursorKeys,
}

impl SharedDatabase {
    /// Connects (which vets the role and checks the schema: [`super::role::vet`]), and reads
    /// (or, on a new database, creates) the key ring.
    pub(crate) async fn open(settings: PgSettings) -> Result<Self, PgError> {
        let mut client = connect(&settings).await?;
        let tx = client.transaction().await?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&KEYS_LOCK])
            .await?;
        let read = async || -> Result<Vec<Vec<u8>>, PgError> {
            let rows = tx
                .query(
                    "SELECT secret FROM mailgate_cursor_keys
                      WHERE retired_at IS NULL OR retired_at > now() - interval '1 day'
                      ORDER BY (retired_at IS NULL) DESC, created_at DESC, id",
                    &[],
                )
                .await?;
            rows.iter()
                .map(|r| r.try_get(0).map_err(PgError::from))
                .collect()
        };
        let mut secrets = read().await?;
        let issuing = tx
            .query_one(
                "SELECT count(*) FROM mailgate_cursor_keys WHERE retired_at IS NULL",
                &[],
            )
            .await?
            .try_get::<_, i64>(0)?;
        if issuing == 0 {
            let secret = CursorKeys::new_secret();
            let id = CursorKeys::id_of(&secret).to_vec();
            tx.execute(
                "INSERT INTO mailgate_cursor_keys (id, secret) VALUES ($1, $2)",
                &[&id, &secret],
            )
            .await?;
            secrets.insert(0, secret);
        }
        tx.commit().await?;
        let cursor_keys = CursorKeys::from_database(secrets).ok_or(PgError::Unreachable(
            "the cursor key ring could not be read",
        ))?;
        Ok(Self {
            settings,
            cursor_keys,
        })
    }
}
