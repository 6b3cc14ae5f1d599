//! The backend of each mailbox (`graph`, `imap` or `maildir`) and its server blocks, validated
//! from the raw file: host syntax, port, transport security, credential variable names, CA file
//! and per-account rate limits.
//!
//! Invariants: a backend carries exactly the blocks its kind allows (a misplaced `path`, `imap`,
//! `smtp` or `auth` is refused, never ignored); `security: plain` only to a loopback host
//! ([`is_loopback_host`], which the SMTP transport runs again); credentials are only ever
//! names of environment variables, at most one per block, and none on the server blocks of a
//! backend with `auth` (issue 37: its grant authenticates IMAP and SMTP alike; `oauth.rs`
//! validates the block itself); a rate-limit override only on the block it applies to and
//! within its bounds. Errors name the JSON path and the rule.
//!
//! Who calls it: `Config::from_raw` (through `backend_spec`); the backends and `gates` read the
//! resulting [`BackendSpec`] and [`ServerSpec`].

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use super::oauth::{OAuthSpec, oauth_spec};
use super::raw::{RawBackend, RawBackendKind, RawSecurity, RawServer};
use super::{ConfigError, file_path};

/// Which backend serves a mailbox. Paths are absolute when the config path was.
#[derive(Clone, Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "one per mailbox, built once at startup: boxing would buy nothing measurable"
)]
pub enum BackendSpec {
    /// `auth: None`: app-only (the `MICROSOFT_GRAPH_*` credentials); else a delegated grant.
    Graph { auth: Option<OAuthSpec> },
    /// `auth: Some`: IMAP and SMTP log in with the alias's grant, and neither block names a
    /// password or token variable.
    Imap {
        imap: ServerSpec,
        smtp: Option<ServerSpec>,
        auth: Option<OAuthSpec>,
    },
    Maildir {
        path: PathBuf,
        smtp: Option<ServerSpec>,
    },
}

/// An IMAP or SMTP server block. Credentials are only ever names of environment variables.
#[derive(Clone, Debug)]
pub struct ServerSpec {
    /// Lower-cased host name or IP address.
    pub host: String,
    pub port: u16,
    pub security: Security,
    /// `None`: log in as the mailbox address.
    pub username: Option<String>,
    pub password_env: Option<String>,
    pub oauth2_token_env: Option<String>,
    pub ca_file: Option<PathBuf>,
    /// Overrides of the default rate limits ([`DEFAULT_IMAP_PER_MINUTE`],
    /// [`DEFAULT_SMTP_PER_HOUR`]); read them through [`ServerSpec::imap_per_minute`] and
    /// [`ServerSpec::smtp_per_hour`], which apply the defaults.
    pub rate_limit: Option<RateLimit>,
}

impl ServerSpec {
    /// IMAP commands per minute for this account: the `imap` block's `rateLimit.imapPerMinute`,
    /// else [`DEFAULT_IMAP_PER_MINUTE`]. Meaningful on an `imap` block only (the config refuses
    /// the key elsewhere, so an `smtp` block always answers the default).
    pub fn imap_per_minute(&self) -> u32 {
        self.rate_limit
            .and_then(|limit| limit.imap_per_minute)
            .unwrap_or(DEFAULT_IMAP_PER_MINUTE)
    }

    /// SMTP sends per hour for this account: the `smtp` block's `rateLimit.smtpPerHour`, else
    /// [`DEFAULT_SMTP_PER_HOUR`]. Meaningful on an `smtp` block only.
    pub fn smtp_per_hour(&self) -> u32 {
        self.rate_limit
            .and_then(|limit| limit.smtp_per_hour)
            .unwrap_or(DEFAULT_SMTP_PER_HOUR)
    }
}

/// Transport security. `Plain` is only accepted for loopback hosts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Security {
    Tls,
    Starttls,
    Plain,
}

/// Rate-limit overrides for one server block (`imapPerMinute` on `imap`, `smtpPerHour` on
/// `smtp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit {
    pub(crate) imap_per_minute: Option<u32>,
    pub(crate) smtp_per_hour: Option<u32>,
}

/// IMAP commands per minute per account when the `imap` block sets no
/// `rateLimit.imapPerMinute` (issue 12: the backend's token bucket holds this many and refills
/// them over a minute, so a full minute's worth may go out at once).
pub const DEFAULT_IMAP_PER_MINUTE: u32 = 60;
/// SMTP sends per hour per account when the `smtp` block sets no `rateLimit.smtpPerHour`
/// (issue 12). The process-wide send cap (`MAILGATE_SEND_MAX_PER_HOUR`, default 20) also applies
/// and the smaller wins, so with both unset the effective limit is 20 an hour.
pub const DEFAULT_SMTP_PER_HOUR: u32 = 100;

/// Bounds for `rateLimit.imapPerMinute`.
pub(crate) const IMAP_PER_MINUTE_BOUNDS: (u32, u32) = (1, 6_000);
/// Bounds for `rateLimit.smtpPerHour`.
pub(crate) const SMTP_PER_HOUR_BOUNDS: (u32, u32) = (1, 10_000);

/// Which server block is being validated (decides the allowed `rateLimit` key).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Imap,
    Smtp,
}

pub(super) fn backend_spec(
    raw: RawBackend,
    at: &str,
    base_dir: &Path,
) -> Result<BackendSpec, ConfigError> {
    let not_allowed = |key: &str, kind: &str| {
        ConfigError::schema(
            format!("{at}.{key}"),
            format!("is not allowed for kind {kind}"),
        )
    };
    let smtp = |raw: Option<RawServer>| {
        raw.map(|server| server_spec(server, &format!("{at}.smtp"), Role::Smtp, base_dir))
            .transpose()
    };
    match raw.kind {
        RawBackendKind::Graph => {
            if raw.path.is_some() {
                return Err(not_allowed("path", "graph"));
            }
            if raw.imap.is_some() {
                return Err(not_allowed("imap", "graph"));
            }
            if raw.smtp.is_some() {
                return Err(not_allowed("smtp", "graph"));
            }
            let auth = raw
                .auth
                .map(|auth| oauth_spec(auth, &format!("{at}.auth"), raw.kind))
                .transpose()?;
            Ok(BackendSpec::Graph { auth })
        }
        RawBackendKind::Imap => {
            if raw.path.is_some() {
                return Err(not_allowed("path", "imap"));
            }
            let Some(imap) = raw.imap else {
                return Err(ConfigError::schema(
                    format!("{at}.imap"),
                    "is required for kind imap",
                ));
            };
            let auth = raw
                .auth
                .map(|auth| oauth_spec(auth, &format!("{at}.auth"), raw.kind))
                .transpose()?;
            if auth.is_some() {
                let blocks = [("imap", Some(&imap)), ("smtp", raw.smtp.as_ref())];
                for (block, server) in blocks {
                    let Some(server) = server else { continue };
                    for (key, value) in [
                        ("passwordEnv", &server.password_env),
                        ("oauth2TokenEnv", &server.oauth2_token_env),
                    ] {
                        if value.is_some() {
                            return Err(ConfigError::schema(
                                format!("{at}.{block}.{key}"),
                                "must not be set with auth: the grant authenticates this mailbox",
                            ));
                        }
                    }
                }
            }
            Ok(BackendSpec::Imap {
                imap: server_spec(imap, &format!("{at}.imap"), Role::Imap, base_dir)?,
                smtp: smtp(raw.smtp)?,
                auth,
            })
        }
        RawBackendKind::Maildir => {
            if raw.imap.is_some() {
                return Err(not_allowed("imap", "maildir"));
            }
            if raw.auth.is_some() {
                return Err(not_allowed("auth", "maildir"));
            }
            let Some(path) = raw.path else {
                return Err(ConfigError::schema(
                    format!("{at}.path"),
                    "is required for kind maildir",
                ));
            };
            Ok(BackendSpec::Maildir {
                path: file_path(&path, &format!("{at}.path"), base_dir)?,
                smtp: smtp(raw.smtp)?,
            })
        }
    }
}

fn server_spec(
    raw: RawServer,
    at: &str,
    role: Role,
    base_dir: &Path,
) -> Result<ServerSpec, ConfigError> {
    let host = parse_host(&raw.host).ok_or_else(|| {
        ConfigError::schema(format!("{at}.host"), "must be a host name or an IP address")
    })?;
    if raw.port == 0 {
        return Err(ConfigError::schema(
            format!("{at}.port"),
            "must be between 1 and 65535",
        ));
    }
    let security = match raw.security {
        RawSecurity::Tls => Security::Tls,
        RawSecurity::Starttls => Security::Starttls,
        RawSecurity::Plain => Security::Plain,
    };
    if security == Security::Plain && !is_loopback_host(&host) {
        return Err(ConfigError::schema(
            format!("{at}.security"),
            "plain is only allowed to a loopback host (127.0.0.0/8, ::1, localhost)",
        ));
    }
    let bad_username =
        |name: &String| name.is_empty() || name.len() > 320 || name.chars().any(char::is_control);
    if raw.username.as_ref().is_some_and(bad_username) {
        return Err(ConfigError::schema(
            format!("{at}.username"),
            "must be 1-320 characters without control characters",
        ));
    }
    for (key, value) in [
        ("passwordEnv", &raw.password_env),
        ("oauth2TokenEnv", &raw.oauth2_token_env),
    ] {
        if value.as_deref().is_some_and(|name| !is_env_var_name(name)) {
            return Err(ConfigError::schema(format!("{at}.{key}"), ENV_VAR_RULE));
        }
    }
    if raw.password_env.is_some() && raw.oauth2_token_env.is_some() {
        return Err(ConfigError::schema(
            at.to_owned(),
            "set at most one of passwordEnv and oauth2TokenEnv",
        ));
    }
    let ca_file = raw
        .ca_file
        .map(|path| file_path(&path, &format!("{at}.caFile"), base_dir))
        .transpose()?;
    let rate_limit = match raw.rate_limit {
        None => None,
        Some(limits) => {
            let check = |key: &str, value: Option<u32>, allowed: bool, (min, max): (u32, u32)| {
                match value {
                    Some(_) if !allowed => Err(ConfigError::schema(
                        format!("{at}.rateLimit.{key}"),
                        "does not apply to this server block",
                    )),
                    Some(v) if v < min || v > max => Err(ConfigError::schema(
                        format!("{at}.rateLimit.{key}"),
                        format!("must be between {min} and {max}"),
                    )),
                    _ => Ok(value),
                }
            };
            let imap_per_minute = check(
                "imapPerMinute",
                limits.imap_per_minute,
                role == Role::Imap,
                IMAP_PER_MINUTE_BOUNDS,
            )?;
            let smtp_per_hour = check(
                "smtpPerHour",
                limits.smtp_per_hour,
                role == Role::Smtp,
                SMTP_PER_HOUR_BOUNDS,
            )?;
            (imap_per_minute.is_some() || smtp_per_hour.is_some()).then_some(RateLimit {
                imap_per_minute,
                smtp_per_hour,
            })
        }
    };
    Ok(ServerSpec {
        host,
        port: raw.port,
        security,
        username: raw.username,
        password_env: raw.password_env,
        oauth2_token_env: raw.oauth2_token_env,
        ca_file,
        rate_limit,
    })
}

/// A bare IP address (v4, or v6 without brackets) or a DNS host name (single labels such as
/// `localhost` allowed), lower-cased. A name whose last label is all digits is refused: resolvers
/// may read `127.1` as an IPv4 address, which would defeat the loopback rule's intent.
pub(super) fn parse_host(host: &str) -> Option<String> {
    if host.parse::<IpAddr>().is_ok() {
        return Some(host.to_ascii_lowercase());
    }
    if host.is_empty() || host.len() > 253 || !host.is_ascii() {
        return None;
    }
    let lower = host.to_ascii_lowercase();
    let labels_ok = lower.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    });
    let numeric_tail = lower
        .rsplit('.')
        .next()
        .is_some_and(|last| last.bytes().all(|b| b.is_ascii_digit()));
    (labels_ok && !numeric_tail).then_some(lower)
}

/// Loopback: `localhost`, 127.0.0.0/8 or `::1` (IPv4-mapped forms are not accepted). The rule
/// for `security: plain`; the SMTP transport checks it again with this same function when it is
/// built, so it does not depend on the config having run it.
pub fn is_loopback_host(host: &str) -> bool {
    host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The rule [`is_env_var_name`] checks, as a refusal says it.
pub(super) const ENV_VAR_RULE: &str =
    "must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*, at most 128)";

/// The names a credential variable key (`passwordEnv`, `clientSecretEnv`, ...) may hold.
pub(super) fn is_env_var_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    name.len() <= 128
        && bytes
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::fixtures::{parse, refusal, with_mailboxes};

    #[test]
    fn rate_limits_default_to_issue_12s_numbers_and_take_the_configured_override() {
        let spec = |rate_limit| ServerSpec {
            host: "imap.example.org".to_owned(),
            port: 993,
            security: Security::Tls,
            username: None,
            password_env: None,
            oauth2_token_env: None,
            ca_file: None,
            rate_limit,
        };
        let unset = spec(None);
        assert_eq!(unset.imap_per_minute(), 60);
        assert_eq!(unset.smtp_per_hour(), 100);
        let imap_only = spec(Some(RateLimit {
            imap_per_minute: Some(12),
            smtp_per_hour: None,
        }));
        assert_eq!(imap_only.imap_per_minute(), 12);
        assert_eq!(imap_only.smtp_per_hour(), DEFAULT_SMTP_PER_HOUR);
        let smtp_only = spec(Some(RateLimit {
            imap_per_minute: None,
            smtp_per_hour: Some(7),
        }));
        assert_eq!(smtp_only.imap_per_minute(), DEFAULT_IMAP_PER_MINUTE);
        assert_eq!(smtp_only.smtp_per_hour(), 7);
        // The defaults lie inside the bounds a configured value must respect.
        for (default, (min, max)) in [
            (DEFAULT_IMAP_PER_MINUTE, IMAP_PER_MINUTE_BOUNDS),
            (DEFAULT_SMTP_PER_HOUR, SMTP_PER_HOUR_BOUNDS),
        ] {
            assert!((min..=max).contains(&default));
        }
    }

    fn server_refusal(server: &str) -> (String, String) {
        refusal(&with_mailboxes(
            &format!(
                r#"{{"alias": "a", "address": "a@example.com",
                     "backend": {{"kind": "imap", "imap": {server}}}}}"#
            ),
            "",
        ))
    }

    #[test]
    fn plain_security_only_to_loopback() {
        for host in [
            "imap.example.com",
            "10.0.0.1",
            "::ffff:127.0.0.1",
            "127.1",
            "localhost.example.com",
        ] {
            let (path, rule) = server_refusal(&format!(
                r#"{{"host": "{host}", "port": 143, "security": "plain"}}"#
            ));
            if host == "127.1" {
                assert_eq!(path, "mailboxes[0].backend.imap.host", "{host}");
            } else {
                assert_eq!(path, "mailboxes[0].backend.imap.security", "{host}");
                assert!(rule.contains("loopback"), "{rule}");
            }
        }
        for host in ["127.0.0.1", "127.3.4.5", "::1", "localhost", "LOCALHOST"] {
            let json = with_mailboxes(
                &format!(
                    r#"{{"alias": "a", "address": "a@example.com", "backend": {{"kind": "maildir",
                        "path": "/srv/a", "smtp": {{"host": "{host}", "port": 25, "security": "plain"}}}}}}"#
                ),
                "",
            );
            assert!(parse(&json).is_ok(), "{host}");
        }
        let json = with_mailboxes(
            r#"{"alias": "a", "address": "a@example.com", "backend": {"kind": "maildir",
                "path": "/srv/a", "smtp": {"host": "smtp.example.com", "port": 25, "security": "plain"}}}"#,
            "",
        );
        let (path, _) = refusal(&json);
        assert_eq!(path, "mailboxes[0].backend.smtp.security");
    }

    #[test]
    fn refuses_bad_server_blocks() {
        let cases = [
            (
                r#"{"host": "", "port": 993, "security": "tls"}"#,
                "imap.host",
            ),
            (
                r#"{"host": "imap example.com", "port": 993, "security": "tls"}"#,
                "imap.host",
            ),
            (
                r#"{"host": "-imap.example.com", "port": 993, "security": "tls"}"#,
                "imap.host",
            ),
            (
                r#"{"host": "imap.example.com/x", "port": 993, "security": "tls"}"#,
                "imap.host",
            ),
            (
                r#"{"host": "imap.example.com", "port": 0, "security": "tls"}"#,
                "imap.port",
            ),
            (
                r#"{"host": "imap.example.com", "port": 993, "security": "ssl"}"#,
                "imap.security",
            ),
            (
                r#"{"host": "imap.example.com", "port": 993}"#,
                "imap.security",
            ),
            (
                r#"{"host": "imap.example.com", "port": 993, "security": "tls", "username": ""}"#,
                "imap.username",
            ),
            (
                r#"{"host": "imap.example.com", "port": 993, "security": "tls", "passwordEnv": "1BAD"}"#,
                "imap.passwordEnv",
            ),
            (
                r#"{"host": "imap.example.com", "port": 993, "security": "tls", "oauth2TokenEnv": "A-B"}"#,
                "imap.oauth2TokenEnv",
            ),
            (
                r#"{"host": "imap.example.com", "port": 993, "security": "tls", "passwordEnv": "A", "oauth2TokenEnv": "B"}"#,
                "imap",
            ),
            (
                r#"{"host": "imap.example.com", "port": 993, "security": "tls", "caFile": ""}"#,
                "imap.caFile",
            ),
            (
                r#"{"host": "imap.example.com", "port": 993, "security": "tls", "rateLimit": {"imapPerMinute": 0}}"#,
                "imap.rateLimit.imapPerMinute",
            ),
            (
                r#"{"host": "imap.example.com", "port": 993, "security": "tls", "rateLimit": {"imapPerMinute": 6001}}"#,
                "imap.rateLimit.imapPerMinute",
            ),
            (
                r#"{"host": "imap.example.com", "port": 993, "security": "tls", "rateLimit": {"smtpPerHour": 10}}"#,
                "imap.rateLimit.smtpPerHour",
            ),
        ];
        for (server, suffix) in cases {
            let (path, _) = server_refusal(server);
            assert_eq!(path, format!("mailboxes[0].backend.{suffix}"), "{server}");
        }
    }

    #[test]
    fn refuses_mismatched_backend_shapes() {
        let backend = |b: &str| {
            refusal(&with_mailboxes(
                &format!(r#"{{"alias": "a", "address": "a@example.com", "backend": {b}}}"#),
                "",
            ))
            .0
        };
        let imap = r#"{"host": "imap.example.com", "port": 993, "security": "tls"}"#;
        assert_eq!(
            backend(r#"{"kind": "maildir"}"#),
            "mailboxes[0].backend.path"
        );
        assert_eq!(
            backend(r#"{"kind": "maildir", "path": ""}"#),
            "mailboxes[0].backend.path"
        );
        assert_eq!(
            backend(&format!(
                r#"{{"kind": "maildir", "path": "/m", "imap": {imap}}}"#
            )),
            "mailboxes[0].backend.imap"
        );
        assert_eq!(backend(r#"{"kind": "imap"}"#), "mailboxes[0].backend.imap");
        assert_eq!(
            backend(&format!(
                r#"{{"kind": "imap", "imap": {imap}, "path": "/m"}}"#
            )),
            "mailboxes[0].backend.path"
        );
        assert_eq!(
            backend(r#"{"kind": "graph", "path": "/m"}"#),
            "mailboxes[0].backend.path"
        );
        assert_eq!(
            backend(&format!(r#"{{"kind": "graph", "smtp": {imap}}}"#)),
            "mailboxes[0].backend.smtp"
        );
        assert_eq!(backend(r#"{"kind": "pop3"}"#), "mailboxes[0].backend.kind");
        assert_eq!(backend(r#"{"path": "/m"}"#), "mailboxes[0].backend.kind");
    }
}
