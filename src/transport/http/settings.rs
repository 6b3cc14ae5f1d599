//! What the HTTP transport is told at startup: the loopback address to bind, how clients
//! authenticate, and which browser origins may call it. Built once from the environment (the
//! reference plugin's `OUTLOOK_HTTP_*` names plus `MAILGATE_HTTP_ALLOWED_ORIGINS`) and the
//! `--http ADDR` argument, which wins over the host and port variables.
//!
//! Invariants: a non-loopback address is refused here, before any socket exists; the bearer
//! token is reduced to its SHA-256 digest at once, so the token itself is never held, formatted or
//! compared (see `guard`); without a token startup is refused unless
//! `OUTLOOK_HTTP_ALLOW_NO_AUTH` is a strict `true`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use sha2::{Digest as _, Sha256};

use super::oauth::OAuthSettings;
use super::tls::TlsFiles;
use crate::backends::graph::endpoints::parse_root;
use crate::config::env::Env;
use crate::config::{
    HTTP_ALLOWED_ORIGINS_VAR, HTTP_BEARER_TOKEN_VAR, HTTP_HOST_VAR, HTTP_OAUTH_ISSUER_VAR,
    HTTP_OAUTH_SCOPES_VAR, HTTP_PERSON_RATE_VAR, HTTP_PORT_VAR, HTTP_PUBLIC_URL_VAR,
    HTTP_TLS_CERT_VAR, HTTP_TLS_KEY_VAR, http_allow_no_auth, http_behind_proxy,
    http_oauth_accept_plain_jwt,
};
use crate::error::HttpConfigError;

/// Requests per minute per remote person when `MAILGATE_HTTP_PERSON_REQUESTS_PER_MINUTE` is unset.
pub(crate) const DEFAULT_PERSON_RATE: u32 = 120;
/// The scope a token needs when `MAILGATE_HTTP_OAUTH_SCOPES` is unset.
pub(crate) const DEFAULT_SCOPE: &str = "mail.read";
/// The reference plugin's default port.
pub(crate) const DEFAULT_PORT: u16 = 3010;
/// Tokens shorter than this are accepted (a reference user's environment must keep working) but
/// warned about: any program on the machine can try tokens against a loopback port.
const SHORT_TOKEN_CHARS: usize = 16;

/// How requests to `/mcp` authenticate.
#[derive(Clone)]
pub(crate) enum Auth {
    /// `Authorization: Bearer <token>` whose SHA-256 digest is this one.
    Bearer(TokenDigest),
    /// No authentication (`OUTLOOK_HTTP_ALLOW_NO_AUTH=true` and no token).
    Open,
    /// The OAuth 2.1 resource server (`MAILGATE_HTTP_OAUTH_ISSUER`): people, by token.
    ResourceServer(OAuthSettings),
}

/// SHA-256 of the configured bearer token. Comparing digests gives a fixed-length, constant-time
/// comparison that reveals nothing about the token's length.
#[derive(Clone)]
pub(crate) struct TokenDigest(pub(super) [u8; 32]);

impl TokenDigest {
    pub(crate) fn of(token: &str) -> Self {
        Self(Sha256::digest(token.as_bytes()).into())
    }
}

impl std::fmt::Debug for TokenDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenDigest(<redacted>)")
    }
}

/// Everything the HTTP transport needs besides the app.
pub(crate) struct HttpSettings {
    pub(crate) addr: SocketAddr,
    pub(crate) auth: Auth,
    /// Origins allowed besides the bound port's loopback origins, as ASCII serializations
    /// (`scheme://host[:port]`, default port omitted), or `null`.
    pub(crate) extra_origins: Vec<String>,
    /// Warnings for stderr (no auth, a short token): printed by the caller at startup.
    pub(crate) warnings: Vec<&'static str>,
    /// The TLS listener's files; `None` serves plain HTTP (loopback only).
    pub(crate) tls: Option<TlsFiles>,
    /// Behind a TLS-terminating reverse proxy on this machine (`MAILGATE_HTTP_BEHIND_PROXY`).
    pub(crate) behind_proxy: bool,
}

impl HttpSettings {
    /// Resolves the settings; `cli_addr` is `--http`'s value (empty when given without one).
    pub(crate) fn resolve(env: &Env, cli_addr: &str) -> Result<Self, HttpConfigError> {
        let addr = if cli_addr.trim().is_empty() {
            let host = match env.get(HTTP_HOST_VAR) {
                Some(host) => parse_host(host, HTTP_HOST_VAR)?,
                None => IpAddr::V4(Ipv4Addr::LOCALHOST),
            };
            let port = match env.get(HTTP_PORT_VAR) {
                Some(port) => port.parse::<u16>().map_err(|_| HttpConfigError::BadPort {
                    source_name: HTTP_PORT_VAR,
                })?,
                None => DEFAULT_PORT,
            };
            SocketAddr::new(host, port)
        } else {
            parse_cli_addr(cli_addr.trim())?
        };
        let mut warnings = Vec::new();
        let token = env
            .secret(HTTP_BEARER_TOKEN_VAR)
            .map(|secret| secret.expose().trim().to_owned())
            .filter(|token| !token.is_empty());
        let auth = match (oauth(env)?, token) {
            (Some(_), Some(_)) => return Err(HttpConfigError::OAuthWithBearer),
            (Some(settings), None) => Auth::ResourceServer(settings),
            (None, Some(token)) => {
                if token.chars().count() < SHORT_TOKEN_CHARS {
                    warnings.push(
                        "OUTLOOK_HTTP_BEARER_TOKEN is shorter than 16 characters; any program on \
                         this machine can try tokens against the port (use e.g. `openssl rand \
                         -hex 32`)",
                    );
                }
                Auth::Bearer(TokenDigest::of(&token))
            }
            (None, None) if http_allow_no_auth(env)? => {
                warnings.push(
                    "serving HTTP WITHOUT authentication (OUTLOOK_HTTP_ALLOW_NO_AUTH=true): any \
                     program on this machine that can reach the port can read the allowlisted \
                     mailboxes",
                );
                Auth::Open
            }
            (None, None) => return Err(HttpConfigError::NoToken),
        };
        let extra_origins = match env.get(HTTP_ALLOWED_ORIGINS_VAR) {
            Some(list) => parse_origins(list)?,
            None => Vec::new(),
        };
        let tls = tls_files(env)?;
        let people = matches!(auth, Auth::ResourceServer(_));
        // Off loopback only people, by token, over TLS (invariant 9).
        let may_leave_loopback = people && tls.is_some();
        if !(addr.ip().is_loopback() || may_leave_loopback) {
            return Err(HttpConfigError::NotLoopback {
                address: addr.ip().to_string(),
            });
        }
        let behind_proxy = http_behind_proxy(env)?;
        if behind_proxy && !(people && addr.ip().is_loopback()) {
            return Err(HttpConfigError::ProxyMode);
        }
        Ok(Self {
            addr,
            auth,
            extra_origins,
            warnings,
            tls,
            behind_proxy,
        })
    }
}

/// The TLS files: both variables or neither, absolute paths.
fn tls_files(env: &Env) -> Result<Option<TlsFiles>, HttpConfigError> {
    let path = |var: &'static str| {
        env.get(var)
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(|v| {
                let path = std::path::PathBuf::from(v);
                if path.is_absolute() {
                    Ok(path)
                } else {
                    Err(HttpConfigError::TlsPath { var })
                }
            })
            .transpose()
    };
    match (path(HTTP_TLS_CERT_VAR)?, path(HTTP_TLS_KEY_VAR)?) {
        (Some(cert), Some(key)) => Ok(Some(TlsFiles { cert, key })),
        (None, None) => Ok(None),
        _ => Err(HttpConfigError::TlsIncomplete),
    }
}

/// The resource server's settings, when `MAILGATE_HTTP_OAUTH_ISSUER` is set (blank is unset).
fn oauth(env: &Env) -> Result<Option<OAuthSettings>, HttpConfigError> {
    let Some(issuer) = env
        .get(HTTP_OAUTH_ISSUER_VAR)
        .map(str::trim)
        .filter(|v| !v.is_empty())
    else {
        return Ok(None);
    };
    let url = |value: &str, var: &'static str| {
        parse_root(value).map_err(|_| HttpConfigError::OAuthUrl { var })
    };
    url(issuer, HTTP_OAUTH_ISSUER_VAR)?;
    let issuer = issuer.to_owned();
    let resource = env
        .get(HTTP_PUBLIC_URL_VAR)
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .ok_or(HttpConfigError::PublicUrlMissing)?;
    let resource = url(resource, HTTP_PUBLIC_URL_VAR)?;
    let scopes: Vec<String> = env
        .get(HTTP_OAUTH_SCOPES_VAR)
        .unwrap_or(DEFAULT_SCOPE)
        .split_ascii_whitespace()
        .map(str::to_owned)
        .collect();
    // RFC 6749 §3.3 scope-token: %x21 / %x23-5B / %x5D-7E.
    let scope_char = |c: char| matches!(c, '\x21' | '\x23'..='\x5B' | '\x5D'..='\x7E');
    if scopes.is_empty() || scopes.iter().any(|s| !s.chars().all(scope_char)) {
        return Err(HttpConfigError::Scopes);
    }
    let per_minute = match env.get(HTTP_PERSON_RATE_VAR) {
        None => DEFAULT_PERSON_RATE,
        Some(v) => v
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=100_000).contains(n))
            .ok_or(HttpConfigError::PersonRate)?,
    };
    Ok(Some(OAuthSettings {
        issuer,
        resource,
        scopes,
        accept_plain_jwt: http_oauth_accept_plain_jwt(env)?,
        requests_per_minute: per_minute,
    }))
}

/// A host for binding: an IP literal (IPv6 with or without brackets) or `localhost`, which is
/// 127.0.0.1 (no resolver is asked: `localhost` could resolve to anything in /etc/hosts).
fn parse_host(host: &str, source_name: &'static str) -> Result<IpAddr, HttpConfigError> {
    if host.eq_ignore_ascii_case("localhost") {
        return Ok(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    bare.parse::<IpAddr>()
        .map_err(|_| HttpConfigError::BadHost { source_name })
}

/// `HOST:PORT` from `--http`.
fn parse_cli_addr(value: &str) -> Result<SocketAddr, HttpConfigError> {
    if let Ok(addr) = value.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let (host, port) = value.rsplit_once(':').ok_or(HttpConfigError::BadAddress)?;
    let port = port.parse::<u16>().map_err(|_| HttpConfigError::BadPort {
        source_name: "--http",
    })?;
    if host.eq_ignore_ascii_case("localhost") {
        Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port))
    } else if host.parse::<IpAddr>().is_ok() {
        // An IPv6 literal needs brackets before a port; say how rather than guess.
        Err(HttpConfigError::BadAddress)
    } else {
        Err(HttpConfigError::BadHost {
            source_name: "--http",
        })
    }
}

/// The allowlist variable's entries as origin serializations; any bad entry refuses them all.
fn parse_origins(list: &str) -> Result<Vec<String>, HttpConfigError> {
    let entries: Vec<&str> = list
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect();
    let parsed: Vec<Option<String>> = entries.iter().map(|e| origin_entry(e)).collect();
    let bad = parsed.iter().filter(|p| p.is_none()).count();
    if bad > 0 || entries.is_empty() {
        return Err(HttpConfigError::BadOrigins { count: bad.max(1) });
    }
    Ok(parsed.into_iter().flatten().collect())
}

/// One allowlist entry: `null`, or an http(s) URL with a host and nothing after it but `/`.
fn origin_entry(entry: &str) -> Option<String> {
    if entry == "null" {
        return Some("null".to_owned());
    }
    let url = url::Url::parse(entry).ok()?;
    let plain = matches!(url.scheme(), "http" | "https")
        && url.host().is_some()
        && url.username().is_empty()
        && url.password().is_none()
        && url.path() == "/"
        && url.query().is_none()
        && url.fragment().is_none()
        && !entry.contains('*');
    plain.then(|| url.origin().ascii_serialization())
}

/// A browser `Origin` header value as the allowlist stores it, or `None` when it is not an
/// http(s) origin (`null` stays `null`).
pub(super) fn serialize_origin(value: &str) -> Option<String> {
    if value == "null" {
        return Some("null".to_owned());
    }
    let url = url::Url::parse(value).ok()?;
    matches!(url.scheme(), "http" | "https").then(|| url.origin().ascii_serialization())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(pairs: &[(&str, &str)], cli: &str) -> Result<HttpSettings, HttpConfigError> {
        HttpSettings::resolve(&Env::from_pairs(pairs.iter().copied()), cli)
    }

    const TOKEN: (&str, &str) = (HTTP_BEARER_TOKEN_VAR, "0123456789abcdef0123456789abcdef");

    #[test]
    fn defaults_are_the_reference_plugins() {
        let s = resolve(&[TOKEN], "").expect("starts");
        assert_eq!(s.addr, "127.0.0.1:3010".parse().unwrap());
        assert!(matches!(s.auth, Auth::Bearer(_)));
        assert!(s.warnings.is_empty());
        assert!(s.extra_origins.is_empty());
    }

    #[test]
    fn loopback_hosts_bind_and_others_are_refused() {
        for (host, want) in [
            ("127.0.0.1", "127.0.0.1:3010"),
            ("127.8.9.10", "127.8.9.10:3010"),
            ("localhost", "127.0.0.1:3010"),
            ("LOCALHOST", "127.0.0.1:3010"),
            ("::1", "[::1]:3010"),
            ("[::1]", "[::1]:3010"),
        ] {
            let s = resolve(&[TOKEN, (HTTP_HOST_VAR, host)], "").expect(host);
            assert_eq!(s.addr, want.parse().unwrap(), "{host}");
        }
        for host in [
            "0.0.0.0",
            "::",
            "192.0.2.7",
            "::ffff:127.0.0.1",
            "169.254.1.1",
        ] {
            let err = resolve(&[TOKEN, (HTTP_HOST_VAR, host)], "").err();
            assert!(
                matches!(err, Some(HttpConfigError::NotLoopback { .. })),
                "{host}: {err:?}"
            );
        }
        for cli in ["0.0.0.0:3010", "[::]:3010", "198.51.100.1:80"] {
            let err = resolve(&[TOKEN], cli).err();
            assert!(
                matches!(err, Some(HttpConfigError::NotLoopback { .. })),
                "{cli}"
            );
        }
        let err = resolve(&[TOKEN, (HTTP_HOST_VAR, "mail.example.com")], "").err();
        assert!(matches!(err, Some(HttpConfigError::BadHost { .. })));
    }

    #[test]
    fn the_cli_address_wins_over_the_variables() {
        let s = resolve(
            &[TOKEN, (HTTP_HOST_VAR, "0.0.0.0"), (HTTP_PORT_VAR, "x")],
            "localhost:0",
        )
        .expect("the argument decides");
        assert_eq!(s.addr, "127.0.0.1:0".parse().unwrap());
        assert_eq!(
            resolve(&[TOKEN], "[::1]:4000").expect("v6").addr,
            "[::1]:4000".parse().unwrap()
        );
        for bad in ["3010", "::1:3010", "localhost", "localhost:99999", "host:1"] {
            assert!(resolve(&[TOKEN], bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ports_are_strict() {
        for port in ["-1", "65536", "30 10", "0x10", "3010.0"] {
            let err = resolve(&[TOKEN, (HTTP_PORT_VAR, port)], "").err();
            assert!(
                matches!(err, Some(HttpConfigError::BadPort { .. })),
                "{port}"
            );
        }
        assert_eq!(
            resolve(&[TOKEN, (HTTP_PORT_VAR, " 8080 ")], "")
                .expect("trimmed")
                .addr
                .port(),
            8080
        );
    }

    #[test]
    fn a_token_is_required_unless_no_auth_is_strictly_true() {
        for blank in [None, Some(""), Some("   "), Some("\t\n")] {
            let pairs: Vec<(&str, &str)> = blank
                .map(|b| vec![(HTTP_BEARER_TOKEN_VAR, b)])
                .unwrap_or_default();
            assert!(matches!(
                resolve(&pairs, "").err(),
                Some(HttpConfigError::NoToken)
            ));
        }
        let err = resolve(&[(crate::config::HTTP_ALLOW_NO_AUTH_VAR, "yes please")], "").err();
        assert!(
            err.as_ref()
                .is_some_and(|e| e.to_string().contains("must be a boolean")),
            "{err:?}"
        );
        assert!(matches!(
            resolve(&[(crate::config::HTTP_ALLOW_NO_AUTH_VAR, "false")], "").err(),
            Some(HttpConfigError::NoToken)
        ));
        let open = resolve(&[(crate::config::HTTP_ALLOW_NO_AUTH_VAR, "true")], "").expect("open");
        assert!(matches!(open.auth, Auth::Open));
        assert!(open.warnings[0].contains("WITHOUT authentication"));
        // A token wins over the opt-out: authentication stays on, no warning.
        let both = resolve(
            &[TOKEN, (crate::config::HTTP_ALLOW_NO_AUTH_VAR, "true")],
            "",
        )
        .expect("token");
        assert!(matches!(both.auth, Auth::Bearer(_)) && both.warnings.is_empty());
    }

    #[test]
    fn a_short_token_is_accepted_with_a_warning_and_never_formatted() {
        let s = resolve(&[(HTTP_BEARER_TOKEN_VAR, " hunter2 ")], "").expect("starts");
        assert!(s.warnings[0].contains("shorter than 16"));
        let Auth::Bearer(digest) = &s.auth else {
            panic!("bearer")
        };
        assert_eq!(digest.0, TokenDigest::of("hunter2").0, "trimmed");
        assert!(!format!("{digest:?}").contains("hunter2"));
    }

    #[test]
    fn origins_are_parsed_to_their_serialization_and_bad_lists_refused() {
        let s = resolve(
            &[
                TOKEN,
                (
                    HTTP_ALLOWED_ORIGINS_VAR,
                    "HTTPS://App.Example.com:443, http://localhost:6274/ ,null",
                ),
            ],
            "",
        )
        .expect("valid");
        assert_eq!(
            s.extra_origins,
            ["https://app.example.com", "http://localhost:6274", "null"]
        );
        for bad in [
            "*",
            "app.example.com",
            "ftp://example.com",
            "https://example.com/path",
            "https://user@example.com",
            "https://example.com?q",
            "https://*.example.com",
            "http://localhost:6274, nope",
            ",",
        ] {
            let err = resolve(&[TOKEN, (HTTP_ALLOWED_ORIGINS_VAR, bad)], "").err();
            assert!(
                matches!(err, Some(HttpConfigError::BadOrigins { .. })),
                "{bad}: {err:?}"
            );
        }
        let err = resolve(
            &[
                TOKEN,
                (HTTP_ALLOWED_ORIGINS_VAR, "https://intranet.example.org/x"),
            ],
            "",
        )
        .err()
        .expect("refused");
        assert!(
            !err.to_string().contains("intranet"),
            "values are not shown"
        );
    }

    /// Issue 29's interface: the issuer turns the resource server on, needs the public URL,
    /// never runs beside the static token, and takes scopes of RFC 6749's characters.
    #[test]
    fn the_resource_server_needs_its_urls_and_never_the_static_token() {
        const ISSUER: (&str, &str) = (HTTP_OAUTH_ISSUER_VAR, "https://login.example.com/t/v2.0");
        const PUBLIC: (&str, &str) = (HTTP_PUBLIC_URL_VAR, "https://mail.example.com/mcp");
        let s = resolve(&[ISSUER, PUBLIC], "").expect("starts");
        match &s.auth {
            Auth::ResourceServer(o) => {
                assert_eq!(o.issuer, "https://login.example.com/t/v2.0");
                assert_eq!(o.resource.as_str(), "https://mail.example.com/mcp");
                assert_eq!(o.scopes, ["mail.read"]);
                assert!(!o.accept_plain_jwt);
            }
            _ => panic!("the resource server is on"),
        }
        let scoped = resolve(
            &[ISSUER, PUBLIC, (HTTP_OAUTH_SCOPES_VAR, " mail.read  mcp ")],
            "",
        )
        .expect("starts");
        assert!(
            matches!(&scoped.auth, Auth::ResourceServer(o) if o.scopes == ["mail.read", "mcp"])
        );
        let err = |pairs: &[(&str, &str)]| resolve(pairs, "").err();
        assert!(matches!(
            err(&[ISSUER, PUBLIC, TOKEN]),
            Some(HttpConfigError::OAuthWithBearer)
        ));
        assert!(matches!(
            err(&[ISSUER]),
            Some(HttpConfigError::PublicUrlMissing)
        ));
        for bad in [
            "http://login.example.com/",
            "not a url",
            "https://u:p@login.example.com/",
        ] {
            assert!(
                matches!(
                    err(&[(HTTP_OAUTH_ISSUER_VAR, bad), PUBLIC]),
                    Some(HttpConfigError::OAuthUrl {
                        var: HTTP_OAUTH_ISSUER_VAR
                    })
                ),
                "{bad}"
            );
        }
        assert!(matches!(
            err(&[ISSUER, (HTTP_PUBLIC_URL_VAR, "http://mail.example.com/mcp")]),
            Some(HttpConfigError::OAuthUrl {
                var: HTTP_PUBLIC_URL_VAR
            })
        ));
        for scopes in ["mail\"read", "a\\b"] {
            assert!(
                matches!(
                    err(&[ISSUER, PUBLIC, (HTTP_OAUTH_SCOPES_VAR, scopes)]),
                    Some(HttpConfigError::Scopes)
                ),
                "{scopes:?}"
            );
        }
        for rate in ["0", "x", "100001", "-1"] {
            assert!(
                matches!(
                    err(&[ISSUER, PUBLIC, (HTTP_PERSON_RATE_VAR, rate)]),
                    Some(HttpConfigError::PersonRate)
                ),
                "{rate}"
            );
        }
        // Off loopback only with the resource server and TLS; the proxy mode on loopback only.
        const CERT: (&str, &str) = (HTTP_TLS_CERT_VAR, "/etc/mailgate/cert.pem");
        const KEY: (&str, &str) = (HTTP_TLS_KEY_VAR, "/etc/mailgate/key.pem");
        let wide = |pairs: &[(&str, &str)]| resolve(pairs, "0.0.0.0:443");
        assert!(wide(&[ISSUER, PUBLIC, CERT, KEY]).is_ok_and(|s| s.tls.is_some()));
        for pairs in [&[ISSUER, PUBLIC][..], &[TOKEN, CERT, KEY][..]] {
            assert!(matches!(
                wide(pairs).err(),
                Some(HttpConfigError::NotLoopback { .. })
            ));
        }
        assert!(matches!(
            err(&[ISSUER, PUBLIC, CERT]),
            Some(HttpConfigError::TlsIncomplete)
        ));
        assert!(matches!(
            err(&[ISSUER, PUBLIC, CERT, (HTTP_TLS_KEY_VAR, "key.pem")]),
            Some(HttpConfigError::TlsPath {
                var: HTTP_TLS_KEY_VAR
            })
        ));
        const PROXY: (&str, &str) = ("MAILGATE_HTTP_BEHIND_PROXY", "true");
        assert!(resolve(&[ISSUER, PUBLIC, PROXY], "").is_ok_and(|s| s.behind_proxy));
        assert!(matches!(
            err(&[TOKEN, PROXY]),
            Some(HttpConfigError::ProxyMode)
        ));
        assert!(matches!(
            wide(&[ISSUER, PUBLIC, CERT, KEY, PROXY]).err(),
            Some(HttpConfigError::ProxyMode)
        ));
        // Loopback http is the test and proxy case.
        let local = resolve(
            &[
                (HTTP_OAUTH_ISSUER_VAR, "http://127.0.0.1:9000"),
                (HTTP_PUBLIC_URL_VAR, "http://localhost:3010/mcp"),
            ],
            "",
        );
        assert!(local.is_ok());
    }
}
