//! The PostgreSQL store (issue 30): one database that several mailgate instances share for
//! their indexes, with row-level security keeping each mailbox's rows to sessions that name it.
//! This module connects ([`connect`], over rustls off loopback) and owns the versioned schema
//! ([`migrations`], applied only by `mailgate index migrate`); the store's reads and writes
//! come next.
//!
//! Errors keep to metadata: a failure is reported by its SQLSTATE code and kind, never by the
//! server's message text, which can quote row values (mail).

pub(crate) mod lease;
pub(crate) mod migrations;
pub(crate) mod settings;
#[cfg(test)]
mod testdb;

use std::time::Duration;

use crate::error::StartupError;

pub(crate) use settings::PgSettings;
use settings::Transport;

/// The store's settings when `MAILGATE_INDEX_URL` is set, as a startup refusal when they are
/// bad.
pub(crate) fn resolve(env: &crate::config::env::Env) -> Result<Option<PgSettings>, StartupError> {
    PgSettings::resolve(env).map_err(|e| StartupError::IndexStore(e.to_string()))
}

/// Every command but `index migrate`, while this build's searches and syncs read and write the
/// local store only: a configured database is refused rather than silently left unused.
pub(crate) fn refuse_unserved(env: &crate::config::env::Env) -> Result<(), StartupError> {
    match resolve(env)? {
        None => Ok(()),
        Some(_) => Err(StartupError::IndexStore(
            "this build searches and syncs the local store only; the PostgreSQL store takes \
             `mailgate index migrate` so far (unset MAILGATE_INDEX_URL to serve)"
                .to_owned(),
        )),
    }
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
}

impl From<tokio_postgres::Error> for PgError {
    fn from(e: tokio_postgres::Error) -> Self {
        match e.code() {
            Some(code) => PgError::Statement(code.code().to_owned()),
            None => PgError::Connection,
        }
    }
}

/// Opens one connection to the database `settings` names; its I/O runs on a task of its own
/// until the client is dropped.
pub(crate) async fn connect(settings: &PgSettings) -> Result<tokio_postgres::Client, PgError> {
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
        Transport::Loopback => None,
        Transport::Tls(roots) => {
            let tls = crate::backends::imap::conn::tls_client_config(std::sync::Arc::clone(roots))
                .map_err(|()| PgError::Unreachable("TLS could not be set up"))?;
            Some(tokio_postgres_rustls::MakeRustlsConnect::new(tls))
        }
    };
    let attempt = async {
        let client = match tls {
            None => {
                config.ssl_mode(tokio_postgres::config::SslMode::Disable);
                let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
                tokio::spawn(async move {
                    let _ = connection.await;
                });
                client
            }
            Some(tls) => {
                config.ssl_mode(tokio_postgres::config::SslMode::Require);
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
        Ok(Err(e)) => Err(match e.code() {
            // Class 28: invalid authorization; 3D000: no such database.
            Some(code) if code.code().starts_with("28") || code.code() == "3D000" => {
                PgError::Login(code.code().to_owned())
            }
            Some(code) => PgError::Statement(code.code().to_owned()),
            None => PgError::Unreachable("no answer, or the connection or TLS failed"),
        }),
    }
}
