//! The HTTP front: what every request meets before rmcp's Streamable HTTP service, and the
//! bounds around it. Routes `/mcp` (MCP, POST only), `/health` and `/healthz` (`{"ok":true}`,
//! nothing else), and answers 404 elsewhere.
//!
//! Order, all before the body is read: `Host`/`Origin` (403) → route → bearer (401, with
//! `WWW-Authenticate: Bearer`) → method (405) → a request slot (503 when all are taken) → the
//! declared length (413). Then the body is read within a size bound and a time bound (413 / 408:
//! a slow body cannot hold a slot), must parse as one JSON-RPC message (400, `-32700` or
//! `-32600`, as the reference plugin answers; rmcp's own error text would quote the body), and
//! only then reaches rmcp, stateless (a fresh server per request over the one shared `App`: no
//! session to guess, fixate or leak), under the per-request timeout. Error bodies are fixed
//! strings; nothing here quotes a request.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{ALLOW, CACHE_CONTROL, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full, LengthLimitError, Limited};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::guard::{Guard, Refusal};
use super::oauth::{self, ResourceServer};
use crate::server::MailServer;
use crate::tools::App;

/// A response body.
pub(crate) type Body = BoxBody<Bytes, Infallible>;

/// The bounds of the HTTP transport. Loopback clients send a request head and body in
/// microseconds, so the read timeouts are short; the request timeout leaves room for the longest
/// tool call (a search's 20 s deadline after waiting for a call slot, an extraction's 30 s).
#[derive(Clone, Debug)]
pub(crate) struct Limits {
    /// Largest request body (the reference plugin's 1 MB; the largest tool input is far smaller).
    pub(crate) body_bytes: usize,
    /// Largest request head (hyper answers 431 beyond it).
    pub(crate) head_bytes: usize,
    /// Most header lines in a request head.
    pub(crate) headers: usize,
    /// Time to receive a request head, also the idle limit of a kept-alive connection.
    pub(crate) head_timeout: Duration,
    /// Time to receive a request body once its head arrived.
    pub(crate) body_timeout: Duration,
    /// Time for rmcp and the tool to answer once the body arrived.
    pub(crate) request_timeout: Duration,
    /// Requests served at once; more are answered 503 with `Retry-After` at once.
    pub(crate) requests: usize,
    /// Connections open at once; more wait in the kernel's accept queue.
    pub(crate) connections: usize,
    /// After SIGINT/SIGTERM: time in-flight requests get to finish before they are cancelled.
    pub(crate) shutdown_grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            body_bytes: 1024 * 1024,
            head_bytes: 16 * 1024,
            headers: 64,
            head_timeout: Duration::from_secs(5),
            body_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(60),
            requests: 32,
            connections: 128,
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// The request handler shared by every connection.
pub(crate) struct Front {
    guard: Guard,
    /// The OAuth resource server, when people authenticate by token (else the guard's bearer).
    oauth: Option<Arc<ResourceServer>>,
    mcp: StreamableHttpService<MailServer, NeverSessionManager>,
    slots: Arc<Semaphore>,
    limits: Limits,
}

impl Front {
    /// The front behind `guard` (which knows the bound port); `cancel` stops rmcp's in-flight
    /// handlers at shutdown.
    pub(crate) fn new(
        app: Arc<App>,
        guard: Guard,
        oauth: Option<Arc<ResourceServer>>,
        limits: Limits,
        cancel: CancellationToken,
    ) -> Self {
        // rmcp's own Host and Origin checks stay on behind ours (pinned to the port, Origin
        // enforced), so a future change to `Guard` cannot silently open them.
        let config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(guard.hosts_with_port())
            .with_allowed_origins(guard.origins_with_ports())
            .enforce_origin_validation()
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .with_max_request_body_bytes(limits.body_bytes)
            .with_cancellation_token(cancel);
        let mcp = StreamableHttpService::new(
            move || Ok(MailServer::read_only_transport(Arc::clone(&app))),
            Arc::new(NeverSessionManager::default()),
            config,
        );
        Self {
            guard,
            oauth,
            mcp,
            slots: Arc::new(Semaphore::new(limits.requests)),
            limits,
        }
    }

    /// Requests holding a slot (tests wait on this instead of sleeping).
    #[cfg(test)]
    pub(super) fn in_flight(&self) -> usize {
        self.limits.requests - self.slots.available_permits()
    }

    /// Answers one request (see the module doc for the order of checks).
    pub(crate) async fn handle<B>(&self, request: Request<B>) -> Response<Body>
    where
        B: hyper::body::Body<Data = Bytes> + Send + 'static,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let mut response = self.route(request).await;
        let headers = response.headers_mut();
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        headers.insert(
            "x-content-type-options",
            HeaderValue::from_static("nosniff"),
        );
        response
    }

    async fn route<B>(&self, request: Request<B>) -> Response<Body>
    where
        B: hyper::body::Body<Data = Bytes> + Send + 'static,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let (mut parts, body) = request.into_parts();
        if let Err(refusal) = self.guard.check_site(&parts.uri, &parts.headers) {
            return refused(refusal);
        }
        if let Some(oauth) = &self.oauth
            && oauth.is_metadata_path(parts.uri.path())
        {
            return match parts.method {
                Method::GET | Method::HEAD => json_bytes(StatusCode::OK, oauth.metadata()),
                _ => method_not_allowed("GET"),
            };
        }
        match parts.uri.path() {
            "/mcp" => {}
            "/health" | "/healthz" if matches!(parts.method, Method::GET | Method::HEAD) => {
                return json(StatusCode::OK, r#"{"ok":true}"#);
            }
            "/health" | "/healthz" => return method_not_allowed("GET"),
            _ => return json(StatusCode::NOT_FOUND, r#"{"error":"not_found"}"#),
        }
        let caller = match &self.oauth {
            Some(oauth) => match oauth.authenticate(&parts.headers).await {
                Ok(caller) => caller,
                Err(denial) => {
                    tracing::info!(reason = denial.code(), "an HTTP request was refused");
                    return oauth_refused(oauth.refusal(denial));
                }
            },
            None => match self.guard.authenticate(&parts.headers) {
                Ok(caller) => caller,
                Err(refusal) => return refused(refusal),
            },
        };
        // The server reads the caller from here (`MailServer::caller`); rmcp hands handlers the
        // request's parts.
        parts.extensions.insert(Arc::new(caller));
        if parts.method != Method::POST {
            return method_not_allowed("POST");
        }
        let Ok(_slot) = Arc::clone(&self.slots).try_acquire_owned() else {
            let mut busy = rpc_error(StatusCode::SERVICE_UNAVAILABLE, -32000, "Server busy");
            busy.headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from_static("1"));
            return busy;
        };
        let declared = parts
            .headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > self.limits.body_bytes as u64) {
            return too_large();
        }
        let read = Limited::new(body, self.limits.body_bytes).collect();
        let bytes = match tokio::time::timeout(self.limits.body_timeout, read).await {
            Ok(Ok(collected)) => collected.to_bytes(),
            Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => return too_large(),
            // The client broke off its own body: nothing to parse, and the connection is done.
            Ok(Err(_)) => {
                return close(rpc_error(StatusCode::BAD_REQUEST, -32700, "Parse error"));
            }
            Err(_) => {
                return close(rpc_error(
                    StatusCode::REQUEST_TIMEOUT,
                    -32000,
                    "Request body not received in time",
                ));
            }
        };
        let id = match serde_json::from_slice::<ClientJsonRpcMessage>(&bytes) {
            Ok(ClientJsonRpcMessage::Request(request)) => {
                serde_json::to_value(&request.id).unwrap_or(serde_json::Value::Null)
            }
            Ok(_) => serde_json::Value::Null,
            Err(e) if e.is_syntax() || e.is_eof() => {
                return rpc_error(StatusCode::BAD_REQUEST, -32700, "Parse error");
            }
            Err(_) => return rpc_error(StatusCode::BAD_REQUEST, -32600, "Invalid Request"),
        };
        let request = Request::from_parts(parts, Full::new(bytes));
        match tokio::time::timeout(self.limits.request_timeout, self.mcp.handle(request)).await {
            Ok(response) => response,
            // Dropping rmcp's future cancels the handler (its disconnect guard).
            Err(_) => rpc_error_with_id(
                StatusCode::SERVICE_UNAVAILABLE,
                -32000,
                "Request timed out",
                id,
            ),
        }
    }
}

fn json(status: StatusCode, body: &'static str) -> Response<Body> {
    json_bytes(status, Bytes::from_static(body.as_bytes()))
}

fn json_bytes(status: StatusCode, body: Bytes) -> Response<Body> {
    let mut response = Response::new(Full::new(body).boxed());
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn oauth_refused(refusal: oauth::Refusal) -> Response<Body> {
    let mut response = json(refusal.status, refusal.body);
    if let Some(challenge) = refusal.www_authenticate {
        response.headers_mut().insert("www-authenticate", challenge);
    }
    if let Some(seconds) = refusal.retry_after {
        response
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

fn refused(refusal: Refusal) -> Response<Body> {
    match refusal {
        Refusal::Host => json(StatusCode::FORBIDDEN, r#"{"error":"host_not_allowed"}"#),
        Refusal::Origin => json(StatusCode::FORBIDDEN, r#"{"error":"origin_not_allowed"}"#),
        Refusal::Unauthorized => {
            let mut response = json(StatusCode::UNAUTHORIZED, r#"{"error":"unauthorized"}"#);
            response
                .headers_mut()
                .insert("www-authenticate", HeaderValue::from_static("Bearer"));
            response
        }
    }
}

fn method_not_allowed(allow: &'static str) -> Response<Body> {
    let mut response = json(
        StatusCode::METHOD_NOT_ALLOWED,
        r#"{"error":"method_not_allowed"}"#,
    );
    response
        .headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    response
}

fn too_large() -> Response<Body> {
    close(rpc_error(
        StatusCode::PAYLOAD_TOO_LARGE,
        -32000,
        "Request body too large",
    ))
}

/// Asks the client to close: the rest of a refused body is never read, so the connection cannot
/// carry another request.
fn close(mut response: Response<Body>) -> Response<Body> {
    response
        .headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

fn rpc_error(status: StatusCode, code: i64, message: &'static str) -> Response<Body> {
    rpc_error_with_id(status, code, message, serde_json::Value::Null)
}

fn rpc_error_with_id(
    status: StatusCode,
    code: i64,
    message: &'static str,
    id: serde_json::Value,
) -> Response<Body> {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "error": { "code": code, "message": message },
        "id": id,
    });
    json_bytes(status, Bytes::from(body.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::http::settings::{Auth, TokenDigest};
    use futures::StreamExt as _;
    use http_body_util::StreamBody;

    const PORT: u16 = 4100;
    const TOKEN: &str = "unit-token-00112233445566778899";
    const LIST: &str = r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#;

    fn front(limits: Limits) -> (Front, crate::tools::testutil::DemoApp) {
        let demo = crate::tools::testutil::demo_app();
        let guard = Guard::new(PORT, &[], Auth::Bearer(TokenDigest::of(TOKEN)));
        let front = Front::new(
            Arc::clone(&demo.app),
            guard,
            None,
            limits,
            CancellationToken::new(),
        );
        (front, demo)
    }

    fn request<B>(body: B) -> Request<B> {
        Request::post("/mcp")
            .header("host", format!("127.0.0.1:{PORT}"))
            .header("authorization", format!("Bearer {TOKEN}"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .body(body)
            .expect("a request")
    }

    /// A body that sends `first` and then nothing, ever (a slow client).
    fn stalled(
        first: &'static [u8],
    ) -> impl hyper::body::Body<Data = Bytes, Error = std::io::Error> {
        let frames =
            futures::stream::iter([Ok(hyper::body::Frame::data(Bytes::from_static(first)))])
                .chain(futures::stream::pending());
        StreamBody::new(frames)
    }

    async fn body_of(response: Response<Body>) -> String {
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("infallible")
            .to_bytes();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_body_holds_its_slot_only_until_the_body_timeout() {
        let limits = Limits {
            requests: 1,
            ..Limits::default()
        };
        let (front, _demo) = front(limits.clone());
        let front = Arc::new(front);
        let stalled_call = tokio::spawn({
            let front = Arc::clone(&front);
            async move { front.handle(request(stalled(b"{\"jsonrpc\""))).await }
        });
        // Let the stalled request take the only slot.
        tokio::task::yield_now().await;
        while front.slots.available_permits() > 0 {
            tokio::task::yield_now().await;
        }
        let busy = front
            .handle(request(Full::new(Bytes::from_static(LIST.as_bytes()))))
            .await;
        assert_eq!(busy.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(busy.headers()[RETRY_AFTER], "1");
        // Time passes (paused clock): the stalled body is cut at the body timeout.
        let stalled = stalled_call.await.expect("joined");
        assert_eq!(stalled.status(), StatusCode::REQUEST_TIMEOUT);
        assert_eq!(stalled.headers()[CONNECTION], "close");
        let served = front
            .handle(request(Full::new(Bytes::from_static(LIST.as_bytes()))))
            .await;
        assert_eq!(served.status(), StatusCode::OK);
        let answer: serde_json::Value = serde_json::from_str(&body_of(served).await).expect("json");
        assert_eq!(answer["result"]["tools"].as_array().map(Vec::len), Some(12));
    }

    #[tokio::test]
    async fn refusals_on_the_head_never_poll_the_body() {
        let (front, _demo) = front(Limits::default());
        // A body that panics if polled: a refusal must be decided on the head alone.
        struct Untouchable;
        impl hyper::body::Body for Untouchable {
            type Data = Bytes;
            type Error = std::io::Error;
            fn poll_frame(
                self: std::pin::Pin<&mut Self>,
                _: &mut std::task::Context<'_>,
            ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, std::io::Error>>>
            {
                panic!("the body was read before the head was checked")
            }
        }
        let cases: [(&str, &str, StatusCode); 4] = [
            ("host", "evil.example", StatusCode::FORBIDDEN),
            ("origin", "http://evil.example", StatusCode::FORBIDDEN),
            ("authorization", "Bearer wrong", StatusCode::UNAUTHORIZED),
            ("content-length", "1048577", StatusCode::PAYLOAD_TOO_LARGE),
        ];
        for (name, value, status) in cases {
            let mut request = request(Untouchable);
            request
                .headers_mut()
                .insert(name, HeaderValue::from_static(value));
            assert_eq!(front.handle(request).await.status(), status, "{name}");
        }
        let mut get = request(Untouchable);
        *get.method_mut() = Method::GET;
        assert_eq!(
            front.handle(get).await.status(),
            StatusCode::METHOD_NOT_ALLOWED
        );
    }
}
