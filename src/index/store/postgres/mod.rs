//! The PostgreSQL store (issue 30): one database that several mailgate instances share for
//! their indexes, with row-level security keeping each mailbox's rows to sessions that name it.
//! This module connects ([`connect`], over rustls off loopback) and owns the versioned schema
//! ([`migrations`], applied only by `mailgate index migrate`); [`read`] is the server's side of
//! an index, [`mod@write`] a sync's (under [`lease`]), [`rows`] what a message becomes,
//! [`vectors`] its passages' vectors (pgvector), [`admin`] the operator's pause and purge, and
//! [`grant_rows`] the delegated sign-ins of instances that share the database.
//!
//! Isolation does not rest on row-level security alone. Every connection is vetted before use
//! ([`role`]: a role the policy does not bind is refused, naming the rule), and every statement
//! on per-mailbox rows names the mailbox itself too (`mailbox = current_setting(
//! 'mailgate.mailbox')` in its condition or key: the setting the code sets for each read
//! transaction, and for the whole session of a sync's connections; read without `missing_ok`,
//! so a statement of a session that names none fails rather than reads every mailbox). Either
//! alone keeps a session to its mailbox: the unit tests in `isolation` run a sync and every read
//! of three mailboxes as a superuser with the check off.
//!
//! Errors keep to metadata: a failure is reported by its SQLSTATE code and kind, never by the
//! server's message text, which can quote row values (mail). A failure without a SQLSTATE is
//! a lost connection only when it is one; an answer of the wrong shape (more rows than a
//! statement may return, a column of another type) says so.

pub(crate) mod admin;
pub(crate) mod buckets;
pub(crate) mod grant_rows;
pub(crate) mod instance;
#[cfg(test)]
mod isolation;
pub(crate) mod lease;
pub(crate) mod migrations;
#[cfg(test)]
mod parity;
pub(crate) mod read;
pub(crate) mod role;
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
use settings::{RoleCheck, Transport};

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
    /// An answer of another shape than the statement's (its kind, as the client library names
    /// it: never the server's text).
    #[error("the database's answer was not what mailgate expects ({0})")]
    Answer(String),
    #[error(transparent)]
    Role(#[from] role::Refusal),
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
    #[error(
        "the database belongs to a superuser, so the schema `index migrate` makes would too, and \
         the role mailgate serves as could not use it: give the database to that role (`ALTER \
         DATABASE … OWNER TO mailgate`; docs/deployment.md), then `mailgate index migrate` again"
    )]
    OwnerIsSuperuser,
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
        use std::error::Error as _;
        if let Some(code) = e.code() {
            return PgError::Statement(code.code().to_owned());
        }
        if e.is_closed() || e.source().is_some_and(|s| s.is::<std::io::Error>()) {
            return PgError::Connection;
        }
        // The library's own words for what went wrong (`query returned an unexpected number of
        // rows`, `error deserializing column 2`), not its cause's, which may quote a value.
        PgError::Answer(e.to_string())
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

/// Opens one connection to the database `settings` names, vetted ([`role::vet`]: its role is
/// bound by row-level security, and the schema is this binary's); its I/O runs on a task of its
/// own until the client is dropped.
pub(crate) async fn connect(settings: &PgSettings) -> Result<tokio_postgres::Client, PgError> {
    let mut client = open(settings).await?;
    role::vet(&mut client, settings.role_check).await?;
    Ok(client)
}

/// `mailgate index migrate`'s connection: not vetted, as migrating may need a superuser (the
/// extension and LEAKPROOF steps), with what it should say of its role when it is one the other
/// commands refuse ([`role::Refusal::migrate_note`]).
pub(crate) async fn connect_to_migrate(
    settings: &PgSettings,
) -> Result<(tokio_postgres::Client, Option<String>), PgError> {
    let client = open(settings).await?;
    let note = role::role(&client).await?.map(role::Refusal::migrate_note);
    Ok((client, note))
}

/// Opens one connection, unvetted.
async fn open(settings: &PgSettings) -> Result<tokio_postgres::Client, PgError> {
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
        .map(|pool| Pool {
            pool,
            role_check: settings.role_check,
        })
        .map_err(|_| PgError::Unreachable("the connection pool could not be built"))
}

/// [`pool`], with one connection opened and vetted now: a command that reads through a pool
/// refuses a role mailgate does not accept at its start, naming the rule, rather than per read.
pub(crate) async fn checked_pool(settings: &PgSettings, size: usize) -> Result<Pool, PgError> {
    let pool = pool(settings, size)?;
    drop(pool.get().await?);
    Ok(pool)
}

/// The server's connections to the database.
#[derive(Clone)]
pub(crate) struct Pool {
    pool: deadpool_postgres::Pool,
    role_check: RoleCheck,
}

impl Pool {
    /// A connection, opened or reused. A connection is vetted ([`role::vet`]) on its first
    /// use; one that fails, or whose vetting is cut short, is closed rather than pooled.
    pub(crate) async fn get(&self) -> Result<deadpool_postgres::Object, PgError> {
        use deadpool_postgres::PoolError;
        let conn = self.pool.get().await.map_err(|e| match e {
            PoolError::Backend(e) => connect_error(&e),
            PoolError::Timeout(_) => PgError::Unreachable("timed out"),
            _ => PgError::Connection,
        })?;
        // Counted each time a pooled connection is handed out again: 0 on its first use.
        if deadpool_postgres::Object::metrics(&conn).recycle_count > 0 {
            return Ok(conn);
        }
        let mut unvetted = Unvetted(Some(conn));
        if let Some(conn) = unvetted.0.as_mut() {
            role::vet(conn, self.role_check).await?;
        }
        unvetted.0.take().ok_or(PgError::Unreachable(
            "the connection pool lost a connection",
        ))
    }
}

/// A pooled connection being vetted: unless taken back out, dropped with its pool slot (never
/// returned to the pool, where it would be handed out again as vetted).
struct Unvetted(Option<deadpool_postgres::Object>);

impl Drop for Unvetted {
    fn drop(&mut self) {
        if let Some(conn) = self.0.take() {
            drop(deadpool_postgres::Object::take(conn));
        }
    }
}
