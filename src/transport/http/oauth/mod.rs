//! The OAuth 2.1 resource server of remote HTTP (issue 29, item 2), as the MCP authorization
//! specification asks of an HTTP server: Protected Resource Metadata (RFC 9728) naming the one
//! authorization server, `401` with a `WWW-Authenticate: Bearer resource_metadata=…` challenge,
//! audience binding to the canonical resource URL (RFC 8707), `403 insufficient_scope` for
//! step-up, and a caller made only from a verified token's identity matched to a principal of
//! `plugin.json` (`config::principals`).
//!
//! Invariants: every refusal is decided from the request head, before its body is read (the
//! front calls [`ResourceServer::authenticate`] where it checked the static bearer); a token is
//! never logged, put in an error, passed to a backend or sent anywhere: it is read here and
//! dropped. A valid token whose identity matches no principal is refused (`403`) whatever its
//! scopes. An issuer whose keys cannot be had fails closed (`503`). A key-set fetch, whoever's
//! token started it, never holds a request whose key is cached (`keys`, issue 36).
//!
//! Who may call it: `transport::http` builds one at startup when `MAILGATE_HTTP_OAUTH_ISSUER` is
//! set; `front` routes the metadata paths to it and authenticates `/mcp` requests with it.

mod keys;
pub(crate) mod token;

use std::time::Duration;

use bytes::Bytes;
use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderValue, StatusCode};
use url::Url;

pub(crate) use keys::KeysError;
use keys::{KeyCache, Lookup};
use token::{Rules, TokenError};

use crate::caller::Caller;
use crate::config::Principal;
use crate::coordination::rate::TokenBucket;

/// The well-known path of RFC 9728's metadata.
pub(crate) const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// The resource server's settings (environment: `MAILGATE_HTTP_OAUTH_*`, `MAILGATE_HTTP_PUBLIC_URL`).
#[derive(Clone, Debug)]
pub(crate) struct OAuthSettings {
    /// The issuer identifier exactly as configured: tokens' `iss` and the metadata's `issuer`
    /// are compared to it as strings (RFC 8414 §3.3), so `https://x/` and `https://x` differ.
    pub(crate) issuer: String,
    /// The canonical resource URL clients use, e.g. `https://mail.example.com/mcp`.
    pub(crate) resource: Url,
    /// Scopes every token must grant.
    pub(crate) scopes: Vec<String>,
    /// Accept `typ: JWT` access tokens (issuers that predate RFC 9068).
    pub(crate) accept_plain_jwt: bool,
    /// Requests one person may make per minute (a token bucket of that many).
    pub(crate) requests_per_minute: u32,
}

/// Why a request was not given a caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Denial {
    /// No `Authorization: Bearer` header (or more than one).
    NoToken,
    Invalid(TokenError),
    /// A valid token without every required scope.
    Scope,
    /// A valid token whose identity no principal matches.
    NotAPrincipal,
    /// The issuer's keys could not be had.
    IssuerUnavailable,
    /// The person's request rate is spent; retry after this long.
    RateLimited(Duration),
}

impl Denial {
    /// A value-free code for logs.
    pub(crate) fn code(self) -> &'static str {
        match self {
            Denial::NoToken => "no_token",
            Denial::Invalid(e) => e.code(),
            Denial::Scope => "insufficient_scope",
            Denial::NotAPrincipal => "not_a_principal",
            Denial::IssuerUnavailable => "issuer_unavailable",
            Denial::RateLimited(_) => "rate_limited",
        }
    }
}

/// A refusal as HTTP: status, JSON body, and the challenge header when there is one.
pub(crate) struct Refusal {
    pub(crate) status: StatusCode,
    pub(crate) body: &'static str,
    pub(crate) www_authenticate: Option<HeaderValue>,
    /// Seconds until a retry can succeed (`Retry-After`).
    pub(crate) retry_after: Option<u64>,
}

/// The resource server: settings, the issuer's keys, the principals.
pub(crate) struct ResourceServer {
    settings: OAuthSettings,
    keys: KeyCache,
    principals: Vec<Principal>,
    /// Each principal's request rate, by position in `principals`.
    rates: Vec<TokenBucket>,
    metadata_url: String,
    metadata: Bytes,
}

impl ResourceServer {
    pub(crate) fn new(
        settings: OAuthSettings,
        principals: Vec<Principal>,
    ) -> Result<Self, KeysError> {
        let keys = KeyCache::new(&settings.issuer)?;
        let metadata_url = metadata_url(&settings.resource);
        let rates = principals
            .iter()
            .map(|_| TokenBucket::new(settings.requests_per_minute, Duration::from_secs(60)))
            .collect();
        let metadata = serde_json::json!({
            "resource": settings.resource.as_str(),
            "authorization_servers": [settings.issuer],
            "scopes_supported": settings.scopes,
            "bearer_methods_supported": ["header"],
            "resource_name": "mailgate",
        })
        .to_string()
        .into();
        Ok(Self {
            settings,
            keys,
            principals,
            rates,
            metadata_url,
            metadata,
        })
    }

    /// Whether `path` is one of the metadata document's paths: the root form and the one with
    /// the resource's path appended (RFC 9728 §3.1; clients try either).
    pub(crate) fn is_metadata_path(&self, path: &str) -> bool {
        path == METADATA_PATH
            || path
                .strip_prefix(METADATA_PATH)
                .is_some_and(|rest| rest == self.settings.resource.path())
    }

    /// The Protected Resource Metadata document.
    pub(crate) fn metadata(&self) -> Bytes {
        self.metadata.clone()
    }

    /// The verified caller of a request, from its head alone.
    pub(crate) async fn authenticate(&self, headers: &HeaderMap) -> Result<Caller, Denial> {
        let token = bearer(headers).ok_or(Denial::NoToken)?;
        let rules = Rules {
            issuer: &self.settings.issuer,
            resource: self.settings.resource.as_str(),
            accept_plain_jwt: self.settings.accept_plain_jwt,
        };
        let head = token::head(token, &rules).map_err(Denial::Invalid)?;
        let jwk = match self.keys.lookup(head.kid.as_deref()).await {
            Lookup::Found(jwk) => jwk,
            Lookup::Unknown => return Err(Denial::Invalid(TokenError::UnknownKey)),
            Lookup::Unavailable => return Err(Denial::IssuerUnavailable),
        };
        let claims = token::verify(token, &head, &jwk, &rules).map_err(Denial::Invalid)?;
        if !claims.has_scopes(&self.settings.scopes) {
            return Err(Denial::Scope);
        }
        let at = claims
            .principal(&self.principals)
            .ok_or(Denial::NotAPrincipal)?;
        if let Some(rate) = self.rates.get(at) {
            rate.try_take().map_err(Denial::RateLimited)?;
        }
        Ok(Caller::person(&self.principals[at]))
    }

    /// The answer to a denial: `401` with the challenge, `403 insufficient_scope` naming the
    /// scopes, `403` for a person who is no principal, `503` when the issuer is unreachable.
    pub(crate) fn refusal(&self, denial: Denial) -> Refusal {
        let scope = self.settings.scopes.join(" ");
        let challenge = |error: Option<(&str, &str)>| {
            let mut value = String::from("Bearer");
            if let Some((code, description)) = error {
                value.push_str(&format!(
                    " error=\"{code}\", error_description=\"{description}\","
                ));
            }
            value.push_str(&format!(
                " resource_metadata=\"{}\", scope=\"{scope}\"",
                self.metadata_url
            ));
            HeaderValue::from_str(&value).ok()
        };
        match denial {
            Denial::NoToken => Refusal {
                status: StatusCode::UNAUTHORIZED,
                body: r#"{"error":"unauthorized"}"#,
                www_authenticate: challenge(None),
                retry_after: None,
            },
            Denial::Invalid(e) => Refusal {
                status: StatusCode::UNAUTHORIZED,
                body: r#"{"error":"invalid_token"}"#,
                www_authenticate: challenge(Some(("invalid_token", &e.to_string()))),
                retry_after: None,
            },
            Denial::Scope => Refusal {
                status: StatusCode::FORBIDDEN,
                body: r#"{"error":"insufficient_scope"}"#,
                www_authenticate: challenge(Some((
                    "insufficient_scope",
                    "the token lacks a required scope",
                ))),
                retry_after: None,
            },
            Denial::NotAPrincipal => Refusal {
                status: StatusCode::FORBIDDEN,
                body: r#"{"error":"not_a_principal"}"#,
                www_authenticate: None,
                retry_after: None,
            },
            Denial::IssuerUnavailable => Refusal {
                status: StatusCode::SERVICE_UNAVAILABLE,
                body: r#"{"error":"authorization_server_unavailable"}"#,
                www_authenticate: None,
                retry_after: Some(30),
            },
            Denial::RateLimited(wait) => Refusal {
                status: StatusCode::TOO_MANY_REQUESTS,
                body: r#"{"error":"rate_limited"}"#,
                www_authenticate: None,
                retry_after: Some(wait.as_secs().max(1)),
            },
        }
    }
}

/// RFC 9728 §3.1: the well-known path inserted between the resource's host and its path.
fn metadata_url(resource: &Url) -> String {
    let mut url = resource.clone();
    let path = resource.path().trim_end_matches('/');
    url.set_path(&format!("{METADATA_PATH}{path}"));
    url.set_query(None);
    url.set_fragment(None);
    url.to_string()
}

/// The token of the one `Authorization: Bearer` header; `None` for none, several, another
/// scheme or an empty token.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let (scheme, token) = value.to_str().ok()?.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Fuzz oracle (`fuzzing::http_oauth`): untrusted bytes as an access token and as an
/// `Authorization` value. The first byte picks which; the rest is the input.
///
/// Oracles, beyond "no panic": a header the token rules accept names an allowed asymmetric
/// algorithm; no input verifies under a key whose private half nobody has (a key generated per
/// process and thrown away); an extracted bearer token is a non-empty, trimmed part of the one
/// header value, after a `Bearer` scheme.
#[cfg(fuzzing)]
pub(crate) fn fuzz(data: &[u8]) {
    use std::sync::OnceLock;

    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _};
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    static KEY: OnceLock<jsonwebtoken::jwk::Jwk> = OnceLock::new();
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 1 {
        let Ok(value) = HeaderValue::from_bytes(rest) else {
            return;
        };
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, value.clone());
        if let Some(token) = bearer(&headers) {
            let text = value
                .to_str()
                .expect("oracle: a token comes from a text value");
            assert!(!token.is_empty(), "oracle: an empty token is no token");
            assert_eq!(token, token.trim(), "oracle: the token is trimmed");
            assert!(
                text.trim_end().ends_with(token),
                "oracle: the token is the value's tail"
            );
            let scheme = text.split_once(' ').map(|(s, _)| s).unwrap_or_default();
            assert!(
                scheme.eq_ignore_ascii_case("bearer"),
                "oracle: only the Bearer scheme"
            );
        }
        return;
    }
    let Ok(token) = std::str::from_utf8(rest) else {
        return;
    };
    let rules = Rules {
        issuer: "https://login.example.com/t",
        resource: "https://mail.example.com/mcp",
        accept_plain_jwt: mode % 4 == 2,
    };
    let Ok(head) = token::head(token, &rules) else {
        return;
    };
    assert!(
        !matches!(
            head.alg,
            jsonwebtoken::Algorithm::HS256
                | jsonwebtoken::Algorithm::HS384
                | jsonwebtoken::Algorithm::HS512
        ),
        "oracle: no HMAC algorithm passes the header check"
    );
    let jwk = KEY.get_or_init(|| {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .expect("oracle setup: keygen");
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref())
            .expect("oracle setup: key");
        let point = pair.public_key().as_ref();
        serde_json::from_value(serde_json::json!({
            "kty": "EC", "crv": "P-256", "kid": "k1", "alg": "ES256",
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
        }))
        .expect("oracle setup: jwk")
    });
    assert!(
        token::verify(token, &head, jwk, &rules).is_err(),
        "oracle: nothing verifies under a key whose private half is gone"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server() -> ResourceServer {
        ResourceServer::new(
            OAuthSettings {
                issuer: token::tests::ISSUER.into(),
                resource: Url::parse(token::tests::RESOURCE).expect("url"),
                scopes: vec!["mail.read".into()],
                accept_plain_jwt: false,
                requests_per_minute: 120,
            },
            Vec::new(),
        )
        .expect("server")
    }

    #[test]
    fn the_metadata_names_the_resource_and_its_one_authorization_server() {
        let s = server();
        let doc: serde_json::Value = serde_json::from_slice(&s.metadata()).expect("json");
        assert_eq!(doc["resource"], token::tests::RESOURCE);
        assert_eq!(
            doc["authorization_servers"],
            serde_json::json!([token::tests::ISSUER])
        );
        assert_eq!(doc["scopes_supported"], serde_json::json!(["mail.read"]));
        assert!(s.is_metadata_path("/.well-known/oauth-protected-resource"));
        assert!(s.is_metadata_path("/.well-known/oauth-protected-resource/mcp"));
        assert!(!s.is_metadata_path("/.well-known/oauth-protected-resource/other"));
        assert_eq!(
            s.metadata_url,
            "https://mail.example.com/.well-known/oauth-protected-resource/mcp"
        );
    }

    #[test]
    fn challenges_name_the_metadata_and_the_scopes_never_the_token() {
        let s = server();
        let header = |d: Denial| {
            let r = s.refusal(d);
            let h = r
                .www_authenticate
                .map(|h| h.to_str().expect("ascii").to_owned());
            (r.status, h)
        };
        let (status, h) = header(Denial::NoToken);
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(
            h.as_deref(),
            Some(
                "Bearer resource_metadata=\"https://mail.example.com/.well-known/oauth-protected-resource/mcp\", scope=\"mail.read\""
            )
        );
        let (status, h) = header(Denial::Invalid(TokenError::Expired));
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert!(h.expect("challenge").starts_with(
            "Bearer error=\"invalid_token\", error_description=\"the token has expired\","
        ));
        let (status, h) = header(Denial::Scope);
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert!(
            h.expect("challenge")
                .contains("error=\"insufficient_scope\"")
        );
        assert_eq!(header(Denial::NotAPrincipal), (StatusCode::FORBIDDEN, None));
        assert_eq!(
            header(Denial::IssuerUnavailable),
            (StatusCode::SERVICE_UNAVAILABLE, None)
        );
    }

    #[test]
    fn exactly_one_bearer_header_is_read() {
        let h = |values: &[&str]| {
            let mut map = HeaderMap::new();
            for v in values {
                map.append(AUTHORIZATION, HeaderValue::from_str(v).expect("value"));
            }
            bearer(&map).map(str::to_owned)
        };
        assert_eq!(h(&["Bearer abc"]).as_deref(), Some("abc"));
        assert_eq!(h(&["bearer abc"]).as_deref(), Some("abc"));
        assert_eq!(h(&[]), None);
        assert_eq!(h(&["Basic abc"]), None);
        assert_eq!(h(&["Bearer "]), None);
        assert_eq!(h(&["Bearer a", "Bearer b"]), None);
    }
}
