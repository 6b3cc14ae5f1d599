//! The HTTP transport's variable names, and the one value decided here: whether
//! `OUTLOOK_HTTP_ALLOW_NO_AUTH` lets the transport run without a bearer token.
//!
//! Invariant: the no-auth switch is a strict boolean ([`http_allow_no_auth`]), and `gates`
//! validates it at startup with the gate variables, so a misspelled value aborts every command
//! rather than only `serve --http`. The transport's other values (host, port, token, origins)
//! are parsed and checked by the server crate's `transport::http::settings`, which owns the
//! loopback and origin rules; their names live here so that the unknown-variable check knows
//! them.
//!
//! Who calls it: `gates` (validation), the server crate's HTTP transport, `vars`.

use super::values::parse_bool;
use super::{ConfigError, env};

/// `OUTLOOK_HTTP_ALLOW_NO_AUTH`: validated with the gates as a strict boolean (so a misspelled
/// value aborts every command); the HTTP transport reads it through [`http_allow_no_auth`].
pub const HTTP_ALLOW_NO_AUTH_VAR: &str = "OUTLOOK_HTTP_ALLOW_NO_AUTH";
// The HTTP transport's other variables (the reference plugin's names, plus mailgate's origin
// allowlist), read by the server crate's `transport::http::settings`.
/// Loopback host the HTTP transport binds (default 127.0.0.1).
pub const HTTP_HOST_VAR: &str = "OUTLOOK_HTTP_HOST";
/// Port the HTTP transport binds (default 3010).
pub const HTTP_PORT_VAR: &str = "OUTLOOK_HTTP_PORT";
/// The bearer token HTTP clients must present; blank counts as missing.
pub const HTTP_BEARER_TOKEN_VAR: &str = "OUTLOOK_HTTP_BEARER_TOKEN";
/// Comma list of browser origins allowed besides the bound port's loopback origins.
pub const HTTP_ALLOWED_ORIGINS_VAR: &str = "MAILGATE_HTTP_ALLOWED_ORIGINS";
// Remote access for people (issue 29): the OAuth 2.1 resource server and TLS.
/// The authorization server's issuer URL; setting it turns the resource server on.
pub const HTTP_OAUTH_ISSUER_VAR: &str = "MAILGATE_HTTP_OAUTH_ISSUER";
/// The canonical resource URL clients use (`https://mail.example.com/mcp`), the tokens' `aud`.
pub const HTTP_PUBLIC_URL_VAR: &str = "MAILGATE_HTTP_PUBLIC_URL";
/// Scopes every token must grant, space-separated (default `mail.read`).
pub const HTTP_OAUTH_SCOPES_VAR: &str = "MAILGATE_HTTP_OAUTH_SCOPES";
/// Strict boolean: also accept access tokens typed `JWT` (issuers that predate RFC 9068).
pub const HTTP_OAUTH_ACCEPT_PLAIN_JWT_VAR: &str = "MAILGATE_HTTP_OAUTH_ACCEPT_PLAIN_JWT";
/// Requests per minute one remote person may make (default 120); a burst of that many is allowed.
pub const HTTP_PERSON_RATE_VAR: &str = "MAILGATE_HTTP_PERSON_REQUESTS_PER_MINUTE";
/// Strict boolean: mailgate listens on loopback behind a TLS-terminating reverse proxy that
/// serves `MAILGATE_HTTP_PUBLIC_URL`; `Host` and `Origin` are then checked against that URL.
pub const HTTP_BEHIND_PROXY_VAR: &str = "MAILGATE_HTTP_BEHIND_PROXY";
/// PEM certificate chain and private key of the TLS listener.
pub const HTTP_TLS_CERT_VAR: &str = "MAILGATE_HTTP_TLS_CERT";
pub const HTTP_TLS_KEY_VAR: &str = "MAILGATE_HTTP_TLS_KEY";

/// `MAILGATE_HTTP_OAUTH_ACCEPT_PLAIN_JWT` as a strict boolean; unset or blank is `false`.
pub fn http_oauth_accept_plain_jwt(env: &env::Env) -> Result<bool, ConfigError> {
    Ok(parse_bool(
        HTTP_OAUTH_ACCEPT_PLAIN_JWT_VAR,
        env.raw(HTTP_OAUTH_ACCEPT_PLAIN_JWT_VAR),
    )? == Some(true))
}

/// `MAILGATE_HTTP_BEHIND_PROXY` as a strict boolean; unset or blank is `false`.
pub fn http_behind_proxy(env: &env::Env) -> Result<bool, ConfigError> {
    Ok(parse_bool(HTTP_BEHIND_PROXY_VAR, env.raw(HTTP_BEHIND_PROXY_VAR))? == Some(true))
}

/// `OUTLOOK_HTTP_ALLOW_NO_AUTH` as a strict boolean; unset or blank is `false`.
pub fn http_allow_no_auth(env: &env::Env) -> Result<bool, ConfigError> {
    Ok(parse_bool(HTTP_ALLOW_NO_AUTH_VAR, env.raw(HTTP_ALLOW_NO_AUTH_VAR))? == Some(true))
}
