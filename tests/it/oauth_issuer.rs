//! A fake OAuth authorization server for the resource server's tests (issue 29, item 5): ES256
//! signing keys generated per test, their JWKS and OpenID Connect discovery served on loopback by
//! wiremock, and the claims a valid access token carries. The integration tests start it beside
//! the real binary; the token module's unit tests include this file by path for its signer, and
//! the key cache's for [`SlowJwks`], a key set the test answers when it says so (issue 36).
//! Only crates both sides depend on are named, never a crate path of either side.

use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

/// An ES256 signing key and its public JWK.
pub(crate) struct Signer {
    pkcs8: Vec<u8>,
    pub(crate) jwk: Value,
    pub(crate) kid: String,
}

impl Signer {
    pub(crate) fn new(kid: &str) -> Self {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .expect("keygen")
            .as_ref()
            .to_vec();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &pkcs8).expect("key");
        // Uncompressed point: 0x04 | x (32 bytes) | y (32 bytes).
        let point = pair.public_key().as_ref();
        let jwk = json!({
            "kty": "EC", "crv": "P-256", "kid": kid, "use": "sig", "alg": "ES256",
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
        });
        Self {
            pkcs8,
            jwk,
            kid: kid.to_owned(),
        }
    }

    /// A token with `claims`, ES256 under this key, `typ: at+jwt`.
    pub(crate) fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.typ = Some("at+jwt".into());
        header.kid = Some(self.kid.clone());
        self.sign_with(&header, claims)
    }

    pub(crate) fn sign_with(&self, header: &Header, claims: &Value) -> String {
        jsonwebtoken::encode(header, claims, &EncodingKey::from_ec_der(&self.pkcs8)).expect("sign")
    }
}

pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

/// What a valid access token for `sub` carries, from `issuer` for `resource`.
pub(crate) fn claims(issuer: &str, resource: &str, sub: &str) -> Value {
    json!({
        "iss": issuer, "aud": resource, "sub": sub, "scope": "mail.read openid",
        "exp": now() + 300, "iat": now(), "client_id": "app-1",
    })
}

/// An unsigned token (`alg: none`) with `claims`.
pub(crate) fn unsigned(claims: &Value) -> String {
    format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(json!({"alg": "none", "typ": "at+jwt"}).to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    )
}

/// The fake authorization server: discovery and a JWKS of the keys it was given (served by
/// wiremock, or by a [`SlowJwks`] whose answers the test holds).
pub(crate) struct FakeIssuer {
    pub(crate) server: wiremock::MockServer,
    slow: Option<SlowJwks>,
}

impl FakeIssuer {
    pub(crate) async fn start(keys: &[&Signer]) -> Self {
        let server = wiremock::MockServer::start().await;
        let issuer = Self { server, slow: None };
        issuer.serve(keys).await;
        issuer
    }

    /// An issuer whose discovery names a [`SlowJwks`] (open until the test holds it).
    pub(crate) async fn start_slow(keys: &[&Signer]) -> Self {
        let server = wiremock::MockServer::start().await;
        let slow = SlowJwks::start(keys).await;
        let issuer = Self {
            server,
            slow: Some(slow),
        };
        issuer.serve(keys).await;
        issuer
    }

    /// The key set of [`FakeIssuer::start_slow`].
    pub(crate) fn slow(&self) -> &SlowJwks {
        self.slow
            .as_ref()
            .expect("an issuer started with start_slow")
    }

    /// The issuer URL (`http://127.0.0.1:PORT`).
    pub(crate) fn url(&self) -> String {
        self.server.uri()
    }

    /// Serves discovery and a JWKS of `keys` (replacing what was served).
    pub(crate) async fn serve(&self, keys: &[&Signer]) {
        use wiremock::matchers::{method, path};
        use wiremock::{Mock, ResponseTemplate};
        self.server.reset().await;
        let jwks_uri = match &self.slow {
            Some(slow) => {
                slow.serve(keys);
                slow.url()
            }
            None => format!("{}/jwks", self.url()),
        };
        Mock::given(method("GET"))
            .and(path("/.well-known/openid-configuration"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "issuer": self.url(),
                "jwks_uri": jwks_uri,
            })))
            .mount(&self.server)
            .await;
        let keys: Vec<&Value> = keys.iter().map(|k| &k.jwk).collect();
        Mock::given(method("GET"))
            .and(path("/jwks"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({ "keys": keys })))
            .mount(&self.server)
            .await;
    }

    /// Answers every request with 503 from now on.
    pub(crate) async fn go_down(&self) {
        use wiremock::matchers::any;
        use wiremock::{Mock, ResponseTemplate};
        self.server.reset().await;
        Mock::given(any())
            .respond_with(ResponseTemplate::new(503))
            .mount(&self.server)
            .await;
    }

    /// How many times the key set was fetched.
    pub(crate) async fn jwks_fetches(&self) -> usize {
        self.server
            .received_requests()
            .await
            .unwrap_or_default()
            .iter()
            .filter(|r| r.url.path() == "/jwks")
            .count()
    }
}

/// A JWKS endpoint on loopback whose answers the test holds and releases: every GET is counted
/// as it arrives, then answered only once the gate is open, so a test can keep a key-set fetch
/// in flight for as long as it needs, and know it is, without sleeping. Plain HTTP/1.1, one
/// request per connection.
pub(crate) struct SlowJwks {
    url: String,
    keys: Arc<Mutex<Value>>,
    open: Arc<tokio::sync::watch::Sender<bool>>,
    arrived: Arc<tokio::sync::watch::Sender<usize>>,
}

impl SlowJwks {
    /// Serves `keys`, the gate open.
    pub(crate) async fn start(keys: &[&Signer]) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/jwks", listener.local_addr().expect("addr"));
        let jwks = Self {
            url,
            keys: Arc::new(Mutex::new(Value::Null)),
            open: Arc::new(tokio::sync::watch::Sender::new(true)),
            arrived: Arc::new(tokio::sync::watch::Sender::new(0)),
        };
        jwks.serve(keys);
        let (keys, open, arrived) = (
            Arc::clone(&jwks.keys),
            Arc::clone(&jwks.open),
            Arc::clone(&jwks.arrived),
        );
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (keys, open, arrived) =
                    (Arc::clone(&keys), Arc::clone(&open), Arc::clone(&arrived));
                tokio::spawn(answer(stream, keys, open, arrived));
            }
        });
        jwks
    }

    pub(crate) fn url(&self) -> String {
        self.url.clone()
    }

    /// Answers with `keys` from now on.
    pub(crate) fn serve(&self, keys: &[&Signer]) {
        let keys: Vec<&Value> = keys.iter().map(|k| &k.jwk).collect();
        *self.keys.lock().expect("keys") = json!({ "keys": keys });
    }

    /// Requests from now on (and those waiting) are answered only after [`SlowJwks::release`].
    pub(crate) fn hold(&self) {
        self.open.send_replace(false);
    }

    /// Answers every request held, and the later ones at once.
    pub(crate) fn release(&self) {
        self.open.send_replace(true);
    }

    /// How many requests arrived (answered or held).
    pub(crate) fn fetches(&self) -> usize {
        *self.arrived.borrow()
    }

    /// Returns once `n` requests have arrived (the caller bounds the wait).
    pub(crate) async fn arrived(&self, n: usize) {
        let mut seen = self.arrived.subscribe();
        seen.wait_for(|count| *count >= n)
            .await
            .expect("the counter lives as long as the endpoint");
    }
}

/// One connection: read the request head, count it, wait for the gate, answer the key set.
async fn answer(
    mut stream: tokio::net::TcpStream,
    keys: Arc<Mutex<Value>>,
    open: Arc<tokio::sync::watch::Sender<bool>>,
    arrived: Arc<tokio::sync::watch::Sender<usize>>,
) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        if head.len() > 16 * 1024 {
            return;
        }
    }
    arrived.send_modify(|count| *count += 1);
    // Subscribed after counting: a release between the two is seen as the current value.
    let mut gate = open.subscribe();
    if gate.wait_for(|open| *open).await.is_err() {
        return;
    }
    let body = keys.lock().expect("keys").to_string();
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}
