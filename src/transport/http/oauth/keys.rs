//! The issuer's signing keys (issue 29, item 2): its metadata (RFC 8414, else OpenID Connect
//! discovery) names the JWKS, which is fetched, cached for [`MAX_AGE`], and fetched again when a
//! token names a key the cache does not hold (a key rotation), at most once per [`MIN_REFRESH`]
//! for unknown keys and once per [`RETRY_AFTER_FAILURE`] after a failed fetch, so a stream of
//! tokens with made-up `kid`s cannot turn the server into a client hammering the issuer.
//!
//! Invariants: every fetch goes to an https URL, or http on loopback (the rule the Graph and
//! embeddings clients follow), without redirects or an ambient proxy, within a time and size
//! bound; the metadata's `issuer` must equal the configured one (RFC 8414 §3.3). A fetch that
//! fails leaves the keys that were cached; with none cached, the lookup answers
//! [`Lookup::Unavailable`] and the request is refused, never served: an issuer that cannot be
//! reached fails closed. No token, and nothing from one but its `kid`, reaches this module.

use std::time::{Duration, Instant};

use jsonwebtoken::jwk::Jwk;
use serde::Deserialize;
use url::Url;

// The URL rule the Graph and embeddings clients follow: https, or http to a loopback host; no
// credentials, query or fragment.
use crate::backends::graph::endpoints::parse_root;

/// The least time between two fetches for a key the cache does not hold.
pub(crate) const MIN_REFRESH: Duration = Duration::from_secs(30);
/// The least time between a failed fetch and the next one.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(5);
/// How long a fetched key set is used before it is fetched again on the next request.
const MAX_AGE: Duration = Duration::from_secs(3600);
/// The largest metadata document or key set read.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;
const TIMEOUT: Duration = Duration::from_secs(10);

/// What the cache says of a key id.
pub(crate) enum Lookup {
    Found(Box<Jwk>),
    /// The issuer answered and holds no such key.
    Unknown,
    /// No key set could be had from the issuer.
    Unavailable,
}

/// Why the issuer's keys could not be had (for the log: no URL, no body).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum KeysError {
    #[error("the authorization server could not be reached")]
    Unreachable,
    #[error("the authorization server's metadata is missing or malformed")]
    Metadata,
    #[error("the authorization server's metadata names another issuer")]
    IssuerMismatch,
    #[error("the authorization server's jwks_uri is not https (or http on loopback)")]
    JwksUri,
    #[error("the authorization server's key set is malformed")]
    KeySet,
}

/// Where the metadata may be: RFC 8414's well-known URL (inserted before the issuer's path),
/// then OpenID Connect's (appended to it).
fn metadata_urls(issuer: &Url) -> Vec<Url> {
    let path = issuer.path().trim_end_matches('/');
    let mut rfc8414 = issuer.clone();
    rfc8414.set_path(&format!("/.well-known/oauth-authorization-server{path}"));
    let mut oidc = issuer.clone();
    oidc.set_path(&format!("{path}/.well-known/openid-configuration"));
    vec![rfc8414, oidc]
}

#[derive(Deserialize)]
struct Metadata {
    issuer: String,
    jwks_uri: String,
}

#[derive(Deserialize)]
struct RawKeySet {
    keys: Vec<serde_json::Value>,
}

struct State {
    jwks_uri: Option<Url>,
    keys: Vec<Jwk>,
    /// When the cached set was fetched.
    fetched: Option<Instant>,
    /// When a fetch for an unknown key last ran.
    refreshed_for_unknown: Option<Instant>,
    /// When a fetch last failed.
    failed: Option<Instant>,
}

/// The cached key set of one issuer.
pub(crate) struct KeyCache {
    client: reqwest::Client,
    /// As configured (compared as a string), and parsed (where the metadata is).
    issuer: String,
    issuer_url: Url,
    state: tokio::sync::Mutex<State>,
}

impl KeyCache {
    pub(crate) fn new(issuer: &str) -> Result<Self, KeysError> {
        let issuer_url = parse_root(issuer).map_err(|_| KeysError::Metadata)?;
        let client = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(TIMEOUT)
            .connect_timeout(TIMEOUT)
            .build()
            .map_err(|_| KeysError::Unreachable)?;
        Ok(Self {
            client,
            issuer: issuer.to_owned(),
            issuer_url,
            state: tokio::sync::Mutex::new(State {
                jwks_uri: None,
                keys: Vec::new(),
                fetched: None,
                refreshed_for_unknown: None,
                failed: None,
            }),
        })
    }

    /// The key a token names (`kid`; without one, the only key the set holds), fetching the set
    /// when it is not cached, too old, or lacks the key (rate-limited).
    pub(crate) async fn lookup(&self, kid: Option<&str>) -> Lookup {
        let mut state = self.state.lock().await;
        let stale = state.fetched.is_none_or(|at| at.elapsed() > MAX_AGE);
        if !stale && let Some(key) = find(&state.keys, kid) {
            return Lookup::Found(Box::new(key.clone()));
        }
        let backing_off = state
            .failed
            .is_some_and(|at| at.elapsed() < RETRY_AFTER_FAILURE);
        // Past here the set is stale, or fresh and without the key.
        let for_unknown = !stale;
        let rate_limited = for_unknown
            && state
                .refreshed_for_unknown
                .is_some_and(|at| at.elapsed() < MIN_REFRESH);
        if !backing_off && !rate_limited {
            if for_unknown {
                state.refreshed_for_unknown = Some(Instant::now());
            }
            match self.fetch(&mut state).await {
                Ok(keys) => {
                    state.keys = keys;
                    state.fetched = Some(Instant::now());
                    state.failed = None;
                }
                Err(e) => {
                    state.failed = Some(Instant::now());
                    tracing::warn!(error = %e, "the OAuth key set could not be fetched");
                }
            }
        }
        match find(&state.keys, kid) {
            Some(key) => Lookup::Found(Box::new(key.clone())),
            None if state.fetched.is_none() => Lookup::Unavailable,
            None => Lookup::Unknown,
        }
    }

    async fn fetch(&self, state: &mut State) -> Result<Vec<Jwk>, KeysError> {
        let jwks_uri = match &state.jwks_uri {
            Some(uri) => uri.clone(),
            None => {
                let uri = self.discover().await?;
                state.jwks_uri = Some(uri.clone());
                uri
            }
        };
        let body = self.get(&jwks_uri).await?;
        let raw: RawKeySet = serde_json::from_slice(&body).map_err(|_| KeysError::KeySet)?;
        // Keys of kinds this server does not use (encryption keys, unknown types) are skipped,
        // not fatal: the issuer's set is shared with other relying parties.
        Ok(raw
            .keys
            .into_iter()
            .filter_map(|k| serde_json::from_value::<Jwk>(k).ok())
            .collect())
    }

    async fn discover(&self) -> Result<Url, KeysError> {
        let mut last = KeysError::Metadata;
        for url in metadata_urls(&self.issuer_url) {
            let body = match self.get(&url).await {
                Ok(body) => body,
                Err(e) => {
                    last = e;
                    continue;
                }
            };
            let metadata: Metadata =
                serde_json::from_slice(&body).map_err(|_| KeysError::Metadata)?;
            if metadata.issuer != self.issuer {
                return Err(KeysError::IssuerMismatch);
            }
            return parse_root(&metadata.jwks_uri).map_err(|_| KeysError::JwksUri);
        }
        Err(last)
    }

    /// A bounded GET of a JSON document.
    async fn get(&self, url: &Url) -> Result<Vec<u8>, KeysError> {
        let mut response = self
            .client
            .get(url.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|_| KeysError::Unreachable)?;
        if !response.status().is_success() {
            return Err(KeysError::Metadata);
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|_| KeysError::Unreachable)? {
            if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                return Err(KeysError::Metadata);
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

fn find<'k>(keys: &'k [Jwk], kid: Option<&str>) -> Option<&'k Jwk> {
    match kid {
        Some(kid) => keys
            .iter()
            .find(|k| k.common.key_id.as_deref() == Some(kid)),
        None if keys.len() == 1 => keys.first(),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_is_looked_for_where_both_rfcs_put_it() {
        let at = |issuer: &str| -> Vec<String> {
            metadata_urls(&Url::parse(issuer).expect("url"))
                .into_iter()
                .map(String::from)
                .collect()
        };
        assert_eq!(
            at("https://login.example.com/tenant/v2.0"),
            [
                "https://login.example.com/.well-known/oauth-authorization-server/tenant/v2.0",
                "https://login.example.com/tenant/v2.0/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            at("https://auth.example.org/"),
            [
                "https://auth.example.org/.well-known/oauth-authorization-server",
                "https://auth.example.org/.well-known/openid-configuration"
            ]
        );
    }

    #[test]
    fn only_https_or_loopback_http_urls_are_fetched() {
        for ok in [
            "https://login.example.com/t",
            "http://127.0.0.1:9000/",
            "http://localhost:9000/jwks",
            "http://[::1]:9/",
        ] {
            assert!(parse_root(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://login.example.com/",
            "https://user:pw@login.example.com/",
            "https://login.example.com/?x=1",
            "ftp://login.example.com/",
        ] {
            assert!(parse_root(bad).is_err(), "{bad}");
        }
    }
}
