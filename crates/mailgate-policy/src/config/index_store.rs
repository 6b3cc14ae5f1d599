//! The names of the shared index store's variables (PostgreSQL, issue 30). Only the names live
//! here, so that the unknown-variable check knows them and the variable named by
//! [`PASSWORD_ENV_VAR`] counts as known whatever it is called; the values are resolved and
//! checked by the server crate's `index::store::postgres::settings`.

/// The database: `postgres://USER@HOST[:PORT]/DATABASE`, never with a password in it.
pub const URL_VAR: &str = "MAILGATE_INDEX_URL";
/// Names the variable that holds the database password, as `passwordEnv` does for IMAP.
pub const PASSWORD_ENV_VAR: &str = "MAILGATE_INDEX_PASSWORD_ENV";
/// A private file (owned by the user running mailgate, mode 0600) that holds the password.
pub const PASSWORD_FILE_VAR: &str = "MAILGATE_INDEX_PASSWORD_FILE";
/// A PEM file of the CA that signs a non-loopback server's certificate (else the web PKI).
pub const CA_FILE_VAR: &str = "MAILGATE_INDEX_CA_FILE";
/// How long a sync's lease on a mailbox lasts without renewal, in seconds (default 60): a sync
/// killed while holding it keeps the next one waiting at most this long.
pub const LEASE_TTL_VAR: &str = "MAILGATE_INDEX_LEASE_TTL";
