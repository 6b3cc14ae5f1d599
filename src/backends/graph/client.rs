//! One HTTP exchange with Graph, with the retry rules the service documents: the only code that
//! sends a Graph request.
//!
//! Invariants:
//! - Every request carries the client's bearer token (the app's, or for a mailbox with
//!   `backend.auth` its delegated alias's: [`GraphTokens`]) and `Prefer: IdType="ImmutableId"`,
//!   so an id Graph hands out survives a move; the token goes only to URLs built by
//!   `endpoints`.
//! - Concurrency per mailbox is bounded by the caller's gate (Exchange allows four concurrent
//!   requests per app and mailbox); the gate is held for the whole exchange, body included.
//! - 429, and 503 for requests that are safe to repeat, are retried after `Retry-After`
//!   (seconds or an HTTP date; an exponential backoff when absent) plus jitter, at most
//!   [`MAX_RETRIES`] times and never past the call's deadline: a wait that would outlast it is
//!   returned at once as `Throttled` with the server's hint. A 401 drops the token and retries
//!   once (for a delegated token: one refresh); a delegated alias that must sign in again is
//!   `AuthRequired` before any request. Requests that change mail are repeated only after a 429 or 401, which Graph answers
//!   before doing anything; never after a 5xx or a timeout, which may hide a done change.
//! - A body is read up to the caller's bound and no further (`TooLarge` past it).
//! - Failures are classes (`BackendError`); Graph's error text, which may echo addresses, is
//!   never passed on or logged. A caller that must tell failures apart (an expired delta
//!   round) may ask for Graph's error code, a fixed identifier, beside the status.

use std::time::{Duration, Instant};

use crate::coordination::upstream::AccountLimits;
use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode, Url};
use serde::de::DeserializeOwned;

use super::auth::GraphTokens;
use super::endpoints::Endpoints;
use crate::backends::BackendError;

/// Retries after throttling or a transient 503, per request.
pub(crate) const MAX_RETRIES: u32 = 3;
/// Longest single wait honoured, whatever `Retry-After` says.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(120);
/// First backoff when the server gives no `Retry-After`.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// Connection setup bound.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Whole-request bound (the call's deadline usually ends it sooner).
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Largest JSON answer read (a page of 100 summaries is well under 1 MiB).
pub(crate) const MAX_JSON_BYTES: u64 = 16 * 1024 * 1024;
/// Largest error answer read when the caller needs Graph's error code (an error object is a
/// few hundred bytes).
const MAX_ERROR_BYTES: u64 = 64 * 1024;

/// What a request sends.
pub(crate) enum Body {
    None,
    Json(serde_json::Value),
    /// A whole RFC 5322 message, base64-encoded as `text/plain` (Graph's MIME upload).
    Mime(Vec<u8>),
}

/// Whether repeating the request after an ambiguous failure is harmless.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Repeat {
    /// Reads and setting a flag: repeat after 429, 503 and 401.
    Safe,
    /// Move, copy, create, send: repeat only after 429 and 401 (not processed).
    OnlyIfUnprocessed,
}

/// One request.
pub(crate) struct Request {
    pub(crate) method: Method,
    pub(crate) url: Url,
    pub(crate) body: Body,
    /// Ask for message bodies as text (`Prefer: outlook.body-content-type="text"`).
    pub(crate) text_body: bool,
    pub(crate) repeat: Repeat,
    /// Largest response body accepted.
    pub(crate) max_bytes: u64,
    /// Items per page asked of a collection that takes no `$top` (`Prefer:
    /// odata.maxpagesize`, what `messages/delta` pages by).
    pub(crate) max_page_size: Option<u32>,
    /// Read a refused answer's body for Graph's error code ([`GraphClient::exchange_or_refusal`]):
    /// a delta round tells an expired sync state from other failures by it.
    pub(crate) error_code: bool,
}

/// A non-success answer that is not retried, as a caller that tells failures apart by Graph's
/// error code sees it. The code is a fixed identifier (`syncStateNotFound`), never the
/// message text, which may echo addresses.
#[derive(Debug)]
pub(crate) struct Refusal {
    pub(crate) status: StatusCode,
    pub(crate) code: Option<String>,
}

impl Request {
    pub(crate) fn get(url: Url) -> Self {
        Self {
            method: Method::GET,
            url,
            body: Body::None,
            text_body: false,
            repeat: Repeat::Safe,
            max_bytes: MAX_JSON_BYTES,
            max_page_size: None,
            error_code: false,
        }
    }

    pub(crate) fn change(method: Method, url: Url, body: Body, repeat: Repeat) -> Self {
        Self {
            method,
            url,
            body,
            text_body: false,
            repeat,
            max_bytes: MAX_JSON_BYTES,
            max_page_size: None,
            error_code: false,
        }
    }
}

/// A Graph client: HTTP connection pool plus the token source. The process's (app-only) one
/// serves every Graph mailbox without `backend.auth`; each mailbox with it has its own.
pub(crate) struct GraphClient {
    http: reqwest::Client,
    tokens: GraphTokens,
    endpoints: Endpoints,
}

/// `Retry-After` as a duration: delta-seconds or an HTTP date (RFC 9110 §10.2.3), capped.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let raw = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    let wait = if let Ok(seconds) = raw.parse::<u64>() {
        Duration::from_secs(seconds)
    } else {
        let at = chrono::DateTime::parse_from_rfc2822(raw).ok()?;
        (at.with_timezone(&chrono::Utc) - chrono::Utc::now())
            .to_std()
            .unwrap_or(Duration::ZERO)
    };
    Some(wait.min(MAX_WAIT))
}

/// `wait` plus up to a fifth more, so throttled callers do not return in lockstep.
fn with_jitter(wait: Duration) -> Duration {
    let fifth = u64::try_from(wait.as_millis() / 5).unwrap_or(u64::MAX);
    wait + Duration::from_millis(rand::random_range(0..=fifth))
}

impl GraphClient {
    pub(crate) fn new(http: reqwest::Client, tokens: GraphTokens, endpoints: Endpoints) -> Self {
        Self {
            http,
            tokens,
            endpoints,
        }
    }

    /// The URLs of the configured cloud.
    pub(crate) fn endpoints(&self) -> &Endpoints {
        &self.endpoints
    }

    #[cfg(test)]
    pub(crate) fn tokens(&self) -> &GraphTokens {
        &self.tokens
    }

    /// Sends `req` under `gate` and the deadline; the body of a 2xx answer.
    pub(crate) async fn exchange(
        &self,
        gate: &AccountLimits,
        req: &Request,
        deadline: Instant,
    ) -> Result<Vec<u8>, BackendError> {
        self.exchange_or_refusal(gate, req, deadline)
            .await?
            .map_err(|refusal| classify(refusal.status))
    }

    /// [`Self::exchange`], except that a failure status that is not retried comes back as a
    /// [`Refusal`] (with Graph's error code when `req.error_code`) instead of its class.
    /// Throttling, token refresh and the deadline work exactly as for `exchange`.
    pub(crate) async fn exchange_or_refusal(
        &self,
        gate: &AccountLimits,
        req: &Request,
        deadline: Instant,
    ) -> Result<Result<Vec<u8>, Refusal>, BackendError> {
        let deadline = tokio::time::Instant::from_std(deadline);
        let mut refreshed = false;
        let mut retries = 0;
        loop {
            let exchange = async {
                let _slot = gate.enter().await.map_err(|_| BackendError::Unavailable)?;
                let token = self.tokens.get().await?;
                let response = self
                    .build(req, token.expose())
                    .send()
                    .await
                    .map_err(transport_error)?;
                let status = response.status();
                let wait = retry_after(response.headers());
                let body = if status.is_success() {
                    read_bounded(response, req.max_bytes).await?
                } else if req.error_code {
                    // Only the code is wanted: an unreadable error body is just no code.
                    read_bounded(response, MAX_ERROR_BYTES)
                        .await
                        .unwrap_or_default()
                } else {
                    Vec::new()
                };
                Ok::<_, BackendError>((status, wait, body, token))
            };
            let (status, wait, body, token) = tokio::time::timeout_at(deadline, exchange)
                .await
                .map_err(|_| BackendError::Timeout)??;
            if status.is_success() {
                return Ok(Ok(body));
            }
            let retry = match status {
                StatusCode::UNAUTHORIZED if !refreshed => {
                    self.tokens.invalidate(&token).await;
                    refreshed = true;
                    continue;
                }
                StatusCode::TOO_MANY_REQUESTS => true,
                StatusCode::SERVICE_UNAVAILABLE => req.repeat == Repeat::Safe,
                _ => false,
            };
            if !retry {
                let code = req
                    .error_code
                    .then(|| serde_json::from_slice::<super::wire::ErrorBody>(&body).ok())
                    .flatten()
                    .and_then(|b| b.error.code);
                return Ok(Err(Refusal { status, code }));
            }
            let pause = with_jitter(wait.unwrap_or(FIRST_BACKOFF * 2u32.pow(retries)));
            let out_of_time = tokio::time::Instant::now() + pause >= deadline;
            if retries >= MAX_RETRIES || out_of_time {
                tracing::debug!(
                    status = status.as_u16(),
                    retries,
                    "graph throttling outlasted the budget"
                );
                return Err(
                    if status == StatusCode::TOO_MANY_REQUESTS || wait.is_some() {
                        BackendError::Throttled { retry_after: wait }
                    } else {
                        BackendError::Unavailable
                    },
                );
            }
            retries += 1;
            tokio::time::sleep(pause).await;
        }
    }

    /// [`Self::exchange`], the answer parsed as JSON (`Malformed` when it is not what `T` needs).
    pub(crate) async fn json<T: DeserializeOwned>(
        &self,
        gate: &AccountLimits,
        req: &Request,
        deadline: Instant,
    ) -> Result<T, BackendError> {
        let body = self.exchange(gate, req, deadline).await?;
        serde_json::from_slice(&body).map_err(|_| BackendError::Malformed)
    }

    fn build(&self, req: &Request, token: &str) -> reqwest::RequestBuilder {
        let mut prefer = String::from("IdType=\"ImmutableId\"");
        if req.text_body {
            prefer.push_str(", outlook.body-content-type=\"text\"");
        }
        if let Some(n) = req.max_page_size {
            prefer.push_str(&format!(", odata.maxpagesize={n}"));
        }
        let builder = self
            .http
            .request(req.method.clone(), req.url.clone())
            .bearer_auth(token)
            .header("Prefer", prefer);
        match &req.body {
            Body::None => builder,
            Body::Json(value) => builder.json(value),
            Body::Mime(raw) => {
                use base64::Engine as _;
                builder
                    .header(reqwest::header::CONTENT_TYPE, "text/plain")
                    .body(base64::engine::general_purpose::STANDARD.encode(raw))
            }
        }
    }
}

/// The class of a failure to exchange with the server at all (connect, TLS, reset, timeout).
pub(crate) fn transport_error(e: reqwest::Error) -> BackendError {
    if e.is_timeout() {
        BackendError::Timeout
    } else {
        BackendError::Unavailable
    }
}

/// The error class of a non-success status that is not retried.
pub(crate) fn classify(status: StatusCode) -> BackendError {
    match status {
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => BackendError::Unauthorised,
        StatusCode::NOT_FOUND | StatusCode::GONE => BackendError::NotFound,
        // Graph answers a malformed id with 400 ErrorInvalidIdMalformed; the requests built by
        // `endpoints` are otherwise well-formed, so a 400 is about the id the caller gave.
        StatusCode::BAD_REQUEST => BackendError::BadId,
        StatusCode::PAYLOAD_TOO_LARGE => BackendError::TooLarge,
        StatusCode::TOO_MANY_REQUESTS => BackendError::Throttled { retry_after: None },
        _ => BackendError::Unavailable,
    }
}

/// The response body, refused past `max` bytes (the declared length is checked first).
async fn read_bounded(mut response: reqwest::Response, max: u64) -> Result<Vec<u8>, BackendError> {
    if response.content_length().is_some_and(|n| n > max) {
        return Err(BackendError::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(transport_error)? {
        if (body.len() + chunk.len()) as u64 > max {
            return Err(BackendError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let mut headers = HeaderMap::new();
        headers.insert("Retry-After", HeaderValue::from_static("7"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(7)));
        let soon = (chrono::Utc::now() + chrono::Duration::seconds(30))
            .format("%a, %d %b %Y %H:%M:%S GMT")
            .to_string();
        headers.insert("Retry-After", HeaderValue::from_str(&soon).expect("header"));
        let wait = retry_after(&headers).expect("a date");
        assert!(
            (Duration::from_secs(28)..=Duration::from_secs(30)).contains(&wait),
            "{wait:?}"
        );
        headers.insert(
            "Retry-After",
            HeaderValue::from_static("Sun, 06 Nov 1994 08:49:37 GMT"),
        );
        assert_eq!(retry_after(&headers), Some(Duration::ZERO), "a past date");
        headers.insert("Retry-After", HeaderValue::from_static("86400"));
        assert_eq!(retry_after(&headers), Some(MAX_WAIT), "capped");
        headers.insert("Retry-After", HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&headers), None);
    }

    #[test]
    fn jitter_adds_at_most_a_fifth() {
        for _ in 0..100 {
            let w = with_jitter(Duration::from_millis(1000));
            assert!((1000..=1200).contains(&w.as_millis()), "{w:?}");
        }
    }
}
