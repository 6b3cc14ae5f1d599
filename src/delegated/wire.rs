//! The OAuth authorization server's answers, parsed into typed outcomes (issue 37): the device
//! authorization endpoint's (RFC 8628 §3.2), the token endpoint's success (RFC 6749 §5.1) and
//! error objects (RFC 6749 §5.2, RFC 8628 §3.5), and provider `oidc`'s discovery document
//! (OpenID Connect Discovery 1.0 §3). Everything here is untrusted bytes from the network
//! (fuzzed: `fuzz/fuzz_targets/oauth_wire.rs`, oracles in its `fuzz` module).
//!
//! Invariants:
//! - The status decides what an answer is (200 a success, 400 and 401 an error object, anything
//!   else [`WireError::UnexpectedStatus`]); a body past its cap, not labelled `application/json`
//!   or not a JSON object is refused before serde sees a field of it.
//! - An accepted [`Grant`] has a non-empty, bounded, visible-ASCII access token whose type was
//!   `Bearer`, and a lifetime in `1..=MAX_TOKEN_LIFETIME_SECS`; an accepted
//!   [`DeviceAuthorization`] has bounded visible-ASCII codes, https (or loopback http) URIs and
//!   bounded lifetimes and intervals; every URL of an accepted [`Discovery`] is https (or
//!   loopback http) and its issuer is the configured one, byte for byte.
//! - Secrets (the tokens, the device code, the user code) are newtypes wiped from memory on drop
//!   whose `Debug` prints no part of them. [`WireError`] names a rule, never a value: serde's own
//!   messages quote the input, so they are dropped unread. A server's `error_description` is
//!   kept for the operator only ([`Description`]: bounded, control characters replaced); it can
//!   echo input, so it never goes to the model.
//!
//! Who may call it: the token client (`delegated`), which does the HTTP and hands over the
//! status, the `Content-Type` and the body it read; this module does no I/O. The body buffer is
//! the caller's: it holds the tokens too, so the caller wipes it.
#![cfg_attr(
    not(any(test, fuzzing)),
    expect(dead_code, reason = "issue 37: the token client calls it next")
)]

use std::fmt;
use std::ops::RangeInclusive;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use url::Url;
use zeroize::Zeroizing;

use super::grants::RefreshToken;

/// The largest token or device-authorization answer read. Real ones stay under 16 KiB, a
/// Microsoft answer with a large access token and an ID token included.
pub(crate) const MAX_BODY_BYTES: usize = 64 * 1024;
/// The largest discovery document read (the resource server's metadata cap,
/// `transport::http::oauth::keys`).
pub(crate) const MAX_DISCOVERY_BYTES: usize = 256 * 1024;
/// The longest access, refresh or ID token accepted (real ones are 0.2 to 8 KiB).
pub(crate) const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// The longest device code accepted.
pub(crate) const MAX_DEVICE_CODE_BYTES: usize = 4 * 1024;
/// The longest user code accepted: the operator types it (real ones are 8 to 12 characters).
pub(crate) const MAX_USER_CODE_BYTES: usize = 64;
/// The longest URI accepted from a server.
pub(crate) const MAX_URI_BYTES: usize = 2 * 1024;
/// The longest `scope` value accepted.
pub(crate) const MAX_SCOPE_BYTES: usize = 4 * 1024;
/// The longest error code accepted (the RFCs' own are at most 22 characters).
pub(crate) const MAX_ERROR_CODE_BYTES: usize = 128;
/// What is kept of an `error_description`, in characters.
pub(crate) const MAX_DESCRIPTION_CHARS: usize = 512;
/// A device authorization's `expires_in` bound (Microsoft says 900, Google 1,800).
pub(crate) const MAX_DEVICE_LIFETIME_SECS: u64 = 86_400;
/// The polling interval when the server names none (RFC 8628 §3.2).
pub(crate) const DEFAULT_INTERVAL_SECS: u64 = 5;
/// The longest polling interval accepted.
pub(crate) const MAX_INTERVAL_SECS: u64 = 300;
/// An access token's `expires_in` bound: two days (real ones live one hour or so).
pub(crate) const MAX_TOKEN_LIFETIME_SECS: u64 = 2 * 86_400;
/// The lifetime assumed when a grant states none (RFC 6749 §5.1 makes it optional); the grant
/// says so ([`Grant::lifetime_assumed`]), and a token refused earlier is simply refreshed.
pub(crate) const ASSUMED_TOKEN_LIFETIME_SECS: u64 = 3_600;

/// Why an answer was refused: a rule, never a value from the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum WireError {
    #[error("the authorization server answered with HTTP status {0}")]
    UnexpectedStatus(u16),
    #[error("the authorization server's answer is not labelled application/json")]
    NotJson,
    #[error("the authorization server's answer is too large")]
    TooLarge,
    #[error("the authorization server's answer is malformed: {0}")]
    Malformed(&'static str),
    #[error("the authorization server's {0} is not a valid URL")]
    BadUrl(&'static str),
    #[error("the authorization server's {0} is not https (or http on loopback)")]
    Insecure(&'static str),
    #[error("the discovery document names another issuer")]
    IssuerMismatch,
}

/// A secret string from the server: wiped from memory on drop, never printed, not `Clone`
/// (a copy cannot outlive its use by accident). Only this module builds one, from a checked
/// value.
macro_rules! secret {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        pub(crate) struct $name(Zeroizing<String>);

        impl $name {
            /// The value itself, for the request or the operator's screen that needs it.
            pub(crate) fn expose(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(concat!(stringify!($name), "(<redacted>)"))
            }
        }
    };
}

secret!(
    /// An access token: what the backend sends as `Bearer` (Graph) or in XOAUTH2/OAUTHBEARER.
    AccessToken
);
secret!(
    /// An ID token, kept opaque: its JWT checks (signature, `aud`, the account) come with the
    /// sign-in's account binding.
    IdToken
);
#[cfg(test)]
impl IdToken {
    /// An ID token made by a test (the parser is the only other constructor).
    pub(crate) fn for_tests(value: String) -> Self {
        Self(Zeroizing::new(value))
    }
}

secret!(
    /// A device code: whoever holds it can poll for the operator's tokens (RFC 8628 §5.2).
    DeviceCode
);
secret!(
    /// The code the operator types at the verification URI; shown to the operator only.
    UserCode
);

/// What the token endpoint said.
#[derive(Debug)]
#[must_use]
pub(crate) enum TokenOutcome {
    Granted(Grant),
    Refused(Refusal),
}

/// A token endpoint success (RFC 6749 §5.1). The type was `Bearer`, so it is not kept.
#[derive(Debug)]
pub(crate) struct Grant {
    pub(crate) access_token: AccessToken,
    /// In `1..=MAX_TOKEN_LIFETIME_SECS`.
    pub(crate) expires_in_secs: u64,
    /// The server stated no `expires_in`; `expires_in_secs` is [`ASSUMED_TOKEN_LIFETIME_SECS`].
    pub(crate) lifetime_assumed: bool,
    /// Absent: the refresh token in use stays valid (RFC 6749 §6). Present on a refresh: it
    /// replaces the old one (rotation).
    pub(crate) refresh_token: Option<RefreshToken>,
    /// The granted scopes, when the server names them (absent: as requested, RFC 6749 §5.1).
    pub(crate) scope: Option<Vec<String>>,
    pub(crate) id_token: Option<IdToken>,
}

/// A token or device endpoint error object (RFC 6749 §5.2, RFC 8628 §3.5).
#[derive(Debug)]
pub(crate) struct Refusal {
    pub(crate) code: ErrorCode,
    /// For the operator only (see [`Description`]).
    pub(crate) description: Option<Description>,
}

/// The `error` of an error object. Codes compare exactly, as the RFCs spell them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ErrorCode {
    /// The operator has not finished signing in yet: poll again after the interval.
    AuthorizationPending,
    /// Poll again, 5 seconds slower (RFC 8628 §3.5).
    SlowDown,
    /// The device code expired before the operator signed in.
    ExpiredToken,
    /// The operator declined.
    AccessDenied,
    /// The code or refresh token is invalid, expired or revoked: the caller answers
    /// `AUTH_REQUIRED`.
    InvalidGrant,
    InvalidClient,
    InvalidScope,
    UnauthorizedClient,
    UnsupportedGrantType,
    InvalidRequest,
    /// Any other code, in the RFC's charset (`%x20-21 / %x23-5B / %x5D-7E`) and bounded.
    Other(String),
}

impl ErrorCode {
    const KNOWN: [(&'static str, ErrorCode); 10] = [
        ("authorization_pending", ErrorCode::AuthorizationPending),
        ("slow_down", ErrorCode::SlowDown),
        ("expired_token", ErrorCode::ExpiredToken),
        ("access_denied", ErrorCode::AccessDenied),
        ("invalid_grant", ErrorCode::InvalidGrant),
        ("invalid_client", ErrorCode::InvalidClient),
        ("invalid_scope", ErrorCode::InvalidScope),
        ("unauthorized_client", ErrorCode::UnauthorizedClient),
        ("unsupported_grant_type", ErrorCode::UnsupportedGrantType),
        ("invalid_request", ErrorCode::InvalidRequest),
    ];

    fn parse(raw: String) -> Result<ErrorCode, WireError> {
        if let Some((_, code)) = Self::KNOWN.iter().find(|(name, _)| *name == raw) {
            return Ok(code.clone());
        }
        if raw.is_empty() || raw.len() > MAX_ERROR_CODE_BYTES || !raw.bytes().all(is_error_char) {
            return Err(WireError::Malformed(
                "error is not a bounded code in the RFC's charset",
            ));
        }
        Ok(ErrorCode::Other(raw))
    }

    /// The code as the server spelled it (for the operator's message and the logs).
    pub(crate) fn as_str(&self) -> &str {
        match self {
            ErrorCode::Other(code) => code,
            known => Self::KNOWN
                .iter()
                .find(|(_, code)| code == known)
                .map_or("", |(name, _)| name),
        }
    }
}

/// A server's `error_description`, for the operator only: at most [`MAX_DESCRIPTION_CHARS`]
/// characters, with every control or bidirectional-formatting character replaced by a space (so
/// it cannot forge log lines or reorder a terminal's text). It can echo the request (codes,
/// client ids), so `Debug` prints only its length and it never reaches the model.
pub(crate) struct Description(String);

impl Description {
    /// `None` when nothing printable is left. Replaced rather than refused: Microsoft puts
    /// CR LF between its trace and correlation ids, and the error code must survive.
    fn sanitize(raw: &str) -> Option<Description> {
        let clean: String = raw
            .chars()
            .map(|c| if is_hidden(c) { ' ' } else { c })
            .take(MAX_DESCRIPTION_CHARS)
            .collect();
        let trimmed = clean.trim();
        (!trimmed.is_empty()).then(|| Description(trimmed.to_owned()))
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Description {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Description(<{} characters>)", self.0.chars().count())
    }
}

/// What the device authorization endpoint said.
#[derive(Debug)]
#[must_use]
pub(crate) enum DeviceOutcome {
    Started(DeviceAuthorization),
    Refused(Refusal),
}

/// A device authorization (RFC 8628 §3.2): what `mailgate auth login` shows, then polls with.
pub(crate) struct DeviceAuthorization {
    pub(crate) device_code: DeviceCode,
    pub(crate) user_code: UserCode,
    /// Google spells the key `verification_url`; both are read.
    pub(crate) verification_uri: Url,
    /// The URI with the user code in it (so `Debug` says only whether there is one).
    pub(crate) verification_uri_complete: Option<Url>,
    /// In `1..=MAX_DEVICE_LIFETIME_SECS`.
    pub(crate) expires_in_secs: u64,
    /// In `1..=MAX_INTERVAL_SECS`; [`DEFAULT_INTERVAL_SECS`] when the server names none.
    pub(crate) interval_secs: u64,
}

impl fmt::Debug for DeviceAuthorization {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceAuthorization")
            .field("device_code", &self.device_code)
            .field("user_code", &self.user_code)
            .field("verification_uri", &self.verification_uri.as_str())
            .field(
                "verification_uri_complete",
                &self
                    .verification_uri_complete
                    .as_ref()
                    .map(|_| "<redacted>"),
            )
            .field("expires_in_secs", &self.expires_in_secs)
            .field("interval_secs", &self.interval_secs)
            .finish()
    }
}

/// The endpoints of an OIDC provider's discovery document whose issuer is the configured one.
#[derive(Debug)]
pub(crate) struct Discovery {
    pub(crate) authorization_endpoint: Url,
    pub(crate) token_endpoint: Url,
    pub(crate) device_authorization_endpoint: Option<Url>,
    pub(crate) revocation_endpoint: Option<Url>,
    pub(crate) jwks_uri: Option<Url>,
}

/// The token endpoint's answer (a grant, a refresh, a device-code poll) as a typed outcome.
pub(crate) fn parse_token_response(
    status: u16,
    content_type: Option<&str>,
    body: &[u8],
) -> Result<TokenOutcome, WireError> {
    let success = is_success(status)?;
    check_body(content_type, body, MAX_BODY_BYTES)?;
    Ok(if success {
        TokenOutcome::Granted(grant(body)?)
    } else {
        TokenOutcome::Refused(refusal(body)?)
    })
}

/// The device authorization endpoint's answer as a typed outcome.
pub(crate) fn parse_device_response(
    status: u16,
    content_type: Option<&str>,
    body: &[u8],
) -> Result<DeviceOutcome, WireError> {
    let success = is_success(status)?;
    check_body(content_type, body, MAX_BODY_BYTES)?;
    Ok(if success {
        DeviceOutcome::Started(device(body)?)
    } else {
        DeviceOutcome::Refused(refusal(body)?)
    })
}

/// An OIDC discovery document fetched for `issuer` (the configured one): only a 200 is one, and
/// its `issuer` must equal `issuer` exactly (Discovery §4.3: no normalisation, so a document
/// served for another issuer, or a look-alike spelling, is refused).
pub(crate) fn parse_discovery(
    status: u16,
    content_type: Option<&str>,
    body: &[u8],
    issuer: &str,
) -> Result<Discovery, WireError> {
    if status != 200 {
        return Err(WireError::UnexpectedStatus(status));
    }
    check_body(content_type, body, MAX_DISCOVERY_BYTES)?;
    let raw: RawDiscovery = object(body, "not a discovery document")?;
    match raw.issuer.as_deref() {
        None => return Err(WireError::Malformed("issuer is missing")),
        Some(named) if named != issuer => return Err(WireError::IssuerMismatch),
        Some(_) => {}
    }
    let required = |raw: Option<String>, field: &'static str| match raw {
        Some(raw) => secure_url(&raw, field),
        None => Err(WireError::BadUrl(field)),
    };
    let optional = |raw: Option<String>, field: &'static str| {
        raw.map(|raw| secure_url(&raw, field)).transpose()
    };
    Ok(Discovery {
        authorization_endpoint: required(raw.authorization_endpoint, "authorization_endpoint")?,
        token_endpoint: required(raw.token_endpoint, "token_endpoint")?,
        device_authorization_endpoint: optional(
            raw.device_authorization_endpoint,
            "device_authorization_endpoint",
        )?,
        revocation_endpoint: optional(raw.revocation_endpoint, "revocation_endpoint")?,
        jwks_uri: optional(raw.jwks_uri, "jwks_uri")?,
    })
}

// ----------------------------------------------------------------------------------------------
// The serde mirrors: every field optional, so a missing one gets its own rule; unknown members
// (Microsoft's `ext_expires_in` and `message`, Google's `refresh_token_expires_in`) are ignored.
// A repeated member is refused by serde. No `Debug`: they hold the secrets unwrapped.
// ----------------------------------------------------------------------------------------------

#[derive(Deserialize)]
struct RawGrant {
    #[serde(default, deserialize_with = "wiped")]
    access_token: Option<Zeroizing<String>>,
    token_type: Option<String>,
    expires_in: Option<RawSeconds>,
    #[serde(default, deserialize_with = "wiped")]
    refresh_token: Option<Zeroizing<String>>,
    scope: Option<String>,
    #[serde(default, deserialize_with = "wiped")]
    id_token: Option<Zeroizing<String>>,
}

#[derive(Deserialize)]
struct RawRefusal {
    error: Option<String>,
    error_description: Option<String>,
}

#[derive(Deserialize)]
struct RawDevice {
    #[serde(default, deserialize_with = "wiped")]
    device_code: Option<Zeroizing<String>>,
    #[serde(default, deserialize_with = "wiped")]
    user_code: Option<Zeroizing<String>>,
    // Google's spelling; both at once is a repeated member, refused.
    #[serde(alias = "verification_url")]
    verification_uri: Option<String>,
    verification_uri_complete: Option<String>,
    expires_in: Option<RawSeconds>,
    interval: Option<RawSeconds>,
}

#[derive(Deserialize)]
struct RawDiscovery {
    issuer: Option<String>,
    authorization_endpoint: Option<String>,
    token_endpoint: Option<String>,
    device_authorization_endpoint: Option<String>,
    revocation_endpoint: Option<String>,
    jwks_uri: Option<String>,
}

/// A secret member, wrapped as soon as serde has it, so it is wiped however the parse ends.
fn wiped<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Zeroizing<String>>, D::Error> {
    Ok(Option::<String>::deserialize(d)?.map(Zeroizing::new))
}

/// A number of seconds: a JSON number, or a string of digits (Microsoft's v1 endpoints send
/// `"expires_in": "3599"`).
#[derive(Deserialize)]
#[serde(untagged)]
enum RawSeconds {
    Number(serde_json::Number),
    Text(String),
}

impl RawSeconds {
    fn within(&self, range: RangeInclusive<u64>, rule: &'static str) -> Result<u64, WireError> {
        let value = match self {
            RawSeconds::Number(n) => n.as_u64(),
            // Digits only: `u64::from_str` would also take a leading `+`.
            RawSeconds::Text(t) if (1..=10).contains(&t.len()) => t
                .bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| t.parse().ok())
                .flatten(),
            RawSeconds::Text(_) => None,
        };
        value
            .filter(|v| range.contains(v))
            .ok_or(WireError::Malformed(rule))
    }
}

fn grant(body: &[u8]) -> Result<Grant, WireError> {
    let raw: RawGrant = object(body, "not a token response")?;
    let access_token = token(
        raw.access_token
            .ok_or(WireError::Malformed("access_token is missing"))?,
        "access_token is not a bounded visible-ASCII string",
    )?;
    match raw.token_type {
        None => return Err(WireError::Malformed("token_type is missing")),
        Some(t) if !t.eq_ignore_ascii_case("bearer") => {
            return Err(WireError::Malformed("token_type is not Bearer"));
        }
        Some(_) => {}
    }
    let (expires_in_secs, lifetime_assumed) = match raw.expires_in {
        None => (ASSUMED_TOKEN_LIFETIME_SECS, true),
        Some(raw) => (
            raw.within(
                1..=MAX_TOKEN_LIFETIME_SECS,
                "expires_in is not 1 to 172,800 seconds",
            )?,
            false,
        ),
    };
    let refresh_token = raw
        .refresh_token
        .map(|t| token(t, "refresh_token is not a bounded visible-ASCII string"))
        .transpose()?
        // The grant store's own type: moved, not copied, out of its wiping wrapper.
        .map(|mut t| RefreshToken::new(std::mem::take(&mut *t)));
    let id_token = raw
        .id_token
        .map(|t| token(t, "id_token is not a bounded visible-ASCII string"))
        .transpose()?;
    Ok(Grant {
        access_token: AccessToken(access_token),
        expires_in_secs,
        lifetime_assumed,
        refresh_token,
        scope: raw.scope.map(|s| scopes(&s)).transpose()?,
        id_token: id_token.map(IdToken),
    })
}

/// A token: non-empty, at most [`MAX_TOKEN_BYTES`], visible ASCII (`%x21-7E`). RFC 6749
/// allows spaces in a token (VSCHAR); no provider sends one, and a token goes into an HTTP
/// header and a SASL string, where a space or a control character would be a splice.
fn token(raw: Zeroizing<String>, bad: &'static str) -> Result<Zeroizing<String>, WireError> {
    if raw.is_empty() || raw.len() > MAX_TOKEN_BYTES || !raw.bytes().all(is_visible) {
        return Err(WireError::Malformed(bad));
    }
    Ok(raw)
}

/// `scope`: space-separated scope tokens (RFC 6749 §3.3: `%x21 / %x23-5B / %x5D-7E`).
fn scopes(raw: &str) -> Result<Vec<String>, WireError> {
    if raw.len() > MAX_SCOPE_BYTES || !raw.bytes().all(|b| b == b' ' || is_scope_char(b)) {
        return Err(WireError::Malformed(
            "scope is not bounded space-separated scope tokens",
        ));
    }
    Ok(raw
        .split(' ')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect())
}

fn refusal(body: &[u8]) -> Result<Refusal, WireError> {
    let raw: RawRefusal = object(body, "not an error object")?;
    let code = ErrorCode::parse(raw.error.ok_or(WireError::Malformed("error is missing"))?)?;
    Ok(Refusal {
        code,
        description: raw
            .error_description
            .as_deref()
            .and_then(Description::sanitize),
    })
}

fn device(body: &[u8]) -> Result<DeviceAuthorization, WireError> {
    let raw: RawDevice = object(body, "not a device authorization")?;
    let device_code = raw
        .device_code
        .ok_or(WireError::Malformed("device_code is missing"))?;
    if device_code.is_empty()
        || device_code.len() > MAX_DEVICE_CODE_BYTES
        || !device_code.bytes().all(is_visible)
    {
        return Err(WireError::Malformed(
            "device_code is not a bounded visible-ASCII string",
        ));
    }
    // The operator reads and types it: printable ASCII (no escape sequence, no look-alike
    // letter), spaces only inside.
    let user_code = raw
        .user_code
        .ok_or(WireError::Malformed("user_code is missing"))?;
    if user_code.is_empty()
        || user_code.len() > MAX_USER_CODE_BYTES
        || !user_code.bytes().all(|b| b == b' ' || is_visible(b))
        || user_code.trim() != user_code.as_str()
    {
        return Err(WireError::Malformed(
            "user_code is not a bounded printable-ASCII string",
        ));
    }
    let verification_uri = match raw.verification_uri {
        Some(raw) => secure_url(&raw, "verification_uri")?,
        None => return Err(WireError::BadUrl("verification_uri")),
    };
    let verification_uri_complete = raw
        .verification_uri_complete
        .map(|raw| secure_url(&raw, "verification_uri_complete"))
        .transpose()?;
    let expires_in_secs = raw
        .expires_in
        .ok_or(WireError::Malformed("expires_in is missing"))?
        .within(
            1..=MAX_DEVICE_LIFETIME_SECS,
            "expires_in is not 1 to 86,400 seconds",
        )?;
    let interval_secs = match raw.interval {
        None => DEFAULT_INTERVAL_SECS,
        Some(raw) => raw.within(1..=MAX_INTERVAL_SECS, "interval is not 1 to 300 seconds")?,
    };
    Ok(DeviceAuthorization {
        device_code: DeviceCode(device_code),
        user_code: UserCode(user_code),
        verification_uri,
        verification_uri_complete,
        expires_in_secs,
        interval_secs,
    })
}

/// 200 is a success, 400 and 401 an error object (RFC 6749 §5.2: 401 for a failed client
/// authentication), anything else (a redirect, a 5xx page, a 429) no answer at all.
fn is_success(status: u16) -> Result<bool, WireError> {
    match status {
        200 => Ok(true),
        400 | 401 => Ok(false),
        other => Err(WireError::UnexpectedStatus(other)),
    }
}

/// The checks before any parsing: the size cap, then the media type (`application/json`,
/// parameters such as `charset` ignored: JSON is UTF-8, and serde refuses anything else).
fn check_body(content_type: Option<&str>, body: &[u8], cap: usize) -> Result<(), WireError> {
    if body.len() > cap {
        return Err(WireError::TooLarge);
    }
    let essence =
        content_type.map(|ct| ct.split_once(';').map_or(ct, |(essence, _)| essence).trim());
    if !essence.is_some_and(|e| e.eq_ignore_ascii_case("application/json")) {
        return Err(WireError::NotJson);
    }
    Ok(())
}

/// `body` as `T`, which must be a JSON object: serde would also fill a struct from an array,
/// positionally.
fn object<T: DeserializeOwned>(body: &[u8], rule: &'static str) -> Result<T, WireError> {
    if body.trim_ascii_start().first() != Some(&b'{') {
        return Err(WireError::Malformed(rule));
    }
    // serde's error quotes the offending input (a token, perhaps): dropped unread.
    serde_json::from_slice(body).map_err(|_| WireError::Malformed(rule))
}

/// A URL a server names: printable ASCII without spaces (a URL is shown to the operator, and
/// `Url::parse` would silently drop tabs and newlines), bounded, https or http on a loopback
/// host (the tests' provider), no userinfo (`https://login.example.com@evil.example/` reads as
/// the wrong host) and no fragment (RFC 8414 §2 forbids one in an endpoint).
fn secure_url(raw: &str, field: &'static str) -> Result<Url, WireError> {
    if raw.is_empty() || raw.len() > MAX_URI_BYTES || !raw.bytes().all(is_visible) {
        return Err(WireError::BadUrl(field));
    }
    let url = Url::parse(raw).map_err(|_| WireError::BadUrl(field))?;
    let loopback = match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => return Err(WireError::BadUrl(field)),
    };
    match url.scheme() {
        "https" => {}
        "http" if loopback => {}
        _ => return Err(WireError::Insecure(field)),
    }
    if !url.username().is_empty() || url.password().is_some() || url.fragment().is_some() {
        return Err(WireError::BadUrl(field));
    }
    Ok(url)
}

/// Visible ASCII, `%x21-7E`.
fn is_visible(b: u8) -> bool {
    (0x21..=0x7e).contains(&b)
}

/// RFC 6749 Appendix A.7's `error` charset: `%x20-21 / %x23-5B / %x5D-7E`.
fn is_error_char(b: u8) -> bool {
    matches!(b, 0x20..=0x21 | 0x23..=0x5b | 0x5d..=0x7e)
}

/// RFC 6749 §3.3's scope-token charset: `%x21 / %x23-5B / %x5D-7E`.
fn is_scope_char(b: u8) -> bool {
    matches!(b, 0x21 | 0x23..=0x5b | 0x5d..=0x7e)
}

/// A character a description must not carry: controls (C0, DEL, C1) and the bidirectional
/// marks, embeddings, overrides and isolates.
fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

// ----------------------------------------------------------------------------------------------
// The fuzz oracle
// ----------------------------------------------------------------------------------------------

/// The statuses the first byte's bits 2 to 4 pick from.
#[cfg(any(test, fuzzing))]
const FUZZ_STATUSES: [u16; 8] = [200, 400, 401, 500, 200, 403, 302, 429];
/// The content types its bits 5 and 6 pick from.
#[cfg(any(test, fuzzing))]
const FUZZ_CONTENT_TYPES: [Option<&str>; 4] = [
    None,
    Some("text/html; charset=utf-8"),
    Some("application/json"),
    Some("application/json; charset=utf-8"),
];
/// The issuer the discovery parser is given.
#[cfg(any(test, fuzzing))]
const FUZZ_ISSUER: &str = "https://id.example.com/tenant-7";

/// Bytes → one of the three parsers. The first byte picks it (bits 0 and 1: 1 the device
/// parser, 2 discovery, 0 and 3 the token parser), the status (bits 2 to 4, from
/// [`FUZZ_STATUSES`]) and the content type (bits 5 and 6); the rest is the body.
///
/// Oracles, beyond "no panic": the parse is deterministic; an outcome means a status that
/// allows it; an accepted grant's access token is non-empty, bounded and visible ASCII, is the
/// body's `access_token` exactly, its `token_type` is `Bearer` in some case, its lifetime is in
/// bounds (the assumed one exactly when the body has none) and its scopes are scope tokens; an
/// accepted device authorization's URIs are https or loopback http and its codes and times in
/// bounds; a discovery document's every URL is https or loopback http; a refusal's description
/// has no control character and at most its bound; and no accepted outcome's `Debug` depends on
/// a secret's value (see [`check_redaction`]), so none shows one of 8 characters or more.
#[cfg(any(test, fuzzing))]
pub(crate) fn fuzz(data: &[u8]) {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let status = FUZZ_STATUSES[usize::from((selector >> 2) & 7)];
    let content_type = FUZZ_CONTENT_TYPES[usize::from((selector >> 5) & 3)];
    match selector & 3 {
        1 => fuzz_device(status, content_type, body),
        2 => fuzz_discovery(status, content_type, body),
        _ => fuzz_token(status, content_type, body),
    }
}

/// Debug plus every secret: equal for equal parses.
#[cfg(any(test, fuzzing))]
fn token_fingerprint(parsed: &Result<TokenOutcome, WireError>) -> String {
    let mut out = format!("{parsed:?}");
    if let Ok(TokenOutcome::Granted(g)) = parsed {
        out.push_str(g.access_token.expose());
        out.push_str(g.refresh_token.as_ref().map_or("-", RefreshToken::expose));
        out.push_str(g.id_token.as_ref().map_or("-", IdToken::expose));
    }
    if let Ok(TokenOutcome::Refused(r)) = parsed {
        out.push_str(r.description.as_ref().map_or("-", Description::as_str));
    }
    out
}

#[cfg(any(test, fuzzing))]
fn fuzz_token(status: u16, content_type: Option<&str>, body: &[u8]) {
    let parsed = parse_token_response(status, content_type, body);
    let again = parse_token_response(status, content_type, body);
    assert_eq!(
        token_fingerprint(&parsed),
        token_fingerprint(&again),
        "oracle: deterministic"
    );
    check_status(status, &parsed);
    match &parsed {
        Ok(outcome @ TokenOutcome::Granted(grant)) => {
            let token = grant.access_token.expose();
            assert!(
                !token.is_empty() && token.len() <= MAX_TOKEN_BYTES,
                "oracle: token bound"
            );
            assert!(token.bytes().all(is_visible), "oracle: visible ASCII");
            #[derive(Deserialize)]
            struct Plain {
                access_token: String,
                token_type: String,
                expires_in: Option<serde_json::Value>,
            }
            let plain: Plain =
                serde_json::from_slice(body).expect("oracle: an accepted grant reads plainly");
            assert_eq!(plain.access_token, token, "oracle: the token round-trips");
            assert!(
                plain.token_type.eq_ignore_ascii_case("Bearer"),
                "oracle: Bearer"
            );
            assert!(
                (1..=MAX_TOKEN_LIFETIME_SECS).contains(&grant.expires_in_secs),
                "oracle: lifetime bound"
            );
            assert_eq!(
                grant.lifetime_assumed,
                plain.expires_in.is_none_or(|v| v.is_null()),
                "oracle: assumed exactly when absent"
            );
            if grant.lifetime_assumed {
                assert_eq!(grant.expires_in_secs, ASSUMED_TOKEN_LIFETIME_SECS);
            }
            for scope in grant.scope.iter().flatten() {
                assert!(
                    !scope.is_empty() && scope.bytes().all(is_scope_char),
                    "oracle: a scope token"
                );
            }
            let secrets = [
                ("access_token", Some(token)),
                (
                    "refresh_token",
                    grant.refresh_token.as_ref().map(RefreshToken::expose),
                ),
                ("id_token", grant.id_token.as_ref().map(IdToken::expose)),
            ];
            check_redaction(outcome, &secrets, body, |bytes| {
                parse_token_response(status, content_type, bytes).map(|o| format!("{o:?}"))
            });
        }
        Ok(TokenOutcome::Refused(refusal)) => check_refusal(refusal),
        Err(_) => {}
    }
}

#[cfg(any(test, fuzzing))]
fn fuzz_device(status: u16, content_type: Option<&str>, body: &[u8]) {
    let fingerprint = |parsed: &Result<DeviceOutcome, WireError>| {
        let mut out = format!("{parsed:?}");
        if let Ok(DeviceOutcome::Started(d)) = parsed {
            out.push_str(d.device_code.expose());
            out.push_str(d.user_code.expose());
            out.push_str(
                d.verification_uri_complete
                    .as_ref()
                    .map_or("-", Url::as_str),
            );
        }
        out
    };
    let parsed = parse_device_response(status, content_type, body);
    let again = parse_device_response(status, content_type, body);
    assert_eq!(
        fingerprint(&parsed),
        fingerprint(&again),
        "oracle: deterministic"
    );
    check_status(status, &parsed);
    match &parsed {
        Ok(outcome @ DeviceOutcome::Started(device)) => {
            for url in std::iter::once(&device.verification_uri)
                .chain(device.verification_uri_complete.as_ref())
            {
                check_url(url);
            }
            let device_code = device.device_code.expose();
            let user_code = device.user_code.expose();
            assert!(!device_code.is_empty() && device_code.len() <= MAX_DEVICE_CODE_BYTES);
            assert!(!user_code.is_empty() && user_code.len() <= MAX_USER_CODE_BYTES);
            assert!(
                user_code.bytes().all(|b| (0x20..=0x7e).contains(&b)),
                "oracle: a printable user code"
            );
            assert!((1..=MAX_DEVICE_LIFETIME_SECS).contains(&device.expires_in_secs));
            assert!((1..=MAX_INTERVAL_SECS).contains(&device.interval_secs));
            let secrets = [
                ("device_code", Some(device_code)),
                ("user_code", Some(user_code)),
            ];
            check_redaction(outcome, &secrets, body, |bytes| {
                parse_device_response(status, content_type, bytes).map(|o| format!("{o:?}"))
            });
        }
        Ok(DeviceOutcome::Refused(refusal)) => check_refusal(refusal),
        Err(_) => {}
    }
}

#[cfg(any(test, fuzzing))]
fn fuzz_discovery(status: u16, content_type: Option<&str>, body: &[u8]) {
    let parsed = parse_discovery(status, content_type, body, FUZZ_ISSUER);
    let again = parse_discovery(status, content_type, body, FUZZ_ISSUER);
    assert_eq!(
        format!("{parsed:?}"),
        format!("{again:?}"),
        "oracle: deterministic"
    );
    let Ok(found) = parsed else {
        return;
    };
    assert_eq!(status, 200, "oracle: a document only from a 200");
    // A plain mirror, not `serde_json::Value`: an ignored member is only skipped, so a number
    // past f64 or a lone surrogate there is valid input that a `Value` would refuse.
    #[derive(Deserialize)]
    struct Plain {
        issuer: String,
    }
    let plain: Plain =
        serde_json::from_slice(body).expect("oracle: an accepted document reads plainly");
    assert_eq!(
        plain.issuer, FUZZ_ISSUER,
        "oracle: the configured issuer exactly"
    );
    for url in [&found.authorization_endpoint, &found.token_endpoint]
        .into_iter()
        .chain(&found.device_authorization_endpoint)
        .chain(&found.revocation_endpoint)
        .chain(&found.jwks_uri)
    {
        check_url(url);
    }
}

/// An outcome only for the statuses that have one; an unexpected status is named as it was.
#[cfg(any(test, fuzzing))]
fn check_status<T>(status: u16, parsed: &Result<T, WireError>) {
    match parsed {
        Ok(_) => assert!(matches!(status, 200 | 400 | 401), "oracle: status {status}"),
        Err(WireError::UnexpectedStatus(s)) => {
            assert_eq!(*s, status);
            assert!(
                !matches!(status, 200 | 400 | 401),
                "oracle: status {status}"
            );
        }
        Err(_) => assert!(matches!(status, 200 | 400 | 401), "oracle: status first"),
    }
}

#[cfg(any(test, fuzzing))]
fn check_url(url: &Url) {
    let loopback = match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    assert!(
        url.scheme() == "https" || url.scheme() == "http" && loopback,
        "oracle: {url} is not https or loopback http"
    );
    assert!(url.username().is_empty() && url.password().is_none() && url.fragment().is_none());
}

#[cfg(any(test, fuzzing))]
fn check_refusal(refusal: &Refusal) {
    let code = refusal.code.as_str();
    assert!(
        !code.is_empty() && code.len() <= MAX_ERROR_CODE_BYTES,
        "oracle: code bound"
    );
    assert!(code.bytes().all(is_error_char), "oracle: code charset");
    if let Some(description) = &refusal.description {
        let text = description.as_str();
        assert!(
            !text.is_empty() && text.chars().count() <= MAX_DESCRIPTION_CHARS,
            "oracle: description bound"
        );
        assert!(
            !text.chars().any(is_hidden),
            "oracle: a hidden character in the description"
        );
    }
}

/// `Debug` of an accepted outcome never shows a secret: the body with each secret replaced by
/// another of its length (all `x`, or all `y` when it was all `x`) must parse to the same
/// rendering, so a secret's text can appear in it only where the body also put that text in a
/// member printed by design (a scope, a URI). That is the "a secret of 8 characters or more never
/// shows" rule without its false alarms; a body serde_json's `Value` refuses gets the direct
/// substring check instead.
#[cfg(any(test, fuzzing))]
fn check_redaction<T: fmt::Debug>(
    parsed: &T,
    secrets: &[(&str, Option<&str>)],
    body: &[u8],
    reparse: impl Fn(&[u8]) -> Result<String, WireError>,
) {
    let rendered = format!("{parsed:?}");
    // serde_json skips, unchecked, the \u escapes of members it ignores: a body serde_json's
    // own `Value` refuses has no swapped twin, and only the direct check applies.
    let Ok(serde_json::Value::Object(mut twin)) = serde_json::from_slice(body) else {
        for (_, secret) in secrets {
            if let Some(secret) = secret.filter(|s| s.len() >= 8) {
                assert!(!rendered.contains(secret), "oracle: a secret in Debug");
            }
        }
        return;
    };
    for (key, secret) in secrets {
        if let Some(secret) = secret {
            let filler = if secret.bytes().all(|b| b == b'x') {
                "y"
            } else {
                "x"
            };
            twin.insert((*key).to_owned(), filler.repeat(secret.len()).into());
        }
    }
    let twin_bytes = serde_json::to_vec(&twin).expect("invariant: a Value serializes");
    match reparse(&twin_bytes) {
        Ok(twin_rendered) => {
            assert_eq!(rendered, twin_rendered, "oracle: Debug depends on a secret");
        }
        // Re-serialising can lengthen the body (`1e2` becomes `100.0`) past the cap.
        Err(WireError::TooLarge) => {}
        Err(e) => panic!("oracle: the twin with other secrets is refused: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JSON: Option<&str> = Some("application/json; charset=utf-8");
    const TOKEN: &str = "EwBYA8l6BAAUexampleAccessToken0123";
    const REFRESH: &str = "M.C500_BAY.0.U.-ExampleRefresh!*$";

    fn token_body(extra: &str) -> String {
        format!(r#"{{"access_token":"{TOKEN}","token_type":"Bearer"{extra}}}"#)
    }

    fn granted(body: &str) -> Grant {
        match parse_token_response(200, JSON, body.as_bytes()) {
            Ok(TokenOutcome::Granted(grant)) => grant,
            other => panic!("{body}: {other:?}"),
        }
    }

    fn token_error(status: u16, body: &str) -> WireError {
        match parse_token_response(status, JSON, body.as_bytes()) {
            Err(e) => e,
            Ok(other) => panic!("{body}: accepted as {other:?}"),
        }
    }

    fn refused(status: u16, body: &str) -> Refusal {
        match parse_token_response(status, JSON, body.as_bytes()) {
            Ok(TokenOutcome::Refused(refusal)) => refusal,
            other => panic!("{body}: {other:?}"),
        }
    }

    fn started(body: &str) -> DeviceAuthorization {
        match parse_device_response(200, JSON, body.as_bytes()) {
            Ok(DeviceOutcome::Started(device)) => device,
            other => panic!("{body}: {other:?}"),
        }
    }

    fn device_error(body: &str) -> WireError {
        match parse_device_response(200, JSON, body.as_bytes()) {
            Err(e) => e,
            Ok(other) => panic!("{body}: accepted as {other:?}"),
        }
    }

    fn device_body(fields: &[(&str, &str)]) -> String {
        let mut members = vec![
            ("device_code", r#""DAQABAAEAAAExampleDeviceCode""#),
            ("user_code", r#""ABCD2EFGH""#),
            (
                "verification_uri",
                r#""https://login.example.com/devicelogin""#,
            ),
            ("expires_in", "900"),
        ];
        for (key, value) in fields {
            members.retain(|(k, _)| k != key);
            if !value.is_empty() {
                members.push((key, value));
            }
        }
        let inner: Vec<String> = members
            .iter()
            .map(|(k, v)| format!(r#""{k}":{v}"#))
            .collect();
        format!("{{{}}}", inner.join(","))
    }

    #[test]
    fn a_microsoft_grant_with_string_lifetimes_is_read() {
        let grant = granted(&format!(
            r#"{{"token_type":"Bearer","scope":"https://graph.example.com/Mail.Read  openid email",
                "expires_in":"3599","ext_expires_in":"3599","access_token":"{TOKEN}",
                "refresh_token":"{REFRESH}","id_token":"eyJhbGciOiJub25lIn0.e30.c2ln"}}"#
        ));
        assert_eq!(grant.access_token.expose(), TOKEN);
        assert_eq!(grant.expires_in_secs, 3599);
        assert!(!grant.lifetime_assumed);
        assert_eq!(
            grant.refresh_token.as_ref().map(RefreshToken::expose),
            Some(REFRESH)
        );
        assert_eq!(
            grant.scope.as_deref(),
            Some(
                &[
                    "https://graph.example.com/Mail.Read".to_owned(),
                    "openid".to_owned(),
                    "email".to_owned()
                ][..]
            )
        );
        assert_eq!(
            grant.id_token.as_ref().map(IdToken::expose),
            Some("eyJhbGciOiJub25lIn0.e30.c2ln")
        );
    }

    #[test]
    fn token_type_must_be_bearer_in_any_case() {
        assert_eq!(granted(&token_body("")).expires_in_secs, 3600);
        let lower = format!(r#"{{"access_token":"{TOKEN}","token_type":"bEARER"}}"#);
        assert_eq!(granted(&lower).access_token.expose(), TOKEN);
        for bad in [r#""mac""#, r#""Bearer ""#, r#""""#, "1"] {
            let body = format!(r#"{{"access_token":"{TOKEN}","token_type":{bad}}}"#);
            let e = token_error(200, &body);
            assert!(
                matches!(
                    e,
                    WireError::Malformed("token_type is not Bearer" | "not a token response")
                ),
                "{bad}: {e:?}"
            );
        }
        assert_eq!(
            token_error(200, &format!(r#"{{"access_token":"{TOKEN}"}}"#)),
            WireError::Malformed("token_type is missing")
        );
    }

    #[test]
    fn the_access_token_is_bounded_visible_ascii() {
        let bad = WireError::Malformed("access_token is not a bounded visible-ASCII string");
        for token in ["", "a b", "a\\u0001b", "a\\r\\nHost: x", "caf\u{e9}"] {
            let body = format!(r#"{{"access_token":"{token}","token_type":"Bearer"}}"#);
            assert_eq!(token_error(200, &body), bad, "{token:?}");
        }
        let longest = "t".repeat(MAX_TOKEN_BYTES);
        let body = format!(r#"{{"access_token":"{longest}","token_type":"Bearer"}}"#);
        assert_eq!(granted(&body).access_token.expose(), longest);
        let body = format!(r#"{{"access_token":"{longest}t","token_type":"Bearer"}}"#);
        assert_eq!(token_error(200, &body), bad);
        assert_eq!(
            token_error(200, r#"{"token_type":"Bearer"}"#),
            WireError::Malformed("access_token is missing")
        );
        assert_eq!(
            token_error(200, r#"{"access_token":null,"token_type":"Bearer"}"#),
            WireError::Malformed("access_token is missing")
        );
    }

    #[test]
    fn expires_in_is_a_bounded_number_or_digit_string_and_assumed_when_absent() {
        for (raw, secs) in [
            ("1", 1),
            ("172800", 172_800),
            (r#""3599""#, 3599),
            (r#""0900""#, 900),
        ] {
            let grant = granted(&token_body(&format!(r#","expires_in":{raw}"#)));
            assert_eq!(grant.expires_in_secs, secs, "{raw}");
            assert!(!grant.lifetime_assumed);
        }
        for absent in ["", r#","expires_in":null"#] {
            let grant = granted(&token_body(absent));
            assert_eq!(grant.expires_in_secs, ASSUMED_TOKEN_LIFETIME_SECS);
            assert!(grant.lifetime_assumed, "{absent}");
        }
        for raw in [
            "0",
            "172801",
            "-1",
            "3599.5",
            "1e3",
            r#""""#,
            r#""+5""#,
            r#"" 5""#,
            r#""-1""#,
            r#""12345678901""#,
            r#""0x10""#,
            "18446744073709551616",
        ] {
            let body = token_body(&format!(r#","expires_in":{raw}"#));
            let e = token_error(200, &body);
            assert!(
                matches!(
                    e,
                    WireError::Malformed(
                        "expires_in is not 1 to 172,800 seconds" | "not a token response"
                    )
                ),
                "{raw}: {e:?}"
            );
        }
        for raw in ["true", "[]", "{}"] {
            let body = token_body(&format!(r#","expires_in":{raw}"#));
            assert_eq!(
                token_error(200, &body),
                WireError::Malformed("not a token response"),
                "{raw}"
            );
        }
    }

    #[test]
    fn refresh_and_id_tokens_are_checked_when_present() {
        let grant = granted(&token_body(""));
        assert!(grant.refresh_token.is_none() && grant.id_token.is_none() && grant.scope.is_none());
        assert_eq!(
            token_error(200, &token_body(r#","refresh_token":"""#)),
            WireError::Malformed("refresh_token is not a bounded visible-ASCII string")
        );
        assert_eq!(
            token_error(200, &token_body(",\"refresh_token\":\"a\nb\"")),
            WireError::Malformed("not a token response"),
            "a raw newline is not JSON"
        );
        assert_eq!(
            token_error(200, &token_body(r#","refresh_token":"a\nb""#)),
            WireError::Malformed("refresh_token is not a bounded visible-ASCII string")
        );
        assert_eq!(
            token_error(200, &token_body(r#","id_token":"a b""#)),
            WireError::Malformed("id_token is not a bounded visible-ASCII string")
        );
        let grant = granted(&token_body(
            r#","refresh_token":null,"id_token":"not.a.jwt""#,
        ));
        assert!(grant.refresh_token.is_none());
        assert_eq!(
            grant.id_token.as_ref().map(IdToken::expose),
            Some("not.a.jwt")
        );
    }

    #[test]
    fn scope_is_bounded_scope_tokens() {
        let grant = granted(&token_body(r#","scope":"""#));
        assert_eq!(grant.scope, Some(vec![]));
        let grant = granted(&token_body(
            r#","scope":" https://mail.example.org/  openid ""#,
        ));
        assert_eq!(
            grant.scope,
            Some(vec![
                "https://mail.example.org/".to_owned(),
                "openid".to_owned()
            ])
        );
        let bad = WireError::Malformed("scope is not bounded space-separated scope tokens");
        for scope in ["a\\\"b", "a\\\\b", "a\\tb", "caf\u{e9}", "a\\u0000"] {
            let body = token_body(&format!(r#","scope":"{scope}""#));
            assert_eq!(token_error(200, &body), bad, "{scope:?}");
        }
        let long = "s".repeat(MAX_SCOPE_BYTES + 1);
        assert_eq!(
            token_error(200, &token_body(&format!(r#","scope":"{long}""#))),
            bad
        );
    }

    #[test]
    fn only_a_json_object_without_repeated_members_is_read() {
        for body in [
            format!(r#"["{TOKEN}","Bearer",3600]"#),
            "null".to_owned(),
            String::new(),
            format!(r#"{{"access_token":"{TOKEN}","token_type":"Bearer","access_token":"x"}}"#),
            format!(r#"{{"access_token":"{TOKEN}","token_type":"Bearer""#),
            format!("\u{feff}{}", token_body("")),
        ] {
            assert_eq!(
                token_error(200, &body),
                WireError::Malformed("not a token response"),
                "{body}"
            );
        }
        // Leading whitespace is JSON; so are unknown members.
        granted(&format!(
            " \n{}",
            token_body(r#","foci":"1","ext":{"a":[1]}"#)
        ));
    }

    #[test]
    fn every_error_code_is_named() {
        let codes = [
            ("authorization_pending", ErrorCode::AuthorizationPending),
            ("slow_down", ErrorCode::SlowDown),
            ("expired_token", ErrorCode::ExpiredToken),
            ("access_denied", ErrorCode::AccessDenied),
            ("invalid_grant", ErrorCode::InvalidGrant),
            ("invalid_client", ErrorCode::InvalidClient),
            ("invalid_scope", ErrorCode::InvalidScope),
            ("unauthorized_client", ErrorCode::UnauthorizedClient),
            ("unsupported_grant_type", ErrorCode::UnsupportedGrantType),
            ("invalid_request", ErrorCode::InvalidRequest),
            ("server_error", ErrorCode::Other("server_error".to_owned())),
            (
                "Invalid_Grant",
                ErrorCode::Other("Invalid_Grant".to_owned()),
            ),
            ("a b!~", ErrorCode::Other("a b!~".to_owned())),
        ];
        for (name, code) in codes {
            for status in [400, 401] {
                let refusal = refused(status, &format!(r#"{{"error":"{name}"}}"#));
                assert_eq!(refusal.code, code);
                assert_eq!(refusal.code.as_str(), name);
                assert!(refusal.description.is_none());
            }
        }
        let bad = WireError::Malformed("error is not a bounded code in the RFC's charset");
        let long = "e".repeat(MAX_ERROR_CODE_BYTES + 1);
        for code in ["", "a\\\"b", "a\\\\b", "a\\nb", "caf\u{e9}", long.as_str()] {
            assert_eq!(
                token_error(400, &format!(r#"{{"error":"{code}"}}"#)),
                bad,
                "{code:?}"
            );
        }
        refused(400, &format!(r#"{{"error":"{}"}}"#, &long[1..]));
        assert_eq!(
            token_error(400, r#"{"error_description":"no code"}"#),
            WireError::Malformed("error is missing")
        );
        assert_eq!(
            token_error(400, &token_body("")),
            WireError::Malformed("error is missing"),
            "a 400 is an error object, whatever it holds"
        );
        assert_eq!(
            token_error(200, r#"{"error":"invalid_grant"}"#),
            WireError::Malformed("access_token is missing"),
            "a 200 is a grant"
        );
    }

    #[test]
    fn a_description_is_bounded_and_without_hidden_characters() {
        let refusal = refused(
            400,
            r#"{"error":"authorization_pending","error_description":
               "AADSTS70016: pending.\r\nTrace ID: 0000\u001b[2J\u0085\u202eevil"}"#,
        );
        let text = refusal.description.as_ref().map(Description::as_str);
        assert_eq!(
            text,
            Some("AADSTS70016: pending.  Trace ID: 0000 [2J  evil")
        );
        let long = "\u{e9}".repeat(MAX_DESCRIPTION_CHARS + 10);
        let refusal = refused(
            400,
            &format!(r#"{{"error":"invalid_grant","error_description":"{long}"}}"#),
        );
        let kept = refusal.description.expect("kept");
        assert_eq!(kept.as_str().chars().count(), MAX_DESCRIPTION_CHARS);
        for empty in [r#""""#, r#""\r\n\t""#, "null"] {
            let body = format!(r#"{{"error":"slow_down","error_description":{empty}}}"#);
            let refusal = refused(400, &body);
            assert_eq!(refusal.code, ErrorCode::SlowDown);
            assert!(refusal.description.is_none(), "{empty}");
        }
    }

    #[test]
    fn the_status_decides_and_others_are_unexpected() {
        for status in [0, 201, 204, 302, 403, 404, 429, 500, 503] {
            assert_eq!(
                token_error(status, &token_body("")),
                WireError::UnexpectedStatus(status)
            );
            assert!(matches!(
                parse_device_response(status, JSON, device_body(&[]).as_bytes()),
                Err(WireError::UnexpectedStatus(s)) if s == status
            ));
        }
        // The status is read first: a 500 page is that, not a content-type problem.
        assert_eq!(
            parse_token_response(500, Some("text/html"), b"<html>").map(|_| ()),
            Err(WireError::UnexpectedStatus(500))
        );
    }

    #[test]
    fn only_a_json_content_type_is_read() {
        let body = token_body("");
        for ct in [
            Some("application/json"),
            Some("APPLICATION/JSON"),
            Some("application/json;charset=UTF-8"),
            Some(" application/json ; charset=utf-8"),
        ] {
            assert!(
                parse_token_response(200, ct, body.as_bytes()).is_ok(),
                "{ct:?}"
            );
        }
        for ct in [
            None,
            Some(""),
            Some("text/html"),
            Some("text/plain; charset=utf-8"),
            Some("application/jsonp"),
            Some("application/x-www-form-urlencoded"),
            Some("application/problem+json"),
        ] {
            assert_eq!(
                parse_token_response(200, ct, body.as_bytes()).map(|_| ()),
                Err(WireError::NotJson),
                "{ct:?}"
            );
            assert_eq!(
                parse_device_response(400, ct, br#"{"error":"x"}"#).map(|_| ()),
                Err(WireError::NotJson)
            );
        }
    }

    #[test]
    fn an_oversize_body_is_refused_unread() {
        let body = token_body("");
        let exact = format!("{body}{}", " ".repeat(MAX_BODY_BYTES - body.len()));
        assert!(parse_token_response(200, JSON, exact.as_bytes()).is_ok());
        let over = format!("{exact} ");
        assert_eq!(
            parse_token_response(200, JSON, over.as_bytes()).map(|_| ()),
            Err(WireError::TooLarge)
        );
        assert_eq!(
            parse_token_response(200, Some("text/html"), over.as_bytes()).map(|_| ()),
            Err(WireError::TooLarge),
            "the cap comes first"
        );
        assert_eq!(
            parse_device_response(200, JSON, over.as_bytes()).map(|_| ()),
            Err(WireError::TooLarge)
        );
    }

    #[test]
    fn a_device_authorization_is_read_in_both_spellings() {
        let device = started(
            r#"{"user_code":"ABCD2EFGH","device_code":"DAQAB-0123_x","verification_uri":
                "https://login.example.com/devicelogin","expires_in":900,"interval":5,
                "message":"To sign in, use a web browser."}"#,
        );
        assert_eq!(device.device_code.expose(), "DAQAB-0123_x");
        assert_eq!(device.user_code.expose(), "ABCD2EFGH");
        assert_eq!(
            device.verification_uri.as_str(),
            "https://login.example.com/devicelogin"
        );
        assert!(device.verification_uri_complete.is_none());
        assert_eq!((device.expires_in_secs, device.interval_secs), (900, 5));
        let google = started(&device_body(&[
            ("verification_uri", ""),
            (
                "verification_url",
                r#""https://accounts.example.org/device""#,
            ),
            ("expires_in", r#""1800""#),
        ]));
        assert_eq!(
            google.verification_uri.as_str(),
            "https://accounts.example.org/device"
        );
        assert_eq!(google.expires_in_secs, 1800);
        assert_eq!(google.interval_secs, DEFAULT_INTERVAL_SECS);
        let both = device_body(&[(
            "verification_url",
            r#""https://accounts.example.org/device""#,
        )]);
        assert_eq!(
            device_error(&both),
            WireError::Malformed("not a device authorization")
        );
        let complete = started(&device_body(&[(
            "verification_uri_complete",
            r#""https://login.example.com/devicelogin?otc=ABCD2EFGH""#,
        )]));
        assert_eq!(
            complete.verification_uri_complete.as_ref().map(Url::as_str),
            Some("https://login.example.com/devicelogin?otc=ABCD2EFGH")
        );
    }

    #[test]
    fn device_codes_are_bounded() {
        let longest = format!(r#""{}""#, "d".repeat(MAX_DEVICE_CODE_BYTES));
        started(&device_body(&[("device_code", &longest)]));
        let bad_device = WireError::Malformed("device_code is not a bounded visible-ASCII string");
        let over = format!(r#""{}""#, "d".repeat(MAX_DEVICE_CODE_BYTES + 1));
        for code in [over.as_str(), r#""""#, r#""a b""#, r#""a\u0000""#] {
            assert_eq!(
                device_error(&device_body(&[("device_code", code)])),
                bad_device,
                "{code}"
            );
        }
        assert_eq!(
            device_error(&device_body(&[("device_code", "")])),
            WireError::Malformed("device_code is missing")
        );
        let longest = format!(r#""{}""#, "U".repeat(MAX_USER_CODE_BYTES));
        started(&device_body(&[("user_code", &longest)]));
        started(&device_body(&[("user_code", r#""ABCD EFGH""#)]));
        let bad_user = WireError::Malformed("user_code is not a bounded printable-ASCII string");
        let over = format!(r#""{}""#, "U".repeat(MAX_USER_CODE_BYTES + 1));
        for code in [
            over.as_str(),
            r#""""#,
            r#"" ABCD""#,
            r#""ABCD ""#,
            r#""AB\u001b[31mCD""#,
            r#""ABCD\tEFGH""#,
            "\"\u{410}BCD\"",
        ] {
            assert_eq!(
                device_error(&device_body(&[("user_code", code)])),
                bad_user,
                "{code}"
            );
        }
        assert_eq!(
            device_error(&device_body(&[("user_code", "")])),
            WireError::Malformed("user_code is missing")
        );
    }

    #[test]
    fn device_lifetimes_and_intervals_are_bounded() {
        for (expires, ok) in [("1", true), ("86400", true), ("0", false), ("86401", false)] {
            let parsed = parse_device_response(
                200,
                JSON,
                device_body(&[("expires_in", expires)]).as_bytes(),
            );
            assert_eq!(parsed.is_ok(), ok, "{expires}");
        }
        assert_eq!(
            device_error(&device_body(&[("expires_in", "0")])),
            WireError::Malformed("expires_in is not 1 to 86,400 seconds")
        );
        assert_eq!(
            device_error(&device_body(&[("expires_in", "")])),
            WireError::Malformed("expires_in is missing")
        );
        for (interval, secs) in [("1", 1), ("300", 300), (r#""10""#, 10), ("null", 5)] {
            let device = started(&device_body(&[("interval", interval)]));
            assert_eq!(device.interval_secs, secs, "{interval}");
        }
        for interval in ["0", "301", "-5", "2.5"] {
            assert_eq!(
                device_error(&device_body(&[("interval", interval)])),
                WireError::Malformed("interval is not 1 to 300 seconds"),
                "{interval}"
            );
        }
    }

    #[test]
    fn verification_uris_are_https_or_loopback_http() {
        for uri in [
            "https://login.example.com/devicelogin",
            "https://login.example.com:8443/device?x=1",
            "http://127.0.0.1:4180/device",
            "http://127.9.9.9/device",
            "http://localhost:4180/device",
            "http://LOCALHOST/device",
            "http://[::1]:4180/device",
        ] {
            let device = started(&device_body(&[(
                "verification_uri",
                &format!(r#""{uri}""#),
            )]));
            assert!(
                device.verification_uri.as_str().starts_with("http"),
                "{uri}"
            );
        }
        for (uri, e) in [
            (
                "http://login.example.com/device",
                WireError::Insecure("verification_uri"),
            ),
            (
                "http://10.0.0.1/device",
                WireError::Insecure("verification_uri"),
            ),
            (
                "http://localhost.example.com/",
                WireError::Insecure("verification_uri"),
            ),
            (
                "ftp://login.example.com/",
                WireError::Insecure("verification_uri"),
            ),
            ("javascript:alert(1)", WireError::BadUrl("verification_uri")),
            ("data:text/html,hi", WireError::BadUrl("verification_uri")),
            ("/devicelogin", WireError::BadUrl("verification_uri")),
            ("", WireError::BadUrl("verification_uri")),
            (
                "https://login.example.com@evil.example/",
                WireError::BadUrl("verification_uri"),
            ),
            (
                "https://a:b@login.example.com/",
                WireError::BadUrl("verification_uri"),
            ),
            (
                "https://login.example.com/#x",
                WireError::BadUrl("verification_uri"),
            ),
            (
                "https://login.exa\\tmple.com/",
                WireError::BadUrl("verification_uri"),
            ),
            (
                "https://login.example.com/a b",
                WireError::BadUrl("verification_uri"),
            ),
            (
                "https://b\u{fc}cher.example/",
                WireError::BadUrl("verification_uri"),
            ),
        ] {
            assert_eq!(
                device_error(&device_body(&[(
                    "verification_uri",
                    &format!(r#""{uri}""#)
                )])),
                e,
                "{uri}"
            );
        }
        let long = format!(
            r#""https://login.example.com/{}""#,
            "a".repeat(MAX_URI_BYTES)
        );
        assert_eq!(
            device_error(&device_body(&[("verification_uri", &long)])),
            WireError::BadUrl("verification_uri")
        );
        assert_eq!(
            device_error(&device_body(&[("verification_uri", "")])),
            WireError::BadUrl("verification_uri")
        );
        assert_eq!(
            device_error(&device_body(&[(
                "verification_uri_complete",
                r#""http://login.example.com/?c=1""#
            )])),
            WireError::Insecure("verification_uri_complete")
        );
    }

    #[test]
    fn a_device_endpoint_error_is_a_refusal() {
        let parsed = parse_device_response(
            400,
            JSON,
            br#"{"error":"invalid_client","error_description":"AADSTS7000218"}"#,
        );
        let Ok(DeviceOutcome::Refused(refusal)) = parsed else {
            panic!("{parsed:?}");
        };
        assert_eq!(refusal.code, ErrorCode::InvalidClient);
        assert_eq!(
            refusal.description.as_ref().map(Description::as_str),
            Some("AADSTS7000218")
        );
    }

    const ISSUER: &str = "https://id.example.com/tenant-7";

    fn discovery_body(fields: &[(&str, &str)]) -> String {
        let mut doc = serde_json::json!({
            "issuer": ISSUER,
            "authorization_endpoint": "https://id.example.com/tenant-7/auth",
            "token_endpoint": "https://id.example.com/tenant-7/token",
            "response_types_supported": ["code"],
        });
        for (key, value) in fields {
            doc[*key] = serde_json::from_str(value).expect("a test value");
        }
        doc.to_string()
    }

    fn discover(body: &str) -> Result<Discovery, WireError> {
        parse_discovery(200, JSON, body.as_bytes(), ISSUER)
    }

    #[test]
    fn a_discovery_document_of_the_configured_issuer_is_read() {
        let found = discover(&discovery_body(&[
            (
                "device_authorization_endpoint",
                r#""https://id.example.com/tenant-7/device""#,
            ),
            (
                "revocation_endpoint",
                r#""https://id.example.com/tenant-7/revoke""#,
            ),
            ("jwks_uri", r#""https://keys.example.com/tenant-7/jwks""#),
        ]))
        .expect("a document");
        assert_eq!(
            found.token_endpoint.as_str(),
            "https://id.example.com/tenant-7/token"
        );
        assert_eq!(
            found.authorization_endpoint.as_str(),
            "https://id.example.com/tenant-7/auth"
        );
        assert_eq!(
            found
                .device_authorization_endpoint
                .as_ref()
                .map(Url::as_str),
            Some("https://id.example.com/tenant-7/device")
        );
        assert!(found.revocation_endpoint.is_some() && found.jwks_uri.is_some());
        let bare = discover(&discovery_body(&[])).expect("a document");
        assert!(bare.device_authorization_endpoint.is_none());
        assert!(bare.revocation_endpoint.is_none() && bare.jwks_uri.is_none());
        let loopback = serde_json::json!({
            "issuer": "http://127.0.0.1:4180",
            "authorization_endpoint": "http://127.0.0.1:4180/auth",
            "token_endpoint": "http://localhost:4180/token",
        })
        .to_string();
        parse_discovery(200, JSON, loopback.as_bytes(), "http://127.0.0.1:4180")
            .expect("the loopback provider");
    }

    #[test]
    fn a_discovery_document_is_refused_for_any_rule() {
        for issuer in [
            r#""https://id.example.com/tenant-7/""#,
            r#""https://ID.example.com/tenant-7""#,
            r#""https://id.example.com/tenant-8""#,
            r#""""#,
        ] {
            assert_eq!(
                discover(&discovery_body(&[("issuer", issuer)])).map(|_| ()),
                Err(WireError::IssuerMismatch),
                "{issuer}"
            );
        }
        assert_eq!(
            discover(&discovery_body(&[("issuer", "null")])).map(|_| ()),
            Err(WireError::Malformed("issuer is missing"))
        );
        assert_eq!(
            discover(&discovery_body(&[("token_endpoint", "null")])).map(|_| ()),
            Err(WireError::BadUrl("token_endpoint"))
        );
        assert_eq!(
            discover(&discovery_body(&[("authorization_endpoint", "null")])).map(|_| ()),
            Err(WireError::BadUrl("authorization_endpoint"))
        );
        for field in [
            "authorization_endpoint",
            "token_endpoint",
            "device_authorization_endpoint",
            "revocation_endpoint",
            "jwks_uri",
        ] {
            assert_eq!(
                discover(&discovery_body(&[(field, r#""http://id.example.com/x""#)])).map(|_| ()),
                Err(WireError::Insecure(field))
            );
            assert_eq!(
                discover(&discovery_body(&[(
                    field,
                    r#""https://id.example.com/x#f""#
                )]))
                .map(|_| ()),
                Err(WireError::BadUrl(field))
            );
        }
        let body = discovery_body(&[]);
        assert_eq!(
            parse_discovery(404, JSON, body.as_bytes(), ISSUER).map(|_| ()),
            Err(WireError::UnexpectedStatus(404))
        );
        assert_eq!(
            parse_discovery(400, JSON, body.as_bytes(), ISSUER).map(|_| ()),
            Err(WireError::UnexpectedStatus(400))
        );
        assert_eq!(
            parse_discovery(200, Some("text/html"), body.as_bytes(), ISSUER).map(|_| ()),
            Err(WireError::NotJson)
        );
        let padded = format!("{body}{}", " ".repeat(MAX_DISCOVERY_BYTES));
        assert_eq!(
            parse_discovery(200, JSON, padded.as_bytes(), ISSUER).map(|_| ()),
            Err(WireError::TooLarge)
        );
    }

    #[test]
    fn debug_never_shows_a_secret_and_errors_never_quote_the_body() {
        let grant = parse_token_response(
            200,
            JSON,
            token_body(&format!(
                r#","refresh_token":"{REFRESH}","id_token":"{ID}","scope":"openid""#,
                ID = "eyJhbGciOiJub25lIn0.e30.c2ln"
            ))
            .as_bytes(),
        );
        let device = parse_device_response(
            200,
            JSON,
            device_body(&[(
                "verification_uri_complete",
                r#""https://login.example.com/devicelogin?otc=ABCD2EFGH""#,
            )])
            .as_bytes(),
        );
        let refusal = parse_token_response(
            400,
            JSON,
            format!(r#"{{"error":"invalid_grant","error_description":"bad {REFRESH}"}}"#)
                .as_bytes(),
        );
        let rendered = format!("{grant:?} {device:?} {refusal:?}");
        for secret in [
            TOKEN,
            REFRESH,
            "eyJhbGciOiJub25lIn0",
            "DAQABAAEAAAExampleDeviceCode",
            "ABCD2EFGH",
        ] {
            assert!(!rendered.contains(secret), "{secret} in {rendered}");
        }
        assert!(rendered.contains("AccessToken(<redacted>)"), "{rendered}");
        assert!(rendered.contains("RefreshToken(<redacted>)"), "{rendered}");
        assert!(rendered.contains("IdToken(<redacted>)"), "{rendered}");
        assert!(rendered.contains("DeviceCode(<redacted>)"), "{rendered}");
        assert!(rendered.contains("UserCode(<redacted>)"), "{rendered}");
        assert!(rendered.contains(r#"verification_uri_complete: Some("<redacted>")"#));
        assert!(rendered.contains("Description(<"), "{rendered}");
        assert!(
            rendered.contains(r#"scope: Some(["openid"])"#),
            "{rendered}"
        );
        // A refused grant whose token breaks a rule after serde read it.
        let bad = token_body(&format!(r#","expires_in":"{TOKEN}""#));
        let e = token_error(200, &bad);
        assert!(!format!("{e} {e:?}").contains(TOKEN));
        let bad = format!(r#"{{"access_token":"{TOKEN}","token_type":7}}"#);
        let e = token_error(200, &bad);
        assert!(!format!("{e} {e:?}").contains(TOKEN));
    }

    /// Every committed seed passes the fuzz oracle and means what its name says.
    #[test]
    fn the_fuzz_seeds_pass_the_oracle_and_parse_as_named() {
        macro_rules! seed {
            ($name:literal) => {
                (
                    $name,
                    &include_bytes!(concat!("../../fuzz/corpus/oauth_wire/", $name))[..],
                )
            };
        }
        let seeds = [
            seed!("c-microsoft-grant.json"),
            seed!("c-microsoft-string-expires-in.json"),
            seed!("c-google-grant.json"),
            seed!("c-no-expires-in-lowercase-bearer.json"),
            seed!("a-microsoft-device.json"),
            seed!("a-google-device-verification-url.json"),
            seed!("a-loopback-device-complete.json"),
            seed!("g-error-authorization-pending.json"),
            seed!("g-error-slow-down.json"),
            seed!("g-error-invalid-grant.json"),
            seed!("k-error-invalid-client-401.json"),
            seed!("o-server-error-500.json"),
            seed!("b-oidc-discovery.json"),
        ];
        for (name, data) in seeds {
            fuzz(data);
            let (&selector, body) = data.split_first().expect("a selector");
            let status = FUZZ_STATUSES[usize::from((selector >> 2) & 7)];
            let ct = FUZZ_CONTENT_TYPES[usize::from((selector >> 5) & 3)];
            let summary = match selector & 3 {
                1 => match parse_device_response(status, ct, body) {
                    Ok(DeviceOutcome::Started(_)) => "started".to_owned(),
                    other => format!("{other:?}"),
                },
                2 => parse_discovery(status, ct, body, FUZZ_ISSUER)
                    .map_or_else(|e| format!("{e:?}"), |_| "discovered".to_owned()),
                _ => match parse_token_response(status, ct, body) {
                    Ok(TokenOutcome::Granted(g)) => {
                        format!("granted {} {}", g.expires_in_secs, g.lifetime_assumed)
                    }
                    Ok(TokenOutcome::Refused(r)) => format!("refused {}", r.code.as_str()),
                    Err(e) => format!("{e:?}"),
                },
            };
            let expected = match name {
                "c-microsoft-grant.json"
                | "c-microsoft-string-expires-in.json"
                | "c-google-grant.json" => "granted 3599 false",
                "c-no-expires-in-lowercase-bearer.json" => "granted 3600 true",
                "g-error-authorization-pending.json" => "refused authorization_pending",
                "g-error-slow-down.json" => "refused slow_down",
                "g-error-invalid-grant.json" => "refused invalid_grant",
                "k-error-invalid-client-401.json" => "refused invalid_client",
                "o-server-error-500.json" => "UnexpectedStatus(500)",
                "b-oidc-discovery.json" => "discovered",
                _ => "started",
            };
            assert_eq!(summary, expected, "{name}");
        }
    }

    /// CI's crash: an ignored member serde only skips (a number past f64, a lone surrogate,
    /// bytes that are not UTF-8) is accepted, and the oracle must read the document the same way.
    #[test]
    fn a_document_with_an_ignored_member_serde_only_skips_passes_the_oracle() {
        macro_rules! regression {
            ($name:literal) => {
                &include_bytes!(concat!("../../fuzz/regressions/oauth_wire/", $name))[..]
            };
        }
        for data in [
            regression!("ignored-number-past-f64.json"),
            regression!("ignored-lone-surrogate.json"),
            regression!("ignored-invalid-utf8.json"),
        ] {
            let (_, body) = data.split_first().expect("a selector");
            assert!(parse_discovery(200, JSON, body, FUZZ_ISSUER).is_ok());
            fuzz(data);
        }
    }

    fn any_status() -> impl proptest::strategy::Strategy<Value = u16> {
        proptest::prop_oneof![
            proptest::strategy::Just(200u16),
            proptest::strategy::Just(400u16),
            proptest::strategy::Just(401u16),
            proptest::num::u16::ANY,
        ]
    }

    proptest::proptest! {
        /// No bytes, status or content type panic the parsers, and each passes the fuzz oracle.
        #[test]
        fn no_input_panics(
            status in any_status(),
            json in proptest::bool::ANY,
            body in proptest::collection::vec(proptest::num::u8::ANY, 0..256),
        ) {
            let ct = if json { JSON } else { Some("text/plain") };
            let _ = parse_token_response(status, ct, &body);
            let _ = parse_device_response(status, ct, &body);
            let _ = parse_discovery(status, ct, &body, ISSUER);
            for parser in 0u8..4 {
                let mut data = vec![parser | (if json { 3 } else { 1 }) << 5];
                data.extend_from_slice(&body);
                fuzz(&data);
            }
        }

        /// A grant assembled from parts: accepted exactly when every part keeps its rule, and
        /// then with the access token exactly as sent.
        #[test]
        fn an_accepted_grant_round_trips_its_access_token(
            token in "[\\x00-\\x7f\u{e9}]{0,24}",
            token_type in proptest::sample::select(vec!["Bearer", "bearer", "BEARER", "MAC", ""]),
            expires_in in proptest::option::of(0u64..200_000),
            as_text in proptest::bool::ANY,
            refresh in proptest::option::of("[!-~]{1,16}"),
            scope in proptest::option::of("[a-z./:]{1,12}( [a-z./:]{1,12}){0,3}"),
        ) {
            let mut members = serde_json::Map::new();
            members.insert("access_token".into(), token.clone().into());
            members.insert("token_type".into(), token_type.into());
            if let Some(secs) = expires_in {
                members.insert(
                    "expires_in".into(),
                    if as_text { secs.to_string().into() } else { secs.into() },
                );
            }
            if let Some(refresh) = &refresh {
                members.insert("refresh_token".into(), refresh.clone().into());
            }
            if let Some(scope) = &scope {
                members.insert("scope".into(), scope.clone().into());
            }
            let body = serde_json::to_vec(&members).expect("json");
            let valid = !token.is_empty()
                && token.bytes().all(is_visible)
                && token_type.eq_ignore_ascii_case("bearer")
                && expires_in.is_none_or(|s| (1..=MAX_TOKEN_LIFETIME_SECS).contains(&s));
            match parse_token_response(200, JSON, &body) {
                Ok(TokenOutcome::Granted(grant)) => {
                    proptest::prop_assert!(valid);
                    proptest::prop_assert_eq!(grant.access_token.expose(), token.as_str());
                    proptest::prop_assert_eq!(
                        grant.refresh_token.as_ref().map(RefreshToken::expose),
                        refresh.as_deref()
                    );
                    proptest::prop_assert_eq!(
                        grant.expires_in_secs,
                        expires_in.unwrap_or(ASSUMED_TOKEN_LIFETIME_SECS)
                    );
                    let rendered = format!("{grant:?}");
                    proptest::prop_assert!(token.len() < 8 || !rendered.contains(&token));
                }
                Ok(TokenOutcome::Refused(_)) => proptest::prop_assert!(false, "a 200 refusal"),
                Err(e) => proptest::prop_assert!(!valid, "refused: {e}"),
            }
        }
    }
}
