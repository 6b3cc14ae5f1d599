//! The certificate client assertion of Microsoft Graph app-only auth (issue 11): a JWT signed
//! with the app's RSA key, sent as `client_assertion` to the tenant's token endpoint in place of
//! a client secret (Microsoft identity platform "certificate credentials"). It owns the parsing
//! of the key and certificate PEM (bytes in, never paths: the caller reads the files through the
//! owner/mode-checked reader) and the signing. Guarantees: only unencrypted RSA keys of at least
//! 2048 bits are accepted, the certificate must hold the key's public key, and neither the
//! [`Debug`] output of a [`CertificateCredential`] nor any [`AssertionError`] carries key bytes or
//! paths. Only the Graph token source calls it.

use std::fmt;
use std::time::{Duration, SystemTime};

use aws_lc_rs::rsa::KeyPair as RsaKeyPair;
use aws_lc_rs::signature::{self, KeyPair as _};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngExt as _;
use rustls_pki_types::pem::{self, PemObject as _};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde::Serialize;
use sha2::{Digest as _, Sha256};

/// How long an assertion is valid after it is made. The identity platform asks for 5–10 minutes
/// at most; a fresh one is made for every token request, so the short end costs nothing.
const LIFETIME: Duration = Duration::from_secs(10 * 60);

/// The smallest RSA modulus accepted, in bits (aws-lc-rs refuses smaller keys itself; checked
/// again here so the refusal does not hang on its error text).
const MIN_KEY_BITS: usize = 2048;

/// Why a key, a certificate or an assertion was refused. No variant carries key material, file
/// contents or paths: the caller adds which file it read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum AssertionError {
    #[error(
        "the key file holds no private key (expected BEGIN PRIVATE KEY or BEGIN RSA PRIVATE KEY)"
    )]
    KeyMissing,
    #[error(
        "the private key is encrypted; give mailgate an unencrypted key file readable only by it"
    )]
    KeyEncrypted,
    #[error("the private key is not an RSA key; the certificate assertion needs RSA")]
    KeyNotRsa,
    #[error("the RSA key is shorter than {MIN_KEY_BITS} bits")]
    KeyTooSmall,
    /// The PEM or the key inside it could not be read (the reason is the crypto library's
    /// fixed word, e.g. `InvalidEncoding`, `TooLarge`; never key bytes).
    #[error("the private key could not be read ({0})")]
    KeyInvalid(&'static str),
    #[error("the certificate file holds no certificate (expected BEGIN CERTIFICATE)")]
    CertificateMissing,
    #[error("the certificate file is not valid PEM")]
    CertificateInvalid,
    #[error("no certificate in the certificate file holds the private key's public key")]
    CertificateKeyMismatch,
    /// The clock reads before 1970, so no `iat`/`exp` can be written.
    #[error("the system clock is before the Unix epoch")]
    Clock,
    #[error("signing the client assertion failed")]
    Signing,
}

/// An app's certificate credential: its RSA private key and the SHA-256 thumbprint of the
/// certificate registered for it in Entra. Built once at startup by [`Self::from_pem`].
pub(crate) struct CertificateCredential {
    key: RsaKeyPair,
    /// base64url (no padding) of SHA-256 over the certificate's DER: the `x5t#S256` header.
    thumbprint: String,
}

/// The JOSE header. Field order is the wire order.
#[derive(Serialize)]
struct Header<'a> {
    alg: &'static str,
    typ: &'static str,
    #[serde(rename = "x5t#S256")]
    x5t_s256: &'a str,
}

/// The claims the identity platform asks for.
#[derive(Serialize)]
struct Claims<'a> {
    aud: &'a str,
    iss: &'a str,
    sub: &'a str,
    jti: String,
    iat: u64,
    nbf: u64,
    exp: u64,
}

impl CertificateCredential {
    /// Parses the private key (`key_pem`: PKCS#8 `BEGIN PRIVATE KEY` or PKCS#1 `BEGIN RSA
    /// PRIVATE KEY`, unencrypted, RSA ≥ 2048 bits) and picks, from `cert_pem`, the first
    /// certificate holding that key's public key (so a file with the chain in any order works).
    pub(crate) fn from_pem(key_pem: &[u8], cert_pem: &[u8]) -> Result<Self, AssertionError> {
        let key = parse_key(key_pem)?;
        let cert = matching_certificate(cert_pem, key.public_key().as_ref())?;
        Ok(Self {
            key,
            thumbprint: URL_SAFE_NO_PAD.encode(Sha256::digest(cert.as_ref())),
        })
    }

    /// The `x5t#S256` value: base64url of SHA-256 over the certificate's DER.
    #[cfg(test)]
    pub(crate) fn thumbprint(&self) -> &str {
        &self.thumbprint
    }

    /// The public key as a PKCS#1 `RSAPublicKey` DER, the form `UnparsedPublicKey` takes (for a
    /// fake token endpoint that verifies assertions). Not secret.
    #[cfg(test)]
    pub(crate) fn public_key_der(&self) -> Vec<u8> {
        self.key.public_key().as_ref().to_vec()
    }

    /// A fresh compact JWS for one token request: `aud` is the token endpoint, `iss` and `sub`
    /// the app's client id, a random `jti`, `iat` = `nbf` = `now`, and `exp` ten minutes on.
    pub(crate) fn assertion(
        &self,
        client_id: &str,
        token_url: &str,
        now: SystemTime,
    ) -> Result<String, AssertionError> {
        let iat = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_err(|_| AssertionError::Clock)?
            .as_secs();
        let header = Header {
            // RSASSA-PSS with SHA-256: the identity platform's current rule for certificate
            // credentials next to `x5t#S256` (the older RS256 is still accepted there).
            alg: "PS256",
            typ: "JWT",
            x5t_s256: &self.thumbprint,
        };
        let claims = Claims {
            aud: token_url,
            iss: client_id,
            sub: client_id,
            jti: random_uuid(),
            iat,
            nbf: iat,
            exp: iat + LIFETIME.as_secs(),
        };
        let mut jws = encode_json(&header)?;
        jws.push('.');
        jws.push_str(&encode_json(&claims)?);
        let mut sig = vec![0; self.key.public_modulus_len()];
        self.key
            .sign(
                &signature::RSA_PSS_SHA256,
                &aws_lc_rs::rand::SystemRandom::new(),
                jws.as_bytes(),
                &mut sig,
            )
            .map_err(|_| AssertionError::Signing)?;
        jws.push('.');
        jws.push_str(&URL_SAFE_NO_PAD.encode(&sig));
        Ok(jws)
    }
}

/// Names the certificate, never the key.
impl fmt::Debug for CertificateCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertificateCredential")
            .field("x5t#S256", &self.thumbprint)
            .field("key_bits", &(self.key.public_modulus_len() * 8))
            .finish_non_exhaustive()
    }
}

fn parse_key(key_pem: &[u8]) -> Result<RsaKeyPair, AssertionError> {
    // The PEM reader skips `ENCRYPTED PRIVATE KEY` sections as unknown and fails on the legacy
    // `Proc-Type: 4,ENCRYPTED` header as bad base64: look for both first, so an encrypted key is
    // named as such rather than as missing or malformed.
    if contains(key_pem, b"-----BEGIN ENCRYPTED PRIVATE KEY-----")
        || contains(key_pem, b"Proc-Type: 4,ENCRYPTED")
    {
        return Err(AssertionError::KeyEncrypted);
    }
    // The PEM error is dropped, not wrapped: its text can quote a line of the file.
    let der = PrivateKeyDer::from_pem_slice(key_pem).map_err(|err| match err {
        pem::Error::NoItemsFound => AssertionError::KeyMissing,
        _ => AssertionError::KeyInvalid("PEM"),
    })?;
    let parsed = match &der {
        PrivateKeyDer::Pkcs8(k) => RsaKeyPair::from_pkcs8(k.secret_pkcs8_der()),
        PrivateKeyDer::Pkcs1(k) => RsaKeyPair::from_der(k.secret_pkcs1_der()),
        // SEC1 (`EC PRIVATE KEY`) and any kind a later rustls-pki-types adds.
        _ => return Err(AssertionError::KeyNotRsa),
    };
    let key = parsed.map_err(|rejected| match rejected.description_() {
        "TooSmall" => AssertionError::KeyTooSmall,
        // A PKCS#8 key of another algorithm (EC, Ed25519).
        "WrongAlgorithm" => AssertionError::KeyNotRsa,
        other => AssertionError::KeyInvalid(other),
    })?;
    if key.public_modulus_len() * 8 < MIN_KEY_BITS {
        return Err(AssertionError::KeyTooSmall);
    }
    Ok(key)
}

/// The first certificate in `cert_pem` whose DER contains `rsa_public_key` (PKCS#1
/// `RSAPublicKey`). A certificate's SubjectPublicKeyInfo wraps exactly those bytes in its BIT
/// STRING, so this finds the key without an X.509 parser, and unlike comparing whole SPKIs it
/// does not depend on how the algorithm identifier is encoded (NULL parameters or none, or the
/// RSA-PSS OID). A certificate holding the same 270+ bytes anywhere else would also hold the
/// key, so a false match is not a concern for the mistake this catches: a key and certificate
/// from different pairs.
fn matching_certificate(
    cert_pem: &[u8],
    rsa_public_key: &[u8],
) -> Result<CertificateDer<'static>, AssertionError> {
    let mut seen = false;
    for cert in CertificateDer::pem_slice_iter(cert_pem) {
        let cert = cert.map_err(|_| AssertionError::CertificateInvalid)?;
        seen = true;
        if contains(cert.as_ref(), rsa_public_key) {
            return Ok(cert);
        }
    }
    Err(if seen {
        AssertionError::CertificateKeyMismatch
    } else {
        AssertionError::CertificateMissing
    })
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

fn encode_json(value: &impl Serialize) -> Result<String, AssertionError> {
    // Serialising these plain structs cannot fail; mapped rather than unwrapped all the same.
    let json = serde_json::to_vec(value).map_err(|_| AssertionError::Signing)?;
    Ok(URL_SAFE_NO_PAD.encode(json))
}

/// A random (version 4) UUID, the form the identity platform shows for `jti`.
fn random_uuid() -> String {
    let mut b: [u8; 16] = rand::rng().random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::signature::{
        RSA_PKCS1_2048_8192_SHA256, RSA_PSS_2048_8192_SHA256, UnparsedPublicKey,
    };

    // Test-only material made once with the openssl CLI (tests/fixtures/graph/README.md).
    const KEY: &[u8] = include_bytes!("../../../tests/fixtures/graph/test-only-key.pem");
    const KEY_PKCS1: &[u8] =
        include_bytes!("../../../tests/fixtures/graph/test-only-key-pkcs1.pem");
    const CERT: &[u8] = include_bytes!("../../../tests/fixtures/graph/test-only-cert.pem");
    const CERT_PUBLIC_KEY: &[u8] =
        include_bytes!("../../../tests/fixtures/graph/test-only-cert-pubkey.pem");
    const OTHER_CERT: &[u8] =
        include_bytes!("../../../tests/fixtures/graph/test-only-other-cert.pem");
    const KEY_ENCRYPTED: &[u8] =
        include_bytes!("../../../tests/fixtures/graph/test-only-key-encrypted.pem");
    const KEY_ENCRYPTED_LEGACY: &[u8] =
        include_bytes!("../../../tests/fixtures/graph/test-only-key-encrypted-legacy.pem");
    const EC_KEY: &[u8] = include_bytes!("../../../tests/fixtures/graph/test-only-ec-key.pem");
    const EC_KEY_SEC1: &[u8] =
        include_bytes!("../../../tests/fixtures/graph/test-only-ec-key-sec1.pem");
    const KEY_1024: &[u8] = include_bytes!("../../../tests/fixtures/graph/test-only-key-1024.pem");

    const CLIENT_ID: &str = "00000000-0000-4000-8000-00000000c11e";
    const TOKEN_URL: &str = "https://login.example.org/tenant-id/oauth2/v2.0/token";

    fn credential() -> CertificateCredential {
        CertificateCredential::from_pem(KEY, CERT).expect("fixture pair")
    }

    fn decode_part(part: &str) -> serde_json::Value {
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).expect("base64url")).expect("json")
    }

    fn cert_der(pem: &[u8]) -> Vec<u8> {
        CertificateDer::from_pem_slice(pem)
            .expect("cert")
            .as_ref()
            .to_vec()
    }

    #[test]
    fn assertion_has_exactly_the_documented_header_and_claims() {
        let cred = credential();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let jws = cred.assertion(CLIENT_ID, TOKEN_URL, now).expect("sign");
        let parts: Vec<&str> = jws.split('.').collect();
        assert_eq!(parts.len(), 3, "{jws}");
        assert!(parts.iter().all(|p| !p.contains('=')), "no padding");

        let header = decode_part(parts[0]);
        assert_eq!(
            header,
            serde_json::json!({"alg": "PS256", "typ": "JWT", "x5t#S256": cred.thumbprint()})
        );

        let claims = decode_part(parts[1]);
        let jti = claims["jti"].as_str().expect("jti").to_owned();
        assert_eq!(
            claims,
            serde_json::json!({
                "aud": TOKEN_URL,
                "iss": CLIENT_ID,
                "sub": CLIENT_ID,
                "jti": jti,
                "iat": 1_700_000_000u64,
                "nbf": 1_700_000_000u64,
                "exp": 1_700_000_600u64,
            })
        );
        let uuid = regex::Regex::new(
            "^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$",
        )
        .expect("regex");
        assert!(uuid.is_match(&jti), "{jti}");
        // A fresh jti per assertion: it is what lets the server refuse a replay.
        let again = cred.assertion(CLIENT_ID, TOKEN_URL, now).expect("sign");
        assert_ne!(
            decode_part(again.split('.').nth(1).expect("claims"))["jti"],
            jti
        );
    }

    /// Verifies `jws` the way a token endpoint would; `Err` when the signature does not hold.
    fn verify(
        alg: &'static signature::RsaParameters,
        public_key: &[u8],
        jws: &str,
    ) -> Result<(), aws_lc_rs::error::Unspecified> {
        let (signed, sig) = jws.rsplit_once('.').expect("three parts");
        let sig = URL_SAFE_NO_PAD.decode(sig).expect("base64url");
        UnparsedPublicKey::new(alg, public_key).verify(signed.as_bytes(), &sig)
    }

    /// Replaces one character of the claims part by another valid base64url one.
    fn tamper_claims(jws: &str) -> String {
        let mut parts: Vec<String> = jws.split('.').map(str::to_owned).collect();
        let claims = &mut parts[1];
        let flipped = if claims.starts_with('e') { "f" } else { "e" };
        claims.replace_range(0..1, flipped);
        parts.join(".")
    }

    #[test]
    fn signature_verifies_with_the_public_key_and_fails_once_tampered() {
        let cred = credential();
        let jws = cred
            .assertion(CLIENT_ID, TOKEN_URL, SystemTime::now())
            .expect("sign");
        let public_key = cred.public_key_der();
        verify(&RSA_PSS_2048_8192_SHA256, &public_key, &jws).expect("verifies");
        assert!(
            verify(&RSA_PKCS1_2048_8192_SHA256, &public_key, &jws).is_err(),
            "PSS padding, as the header says"
        );
        assert!(verify(&RSA_PSS_2048_8192_SHA256, &public_key, &tamper_claims(&jws)).is_err());
        // The certificate's own public key (SPKI, extracted by the openssl CLI) verifies it too.
        let spki = rustls_pki_types::SubjectPublicKeyInfoDer::from_pem_slice(CERT_PUBLIC_KEY)
            .expect("spki");
        verify(&RSA_PSS_2048_8192_SHA256, spki.as_ref(), &jws).expect("verifies");
    }

    #[test]
    fn thumbprint_is_base64url_sha256_of_the_certificate_der() {
        let expected = URL_SAFE_NO_PAD.encode(Sha256::digest(cert_der(CERT)));
        assert_eq!(credential().thumbprint(), expected);
        // Independently: the openssl CLI's SHA-256 fingerprint of the fixture.
        let openssl = "19227DF4A371C804B3323DBC78810C888FF91EAB02966EC542D5A22D04799596";
        assert_eq!(
            credential().thumbprint(),
            URL_SAFE_NO_PAD.encode(hex::decode(openssl).expect("hex"))
        );
    }

    #[test]
    fn pkcs1_key_gives_the_same_credential() {
        let pkcs1 = CertificateCredential::from_pem(KEY_PKCS1, CERT).expect("pkcs1");
        assert_eq!(pkcs1.public_key_der(), credential().public_key_der());
        assert_eq!(pkcs1.thumbprint(), credential().thumbprint());
    }

    #[test]
    fn the_certificate_holding_the_key_is_picked_from_a_bundle() {
        let bundle = [OTHER_CERT, CERT].concat();
        let cred = CertificateCredential::from_pem(KEY, &bundle).expect("bundle");
        assert_eq!(cred.thumbprint(), credential().thumbprint());
        // A combined key + certificate file works as either argument.
        let combined = [KEY, CERT].concat();
        let cred = CertificateCredential::from_pem(&combined, &combined).expect("combined");
        assert_eq!(cred.thumbprint(), credential().thumbprint());
    }

    #[test]
    fn refusals_name_the_problem() {
        let refused = |key: &[u8], cert: &[u8]| {
            CertificateCredential::from_pem(key, cert).expect_err("refused")
        };
        assert_eq!(refused(KEY_ENCRYPTED, CERT), AssertionError::KeyEncrypted);
        assert_eq!(
            refused(KEY_ENCRYPTED_LEGACY, CERT),
            AssertionError::KeyEncrypted
        );
        assert_eq!(refused(EC_KEY, CERT), AssertionError::KeyNotRsa);
        assert_eq!(refused(EC_KEY_SEC1, CERT), AssertionError::KeyNotRsa);
        assert_eq!(refused(KEY_1024, CERT), AssertionError::KeyTooSmall);
        assert_eq!(refused(CERT, CERT), AssertionError::KeyMissing);
        assert_eq!(refused(b"", CERT), AssertionError::KeyMissing);
        assert_eq!(refused(KEY, b""), AssertionError::CertificateMissing);
        assert_eq!(refused(KEY, KEY), AssertionError::CertificateMissing);
        assert_eq!(
            refused(KEY, OTHER_CERT),
            AssertionError::CertificateKeyMismatch
        );
        let truncated = &CERT[..CERT.len() - 30];
        assert_eq!(refused(KEY, truncated), AssertionError::CertificateInvalid);
        let garbled = String::from_utf8(KEY.to_vec())
            .expect("ascii")
            .replacen("MII", "MI!", 1);
        assert!(matches!(
            refused(garbled.as_bytes(), CERT),
            AssertionError::KeyInvalid(_)
        ));
    }

    #[test]
    fn a_clock_before_1970_is_an_error_not_a_panic() {
        let before = SystemTime::UNIX_EPOCH - Duration::from_secs(1);
        assert_eq!(
            credential().assertion(CLIENT_ID, TOKEN_URL, before),
            Err(AssertionError::Clock)
        );
    }

    /// Neither the credential's Debug nor any refusal shows key material: no PEM body line, no
    /// base64 of the private key DER, no hex of it.
    #[test]
    fn debug_and_errors_show_no_key_material() {
        let cred = credential();
        let shown = format!("{cred:?}");
        assert!(shown.contains(cred.thumbprint()), "{shown}");
        let der = PrivateKeyDer::from_pem_slice(KEY).expect("key");
        let secret = der.secret_der();
        let b64 = base64::engine::general_purpose::STANDARD.encode(secret);
        let hex = hex::encode(secret);
        let public_hex = hex::encode(cred.public_key_der());
        let mut outputs = vec![shown];
        for key in [KEY_ENCRYPTED, EC_KEY, KEY_1024, CERT] {
            let err = CertificateCredential::from_pem(key, CERT).expect_err("refused");
            outputs.push(format!("{err:?} {err}"));
        }
        let err = CertificateCredential::from_pem(KEY, OTHER_CERT).expect_err("mismatch");
        outputs.push(format!("{err:?} {err}"));
        for out in &outputs {
            for chunk in b64.as_bytes().chunks(16) {
                let chunk = std::str::from_utf8(chunk).expect("ascii");
                assert!(!out.contains(chunk), "base64 key bytes in {out}");
            }
            assert!(!out.contains(&hex[..32]), "hex key bytes in {out}");
            // aws-lc-rs's own Debug prints the public key in hex; ours does not even that.
            assert!(!out.contains(&public_hex[..32]), "public key in {out}");
            assert!(!out.to_lowercase().contains("private key-----"), "{out}");
        }
    }
}
