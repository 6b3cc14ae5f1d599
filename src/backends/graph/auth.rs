//! The bearer tokens a Graph client sends ([`GraphTokens`]): app-only ones (OAuth 2.0 client
//! credentials: a client secret or a certificate-signed client assertion, exchanged at the
//! tenant's token endpoint; [`TokenSource`]), or a delegated alias's (issue 37: the operator's
//! sign-in, refreshed by `delegated::source`). Both are `delegated::grants::AccessToken`.
//!
//! Invariants: one token is cached in memory per process and refreshed shortly before it
//! expires; refreshing happens under one lock, so concurrent callers that find the token stale
//! wait for one request instead of each sending their own (no stampede). A token a request
//! found rejected (HTTP 401) is dropped only if it is still the cached one, so a burst of 401s
//! causes one refresh. Neither the token nor the credential is ever formatted: both have
//! redacting `Debug` and no `Display`, and errors carry classes, never the endpoint's text.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use reqwest::{StatusCode, Url};
use serde::Deserialize;

use super::assertion::CertificateCredential;
use crate::backends::BackendError;
use crate::backends::bearer::DelegatedBearer;
use crate::config::env::Secret;
use crate::delegated::grants::AccessToken;

/// Refresh this long before the token's stated expiry (clock skew, a slow request).
const REFRESH_MARGIN: Duration = Duration::from_secs(300);
/// Longest wait for the token endpoint.
const TOKEN_TIMEOUT: Duration = Duration::from_secs(30);

/// What proves the app's identity.
pub(crate) enum AppCredential {
    Secret(Secret),
    Certificate(CertificateCredential),
}

struct Cached {
    token: AccessToken,
    refresh_at: Instant,
}

#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    expires_in: u64,
}

/// Where a Graph client's tokens come from: the process's app registration (every Graph
/// mailbox without `backend.auth`), or one delegated alias's sign-in (its own client).
pub(crate) enum GraphTokens {
    App(Box<TokenSource>),
    Delegated(DelegatedBearer),
}

impl GraphTokens {
    /// A token valid for a while yet. A delegated alias that must sign in again is
    /// [`BackendError::AuthRequired`] (`backends::bearer::token_error`).
    pub(crate) async fn get(&self) -> Result<AccessToken, BackendError> {
        match self {
            GraphTokens::App(source) => source.get().await,
            GraphTokens::Delegated(bearer) => bearer.get().await,
        }
    }

    /// Graph refused `stale` (HTTP 401): the next [`get`](Self::get) fetches or refreshes.
    pub(crate) async fn invalidate(&self, stale: &AccessToken) {
        match self {
            GraphTokens::App(source) => source.invalidate(stale).await,
            GraphTokens::Delegated(bearer) => bearer.invalidate(stale).await,
        }
    }

    /// Tokens fetched (app) or refreshes asked for (delegated) so far.
    #[cfg(test)]
    pub(crate) fn fetched(&self) -> u64 {
        match self {
            GraphTokens::App(source) => source.fetched(),
            GraphTokens::Delegated(bearer) => bearer.refreshes(),
        }
    }
}

/// The process's token source for one app registration.
pub(crate) struct TokenSource {
    http: reqwest::Client,
    token_url: Url,
    scope: String,
    client_id: String,
    credential: AppCredential,
    cached: tokio::sync::Mutex<Option<Cached>>,
    /// Tokens fetched so far (metadata for logs and tests).
    fetched: AtomicU64,
}

impl TokenSource {
    pub(crate) fn new(
        http: reqwest::Client,
        token_url: Url,
        scope: String,
        client_id: String,
        credential: AppCredential,
    ) -> Self {
        Self {
            http,
            token_url,
            scope,
            client_id,
            credential,
            cached: tokio::sync::Mutex::new(None),
            fetched: AtomicU64::new(0),
        }
    }

    /// A token valid for a while yet, fetching one when none is cached or it is due.
    pub(crate) async fn get(&self) -> Result<AccessToken, BackendError> {
        let mut cached = self.cached.lock().await;
        if let Some(c) = cached.as_ref()
            && Instant::now() < c.refresh_at
        {
            return Ok(c.token.clone());
        }
        let fresh = self.fetch().await?;
        let token = fresh.token.clone();
        *cached = Some(fresh);
        Ok(token)
    }

    /// Forgets `stale` if it is still the cached token (a request found it rejected).
    pub(crate) async fn invalidate(&self, stale: &AccessToken) {
        let mut cached = self.cached.lock().await;
        if cached.as_ref().is_some_and(|c| &c.token == stale) {
            *cached = None;
        }
    }

    #[cfg(test)]
    pub(crate) fn fetched(&self) -> u64 {
        self.fetched.load(Ordering::Relaxed)
    }

    async fn fetch(&self) -> Result<Cached, BackendError> {
        let mut form: Vec<(&str, String)> = vec![
            ("grant_type", "client_credentials".to_owned()),
            ("client_id", self.client_id.clone()),
            ("scope", self.scope.clone()),
        ];
        match &self.credential {
            AppCredential::Secret(secret) => {
                form.push(("client_secret", secret.expose().to_owned()));
            }
            AppCredential::Certificate(cert) => {
                let assertion = cert
                    .assertion(&self.client_id, self.token_url.as_str(), SystemTime::now())
                    .map_err(|_| BackendError::Unauthorised)?;
                form.push((
                    "client_assertion_type",
                    "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".to_owned(),
                ));
                form.push(("client_assertion", assertion));
            }
        }
        let started = Instant::now();
        let response = self
            .http
            .post(self.token_url.clone())
            .form(&form)
            .timeout(TOKEN_TIMEOUT)
            .send()
            .await
            .map_err(super::client::transport_error)?;
        let status = response.status();
        if !status.is_success() {
            return Err(match status {
                StatusCode::TOO_MANY_REQUESTS => BackendError::Throttled {
                    retry_after: super::client::retry_after(response.headers()),
                },
                s if s.is_server_error() => BackendError::Unavailable,
                // invalid_client, unauthorized_client, a tenant that does not exist, …
                _ => BackendError::Unauthorised,
            });
        }
        let body: TokenResponse = response.json().await.map_err(|_| BackendError::Malformed)?;
        if body.access_token.is_empty() {
            return Err(BackendError::Malformed);
        }
        self.fetched.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(
            expires_in_seconds = body.expires_in,
            "graph access token fetched"
        );
        let lifetime = Duration::from_secs(body.expires_in);
        // A short-lived token is refreshed halfway through instead of never being cached.
        let fresh_for = lifetime.checked_sub(REFRESH_MARGIN).unwrap_or(lifetime / 2);
        Ok(Cached {
            token: AccessToken::new(body.access_token),
            refresh_at: started + fresh_for,
        })
    }
}

#[cfg(test)]
mod tests {
    use wiremock::matchers::{body_string_contains, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;

    fn source(server: &MockServer) -> TokenSource {
        let url = Url::parse(&format!("{}/tenant-1/oauth2/v2.0/token", server.uri())).expect("url");
        TokenSource::new(
            reqwest::Client::new(),
            url,
            "https://graph.microsoft.com/.default".into(),
            "client-1".into(),
            AppCredential::Secret(
                crate::config::env::Env::from_pairs([("S", "pa55")])
                    .secret("S")
                    .expect("secret"),
            ),
        )
    }

    /// Concurrent callers share one fetch; a rejected token is refreshed once, and only while it
    /// is still the cached one.
    #[tokio::test]
    async fn one_fetch_for_many_callers_and_one_refresh_per_rejection() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/tenant-1/oauth2/v2.0/token"))
            .and(body_string_contains("grant_type=client_credentials"))
            .and(body_string_contains("client_secret=pa55"))
            .and(body_string_contains(
                "scope=https%3A%2F%2Fgraph.microsoft.com%2F.default",
            ))
            .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
                "token_type": "Bearer", "expires_in": 3599, "access_token": "tok-1"
            })))
            .mount(&server)
            .await;
        let tokens = source(&server);
        let all = futures::future::join_all((0..16).map(|_| tokens.get())).await;
        assert!(
            all.iter()
                .all(|t| t.as_ref().ok().map(AccessToken::expose) == Some("tok-1"))
        );
        assert_eq!(tokens.fetched(), 1, "no stampede");
        let stale = tokens.get().await.expect("cached");
        tokens.invalidate(&stale).await;
        tokens.invalidate(&stale).await;
        let _ = tokens.get().await.expect("refetched");
        let _ = tokens.get().await.expect("cached again");
        assert_eq!(tokens.fetched(), 2);
        assert!(!format!("{stale:?}").contains("tok-1"));
    }

    #[tokio::test]
    async fn refusals_map_to_classes() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(401).set_body_json(serde_json::json!({
                "error": "invalid_client",
                "error_description": "AADSTS7000215: Invalid client secret provided."
            })))
            .up_to_n_times(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(503))
            .up_to_n_times(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_string("{\"access_tok"))
            .mount(&server)
            .await;
        let tokens = source(&server);
        assert!(matches!(
            tokens.get().await,
            Err(BackendError::Unauthorised)
        ));
        assert!(matches!(tokens.get().await, Err(BackendError::Unavailable)));
        assert!(matches!(tokens.get().await, Err(BackendError::Malformed)));
    }
}
