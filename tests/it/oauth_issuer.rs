//! A fake OAuth authorization server for the resource server's tests (issue 29, item 5): ES256
//! signing keys generated per test, their JWKS and OpenID Connect discovery served on loopback by
//! wiremock, and the claims a valid access token carries. The integration tests start it beside
//! the real binary; the token module's unit tests include this file by path for its signer.
//! Only crates both sides depend on are named, never a crate path of either side.

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

/// The fake authorization server: discovery and a JWKS of the keys it was given.
pub(crate) struct FakeIssuer {
    pub(crate) server: wiremock::MockServer,
}

impl FakeIssuer {
    pub(crate) async fn start(keys: &[&Signer]) -> Self {
        let server = wiremock::MockServer::start().await;
        let issuer = Self { server };
        issuer.serve(keys).await;
        issuer
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
        Mock::given(method("GET"))
            .and(path("/.well-known/openid-configuration"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "issuer": self.url(),
                "jwks_uri": format!("{}/jwks", self.url()),
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
