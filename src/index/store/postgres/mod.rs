//! The PostgreSQL store (issue 30): one database that several mailgate instances share for
//! their indexes, with row-level security keeping each mailbox's rows to sessions that name it.
//! This module connects ([`connect`], over rustls off loopback) and owns the versioned schema
//! ([`migrations`], applied only by `mailgate index migrate`); [`read`] is the server's side of
//! an index, [`mod@write`] a sync's (under [`lease`]), [`rows`] what a message becomes,
//! [`vectors`] its passages' vectors (pgvector), and [`admin`] the operator's pause and purge.
//!
//! Errors keep to metadata: a failure is reported by its SQLSTATE code and kind, never by the
//! server's message text, which can quote row values (mail).

pub(crate) mod admin;
pub(crate) mod buckets;
pub(crate) mod instance;
pub(crate) mod lease;
pub(crate) mod migrations;
#[cfg(test)]
mod parity;
pub(crate) mod read;
pub(crate) mod rows;
pub(crate) mod settings;
pub(crate) mod slots;
#[cfg(test)]
mod testdb;
pub(crate) mod vectors;
pub(crate) mod write;

use std::time::Duration;

use crate::error::StartupError;

pub(crate) use settings::PgSettings;
use settings::Transport;

/// The store's settings when `MAILGATE_INDEX_URL` is set, as a startup refusal when they are
/// bad.
pub(crate) fn resolve(env: &crate::config::env::Env) -> Result<Option<PgSettings>, StartupError> {
    PgSettings::resolve(env).map_err(|e| StartupError::IndexStore(e.to_string()))
}

/// How long a connection attempt may take, TLS and login included.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the database could not be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PgError {
    #[error("the database could not be reached ({0})")]
    Unreachable(&'static str),
    #[error("the database refused the login (SQLSTATE {0})")]
    Login(String),
    #[error("a database statement failed (SQLSTATE {0})")]
    Statement(String),
    #[error("the connection to the database failed")]
    Connection,
    #[error(
        "the database's schema is at version {at}, newer than this mailgate knows ({known}): \
         upgrade mailgate"
    )]
    SchemaAhead { at: i32, known: i32 },
    #[error(
        "the database's schema is at version {at} and this mailgate needs {known}: run \
         `mailgate index migrate`"
    )]
    SchemaBehind { at: i32, known: i32 },
    #[error(
        "the database needs two steps only a superuser may take: as one, run `CREATE EXTENSION \
         IF NOT EXISTS vector; ALTER FUNCTION ts_match_vq(tsvector, tsquery) LEAKPROOF;` in it \
         (docs/deployment.md says why), then `mailgate index migrate` again"
    )]
    NeedsSuperuser,
}

/// A database failure as the index reports it (its SQLSTATE, never the server's text).
pub(crate) fn store_error(e: impl Into<PgError>) -> crate::index::IndexError {
    crate::index::IndexError::Store(e.into().to_string())
}

/// The first two columns of `rows` as a map's keys and values.
pub(crate) fn two_columns<K, V>(
    rows: &[tokio_postgres::Row],
) -> Result<std::collections::HashMap<K, V>, crate::index::IndexError>
where
    K: for<'a> tokio_postgres::types::FromSql<'a> + Eq + std::hash::Hash,
    V: for<'a> tokio_postgres::types::FromSql<'a>,
{
    rows.iter()
        .map(|r| {
            Ok((
                r.try_get(0).map_err(store_error)?,
                r.try_get(1).map_err(store_error)?,
            ))
        })
        .collect()
}

impl From<tokio_postgres::Error> for PgError {
    fn from(e: tokio_postgres::Error) -> Self {
        match e.code() {
            Some(code) => PgError::Statement(code.code().to_owned()),
            None => PgError::Connection,
        }
    }
}

/// The connection settings and the TLS connector (`None`: plain TCP to a loopback server).
fn client_config(
    settings: &PgSettings,
) -> Result<
    (
        tokio_postgres::Config,
        Option<tokio_postgres_rustls::MakeRustlsConnect>,
    ),
    PgError,
> {
    let mut config = tokio_postgres::Config::new();
    config
        .host(&settings.host)
        .port(settings.port)
        .user(&settings.user)
        .dbname(&settings.database)
        .application_name("mailgate")
        .connect_timeout(CONNECT_TIMEOUT);
    if let Some(password) = &settings.password {
        config.password(password.expose());
    }
    let tls = match &settings.transport {
        Transport::Loopback => {
            config.ssl_mode(tokio_postgres::config::SslMode::Disable);
            None
        }
        Transport::Tls(roots) => {
            let tls = crate::backends::imap::conn::tls_client_config(std::sync::Arc::clone(roots))
                .map_err(|()| PgError::Unreachable("TLS could not be set up"))?;
            config.ssl_mode(tokio_postgres::config::SslMode::Require);
            Some(tokio_postgres_rustls::MakeRustlsConnect::new(tls))
        }
    };
    Ok((config, tls))
}

/// A failed connection attempt as the operator may read it.
fn connect_error(e: &tokio_postgres::Error) -> PgError {
    match e.code() {
        // Class 28: invalid authorization; 3D000: no such database.
        Some(code) if code.code().starts_with("28") || code.code() == "3D000" => {
            PgError::Login(code.code().to_owned())
        }
        Some(code) => PgError::Statement(code.code().to_owned()),
        None => PgError::Unreachable("no answer, or the connection or TLS failed"),
    }
}

/// Opens one connection to the database `settings` names; its I/O runs on a task of its own
/// until the client is dropped.
pub(crate) async fn connect(settings: &PgSettings) -> Result<tokio_postgres::Client, PgError> {
    let (config, tls) = client_config(settings)?;
    let attempt = async {
        let client = match tls {
            None => {
                let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
                tokio::spawn(async move {
                    let _ = connection.await;
                });
                client
            }
            Some(tls) => {
                let (client, connection) = config.connect(tls).await?;
                tokio::spawn(async move {
                    let _ = connection.await;
                });
                client
            }
        };
        Ok::<_, tokio_postgres::Error>(client)
    };
    match tokio::time::timeout(CONNECT_TIMEOUT, attempt).await {
        Err(_) => Err(PgError::Unreachable("timed out")),
        Ok(Ok(client)) => Ok(client),
        Ok(Err(e)) => Err(connect_error(&e)),
    }
}

/// Connections to the database for the server's answers: at most `size` open, each opened
/// when first needed and checked before reuse.
pub(crate) fn pool(settings: &PgSettings, size: usize) -> Result<Pool, PgError> {
    use deadpool_postgres::{Manager, ManagerConfig, RecyclingMethod, Runtime, Timeouts};
    let (config, tls) = client_config(settings)?;
    let manager_config = ManagerConfig {
        recycling_method: RecyclingMethod::Fast,
    };
    let manager = match tls {
        None => Manager::from_config(config, tokio_postgres::NoTls, manager_config),
        Some(tls) => Manager::from_config(config, tls, manager_config),
    };
    deadpool_postgres::Pool::builder(manager)
        .max_size(size)
        .timeouts(Timeouts {
            wait: Some(CONNECT_TIMEOUT),
            create: Some(CONNECT_TIMEOUT),
            recycle: Some(CONNECT_TIMEOUT),
        })
        .runtime(Runtime::Tokio1)
        .build()
        .map(Pool)
        .map_err(|_| PgError::Unreachable("the connection pool could not be built"))
}

/// The server's connections to the database.
#[derive(Clone)]
pub(crate) struct Pool(deadpool_postgres::Pool);

impl Pool {
    /// A connection, opened or reused.
    pub(crate) async fn get(&self) -> Result<deadpool_postgres::Object, PgError> {
        use deadpool_postgres::PoolError;
        self.0.get().await.map_err(|e| match e {
            PoolError::Backend(e) => connect_error(&e),
            PoolError::Timeout(_) => PgError::Unreachable("timed out"),
            _ => PgError::Connection,
        })
    }
}
