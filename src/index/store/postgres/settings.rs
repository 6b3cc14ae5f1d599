//! The shared index store's connection settings, resolved once from the environment snapshot:
//! `MAILGATE_INDEX_URL` (`postgres://USER@HOST[:PORT]/DATABASE`), the password from the variable
//! `MAILGATE_INDEX_PASSWORD_ENV` names or from the private file `MAILGATE_INDEX_PASSWORD_FILE`
//! (never in the URL, never in `plugin.json`), and `MAILGATE_INDEX_CA_FILE` for a server signed
//! by a private CA. A server off this machine is reached over TLS only (rustls, the web PKI plus
//! that CA); a loopback one over plain TCP. Errors name variables and rules, never a value.

use std::path::PathBuf;
use std::sync::Arc;

use reqwest::Url;
use tokio_rustls::rustls;

use crate::config::env::Env;
use crate::config::index_store::{
    CA_FILE_VAR, LEASE_TTL_VAR, PASSWORD_ENV_VAR, PASSWORD_FILE_VAR, URL_VAR,
};
use crate::path_guard;

/// The longest password file read (a password is far shorter).
const MAX_PASSWORD_FILE_BYTES: u64 = 4096;
const MAX_CA_FILE_BYTES: u64 = 1024 * 1024;
const DEFAULT_PORT: u16 = 5432;
/// A sync's lease on a mailbox, unless `MAILGATE_INDEX_LEASE_TTL` says otherwise.
const DEFAULT_LEASE_TTL: std::time::Duration = std::time::Duration::from_secs(60);
/// The bounds of that setting: renewals come a third of it apart, and an hour is long enough
/// for any stall a sync survives.
const LEASE_TTL_SECONDS: std::ops::RangeInclusive<u64> = 3..=3600;

/// The database password. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Password(String);

impl Password {
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Password(<redacted>)")
    }
}

/// How the connection is secured.
#[derive(Clone, Debug)]
pub(crate) enum Transport {
    /// A loopback server: plain TCP never leaves the machine.
    Loopback,
    /// Any other server: TLS, checked against these roots.
    Tls(Arc<rustls::RootCertStore>),
}

/// Where the shared index lives and how to log in.
#[derive(Clone, Debug)]
pub(crate) struct PgSettings {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) user: String,
    pub(crate) database: String,
    pub(crate) password: Option<Password>,
    pub(crate) transport: Transport,
    /// How long a sync's lease lasts without renewal.
    pub(crate) lease_ttl: std::time::Duration,
    /// Whether every connection checks that row-level security binds its role
    /// ([`super::role`]): always, outside unit tests.
    pub(crate) role_check: RoleCheck,
}

/// Whether a connection's role is checked before it is used ([`super::role::vet`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RoleCheck {
    /// A role that is a superuser, has BYPASSRLS, may act as one that does, or reads rows
    /// outside the session's mailbox is refused.
    Enforced,
    /// Unit tests only: any role is let in, so a test can show that the statements' own
    /// mailbox conditions keep a role row security does not bind to one mailbox.
    #[cfg(test)]
    Off,
}

/// Why the store's settings were refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PgSettingsError {
    #[error(
        "{URL_VAR} must be postgres://USER@HOST[:PORT]/DATABASE, without query or fragment; \
         value not shown"
    )]
    Url,
    #[error(
        "{URL_VAR} holds a password: put it in the variable named by {PASSWORD_ENV_VAR} or in \
         the private file {PASSWORD_FILE_VAR} names, never in the URL"
    )]
    PasswordInUrl,
    #[error("{PASSWORD_ENV_VAR} and {PASSWORD_FILE_VAR} are both set; name one password")]
    TwoPasswords,
    #[error(
        "{PASSWORD_ENV_VAR} must be the name of the variable holding the password (letters, \
         digits and underscores), not the password itself; value not shown"
    )]
    PasswordVarName,
    #[error(
        "the variable named by {PASSWORD_ENV_VAR} is not set or is empty; name and value not \
         shown"
    )]
    PasswordMissing,
    #[error("{PASSWORD_FILE_VAR} must be an absolute path")]
    PasswordFilePath,
    #[error("the password file ({PASSWORD_FILE_VAR}) is refused: {0}")]
    PasswordFile(path_guard::PrivateFileError),
    #[error("{CA_FILE_VAR} must be an absolute path to a PEM file of at least one certificate")]
    CaFile,
    #[error("{CA_FILE_VAR} is set but {URL_VAR} names a loopback server, reached without TLS")]
    CaForLoopback,
    #[error("{LEASE_TTL_VAR} must be a whole number of seconds from 3 to 3600")]
    LeaseTtl,
    #[error("{0} is set but {URL_VAR} is not")]
    WithoutUrl(&'static str),
}

impl PgSettings {
    /// `None` when `MAILGATE_INDEX_URL` is not set (the indexes stay local).
    pub(crate) fn resolve(env: &Env) -> Result<Option<Self>, PgSettingsError> {
        let Some(raw) = env.get(URL_VAR) else {
            for var in [
                PASSWORD_ENV_VAR,
                PASSWORD_FILE_VAR,
                CA_FILE_VAR,
                LEASE_TTL_VAR,
            ] {
                if env.get(var).is_some() {
                    return Err(PgSettingsError::WithoutUrl(var));
                }
            }
            return Ok(None);
        };
        let url = Url::parse(raw).map_err(|_| PgSettingsError::Url)?;
        if !matches!(url.scheme(), "postgres" | "postgresql")
            || url.query().is_some()
            || url.fragment().is_some()
        {
            return Err(PgSettingsError::Url);
        }
        if url.password().is_some() {
            return Err(PgSettingsError::PasswordInUrl);
        }
        let user = plain_name(url.username())?;
        let host = url.host_str().filter(|h| !h.is_empty());
        let database = url
            .path()
            .strip_prefix('/')
            .filter(|d| !d.is_empty() && !d.contains('/'))
            .map(plain_name)
            .transpose()?;
        let (Some(host), Some(database)) = (host, database) else {
            return Err(PgSettingsError::Url);
        };
        if user.is_empty() {
            return Err(PgSettingsError::Url);
        }
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let password = password(env)?;
        let transport = if crate::backends::imap::conn::is_loopback(&host) {
            if env.get(CA_FILE_VAR).is_some() {
                return Err(PgSettingsError::CaForLoopback);
            }
            Transport::Loopback
        } else {
            Transport::Tls(Arc::new(roots(env)?))
        };
        let lease_ttl = match env.get(LEASE_TTL_VAR) {
            None => DEFAULT_LEASE_TTL,
            Some(raw) => raw
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|s| LEASE_TTL_SECONDS.contains(s))
                .map(std::time::Duration::from_secs)
                .ok_or(PgSettingsError::LeaseTtl)?,
        };
        Ok(Some(Self {
            host,
            port: url.port().unwrap_or(DEFAULT_PORT),
            user,
            database,
            password,
            transport,
            lease_ttl,
            role_check: RoleCheck::Enforced,
        }))
    }
}

#[cfg(test)]
impl PgSettings {
    /// The test server's database `database` as the role and password `url` names (loopback).
    pub(crate) fn for_test(url: &str, database: &str, lease_ttl: std::time::Duration) -> Self {
        let config: tokio_postgres::Config = url.parse().expect("the test URL");
        Self {
            host: "127.0.0.1".to_owned(),
            port: config.get_ports().first().copied().unwrap_or(DEFAULT_PORT),
            user: config.get_user().expect("a user").to_owned(),
            database: database.to_owned(),
            password: config
                .get_password()
                .map(|p| Password(String::from_utf8_lossy(p).into_owned())),
            transport: Transport::Loopback,
            lease_ttl,
            role_check: RoleCheck::Enforced,
        }
    }
}

/// A user or database name as the URL spells it: percent escapes are refused rather than
/// decoded (a name that needs them is better renamed than half understood).
fn plain_name(raw: &str) -> Result<String, PgSettingsError> {
    if raw.contains('%') || raw.chars().any(char::is_control) {
        return Err(PgSettingsError::Url);
    }
    Ok(raw.to_owned())
}

fn password(env: &Env) -> Result<Option<Password>, PgSettingsError> {
    match (env.get(PASSWORD_ENV_VAR), env.get(PASSWORD_FILE_VAR)) {
        (Some(_), Some(_)) => Err(PgSettingsError::TwoPasswords),
        (None, None) => Ok(None),
        (Some(name), None) => {
            if !crate::embed::settings::is_variable_name(name) {
                return Err(PgSettingsError::PasswordVarName);
            }
            env.secret(name)
                .filter(|s| !s.expose().is_empty())
                .map(|s| Some(Password(s.expose().to_owned())))
                .ok_or(PgSettingsError::PasswordMissing)
        }
        (None, Some(path)) => {
            let path = PathBuf::from(path);
            if !path.is_absolute() {
                return Err(PgSettingsError::PasswordFilePath);
            }
            let bytes = path_guard::read_private_file(&path, MAX_PASSWORD_FILE_BYTES)
                .map_err(PgSettingsError::PasswordFile)?;
            // One line: the trailing newline an editor adds is not part of it.
            let text = String::from_utf8(bytes).map_err(|_| PgSettingsError::PasswordMissing)?;
            let password = text.trim_end_matches(['\n', '\r']);
            if password.is_empty() {
                return Err(PgSettingsError::PasswordMissing);
            }
            Ok(Some(Password(password.to_owned())))
        }
    }
}

/// The web PKI's roots, plus the operator's CA when one is named.
fn roots(env: &Env) -> Result<rustls::RootCertStore, PgSettingsError> {
    let pem = match env.get(CA_FILE_VAR) {
        None => None,
        Some(path) => {
            let path = PathBuf::from(path);
            if !path.is_absolute() {
                return Err(PgSettingsError::CaFile);
            }
            // A CA file decides whom the store trusts: a policy file, checked like one.
            Some(
                path_guard::read_optional_trusted_file(&path, MAX_CA_FILE_BYTES)
                    .ok()
                    .flatten()
                    .ok_or(PgSettingsError::CaFile)?,
            )
        }
    };
    crate::backends::imap::conn::tls_roots(pem.as_deref()).map_err(|()| PgSettingsError::CaFile)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(pairs: &[(&str, &str)]) -> Result<Option<PgSettings>, PgSettingsError> {
        PgSettings::resolve(&Env::from_pairs(pairs.iter().copied()))
    }

    #[test]
    fn a_loopback_url_with_a_password_variable_resolves() {
        let s = resolve(&[
            (URL_VAR, "postgres://mailgate@127.0.0.1:15432/mailgate_test"),
            (PASSWORD_ENV_VAR, "PG_PASSWORD"),
            ("PG_PASSWORD", "s3cret"),
        ])
        .expect("valid")
        .expect("set");
        assert_eq!(
            (
                s.host.as_str(),
                s.port,
                s.user.as_str(),
                s.database.as_str()
            ),
            ("127.0.0.1", 15432, "mailgate", "mailgate_test")
        );
        assert_eq!(s.password.as_ref().map(Password::expose), Some("s3cret"));
        assert!(matches!(s.transport, Transport::Loopback));
        assert!(!format!("{s:?}").contains("s3cret"), "Debug redacts");
        let remote = resolve(&[(URL_VAR, "postgresql://svc@db.example.org/mail")])
            .expect("valid")
            .expect("set");
        assert_eq!(remote.port, 5432);
        assert!(
            matches!(remote.transport, Transport::Tls(_)),
            "TLS off loopback"
        );
    }

    #[test]
    fn bad_settings_are_refused_naming_the_rule_and_never_the_value() {
        let url = (URL_VAR, "postgres://mailgate@127.0.0.1/db");
        let cases: [(&[(&str, &str)], PgSettingsError); 9] = [
            (
                &[(URL_VAR, "postgres://u:hunter2@127.0.0.1/db")],
                PgSettingsError::PasswordInUrl,
            ),
            (&[(URL_VAR, "mysql://u@127.0.0.1/db")], PgSettingsError::Url),
            (
                &[(URL_VAR, "postgres://127.0.0.1/db")],
                PgSettingsError::Url,
            ),
            (
                &[(URL_VAR, "postgres://u@127.0.0.1/")],
                PgSettingsError::Url,
            ),
            (
                &[(URL_VAR, "postgres://u@127.0.0.1/db?sslmode=disable")],
                PgSettingsError::Url,
            ),
            (
                &[url, (PASSWORD_ENV_VAR, "hunter 2")],
                PgSettingsError::PasswordVarName,
            ),
            (
                &[url, (PASSWORD_ENV_VAR, "UNSET_VAR")],
                PgSettingsError::PasswordMissing,
            ),
            (
                &[url, (PASSWORD_ENV_VAR, "P"), (PASSWORD_FILE_VAR, "/p")],
                PgSettingsError::TwoPasswords,
            ),
            (
                &[(PASSWORD_ENV_VAR, "P")],
                PgSettingsError::WithoutUrl(PASSWORD_ENV_VAR),
            ),
        ];
        for (pairs, want) in cases {
            let got = resolve(pairs).expect_err("refused");
            assert_eq!(got, want);
            let shown = got.to_string();
            assert!(!shown.contains("hunter"), "{shown}");
        }
        assert_eq!(
            resolve(&[url, (CA_FILE_VAR, "/etc/ca.pem")]).expect_err("refused"),
            PgSettingsError::CaForLoopback
        );
        assert_eq!(
            resolve(&[url, (PASSWORD_FILE_VAR, "relative/pw")]).expect_err("refused"),
            PgSettingsError::PasswordFilePath
        );
    }
}
