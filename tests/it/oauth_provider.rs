//! The delegated-OAuth provider of the tests (issue 37, item 5): `oidc-provider` on loopback
//! (`tests/clients/oauth-delegated-provider.mjs`) standing in for Microsoft's and Google's sign-in,
//! on the one port Dovecot's oauth2 passdb introspects (`MT_OAUTH_PORT` of
//! `scripts/mailserver.sh`). [`OAuthProvider::get`] finds it (a provider of another test process
//! already on the port is used as is) or starts it once per test process; it ends with the
//! process, even a killed one, because it exits when the stdin pipe this module holds closes.
//! Tests sign in as accounts of their own (`t-…@example.org`, e.g. an [`ImapUser`]'s address), so
//! sharing the provider never mixes their grants or counters.
//!
//! The client side is plain reqwest against the RFC endpoints, plus the provider's test routes
//! that replace the operator's browser (`/test/approve`, `/test/authorize`), revoke from the
//! provider's side (`/test/revoke-all`), shorten one account's access tokens (`/test/ttl`) and
//! count token, introspection and revocation calls per account (`/test/stats`).
//!
//! [`ImapUser`]: crate::imap_server::ImapUser

use std::io::{BufRead as _, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::Value;

/// The public client mailgate signs in as (device flow, auth code + PKCE, refresh).
pub(crate) const CLIENT_ID: &str = "mailgate-delegated";
/// RFC 8628's grant type.
pub(crate) const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";
/// Every scope the provider knows: the OpenID ones, offline_access for a refresh token, and the
/// two mail scopes (Dovecot admits a token only with `mail.read`).
pub(crate) const ALL_SCOPES: &str = "openid email profile offline_access mail.read mail.send";
/// What `stats()` answers to, so a foreign listener on the port is never taken for ours.
const PROTOCOL: u64 = 1;

/// The provider, as this test process reaches it.
pub(crate) struct OAuthProvider {
    /// `http://127.0.0.1:PORT`, the issuer of every token and ID token.
    pub(crate) issuer: String,
    /// Dovecot's introspection client, so a test can ask what Dovecot is told.
    introspection_secret: String,
    /// Kept, never used: dropping it (the process ending) ends the provider we started.
    _process: Option<(Child, ChildStdin)>,
}

/// A device authorization (RFC 8628 §3.2).
#[derive(Debug)]
pub(crate) struct DeviceAuthorization {
    pub(crate) device_code: String,
    pub(crate) user_code: String,
    pub(crate) verification_uri: String,
}

/// A successful token answer.
#[derive(Clone, Debug)]
pub(crate) struct Tokens {
    pub(crate) access_token: String,
    pub(crate) refresh_token: Option<String>,
    pub(crate) id_token: Option<String>,
    pub(crate) expires_in: u64,
    pub(crate) scope: String,
}

impl Tokens {
    fn from_answer(answer: &Value) -> Self {
        let text = |k: &str| answer[k].as_str().map(str::to_owned);
        Self {
            access_token: text("access_token")
                .unwrap_or_else(|| panic!("no access_token: {answer}")),
            refresh_token: text("refresh_token"),
            id_token: text("id_token"),
            expires_in: answer["expires_in"].as_u64().unwrap_or(0),
            scope: text("scope").unwrap_or_default(),
        }
    }

    /// The ID token's claims (its payload, decoded; its signature is the provider's business
    /// and mailgate's to check).
    pub(crate) fn id_claims(&self) -> Value {
        let jwt = self
            .id_token
            .as_deref()
            .expect("an ID token (scope openid)");
        let payload = jwt.split('.').nth(1).expect("a JWS");
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(payload)
            .expect("base64url");
        serde_json::from_slice(&bytes).expect("JSON claims")
    }
}

/// Why the provider cannot be used here.
type Found = Result<OAuthProvider, String>;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn clients_dir() -> PathBuf {
    repo().join("tests/clients")
}

/// Whether a skip is an error: where the IMAP tests must run (CI, or scripts/test.sh brought the
/// servers up, having installed the node clients first), so must these.
fn required() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty())
        || std::env::var("MAILGATE_IMAP_TESTS").is_ok_and(|v| v == "require")
}

/// `MT_OAUTH_PORT` and `MT_OAUTH_SECRET` from `scripts/mailserver.sh env` (the values Dovecot's
/// config was written with), with the script's defaults when it says nothing of them.
fn mailserver_settings() -> (u16, String) {
    let out = Command::new(repo().join("scripts/mailserver.sh"))
        .arg("env")
        .stdin(Stdio::null())
        .output()
        .expect("scripts/mailserver.sh env");
    let text = String::from_utf8_lossy(&out.stdout);
    let var = |key: &str| {
        text.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{key}=")))
            .map(str::to_owned)
    };
    let port = var("MT_OAUTH_PORT")
        .and_then(|p| p.parse().ok())
        .unwrap_or(10090);
    let secret = var("MT_OAUTH_SECRET").unwrap_or_else(|| "dovecot-introspection-test-only".into());
    (port, secret)
}

/// The provider's `/test/stats` on `port`, when one of ours answers there (blocking, bounded: a
/// plain HTTP/1.0 GET, so the probe needs no runtime).
fn probe(port: u16) -> Option<String> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut tcp = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    tcp.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    tcp.write_all(b"GET /test/stats?account=- HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .ok()?;
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).ok()?;
    let body: Value = serde_json::from_str(answer.split_once("\r\n\r\n")?.1).ok()?;
    (body["provider"] == "mailgate-oauth-delegated" && body["protocol"] == PROTOCOL)
        .then(|| body["issuer"].as_str().map(str::to_owned))
        .flatten()
}

fn find() -> Found {
    if !clients_dir().join("node_modules/oidc-provider").is_dir() {
        return Err(
            "tests/clients/node_modules is absent (scripts/test.sh installs it, or npm ci there)"
                .into(),
        );
    }
    let (port, introspection_secret) = mailserver_settings();
    let started = Instant::now();
    // Another test process (a second cargo test, a developer's run) may hold the port with its
    // provider: its tokens are the ones Dovecot checks, so use it rather than fail.
    if let Some(issuer) = probe(port) {
        return Ok(OAuthProvider {
            issuer,
            introspection_secret,
            _process: None,
        });
    }
    let log_path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("oauth-delegated-provider.log");
    std::fs::create_dir_all(log_path.parent().unwrap()).unwrap();
    let log = std::fs::File::create(&log_path).unwrap();
    let mut child = Command::new("node")
        .arg(clients_dir().join("oauth-delegated-provider.mjs"))
        .arg(port.to_string())
        .arg(format!("--introspection-secret={introspection_secret}"))
        .arg("--exit-on-stdin-eof")
        .env_clear()
        .env(
            "PATH",
            std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into()),
        )
        .current_dir(clients_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("node: {e}"))?;
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    // The `issuer` line, read on a thread so the wait is bounded.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = std::io::BufReader::new(stdout).lines();
        let issuer = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| l.strip_prefix("issuer ").map(str::to_owned));
        let _ = tx.send(issuer);
        // Keep reading, so the provider never blocks on a full stdout pipe.
        for _ in lines {}
    });
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(Some(issuer)) => {
            print_started(started);
            Ok(OAuthProvider {
                issuer,
                introspection_secret,
                _process: Some((child, stdin)),
            })
        }
        _ => {
            let _ = child.kill();
            let _ = child.wait();
            // Lost a race with another process starting its provider on the port: use that one.
            if let Some(issuer) = probe(port) {
                return Ok(OAuthProvider {
                    issuer,
                    introspection_secret,
                    _process: None,
                });
            }
            panic!(
                "oauth-delegated-provider.mjs did not listen on 127.0.0.1:{port} within 30 s:\n{}",
                std::fs::read_to_string(&log_path).unwrap_or_default()
            )
        }
    }
}

#[expect(
    clippy::print_stderr,
    reason = "the provider's start time is part of the suite's budget report"
)]
fn print_started(started: Instant) {
    eprintln!(
        "oauth-delegated-provider.mjs listening after {:.2} s",
        started.elapsed().as_secs_f64()
    );
}

/// A fresh account no other test (of this or any run) signs in as: `t-<name>-<pid>-<nanos>@example.org`.
pub(crate) fn fresh_account(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let name: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    format!("t-{name}-{}-{nanos}@example.org", std::process::id())
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        // The authorization route answers with the provider's redirect: the test reads it.
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// `(status, JSON body)` of a form POST.
async fn post(url: String, form: &[(&str, &str)]) -> (u16, Value) {
    let res = http()
        .post(url)
        .form(form)
        .send()
        .await
        .expect("provider reachable");
    let status = res.status().as_u16();
    let text = res.text().await.unwrap_or_default();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

impl OAuthProvider {
    /// The provider, or `None` after a loud SKIP line when it cannot run here (node clients not
    /// installed). Where the IMAP tests are required it must run, and a missing one fails.
    #[expect(clippy::print_stderr, reason = "a skipped test says why, loudly")]
    pub(crate) fn get(test: &str) -> Option<&'static OAuthProvider> {
        static PROVIDER: OnceLock<Found> = OnceLock::new();
        match PROVIDER.get_or_init(find) {
            Ok(provider) => Some(provider),
            Err(reason) if required() => {
                panic!("{test}: the OAuth provider must run here: {reason}")
            }
            Err(reason) => {
                eprintln!("!!! SKIP {test}: delegated OAuth test not run: {reason}");
                None
            }
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.issuer)
    }

    /// `POST /device/auth` (RFC 8628 §3.1) for `scope`.
    pub(crate) async fn device_authorization(&self, scope: &str) -> DeviceAuthorization {
        let (status, answer) = post(
            self.url("/device/auth"),
            &[("client_id", CLIENT_ID), ("scope", scope)],
        )
        .await;
        assert_eq!(status, 200, "device authorization: {answer}");
        let text = |k: &str| {
            answer[k]
                .as_str()
                .unwrap_or_else(|| panic!("{k}: {answer}"))
                .to_owned()
        };
        DeviceAuthorization {
            device_code: text("device_code"),
            user_code: text("user_code"),
            verification_uri: text("verification_uri"),
        }
    }

    /// The operator, in the browser, enters `user_code` and signs in as `account` (test route
    /// `POST /test/approve`); `{"approved": true}` or `{"approved": false, "error": …}`.
    pub(crate) async fn approve(&self, user_code: &str, account: &str) -> Value {
        post(
            self.url("/test/approve"),
            &[("user_code", user_code), ("account", account)],
        )
        .await
        .1
    }

    /// The operator refuses the sign-in at the provider.
    pub(crate) async fn deny(&self, user_code: &str) -> Value {
        post(
            self.url("/test/approve"),
            &[("user_code", user_code), ("deny", "1")],
        )
        .await
        .1
    }

    /// `POST /token` with `form` (the public client's id added): status and answer.
    pub(crate) async fn token(&self, form: &[(&str, &str)]) -> (u16, Value) {
        let mut form = form.to_vec();
        form.push(("client_id", CLIENT_ID));
        post(self.url("/token"), &form).await
    }

    /// One device-code poll.
    pub(crate) async fn poll(&self, device_code: &str) -> (u16, Value) {
        self.token(&[("grant_type", DEVICE_GRANT), ("device_code", device_code)])
            .await
    }

    /// The whole device flow for `account`: authorization, a poll that is still pending, the
    /// operator's approval, the poll that gets the tokens.
    pub(crate) async fn sign_in(&self, account: &str, scope: &str) -> Tokens {
        let device = self.device_authorization(scope).await;
        let (status, pending) = self.poll(&device.device_code).await;
        assert_eq!(
            (status, pending["error"].as_str()),
            (400, Some("authorization_pending")),
            "{pending}"
        );
        let approved = self.approve(&device.user_code, account).await;
        assert_eq!(approved["approved"], true, "{approved}");
        let (status, answer) = self.poll(&device.device_code).await;
        assert_eq!(status, 200, "{answer}");
        Tokens::from_answer(&answer)
    }

    /// `grant_type=refresh_token`: the new tokens, or the error answer.
    pub(crate) async fn refresh(&self, refresh_token: &str) -> Result<Tokens, (u16, Value)> {
        let (status, answer) = self
            .token(&[
                ("grant_type", "refresh_token"),
                ("refresh_token", refresh_token),
            ])
            .await;
        if status == 200 {
            Ok(Tokens::from_answer(&answer))
        } else {
            Err((status, answer))
        }
    }

    /// `grant_type=authorization_code` with the PKCE verifier and the redirect_uri used.
    pub(crate) async fn exchange_code(
        &self,
        code: &str,
        verifier: &str,
        redirect_uri: &str,
    ) -> (u16, Value) {
        self.token(&[
            ("grant_type", "authorization_code"),
            ("code", code),
            ("code_verifier", verifier),
            ("redirect_uri", redirect_uri),
        ])
        .await
    }

    /// The operator's browser through the authorization endpoint with `params`, signed in as
    /// `account` (test route `GET /test/authorize`): the status and the Location it ends on
    /// (the client's redirect, with `code`/`state`/`iss` or `error`), or the provider's page.
    pub(crate) async fn authorize(&self, params: &[(&str, &str)], account: &str) -> (u16, String) {
        let mut query = params.to_vec();
        query.push(("account", account));
        let url = reqwest::Url::parse_with_params(&self.url("/test/authorize"), &query).unwrap();
        let res = http().get(url).send().await.expect("provider reachable");
        let status = res.status().as_u16();
        let location = res
            .headers()
            .get("location")
            .and_then(|l| l.to_str().ok())
            .map(str::to_owned);
        let text = res.text().await.unwrap_or_default();
        (status, location.unwrap_or(text))
    }

    /// RFC 7009 revocation by the client.
    pub(crate) async fn revoke(&self, token: &str) -> u16 {
        post(
            self.url("/token/revocation"),
            &[("token", token), ("client_id", CLIENT_ID)],
        )
        .await
        .0
    }

    /// What Dovecot is told about `token` (RFC 7662, as the `dovecot` client).
    pub(crate) async fn introspect(&self, token: &str) -> Value {
        let res = http()
            .post(self.url("/token/introspection"))
            .basic_auth("dovecot", Some(&self.introspection_secret))
            .form(&[("token", token)])
            .send()
            .await
            .expect("provider reachable");
        res.json().await.expect("JSON")
    }

    /// The account removes the app's access at the provider: every grant and token of it is
    /// revoked (test route `POST /test/revoke-all`); how many grants there were.
    pub(crate) async fn revoke_all(&self, account: &str) -> u64 {
        let (status, answer) = post(self.url("/test/revoke-all"), &[("account", account)]).await;
        assert_eq!(status, 200, "{answer}");
        answer["revoked"].as_u64().unwrap_or(0)
    }

    /// The account's access tokens issued from now on live `seconds` (test route `POST
    /// /test/ttl`; 0 restores the provider's default of 60 s).
    pub(crate) async fn set_access_ttl(&self, account: &str, seconds: u64) {
        let seconds = seconds.to_string();
        let (status, answer) = post(
            self.url("/test/ttl"),
            &[("account", account), ("access_ttl", &seconds)],
        )
        .await;
        assert_eq!(status, 200, "{answer}");
    }

    /// Holds (`on`) or releases the account's refresh requests at the token endpoint before the
    /// provider sees them (test route `POST /test/hold`).
    pub(crate) async fn hold_refreshes(&self, account: &str, on: bool) {
        let on = if on { "1" } else { "0" };
        let (status, answer) =
            post(self.url("/test/hold"), &[("account", account), ("on", on)]).await;
        assert_eq!(status, 200, "{answer}");
    }

    /// `(held now, dropped unseen)` of the account's refresh requests (test route `GET
    /// /test/held`).
    pub(crate) async fn held_refreshes(&self, account: &str) -> (u64, u64) {
        let url = reqwest::Url::parse_with_params(&self.url("/test/held"), [("account", account)])
            .unwrap();
        let res = http().get(url).send().await.expect("provider reachable");
        let body: Value = res.json().await.expect("JSON");
        (
            body["held"].as_u64().unwrap_or(0),
            body["dropped"].as_u64().unwrap_or(0),
        )
    }

    /// Every access token, refresh token and device code issued to the account (test route
    /// `GET /test/tokens`).
    pub(crate) async fn issued_tokens(&self, account: &str) -> Vec<String> {
        let url =
            reqwest::Url::parse_with_params(&self.url("/test/tokens"), [("account", account)])
                .unwrap();
        let res = http().get(url).send().await.expect("provider reachable");
        let body: Value = res.json().await.expect("JSON");
        body["tokens"]
            .as_array()
            .expect("a token list")
            .iter()
            .filter_map(|t| t.as_str().map(str::to_owned))
            .collect()
    }

    /// The account's counters (test route `GET /test/stats`): `{"token": {<grant_type>: {"ok",
    /// "error"}}, "introspection": {"active", "inactive", "error"}, "revocation"}`.
    pub(crate) async fn stats(&self, account: &str) -> Value {
        let url = reqwest::Url::parse_with_params(&self.url("/test/stats"), [("account", account)])
            .unwrap();
        let res = http().get(url).send().await.expect("provider reachable");
        let body: Value = res.json().await.expect("JSON");
        body["accounts"][account].clone()
    }

    /// `stats()`'s count of `grant_type` token calls that `outcome` ("ok" or "error").
    pub(crate) async fn token_calls(&self, account: &str, grant_type: &str, outcome: &str) -> u64 {
        self.stats(account).await["token"][grant_type][outcome]
            .as_u64()
            .unwrap_or(0)
    }
}

/// A PKCE pair (RFC 7636): a verifier (43 characters of base64url, the shortest §4.1 allows) and
/// its S256 challenge.
pub(crate) fn pkce() -> (String, String) {
    use sha2::Digest as _;
    let seed = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let verifier = b64(&sha2::Sha256::digest(seed.as_bytes()));
    let challenge = b64(&sha2::Sha256::digest(verifier.as_bytes()));
    (verifier, challenge)
}
