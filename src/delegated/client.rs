//! The requests to a provider's OAuth endpoints (issue 37): the device flow (RFC 8628), the
//! authorization-code exchange with PKCE (RFC 6749 §4.1, RFC 7636), the refresh (RFC 6749 §6)
//! and the revocation (RFC 7009).
//!
//! Why it is shaped this way: these requests carry the secrets mailgate holds longest (the
//! refresh token, the client secret), and their answers are untrusted bytes. So the client does
//! the HTTP and nothing else: it sends only to the URLs of `endpoints`, reads each answer with a
//! cap before anything parses it, and hands status, media type and bytes to `wire`, which
//! decides what the answer is.
//!
//! Invariants:
//! - Redirects are never followed (a 3xx is an unexpected status): a token request that a
//!   server bounced elsewhere would carry the secrets with it. Every request has a timeout.
//! - A body is refused once it passes its cap (`wire::MAX_BODY_BYTES`, or
//!   `MAX_DISCOVERY_BYTES`), whatever `Content-Length` said, and is wiped after parsing.
//! - [`ClientError`] holds classes only: no URL, no token, code, secret or server text can be
//!   formatted from it, by `Display` or `Debug`. A server's `error_description` stays in the
//!   `wire::Refusal`, for the operator.
//! - The device-flow wait never polls faster than the server's interval (RFC 8628 §3.5: plus 5
//!   seconds for every `slow_down`, doubled after a timeout) and never past the device code's
//!   lifetime.
//!
//! Who calls it: the login (`mailgate auth login`, `auth logout`) and the token source.

use std::future::Future;
use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE};
use tokio::time::Instant;
use url::Url;
use zeroize::Zeroizing;

use super::endpoints::Endpoints;
use super::grants::RefreshToken;
use super::loopback::AuthorizationCode;
use super::pkce::PkceVerifier;
use super::wire::{
    self, DeviceAuthorization, DeviceCode, DeviceOutcome, ErrorCode, Grant, Refusal, TokenOutcome,
    WireError,
};
use crate::config::env::Secret;

/// Longest wait for one request, answer included (Microsoft and Google answer in well under a
/// second; a device-flow poll is not held open by either).
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest wait for the connection (as the Graph backend's).
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// What a `slow_down` adds to the polling interval (RFC 8628 §3.5).
const SLOW_DOWN_STEP: Duration = Duration::from_secs(5);
/// The device-code grant type (RFC 8628 §3.4).
const DEVICE_GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:device_code";

/// Why a request got no answer `wire` could read. Classes only (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum ClientError {
    #[error("the authorization server could not be reached")]
    Transport,
    #[error("the authorization server did not answer in time")]
    Timeout,
    #[error("the authorization server's answer is too large")]
    TooLarge,
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error("the provider offers no device sign-in (sign in with --browser)")]
    NoDeviceEndpoint,
    #[error("the HTTPS client could not be built")]
    Setup,
}

/// What the revocation endpoint said.
#[derive(Debug)]
#[must_use]
pub(crate) enum RevokeOutcome {
    /// 200: the grant is gone (RFC 7009 §2.2 answers 200 for an already invalid token too).
    Revoked,
    /// The provider has no revocation endpoint (Microsoft): the operator revokes the app's
    /// access in the account's settings.
    NotOffered,
    /// An error object (Google answers 400 `invalid_token` for a token already expired or
    /// revoked).
    Refused(Refusal),
}

/// How a device-flow sign-in ended.
#[derive(Debug)]
#[must_use]
pub(crate) enum DeviceWait {
    Granted(Grant),
    /// The operator declined (`access_denied`).
    Denied,
    /// The device code expired (`expired_token`, or its lifetime passed while polling).
    Expired,
    /// Any other error object (`invalid_client`, `invalid_scope`, ...).
    Refused(Refusal),
}

/// The HTTPS client every delegated request goes through: rustls (reqwest's only TLS here),
/// no redirects, connect and request timeouts.
pub(crate) fn http_client() -> Result<reqwest::Client, ClientError> {
    reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(REQUEST_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|_| ClientError::Setup)
}

/// One app registration's requests to one provider.
///
/// Client authentication: the client id always goes in the form body, and the client secret,
/// when the app has one, goes there too as `client_secret` (RFC 6749 §2.3.1's body form), not
/// in an HTTP Basic header. Google's installed-app clients have a secret and take it in the
/// body, as Microsoft's confidential clients do, and the body form needs none of Basic's
/// form-encoding of id and secret before base64, which providers are known to get wrong. The
/// secret goes only to the token and revocation endpoints, never to the device authorization
/// endpoint (which authenticates nobody).
#[derive(Debug)]
pub(crate) struct TokenClient {
    http: reqwest::Client,
    endpoints: Endpoints,
    client_id: String,
    /// Read by the caller from `OAuthSpec::client_secret_env()`'s variable.
    secret: Option<Secret>,
}

/// An answer read within its cap.
struct Answer {
    status: u16,
    content_type: Option<String>,
    /// Holds tokens: wiped on drop.
    body: Zeroizing<Vec<u8>>,
}

impl TokenClient {
    pub(crate) fn new(
        http: reqwest::Client,
        endpoints: Endpoints,
        client_id: &str,
        secret: Option<Secret>,
    ) -> TokenClient {
        TokenClient {
            http,
            endpoints,
            client_id: client_id.to_owned(),
            secret,
        }
    }

    pub(crate) fn endpoints(&self) -> &Endpoints {
        &self.endpoints
    }

    /// Starts a device-flow sign-in (RFC 8628 §3.1) for `scopes`.
    pub(crate) async fn start_device(
        &self,
        scopes: &[String],
    ) -> Result<DeviceOutcome, ClientError> {
        let url = self
            .endpoints
            .device()
            .ok_or(ClientError::NoDeviceEndpoint)?;
        let scope = scopes.join(" ");
        let form = [("client_id", self.client_id.as_str()), ("scope", &scope)];
        let answer = self.post(url, &form).await?;
        Ok(wire::parse_device_response(
            answer.status,
            answer.content_type.as_deref(),
            &answer.body,
        )?)
    }

    /// One poll of the token endpoint with the device code (RFC 8628 §3.4).
    pub(crate) async fn poll_device(&self, code: &DeviceCode) -> Result<TokenOutcome, ClientError> {
        self.token_request(&[
            ("grant_type", DEVICE_GRANT_TYPE),
            ("device_code", code.expose()),
        ])
        .await
    }

    /// Polls until the operator has signed in, declined, or the device code expired, at the
    /// server's interval (RFC 8628 §3.5: `authorization_pending` polls again, `slow_down` adds 5
    /// seconds for this and every later poll, a timed-out or failed request doubles the
    /// interval). Ends with the last request's error when the code's lifetime ran out while the
    /// server was unreachable.
    pub(crate) async fn wait_for_device_grant(
        &self,
        authorization: &DeviceAuthorization,
    ) -> Result<DeviceWait, ClientError> {
        self.wait_with(authorization, &TokioClock).await
    }

    async fn wait_with(
        &self,
        authorization: &DeviceAuthorization,
        clock: &impl Clock,
    ) -> Result<DeviceWait, ClientError> {
        let deadline = clock.now() + Duration::from_secs(authorization.expires_in_secs);
        let max_interval = Duration::from_secs(wire::MAX_INTERVAL_SECS);
        let mut interval = Duration::from_secs(authorization.interval_secs);
        let mut failed: Option<ClientError> = None;
        loop {
            if clock.now() + interval >= deadline {
                return match failed {
                    Some(error) => Err(error),
                    None => Ok(DeviceWait::Expired),
                };
            }
            clock.sleep(interval).await;
            match self.poll_device(&authorization.device_code).await {
                Ok(TokenOutcome::Granted(grant)) => return Ok(DeviceWait::Granted(grant)),
                Ok(TokenOutcome::Refused(refusal)) => {
                    failed = None;
                    match refusal.code {
                        ErrorCode::AuthorizationPending => {}
                        ErrorCode::SlowDown => {
                            interval = (interval + SLOW_DOWN_STEP).min(max_interval)
                        }
                        ErrorCode::ExpiredToken => return Ok(DeviceWait::Expired),
                        ErrorCode::AccessDenied => return Ok(DeviceWait::Denied),
                        _ => return Ok(DeviceWait::Refused(refusal)),
                    }
                }
                // RFC 8628 §3.5: back off on a connection timeout; a refused connection (a
                // laptop between networks) is treated the same.
                Err(error @ (ClientError::Timeout | ClientError::Transport)) => {
                    failed = Some(error);
                    interval = (interval * 2).min(max_interval);
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// Redeems the code the loopback receiver got, with the PKCE verifier of the same sign-in
    /// and the redirect URI the authorization request named (RFC 6749 §4.1.3).
    pub(crate) async fn exchange_code(
        &self,
        code: &AuthorizationCode,
        verifier: &PkceVerifier,
        redirect_uri: &str,
    ) -> Result<TokenOutcome, ClientError> {
        self.token_request(&[
            ("grant_type", "authorization_code"),
            ("code", code.expose()),
            ("redirect_uri", redirect_uri),
            ("code_verifier", verifier.expose()),
        ])
        .await
    }

    /// A new access token for the grant (RFC 6749 §6). `scopes` empty: none named (the grant's
    /// own); Microsoft wants them named. A granted answer with a refresh token rotates it: the
    /// caller stores the new one before using the access token.
    pub(crate) async fn refresh(
        &self,
        token: &RefreshToken,
        scopes: &[String],
    ) -> Result<TokenOutcome, ClientError> {
        let scope = scopes.join(" ");
        let mut form = vec![
            ("grant_type", "refresh_token"),
            ("refresh_token", token.expose()),
        ];
        if !scope.is_empty() {
            form.push(("scope", &scope));
        }
        self.token_request(&form).await
    }

    /// Revokes the grant (RFC 7009 §2.1: the refresh token, hinted as one). The provider's
    /// 200 is the only success; any other status but an error object is an error.
    pub(crate) async fn revoke(&self, token: &RefreshToken) -> Result<RevokeOutcome, ClientError> {
        let Some(url) = self.endpoints.revocation() else {
            return Ok(RevokeOutcome::NotOffered);
        };
        let mut form = vec![
            ("token", token.expose()),
            ("token_type_hint", "refresh_token"),
            ("client_id", self.client_id.as_str()),
        ];
        if let Some(secret) = &self.secret {
            form.push(("client_secret", secret.expose()));
        }
        let answer = self.post(url, &form).await?;
        match answer.status {
            // The body of a 200 has no meaning (RFC 7009 §2.2); it is not parsed.
            200 => Ok(RevokeOutcome::Revoked),
            status @ (400 | 401) => {
                match wire::parse_token_response(
                    status,
                    answer.content_type.as_deref(),
                    &answer.body,
                )? {
                    TokenOutcome::Refused(refusal) => Ok(RevokeOutcome::Refused(refusal)),
                    // `wire` grants only on a 200.
                    TokenOutcome::Granted(_) => Err(WireError::UnexpectedStatus(status).into()),
                }
            }
            other => Err(WireError::UnexpectedStatus(other).into()),
        }
    }

    /// A token endpoint request: `params`, then the client's id and secret.
    async fn token_request(&self, params: &[(&str, &str)]) -> Result<TokenOutcome, ClientError> {
        let mut form = params.to_vec();
        form.push(("client_id", &self.client_id));
        if let Some(secret) = &self.secret {
            form.push(("client_secret", secret.expose()));
        }
        let answer = self.post(self.endpoints.token(), &form).await?;
        Ok(wire::parse_token_response(
            answer.status,
            answer.content_type.as_deref(),
            &answer.body,
        )?)
    }

    async fn post(&self, url: &Url, form: &[(&str, &str)]) -> Result<Answer, ClientError> {
        let response = self
            .http
            .post(url.clone())
            .header(ACCEPT, "application/json")
            .form(form)
            .send()
            .await
            .map_err(transport)?;
        read_capped(response, wire::MAX_BODY_BYTES).await
    }
}

/// `GET url` read within `cap` (the discovery document): status, media type, body.
pub(super) async fn get_capped(
    http: &reqwest::Client,
    url: Url,
    cap: usize,
) -> Result<(u16, Option<String>, Zeroizing<Vec<u8>>), ClientError> {
    let response = http
        .get(url)
        .header(ACCEPT, "application/json")
        .send()
        .await
        .map_err(transport)?;
    let answer = read_capped(response, cap).await?;
    Ok((answer.status, answer.content_type, answer.body))
}

/// The answer, its body refused past `cap` bytes: the declared length is checked first, and
/// the streamed one chunk by chunk (a chunked body declares none). The buffer is allocated
/// once at its cap, so no reallocation leaves an unwiped copy of a token behind.
async fn read_capped(mut response: reqwest::Response, cap: usize) -> Result<Answer, ClientError> {
    if response
        .content_length()
        .is_some_and(|n| n > u64::try_from(cap).unwrap_or(u64::MAX))
    {
        return Err(ClientError::TooLarge);
    }
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut body = Zeroizing::new(Vec::with_capacity(cap));
    while let Some(chunk) = response.chunk().await.map_err(transport)? {
        if body.len() + chunk.len() > cap {
            return Err(ClientError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Answer {
        status,
        content_type,
        body,
    })
}

/// reqwest's error as a class; its text (it names the URL) is dropped.
fn transport(error: reqwest::Error) -> ClientError {
    if error.is_timeout() {
        ClientError::Timeout
    } else {
        ClientError::Transport
    }
}

/// The device-flow wait's time: tokio's, or the tests' fake (the polls are real requests to a
/// mock server on its own thread, which paused tokio time would race: the runtime advances to
/// the request's timeout while the answer is on its way).
trait Clock {
    fn now(&self) -> Instant;
    fn sleep(&self, duration: Duration) -> impl Future<Output = ()>;
}

struct TokioClock;

impl Clock for TokioClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep(&self, duration: Duration) -> impl Future<Output = ()> {
        tokio::time::sleep(duration)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use wiremock::matchers::{body_string_contains, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;
    use crate::config::env::Env;
    use crate::delegated::endpoints::IssuerRule;

    const CLIENT_ID: &str = "mailgate-test-client";
    const SECRET: &str = "s3cr3t-Client-Value";
    const REFRESH: &str = "M.R3_BAY.refresh-Token-Value";
    const NEW_REFRESH: &str = "M.R3_BAY.rotated-Token-Value";
    const ACCESS: &str = "EwBYA8l6-access-Token-Value";
    const DEVICE_CODE: &str = "GmRhmhcxhwAzkoEqiMEg_DnyEysNkuNhszIySk9eS";
    const USER_CODE: &str = "WDJB-MJHT";

    /// The fake clock: `now` moves only when the wait sleeps, and every sleep is recorded.
    struct FakeClock {
        start: Instant,
        slept: Mutex<Vec<Duration>>,
    }

    impl FakeClock {
        fn new() -> FakeClock {
            FakeClock {
                start: Instant::now(),
                slept: Mutex::new(Vec::new()),
            }
        }

        fn sleeps(&self) -> Vec<u64> {
            self.slept
                .lock()
                .expect("lock")
                .iter()
                .map(Duration::as_secs)
                .collect()
        }
    }

    impl Clock for FakeClock {
        fn now(&self) -> Instant {
            self.start + self.slept.lock().expect("lock").iter().sum::<Duration>()
        }

        fn sleep(&self, duration: Duration) -> impl Future<Output = ()> {
            self.slept.lock().expect("lock").push(duration);
            std::future::ready(())
        }
    }

    fn url(server: &MockServer, at: &str) -> Url {
        Url::parse(&format!("{}{at}", server.uri())).expect("url")
    }

    fn endpoints(server: &MockServer, revocation: bool) -> Endpoints {
        Endpoints::for_tests(
            url(server, "/authorize"),
            url(server, "/token"),
            Some(url(server, "/device")),
            revocation.then(|| url(server, "/revoke")),
            IssuerRule::Exact(server.uri()),
        )
    }

    fn secret() -> Secret {
        Env::from_pairs([("APP_SECRET", SECRET)])
            .secret("APP_SECRET")
            .expect("secret")
    }

    fn client(server: &MockServer) -> TokenClient {
        TokenClient::new(
            http_client().expect("http"),
            endpoints(server, true),
            CLIENT_ID,
            Some(secret()),
        )
    }

    fn json(status: u16, body: &str) -> ResponseTemplate {
        ResponseTemplate::new(status)
            // `set_body_string` would label it text/plain.
            .set_body_raw(body.to_owned(), "application/json; charset=utf-8")
    }

    fn refusal(code: &str) -> ResponseTemplate {
        json(
            400,
            &format!(r#"{{"error":"{code}","error_description":"AADSTS70016: pending"}}"#),
        )
    }

    fn grant_body(refresh: Option<&str>) -> String {
        let refresh = refresh.map_or(String::new(), |r| format!(r#","refresh_token":"{r}""#));
        format!(
            r#"{{"access_token":"{ACCESS}","token_type":"Bearer","expires_in":3599,
                "scope":"openid email"{refresh}}}"#
        )
    }

    fn refresh_token() -> RefreshToken {
        RefreshToken::new(REFRESH.to_owned())
    }

    /// The form of every request the server received, decoded, in order.
    async fn forms(server: &MockServer) -> Vec<Vec<(String, String)>> {
        server
            .received_requests()
            .await
            .expect("recording")
            .iter()
            .map(|r| url::form_urlencoded::parse(&r.body).into_owned().collect())
            .collect()
    }

    fn field<'a>(form: &'a [(String, String)], key: &str) -> Option<&'a str> {
        let mut values = form
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str());
        let first = values.next();
        assert_eq!(values.next(), None, "{key} sent once");
        first
    }

    async fn start_device(server: &MockServer, interval: u64, expires: u64) -> DeviceAuthorization {
        Mock::given(method("POST"))
            .and(path("/device"))
            .respond_with(json(
                200,
                &format!(
                    r#"{{"device_code":"{DEVICE_CODE}","user_code":"{USER_CODE}",
                        "verification_uri":"https://microsoft.com/devicelogin",
                        "expires_in":{expires},"interval":{interval}}}"#
                ),
            ))
            .mount(server)
            .await;
        let scopes = ["openid".to_owned(), "offline_access".to_owned()];
        match client(server).start_device(&scopes).await.expect("answer") {
            DeviceOutcome::Started(authorization) => authorization,
            DeviceOutcome::Refused(r) => panic!("{r:?}"),
        }
    }

    /// A poll answer for the first `times` polls still unanswered by an earlier mock.
    async fn poll_answers(server: &MockServer, answer: ResponseTemplate, times: u64) {
        Mock::given(method("POST"))
            .and(path("/token"))
            .and(body_string_contains(
                "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Adevice_code",
            ))
            .respond_with(answer)
            .up_to_n_times(times)
            .mount(server)
            .await;
    }

    #[tokio::test]
    async fn device_flow_waits_through_pending_and_slow_down() {
        let server = MockServer::start().await;
        let authorization = start_device(&server, 5, 900).await;
        assert_eq!(authorization.user_code.expose(), USER_CODE);
        poll_answers(&server, refusal("authorization_pending"), 1).await;
        poll_answers(&server, refusal("slow_down"), 1).await;
        poll_answers(&server, refusal("authorization_pending"), 1).await;
        poll_answers(&server, json(200, &grant_body(Some(NEW_REFRESH))), 1).await;
        let clock = FakeClock::new();
        let waited = client(&server)
            .wait_with(&authorization, &clock)
            .await
            .expect("answer");
        let DeviceWait::Granted(grant) = waited else {
            panic!("{waited:?}");
        };
        assert_eq!(grant.access_token.expose(), ACCESS);
        assert_eq!(
            grant.refresh_token.as_ref().map(RefreshToken::expose),
            Some(NEW_REFRESH)
        );
        // The interval, again, then 5 seconds more from the slow_down on.
        assert_eq!(clock.sleeps(), [5, 5, 10, 10]);

        let forms = forms(&server).await;
        assert_eq!(forms.len(), 5, "one device request, four polls");
        let device = &forms[0];
        assert_eq!(field(device, "client_id"), Some(CLIENT_ID));
        assert_eq!(field(device, "scope"), Some("openid offline_access"));
        assert_eq!(
            field(device, "client_secret"),
            None,
            "the device endpoint gets no secret"
        );
        for poll in &forms[1..] {
            assert_eq!(field(poll, "device_code"), Some(DEVICE_CODE));
            assert_eq!(field(poll, "client_id"), Some(CLIENT_ID));
            assert_eq!(field(poll, "client_secret"), Some(SECRET));
        }
    }

    #[tokio::test]
    async fn device_flow_ends_on_expiry_denial_and_other_refusals() {
        // expired_token from the server.
        let server = MockServer::start().await;
        let authorization = start_device(&server, 5, 900).await;
        poll_answers(&server, refusal("expired_token"), 1).await;
        let waited = client(&server)
            .wait_with(&authorization, &FakeClock::new())
            .await;
        assert!(matches!(waited, Ok(DeviceWait::Expired)), "{waited:?}");

        // The code's lifetime runs out while the operator has not finished: no poll past it.
        let server = MockServer::start().await;
        let authorization = start_device(&server, 5, 12).await;
        poll_answers(&server, refusal("authorization_pending"), 10).await;
        let clock = FakeClock::new();
        let waited = client(&server).wait_with(&authorization, &clock).await;
        assert!(matches!(waited, Ok(DeviceWait::Expired)), "{waited:?}");
        assert_eq!(clock.sleeps(), [5, 5]);

        let server = MockServer::start().await;
        let authorization = start_device(&server, 5, 900).await;
        poll_answers(&server, refusal("access_denied"), 1).await;
        let waited = client(&server)
            .wait_with(&authorization, &FakeClock::new())
            .await;
        assert!(matches!(waited, Ok(DeviceWait::Denied)), "{waited:?}");

        let server = MockServer::start().await;
        let authorization = start_device(&server, 5, 900).await;
        poll_answers(&server, refusal("invalid_client"), 1).await;
        let waited = client(&server)
            .wait_with(&authorization, &FakeClock::new())
            .await;
        match waited {
            Ok(DeviceWait::Refused(r)) => assert_eq!(r.code, ErrorCode::InvalidClient),
            other => panic!("{other:?}"),
        }

        // A malformed answer ends the wait with its rule.
        let server = MockServer::start().await;
        let authorization = start_device(&server, 5, 900).await;
        poll_answers(&server, ResponseTemplate::new(500), 1).await;
        let waited = client(&server)
            .wait_with(&authorization, &FakeClock::new())
            .await;
        assert!(
            matches!(
                waited,
                Err(ClientError::Wire(WireError::UnexpectedStatus(500)))
            ),
            "{waited:?}"
        );
    }

    /// On tokio's clock: a code that expires before the first interval is over is not polled.
    #[tokio::test]
    async fn device_flow_on_the_real_clock_does_not_poll_past_expiry() {
        let server = MockServer::start().await;
        let authorization = start_device(&server, 5, 3).await;
        let client = client(&server);
        assert_eq!(client.endpoints().token(), &url(&server, "/token"));
        let waited = client.wait_for_device_grant(&authorization).await;
        assert!(matches!(waited, Ok(DeviceWait::Expired)), "{waited:?}");
        assert_eq!(forms(&server).await.len(), 1, "the device request only");
    }

    #[tokio::test]
    async fn device_flow_backs_off_while_the_server_is_unreachable() {
        let server = MockServer::start().await;
        let authorization = start_device(&server, 5, 60).await;
        // A port nothing listens on: the connection is refused at once.
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let dead = Url::parse(&format!(
            "http://{}/token",
            closed.local_addr().expect("addr")
        ))
        .expect("url");
        drop(closed);
        let unreachable = TokenClient::new(
            http_client().expect("http"),
            Endpoints::for_tests(
                url(&server, "/authorize"),
                dead,
                None,
                None,
                IssuerRule::Google,
            ),
            CLIENT_ID,
            None,
        );
        let clock = FakeClock::new();
        let waited = unreachable.wait_with(&authorization, &clock).await;
        assert!(matches!(waited, Err(ClientError::Transport)), "{waited:?}");
        assert_eq!(
            clock.sleeps(),
            [5, 10, 20],
            "doubled, and never past the 60 s"
        );
    }

    #[tokio::test]
    async fn no_device_endpoint_is_its_own_error() {
        let server = MockServer::start().await;
        let no_device = TokenClient::new(
            http_client().expect("http"),
            Endpoints::for_tests(
                url(&server, "/a"),
                url(&server, "/t"),
                None,
                None,
                IssuerRule::Google,
            ),
            CLIENT_ID,
            None,
        );
        assert_eq!(
            no_device.start_device(&["openid".to_owned()]).await.err(),
            Some(ClientError::NoDeviceEndpoint)
        );
    }

    #[tokio::test]
    async fn refresh_with_and_without_rotation() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/token"))
            .respond_with(json(200, &grant_body(Some(NEW_REFRESH))))
            .up_to_n_times(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path("/token"))
            .respond_with(json(200, &grant_body(None)))
            .mount(&server)
            .await;
        let client = client(&server);
        let scopes = [
            "https://graph.microsoft.com/Mail.Read".to_owned(),
            "offline_access".to_owned(),
        ];
        let TokenOutcome::Granted(rotated) = client
            .refresh(&refresh_token(), &scopes)
            .await
            .expect("answer")
        else {
            panic!("refused");
        };
        assert_eq!(
            rotated.refresh_token.as_ref().map(RefreshToken::expose),
            Some(NEW_REFRESH)
        );
        assert_eq!(rotated.expires_in_secs, 3599);
        let TokenOutcome::Granted(kept) =
            client.refresh(&refresh_token(), &[]).await.expect("answer")
        else {
            panic!("refused");
        };
        assert!(
            kept.refresh_token.is_none(),
            "the old refresh token stays valid"
        );
        assert_eq!(kept.access_token.expose(), ACCESS);

        let forms = forms(&server).await;
        for form in &forms {
            assert_eq!(field(form, "grant_type"), Some("refresh_token"));
            assert_eq!(field(form, "refresh_token"), Some(REFRESH));
            assert_eq!(field(form, "client_id"), Some(CLIENT_ID));
            assert_eq!(field(form, "client_secret"), Some(SECRET));
        }
        assert_eq!(
            field(&forms[0], "scope"),
            Some("https://graph.microsoft.com/Mail.Read offline_access")
        );
        assert_eq!(field(&forms[1], "scope"), None, "no scopes: none named");
    }

    /// invalid_grant is an outcome (the caller answers AUTH_REQUIRED), and the server's
    /// description, which may echo the token, is not in its Debug.
    #[tokio::test]
    async fn invalid_grant_is_a_refusal_that_shows_no_token() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/token"))
            .respond_with(json(
                400,
                &format!(r#"{{"error":"invalid_grant","error_description":"token {REFRESH} was revoked"}}"#),
            ))
            .mount(&server)
            .await;
        let outcome = client(&server)
            .refresh(&refresh_token(), &[])
            .await
            .expect("answer");
        let shown = format!("{outcome:?}");
        let TokenOutcome::Refused(refusal) = outcome else {
            panic!("granted");
        };
        assert_eq!(refusal.code, ErrorCode::InvalidGrant);
        assert!(refusal.description.is_some(), "kept for the operator");
        assert!(!shown.contains(REFRESH), "{shown}");
    }

    #[tokio::test]
    async fn code_exchange_sends_the_code_verifier_and_redirect() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/token"))
            .respond_with(json(200, &grant_body(Some(NEW_REFRESH))))
            .mount(&server)
            .await;
        let pkce = crate::delegated::pkce::Pkce::generate().expect("rng");
        let code = AuthorizationCode::for_tests("M.C5_SN1.code-Value");
        let redirect = "http://127.0.0.1:49152/callback";
        let outcome = client(&server)
            .exchange_code(&code, pkce.verifier(), redirect)
            .await
            .expect("answer");
        assert!(matches!(outcome, TokenOutcome::Granted(_)), "{outcome:?}");
        let forms = forms(&server).await;
        let form = &forms[0];
        assert_eq!(field(form, "grant_type"), Some("authorization_code"));
        assert_eq!(field(form, "code"), Some("M.C5_SN1.code-Value"));
        assert_eq!(field(form, "redirect_uri"), Some(redirect));
        assert_eq!(field(form, "code_verifier"), Some(pkce.verifier().expose()));
        assert_eq!(field(form, "client_id"), Some(CLIENT_ID));
        assert_eq!(field(form, "client_secret"), Some(SECRET));
    }

    #[tokio::test]
    async fn revoke_answers() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/revoke"))
            .respond_with(ResponseTemplate::new(200))
            .up_to_n_times(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path("/revoke"))
            .respond_with(json(400, r#"{"error":"unsupported_token_type"}"#))
            .up_to_n_times(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path("/revoke"))
            .respond_with(ResponseTemplate::new(503))
            .mount(&server)
            .await;
        let client = client(&server);
        let token = refresh_token();
        assert!(matches!(
            client.revoke(&token).await,
            Ok(RevokeOutcome::Revoked)
        ));
        match client.revoke(&token).await {
            Ok(RevokeOutcome::Refused(r)) => {
                assert_eq!(
                    r.code,
                    ErrorCode::Other("unsupported_token_type".to_owned())
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            client.revoke(&token).await.err(),
            Some(ClientError::Wire(WireError::UnexpectedStatus(503)))
        );
        for form in forms(&server).await {
            assert_eq!(field(&form, "token"), Some(REFRESH));
            assert_eq!(field(&form, "token_type_hint"), Some("refresh_token"));
            assert_eq!(field(&form, "client_id"), Some(CLIENT_ID));
            assert_eq!(field(&form, "client_secret"), Some(SECRET));
        }

        let microsoft = TokenClient::new(
            http_client().expect("http"),
            endpoints(&server, false),
            CLIENT_ID,
            None,
        );
        assert!(matches!(
            microsoft.revoke(&token).await,
            Ok(RevokeOutcome::NotOffered)
        ));
        assert_eq!(
            server.received_requests().await.map(|r| r.len()),
            Some(3),
            "no request"
        );
    }

    /// A 302 is an unexpected status, and its target gets nothing.
    #[tokio::test]
    async fn redirects_are_not_followed() {
        let server = MockServer::start().await;
        Mock::given(path("/token"))
            .respond_with(
                ResponseTemplate::new(302)
                    .insert_header("location", format!("{}/elsewhere", server.uri())),
            )
            .mount(&server)
            .await;
        Mock::given(path("/elsewhere"))
            .respond_with(json(200, &grant_body(None)))
            .expect(0)
            .mount(&server)
            .await;
        assert_eq!(
            client(&server).refresh(&refresh_token(), &[]).await.err(),
            Some(ClientError::Wire(WireError::UnexpectedStatus(302)))
        );
    }

    /// Past the cap, declared (`Content-Length`) or streamed (chunked, no length).
    #[tokio::test]
    async fn oversize_answers_are_refused() {
        let server = MockServer::start().await;
        let padded = format!(
            r#"{{"access_token":"{ACCESS}","token_type":"Bearer","pad":"{}"}}"#,
            "x".repeat(wire::MAX_BODY_BYTES)
        );
        Mock::given(path("/token"))
            .respond_with(json(200, &padded))
            .mount(&server)
            .await;
        assert_eq!(
            client(&server).refresh(&refresh_token(), &[]).await.err(),
            Some(ClientError::TooLarge)
        );

        // A raw server that streams 16 KiB chunks without a length, for as long as it is read.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let at = listener.local_addr().expect("addr");
        let streamer = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.expect("accept");
            let mut request = vec![0u8; 4096];
            let _ = stream.read(&mut request).await;
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                        transfer-encoding: chunked\r\n\r\n";
            stream.write_all(head.as_bytes()).await.expect("head");
            let chunk = format!("4000\r\n{}\r\n", "x".repeat(0x4000));
            let mut sent = 0usize;
            while stream.write_all(chunk.as_bytes()).await.is_ok() {
                sent += 0x4000;
                if sent > 4 * wire::MAX_BODY_BYTES {
                    break;
                }
            }
            sent
        });
        let token = Url::parse(&format!("http://{at}/token")).expect("url");
        let streamed = TokenClient::new(
            http_client().expect("http"),
            Endpoints::for_tests(token.clone(), token, None, None, IssuerRule::Google),
            CLIENT_ID,
            None,
        );
        assert_eq!(
            streamed.refresh(&refresh_token(), &[]).await.err(),
            Some(ClientError::TooLarge)
        );
        let sent = streamer.await.expect("streamer");
        assert!(
            sent > wire::MAX_BODY_BYTES,
            "the cap, not the server, ended it: {sent}"
        );
    }

    /// The secret and the refresh token are in the form, and in no error's text or Debug,
    /// however the answer echoes them.
    #[tokio::test]
    async fn secrets_go_in_the_form_and_never_in_an_error() {
        let server = MockServer::start().await;
        let echo = format!("{SECRET} {REFRESH}");
        Mock::given(path("/token"))
            .respond_with(json(500, &format!(r#"{{"error":"{echo}"}}"#)))
            .up_to_n_times(1)
            .mount(&server)
            .await;
        Mock::given(path("/token"))
            .respond_with(ResponseTemplate::new(200).set_body_string(echo.clone()))
            .up_to_n_times(1)
            .mount(&server)
            .await;
        Mock::given(path("/token"))
            .respond_with(json(
                200,
                &format!(r#"{{"access_token":"{echo}","token_type":"Bearer"}}"#),
            ))
            .up_to_n_times(1)
            .mount(&server)
            .await;
        Mock::given(path("/token"))
            .respond_with(json(400, &format!(r#"{{"error":"{echo}\u0001"}}"#)))
            .mount(&server)
            .await;
        let client = client(&server);
        let mut errors = Vec::new();
        for _ in 0..4 {
            errors.push(
                client
                    .refresh(&refresh_token(), &[])
                    .await
                    .expect_err("refused"),
            );
        }
        assert_eq!(
            errors[0],
            ClientError::Wire(WireError::UnexpectedStatus(500))
        );
        assert_eq!(errors[1], ClientError::Wire(WireError::NotJson));
        assert!(matches!(
            errors[2],
            ClientError::Wire(WireError::Malformed(_))
        ));
        assert!(matches!(
            errors[3],
            ClientError::Wire(WireError::Malformed(_))
        ));
        let dead = TokenClient::new(
            http_client().expect("http"),
            Endpoints::for_tests(
                Url::parse("http://127.0.0.1:1/a").expect("url"),
                Url::parse("http://127.0.0.1:1/t").expect("url"),
                None,
                None,
                IssuerRule::Google,
            ),
            CLIENT_ID,
            Some(secret()),
        );
        errors.push(
            dead.refresh(&refresh_token(), &[])
                .await
                .expect_err("unreachable"),
        );
        assert_eq!(errors[4], ClientError::Transport);
        for error in &errors {
            for shown in [error.to_string(), format!("{error:?}")] {
                assert!(
                    !shown.contains(SECRET) && !shown.contains(REFRESH),
                    "{shown}"
                );
                assert!(!shown.contains("127.0.0.1"), "no URL: {shown}");
            }
        }
        let shown = format!("{client:?} {:?}", refresh_token());
        assert!(
            !shown.contains(SECRET) && !shown.contains(REFRESH),
            "{shown}"
        );

        for form in forms(&server).await {
            assert_eq!(field(&form, "client_secret"), Some(SECRET));
            assert_eq!(field(&form, "refresh_token"), Some(REFRESH));
        }
    }
}
