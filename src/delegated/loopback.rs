//! The `--browser` sign-in's redirect receiver (issue 37; RFC 8252 §7.3): a one-shot HTTP
//! listener on `127.0.0.1` that the provider's authorization page redirects the browser to,
//! with the authorization code in the query; and the authorization URL that starts it.
//!
//! Why it is this small: the listener is reachable by every local process and, through the
//! browser, by any web page that guesses the port, for as long as the sign-in lasts. So it
//! speaks just enough HTTP/1 for a browser's redirect (one bounded request head per
//! connection, one fixed page back, then close), and nothing a request says is trusted until
//! its `state` is this sign-in's.
//!
//! Invariants:
//! - Only a `GET /callback` whose `state` equals this sign-in's (constant time, `pkce::State`)
//!   ends the wait. Anything else (a wrong or missing `state`, another path or method, a head
//!   over [`MAX_REQUEST_BYTES`], a connection idle past [`CONNECTION_TIMEOUT`]) is answered or
//!   dropped and the wait goes on: a stray or forged request must not be able to end, or
//!   choose the outcome of, the operator's sign-in. The wait ends at the caller's deadline.
//! - Connections are served side by side (at most [`MAX_CONNECTIONS`]), so an idle one (a
//!   browser's speculative preconnect, a local process holding a socket) cannot hold up the
//!   redirect.
//! - The page sent back is fixed text: nothing from the request is reflected. An `error` code
//!   reaches the caller only bounded and in `[A-Za-z0-9._-]`; `error_description` is ignored.
//! - The code is wiped from memory on drop (so is the request head that held it) and never
//!   printed.
//!
//! Who calls it: the login (`mailgate auth login --browser`), which then redeems the code with
//! `client::TokenClient::exchange_code`.

use std::fmt;
use std::net::Ipv4Addr;
use std::time::Duration;

use futures::StreamExt as _;
use futures::stream::FuturesUnordered;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use url::Url;
use zeroize::Zeroizing;

use super::endpoints::Endpoints;
use super::pkce::{CHALLENGE_METHOD, Pkce, State};

/// The redirect URI's path (the app registration lists `http://127.0.0.1/callback`; Microsoft
/// and Google ignore the port of a loopback redirect, RFC 8252 §7.3).
pub(crate) const CALLBACK_PATH: &str = "/callback";
/// The largest request head read (a redirect with a Microsoft code is under 2 KiB).
pub(crate) const MAX_REQUEST_BYTES: usize = 8 * 1024;
/// How long one connection may take to send its head and take the answer.
pub(crate) const CONNECTION_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once; more wait in the listen queue.
pub(crate) const MAX_CONNECTIONS: usize = 8;
/// The longest authorization code accepted.
const MAX_CODE_BYTES: usize = 4 * 1024;
/// The longest `error` code passed on.
const MAX_ERROR_CODE_BYTES: usize = 64;
/// What an `error` outside its bounds or charset is passed on as.
const UNRECOGNISED_ERROR: &str = "unrecognised";

/// Why the receiver stopped without a code. The texts name no value from the request but the
/// sanitised `error` code.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum LoopbackError {
    #[error("could not listen on 127.0.0.1 for the sign-in's redirect")]
    Bind,
    #[error("could not accept the sign-in's redirect")]
    Accept,
    #[error("the sign-in did not finish in time")]
    TimedOut,
    /// The provider redirected with `error` (`access_denied`: the operator declined).
    #[error("the provider ended the sign-in with error {0}")]
    Denied(String),
    #[error("the provider's redirect carried no usable authorization code")]
    Malformed,
}

/// The authorization code from the redirect: redeemable (with the PKCE verifier) once.
pub(crate) struct AuthorizationCode(Zeroizing<String>);

impl AuthorizationCode {
    /// The code itself, for the token request's body.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    #[cfg(test)]
    pub(crate) fn for_tests(code: &str) -> AuthorizationCode {
        AuthorizationCode(Zeroizing::new(code.to_owned()))
    }
}

impl fmt::Debug for AuthorizationCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AuthorizationCode(<redacted>)")
    }
}

/// The listener, bound before the browser opens so the redirect URI names its port.
#[derive(Debug)]
pub(crate) struct LoopbackReceiver {
    listener: TcpListener,
    redirect_uri: String,
}

impl LoopbackReceiver {
    /// Listens on `127.0.0.1` on a port the system picks (RFC 8252 §7.3: the IP literal, not
    /// `localhost`, which may resolve elsewhere or to IPv6 first).
    pub(crate) async fn bind() -> Result<LoopbackReceiver, LoopbackError> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .map_err(|_| LoopbackError::Bind)?;
        let port = listener
            .local_addr()
            .map_err(|_| LoopbackError::Bind)?
            .port();
        Ok(LoopbackReceiver {
            listener,
            redirect_uri: format!("http://127.0.0.1:{port}{CALLBACK_PATH}"),
        })
    }

    /// `http://127.0.0.1:{port}/callback`: for the authorization URL and the code exchange.
    pub(crate) fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }

    /// Serves connections until a redirect with `state` arrives or `deadline` passes; the
    /// listener closes when this returns.
    pub(crate) async fn wait(
        self,
        state: &State,
        deadline: Instant,
    ) -> Result<AuthorizationCode, LoopbackError> {
        let mut connections = FuturesUnordered::new();
        let expiry = tokio::time::sleep_until(deadline);
        tokio::pin!(expiry);
        loop {
            tokio::select! {
                () = &mut expiry => return Err(LoopbackError::TimedOut),
                accepted = self.listener.accept(), if connections.len() < MAX_CONNECTIONS => {
                    match accepted {
                        Ok((stream, _)) => connections.push(serve(stream, state)),
                        // The client gave up between SYN and accept: not ours to mind.
                        Err(e) if e.kind() == std::io::ErrorKind::ConnectionAborted => {}
                        Err(_) => return Err(LoopbackError::Accept),
                    }
                }
                Some(verdict) = connections.next() => {
                    if let Verdict::Done(result) = verdict {
                        return result;
                    }
                }
            }
        }
    }
}

/// The authorization request (RFC 6749 §4.1.1 with RFC 7636's S256 challenge) the browser is
/// sent to, plus the provider's own parameters (Google's offline access). `login_hint`
/// pre-fills the account (the alias's address, or its `delegatedFrom`).
pub(crate) fn authorization_url(
    endpoints: &Endpoints,
    client_id: &str,
    redirect_uri: &str,
    scopes: &[String],
    pkce: &Pkce,
    state: &State,
    login_hint: Option<&str>,
) -> Url {
    let mut url = endpoints.authorization().clone();
    {
        let mut query = url.query_pairs_mut();
        query
            .append_pair("response_type", "code")
            .append_pair("client_id", client_id)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("scope", &scopes.join(" "))
            .append_pair("state", state.expose())
            .append_pair("code_challenge", pkce.challenge())
            .append_pair("code_challenge_method", CHALLENGE_METHOD);
        if let Some(hint) = login_hint {
            query.append_pair("login_hint", hint);
        }
        for (key, value) in endpoints.authorize_extras() {
            query.append_pair(key, value);
        }
    }
    url
}

/// What one connection came to.
enum Verdict {
    /// Answered or dropped; keep waiting.
    Ignored,
    /// The sign-in's redirect: the wait ends with this.
    Done(Result<AuthorizationCode, LoopbackError>),
}

/// The fixed answers. No page carries anything from the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reply {
    SignedIn,
    NotCompleted,
    NotThisSignIn,
    NotFound,
    MethodNotAllowed,
    TooLarge,
}

impl Reply {
    fn status(self) -> &'static str {
        match self {
            Reply::SignedIn | Reply::NotCompleted => "200 OK",
            Reply::NotThisSignIn => "400 Bad Request",
            Reply::NotFound => "404 Not Found",
            Reply::MethodNotAllowed => "405 Method Not Allowed",
            Reply::TooLarge => "431 Request Header Fields Too Large",
        }
    }

    fn text(self) -> &'static str {
        match self {
            Reply::SignedIn => "Signed in. You can close this tab and return to the terminal.",
            Reply::NotCompleted => {
                "The sign-in was not completed. Return to the terminal for details."
            }
            Reply::NotThisSignIn => "This is not the sign-in mailgate is waiting for.",
            Reply::NotFound => "Not found.",
            Reply::MethodNotAllowed => "Method not allowed.",
            Reply::TooLarge => "Request too large.",
        }
    }
}

/// One connection: read its head, judge it, answer, close.
async fn serve(mut stream: TcpStream, state: &State) -> Verdict {
    let head = match tokio::time::timeout(CONNECTION_TIMEOUT, read_head(&mut stream)).await {
        Ok(Ok(head)) => head,
        Ok(Err(HeadError::TooLarge)) => {
            respond(&mut stream, Reply::TooLarge).await;
            return Verdict::Ignored;
        }
        // Closed early, an I/O error, or idle too long.
        Ok(Err(HeadError::Io)) | Err(_) => return Verdict::Ignored,
    };
    let (reply, verdict) = judge(&head, state);
    respond(&mut stream, reply).await;
    verdict
}

enum HeadError {
    TooLarge,
    Io,
}

/// The request head, up to its blank line, within [`MAX_REQUEST_BYTES`]. A body, if any, is
/// not read. Wiped on drop: it holds the code.
async fn read_head(stream: &mut TcpStream) -> Result<Zeroizing<Vec<u8>>, HeadError> {
    let mut buf = Zeroizing::new(vec![0u8; MAX_REQUEST_BYTES]);
    let mut len = 0;
    loop {
        if len == buf.len() {
            return Err(HeadError::TooLarge);
        }
        let n = stream
            .read(&mut buf[len..])
            .await
            .map_err(|_| HeadError::Io)?;
        if n == 0 {
            return Err(HeadError::Io);
        }
        // The terminator may straddle two reads.
        let from = len.saturating_sub(3);
        len += n;
        if let Some(at) = buf[from..len].windows(4).position(|w| w == b"\r\n\r\n") {
            buf.truncate(from + at);
            return Ok(buf);
        }
    }
}

/// The answer to a request head, and what it means for the wait.
fn judge(head: &[u8], state: &State) -> (Reply, Verdict) {
    let ignored = |reply| (reply, Verdict::Ignored);
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let Ok(line) = std::str::from_utf8(line.strip_suffix(b"\r").unwrap_or(line)) else {
        return ignored(Reply::NotFound);
    };
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return ignored(Reply::NotFound);
    };
    if !version.starts_with("HTTP/1.") {
        return ignored(Reply::NotFound);
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if path != CALLBACK_PATH {
        return ignored(Reply::NotFound);
    }
    if method != "GET" {
        return ignored(Reply::MethodNotAllowed);
    }
    let Some(params) = Params::parse(query) else {
        return ignored(Reply::NotThisSignIn);
    };
    if !params.state.as_deref().is_some_and(|s| state.matches(s)) {
        return ignored(Reply::NotThisSignIn);
    }
    // The state is this sign-in's: the provider sent this, and it settles the sign-in.
    if let Some(error) = params.error {
        return (
            Reply::NotCompleted,
            Verdict::Done(Err(LoopbackError::Denied(sanitize_error(&error)))),
        );
    }
    match params.code {
        Some(code)
            if !code.is_empty()
                && code.len() <= MAX_CODE_BYTES
                && code.bytes().all(|b| (0x21..=0x7e).contains(&b)) =>
        {
            (Reply::SignedIn, Verdict::Done(Ok(AuthorizationCode(code))))
        }
        _ => (
            Reply::NotCompleted,
            Verdict::Done(Err(LoopbackError::Malformed)),
        ),
    }
}

/// The redirect's parameters that matter; each at most once (RFC 6749 §3.1), else none.
struct Params {
    state: Option<Zeroizing<String>>,
    code: Option<Zeroizing<String>>,
    error: Option<String>,
}

impl Params {
    fn parse(query: &str) -> Option<Params> {
        let mut params = Params {
            state: None,
            code: None,
            error: None,
        };
        for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
            let repeated = match key.as_ref() {
                "state" => params.state.replace(Zeroizing::new(value.into_owned())),
                "code" => params.code.replace(Zeroizing::new(value.into_owned())),
                "error" => params.error.replace(value.into_owned()).map(Zeroizing::new),
                _ => None,
            };
            if repeated.is_some() {
                return None;
            }
        }
        Some(params)
    }
}

/// An `error` code as it may be shown: bounded and in `[A-Za-z0-9._-]` (the RFC's own codes
/// are lower-case with underscores), else [`UNRECOGNISED_ERROR`].
fn sanitize_error(raw: &str) -> String {
    let fits = !raw.is_empty()
        && raw.len() <= MAX_ERROR_CODE_BYTES
        && raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if fits { raw } else { UNRECOGNISED_ERROR }.to_owned()
}

/// Sends the fixed page and closes; a client that stopped reading is not waited for.
async fn respond(stream: &mut TcpStream, reply: Reply) {
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>mailgate</title></head>\
         <body><p>{}</p></body></html>",
        reply.text()
    );
    let response = format!(
        "HTTP/1.1 {}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nReferrer-Policy: no-referrer\r\n\
         X-Content-Type-Options: nosniff\r\nContent-Security-Policy: default-src 'none'\r\n\
         Connection: close\r\n\r\n{body}",
        reply.status(),
        body.len()
    );
    let _ = tokio::time::timeout(CONNECTION_TIMEOUT, async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await
    })
    .await;
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;
    use crate::delegated::endpoints::IssuerRule;

    fn long_deadline() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    /// Sends `request` raw and returns the whole answer.
    async fn request_once(uri: &str, request: String) -> String {
        let at = uri
            .strip_prefix("http://")
            .and_then(|rest| rest.split_once('/'))
            .map(|(host, _)| host.to_owned())
            .expect("authority");
        let mut stream = TcpStream::connect(at).await.expect("connect");
        stream.write_all(request.as_bytes()).await.expect("write");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.expect("read");
        answer
    }

    fn get(query: &str) -> String {
        format!("GET /callback?{query} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    }

    /// A real HTTP client (the browser's stand-in) gets the page, and the wait the code.
    #[tokio::test]
    async fn the_redirect_with_this_state_ends_the_wait_with_the_code() {
        let receiver = LoopbackReceiver::bind().await.expect("bind");
        let uri = receiver.redirect_uri().to_owned();
        assert!(
            uri.starts_with("http://127.0.0.1:") && uri.ends_with("/callback"),
            "{uri}"
        );
        let state = State::generate().expect("rng");
        let redirect = format!("{uri}?code=M.C5_SN1%2Fcode-Value&state={}", state.expose());
        let (code, page) = tokio::join!(receiver.wait(&state, long_deadline()), async {
            let response = reqwest::get(&redirect).await.expect("request");
            let status = response.status();
            (status, response.text().await.expect("body"))
        });
        assert_eq!(code.expect("code").expose(), "M.C5_SN1/code-Value");
        assert_eq!(page.0, 200);
        assert!(page.1.contains("Signed in"), "{}", page.1);
    }

    /// A wrong, missing or repeated state is answered 400 and the wait goes on; a stray path
    /// gets 404; a POST gets 405; the right redirect then still ends it.
    #[tokio::test]
    async fn stray_requests_do_not_end_the_wait() {
        let receiver = LoopbackReceiver::bind().await.expect("bind");
        let uri = receiver.redirect_uri().to_owned();
        let state = State::generate().expect("rng");
        let good = state.expose().to_owned();
        let (code, answers) = tokio::join!(receiver.wait(&state, long_deadline()), async {
            let mut answers = Vec::new();
            for request in [
                get("code=forged&state=wrong"),
                get("code=forged"),
                get(&format!("error=access_denied&state={}x", good)),
                get(&format!("code=forged&state={good}&state={good}")),
                "GET /favicon.ico HTTP/1.1\r\n\r\n".to_owned(),
                format!("POST /callback?code=forged&state={good} HTTP/1.1\r\n\r\n"),
                "\u{1}\u{2}\r\n\r\n".to_owned(),
            ] {
                answers.push(request_once(&uri, request).await);
            }
            answers.push(request_once(&uri, get(&format!("code=real&state={good}"))).await);
            answers
        });
        assert_eq!(code.expect("code").expose(), "real");
        let statuses: Vec<&str> = answers
            .iter()
            .map(|a| a.split("\r\n").next().unwrap_or_default())
            .collect();
        assert_eq!(
            statuses,
            [
                "HTTP/1.1 400 Bad Request",
                "HTTP/1.1 400 Bad Request",
                "HTTP/1.1 400 Bad Request",
                "HTTP/1.1 400 Bad Request",
                "HTTP/1.1 404 Not Found",
                "HTTP/1.1 405 Method Not Allowed",
                "HTTP/1.1 404 Not Found",
                "HTTP/1.1 200 OK",
            ]
        );
        for answer in &answers {
            assert!(!answer.contains("forged"), "nothing reflected: {answer}");
        }
    }

    /// `error=access_denied` with this state ends the sign-in; the page reflects nothing, and
    /// an error code outside the charset is not passed on.
    #[tokio::test]
    async fn an_error_redirect_is_a_denial() {
        let receiver = LoopbackReceiver::bind().await.expect("bind");
        let uri = receiver.redirect_uri().to_owned();
        let state = State::generate().expect("rng");
        let query = format!(
            "error=access_denied&error_description=%3Cscript%3Ealert(1)%3C%2Fscript%3E&state={}",
            state.expose()
        );
        let (result, answer) = tokio::join!(
            receiver.wait(&state, long_deadline()),
            request_once(&uri, get(&query))
        );
        assert_eq!(
            result.expect_err("denied"),
            LoopbackError::Denied("access_denied".to_owned())
        );
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        assert!(answer.contains("not completed"), "{answer}");
        assert!(
            !answer.contains("script") && !answer.contains("access_denied"),
            "{answer}"
        );

        let receiver = LoopbackReceiver::bind().await.expect("bind");
        let uri = receiver.redirect_uri().to_owned();
        let query = format!("error=%1B%5B2J%20evil&state={}", state.expose());
        let (result, _) = tokio::join!(
            receiver.wait(&state, long_deadline()),
            request_once(&uri, get(&query))
        );
        assert_eq!(
            result.expect_err("denied"),
            LoopbackError::Denied(UNRECOGNISED_ERROR.to_owned())
        );
    }

    /// With this state but no usable code, the sign-in ends as malformed.
    #[tokio::test]
    async fn this_state_without_a_code_is_malformed() {
        for query in ["", "code=", "code=a%20b"] {
            let receiver = LoopbackReceiver::bind().await.expect("bind");
            let uri = receiver.redirect_uri().to_owned();
            let state = State::generate().expect("rng");
            let query = format!("{query}&state={}", state.expose());
            let (result, _) = tokio::join!(
                receiver.wait(&state, long_deadline()),
                request_once(&uri, get(&query))
            );
            assert_eq!(
                result.expect_err("malformed"),
                LoopbackError::Malformed,
                "{query}"
            );
        }
    }

    /// A head past the cap gets 431 and the wait goes on; an idle connection (a preconnect)
    /// does not hold up the redirect behind it.
    #[tokio::test]
    async fn oversized_and_idle_connections_do_not_block_the_redirect() {
        let receiver = LoopbackReceiver::bind().await.expect("bind");
        let uri = receiver.redirect_uri().to_owned();
        let at = uri
            .strip_prefix("http://")
            .and_then(|r| r.split_once('/'))
            .map(|(a, _)| a.to_owned())
            .expect("authority");
        let state = State::generate().expect("rng");
        let good = get(&format!("code=real&state={}", state.expose()));
        let started = std::time::Instant::now();
        let (code, oversized) = tokio::join!(receiver.wait(&state, long_deadline()), async {
            let _idle = TcpStream::connect(&at).await.expect("connect");
            let mut big = TcpStream::connect(&at).await.expect("connect");
            let header = format!(
                "GET /callback HTTP/1.1\r\nX-Pad: {}",
                "a".repeat(MAX_REQUEST_BYTES)
            );
            // The receiver may answer and close before it has read everything: ignore errors.
            let _ = big.write_all(header.as_bytes()).await;
            let mut answer = String::new();
            let _ = big.read_to_string(&mut answer).await;
            request_once(&uri, good).await;
            answer
        });
        assert_eq!(code.expect("code").expose(), "real");
        assert!(
            oversized.starts_with("HTTP/1.1 431 "),
            "{}",
            oversized.lines().next().unwrap_or_default()
        );
        assert!(
            started.elapsed() < CONNECTION_TIMEOUT,
            "the idle connection held nothing up"
        );
    }

    #[tokio::test]
    async fn the_wait_ends_at_the_deadline() {
        tokio::time::pause();
        let receiver = LoopbackReceiver::bind().await.expect("bind");
        let state = State::generate().expect("rng");
        let started = Instant::now();
        let result = receiver
            .wait(&state, started + Duration::from_secs(300))
            .await;
        assert_eq!(result.expect_err("timed out"), LoopbackError::TimedOut);
        assert!(started.elapsed() >= Duration::from_secs(300));
    }

    #[test]
    fn the_authorization_url_carries_the_request() {
        let at = |p: &str| Url::parse(&format!("https://id.example.com{p}")).expect("url");
        let endpoints = Endpoints::for_tests(
            at("/authorize?tenant=x"),
            at("/token"),
            None,
            None,
            IssuerRule::Exact("https://id.example.com".to_owned()),
        );
        let pkce = Pkce::generate().expect("rng");
        let state = State::generate().expect("rng");
        let scopes = ["openid".to_owned(), "https://mail.google.com/".to_owned()];
        let redirect = "http://127.0.0.1:4242/callback";
        let url = authorization_url(
            &endpoints,
            "client-1",
            redirect,
            &scopes,
            &pkce,
            &state,
            Some("ana@example.com"),
        );
        assert_eq!(url.path(), "/authorize");
        let pairs: Vec<(String, String)> = url.query_pairs().into_owned().collect();
        let expected = [
            ("tenant", "x"),
            ("response_type", "code"),
            ("client_id", "client-1"),
            ("redirect_uri", redirect),
            ("scope", "openid https://mail.google.com/"),
            ("state", state.expose()),
            ("code_challenge", pkce.challenge()),
            ("code_challenge_method", "S256"),
            ("login_hint", "ana@example.com"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        assert_eq!(pairs, expected);
        assert!(
            !url.as_str().contains(pkce.verifier().expose()),
            "the verifier stays here"
        );

        let google = Endpoints::google();
        let url = authorization_url(&google, "c", redirect, &scopes, &pkce, &state, None);
        let pairs: Vec<(String, String)> = url.query_pairs().into_owned().collect();
        assert!(pairs.iter().all(|(k, _)| k != "login_hint"));
        assert!(pairs.contains(&("access_type".to_owned(), "offline".to_owned())));
        assert!(pairs.contains(&("prompt".to_owned(), "consent".to_owned())));
    }

    #[test]
    fn the_code_is_redacted() {
        let code = AuthorizationCode::for_tests("M.C5_SN1.secret-code");
        assert_eq!(format!("{code:?}"), "AuthorizationCode(<redacted>)");
    }
}
