//! One access token, checked (issue 29, item 2): its header (an asymmetric algorithm from the
//! allowlist, the RFC 9068 `typ`), its signature under the issuer's key, and its claims (`iss`,
//! `aud` holding this server's canonical resource URL, `exp` and `nbf` with a small leeway, the
//! required scopes), then the principal its verified identity is.
//!
//! Invariants: `none` and every HMAC algorithm are refused before any key is looked at, so a
//! token "signed" with the public key as an HMAC secret never verifies; a JWK is used only for
//! the algorithm family it is a key of, never a symmetric (`oct`) one, and only when its own
//! `alg` and `use`, if given, agree. Nothing here copies the token or a claim value into an error:
//! [`TokenError`] says which rule failed, for the challenge and the logs. Pure functions, no I/O:
//! the key set comes from `keys`.

use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;

use crate::config::{Identity, Principal};

/// Access tokens longer than this are refused unread (real ones are 1–4 KB).
pub(super) const MAX_TOKEN_BYTES: usize = 8 * 1024;
/// Clock skew allowed on `exp` and `nbf`, in seconds.
pub(crate) const LEEWAY_SECS: u64 = 30;

/// The asymmetric algorithms a token may be signed with.
pub(crate) const ALLOWED: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Why a token was refused (a rule, never a value).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TokenError {
    #[error("the token is not a well-formed JWT")]
    Malformed,
    #[error("the token's algorithm is not allowed")]
    Algorithm,
    #[error("the token is not an access token (typ)")]
    Type,
    #[error("the token's signing key is unknown")]
    UnknownKey,
    #[error("the token's signature does not verify")]
    Signature,
    #[error("the token is from another issuer")]
    Issuer,
    #[error("the token is for another resource (aud)")]
    Audience,
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet (nbf)")]
    NotYetValid,
    #[error("the token's claims are malformed")]
    Claims,
}

impl TokenError {
    /// A short, value-free code for logs and the journal.
    pub(crate) fn code(self) -> &'static str {
        match self {
            TokenError::Malformed => "malformed",
            TokenError::Algorithm => "algorithm",
            TokenError::Type => "type",
            TokenError::UnknownKey => "unknown_key",
            TokenError::Signature => "signature",
            TokenError::Issuer => "issuer",
            TokenError::Audience => "audience",
            TokenError::Expired => "expired",
            TokenError::NotYetValid => "not_yet_valid",
            TokenError::Claims => "claims",
        }
    }
}

/// What the rules need besides the token.
pub(crate) struct Rules<'a> {
    pub(crate) issuer: &'a str,
    /// The canonical resource URL the token's `aud` must hold.
    pub(crate) resource: &'a str,
    /// Accept `typ: JWT` (or none) as well as `at+jwt`: issuers that predate RFC 9068, such as
    /// Entra ID, mark access tokens so. The `aud` rule still keeps an ID token out.
    pub(crate) accept_plain_jwt: bool,
}

/// The parts of a token's header the key lookup needs.
pub(crate) struct Head {
    pub(crate) alg: Algorithm,
    pub(crate) kid: Option<String>,
}

/// Reads and checks the header: size, algorithm allowlist, `typ`.
pub(crate) fn head(token: &str, rules: &Rules<'_>) -> Result<Head, TokenError> {
    if token.len() > MAX_TOKEN_BYTES || token.split('.').count() != 3 {
        return Err(TokenError::Malformed);
    }
    // An unknown `alg` (`none` included) fails to parse: jsonwebtoken has no variant for it.
    let header = jsonwebtoken::decode_header(token).map_err(|e| match e.kind() {
        jsonwebtoken::errors::ErrorKind::Json(_) => TokenError::Algorithm,
        _ => TokenError::Malformed,
    })?;
    if !ALLOWED.contains(&header.alg) {
        return Err(TokenError::Algorithm);
    }
    let typ = header.typ.as_deref().map(str::to_ascii_lowercase);
    let access_token = matches!(typ.as_deref(), Some("at+jwt" | "application/at+jwt"));
    let plain = matches!(typ.as_deref(), None | Some("jwt"));
    if !(access_token || rules.accept_plain_jwt && plain) {
        return Err(TokenError::Type);
    }
    Ok(Head {
        alg: header.alg,
        kid: header.kid,
    })
}

/// Whether `jwk` may check a signature made with `alg`.
pub(crate) fn key_fits(jwk: &Jwk, alg: Algorithm) -> bool {
    let family_fits = matches!(
        (&jwk.algorithm, alg),
        (
            AlgorithmParameters::RSA(_),
            Algorithm::RS256
                | Algorithm::RS384
                | Algorithm::RS512
                | Algorithm::PS256
                | Algorithm::PS384
                | Algorithm::PS512
        ) | (
            AlgorithmParameters::EllipticCurve(_),
            Algorithm::ES256 | Algorithm::ES384
        ) | (AlgorithmParameters::OctetKeyPair(_), Algorithm::EdDSA)
    );
    let alg_agrees = jwk
        .common
        .key_algorithm
        .is_none_or(|k| Algorithm::try_from(k).is_ok_and(|a| a == alg));
    let use_agrees = matches!(
        jwk.common.public_key_use,
        None | Some(PublicKeyUse::Signature)
    );
    family_fits && alg_agrees && use_agrees
}

/// The verified claims mailgate reads.
#[derive(Debug, Deserialize)]
pub(crate) struct Claims {
    pub(crate) sub: String,
    #[serde(default)]
    email: Option<String>,
    #[serde(default)]
    email_verified: Option<bool>,
    #[serde(default)]
    groups: Option<Vec<String>>,
    #[serde(default)]
    roles: Option<Vec<String>>,
    /// RFC 9068 / RFC 8693: space-separated.
    #[serde(default)]
    scope: Option<String>,
    /// Entra ID and others: `scp`, a space-separated string or an array.
    #[serde(default)]
    scp: Option<Scp>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Scp {
    Text(String),
    List(Vec<String>),
}

impl Claims {
    /// Every scope the token grants.
    pub(crate) fn scopes(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self
            .scope
            .as_deref()
            .map(|s| s.split_ascii_whitespace().collect())
            .unwrap_or_default();
        match &self.scp {
            Some(Scp::Text(s)) => out.extend(s.split_ascii_whitespace()),
            Some(Scp::List(list)) => out.extend(list.iter().map(String::as_str)),
            None => {}
        }
        out
    }

    /// Whether the token grants every scope in `required`.
    pub(crate) fn has_scopes(&self, required: &[String]) -> bool {
        let granted = self.scopes();
        required.iter().all(|r| granted.contains(&r.as_str()))
    }

    /// Where in `principals` the first one (in the file's order) whose identity this token
    /// carries stands. An email counts only when the token says it is verified.
    pub(crate) fn principal(&self, principals: &[Principal]) -> Option<usize> {
        principals.iter().position(|p| match &p.identity {
            Identity::Subject(sub) => *sub == self.sub,
            Identity::Email(address) => {
                self.email_verified == Some(true)
                    && self
                        .email
                        .as_deref()
                        .is_some_and(|e| e.eq_ignore_ascii_case(address.as_str()))
            }
            Identity::Group(group) => self
                .groups
                .iter()
                .chain(self.roles.iter())
                .flatten()
                .any(|g| g == group),
        })
    }
}

/// Verifies the signature with `jwk` and checks the claims.
pub(crate) fn verify(
    token: &str,
    head: &Head,
    jwk: &Jwk,
    rules: &Rules<'_>,
) -> Result<Claims, TokenError> {
    if !key_fits(jwk, head.alg) {
        return Err(TokenError::UnknownKey);
    }
    let key = DecodingKey::from_jwk(jwk).map_err(|_| TokenError::UnknownKey)?;
    let mut validation = Validation::new(head.alg);
    validation.set_issuer(&[rules.issuer]);
    validation.set_audience(&[rules.resource]);
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    validation.leeway = LEEWAY_SECS;
    validation.validate_nbf = true;
    use jsonwebtoken::errors::ErrorKind as K;
    jsonwebtoken::decode::<Claims>(token, &key, &validation)
        .map(|data| data.claims)
        .map_err(|e| match e.kind() {
            K::InvalidSignature => TokenError::Signature,
            K::InvalidAlgorithm | K::InvalidAlgorithmName => TokenError::Algorithm,
            K::InvalidIssuer => TokenError::Issuer,
            K::InvalidAudience => TokenError::Audience,
            K::ExpiredSignature => TokenError::Expired,
            K::ImmatureSignature => TokenError::NotYetValid,
            K::MissingRequiredClaim(_) | K::Json(_) | K::InvalidClaimFormat(_) => {
                TokenError::Claims
            }
            _ => TokenError::Malformed,
        })
}

/// The fake authorization server (its signer, and the key cache tests' slow key set), shared with
/// the integration tests.
#[cfg(test)]
#[path = "../../../../tests/it/oauth_issuer.rs"]
#[expect(
    dead_code,
    reason = "the unit tests sign tokens and hold key sets; the rest serves the integration tests"
)]
pub(crate) mod issuer_fixture;

#[cfg(test)]
pub(crate) mod tests {
    //! The token rules, one refusal each, on tokens signed by the shared fixture.

    use std::path::Path;

    use jsonwebtoken::{EncodingKey, Header};
    use serde_json::{Value, json};

    use super::issuer_fixture::{Signer, now};
    use super::*;
    use crate::config::Config;

    pub(crate) const ISSUER: &str = "https://login.example.com/tenant";
    pub(crate) const RESOURCE: &str = "https://mail.example.com/mcp";

    fn jwk(signer: &Signer) -> Jwk {
        serde_json::from_value(signer.jwk.clone()).expect("jwk")
    }

    /// Claims a valid token for `sub` carries.
    fn claims(sub: &str) -> Value {
        issuer_fixture::claims(ISSUER, RESOURCE, sub)
    }

    fn rules() -> Rules<'static> {
        Rules {
            issuer: ISSUER,
            resource: RESOURCE,
            accept_plain_jwt: false,
        }
    }

    fn check(signer: &Signer, token: &str) -> Result<Claims, TokenError> {
        let head = head(token, &rules())?;
        verify(token, &head, &jwk(signer), &rules())
    }

    #[test]
    fn a_valid_token_verifies_and_names_its_subject_and_scopes() {
        let signer = Signer::new("k1");
        let claims = check(&signer, &signer.sign(&claims("a-1"))).expect("valid");
        assert_eq!(claims.sub, "a-1");
        assert!(claims.has_scopes(&["mail.read".into()]));
        assert!(!claims.has_scopes(&["mail.read".into(), "mail.send".into()]));
    }

    /// The refusal matrix of issue 29, item 5, at the token level: each case changes one thing
    /// of a valid token and must fail with its own rule.
    #[test]
    fn every_broken_rule_is_refused_with_its_reason() {
        let signer = Signer::new("k1");
        let other = Signer::new("k1");
        let mut cases: Vec<(&str, String, TokenError)> = vec![
            ("not a jwt", "abc".into(), TokenError::Malformed),
            ("two parts", "a.b".into(), TokenError::Malformed),
            (
                "oversized",
                format!("{}.{}.x", "a".repeat(MAX_TOKEN_BYTES), "b"),
                TokenError::Malformed,
            ),
            (
                "signed by another key",
                other.sign(&claims("a-1")),
                TokenError::Signature,
            ),
            (
                "alg none",
                issuer_fixture::unsigned(&claims("a-1")),
                TokenError::Algorithm,
            ),
        ];
        let mutate = |f: &dyn Fn(&mut Value)| {
            let mut c = claims("a-1");
            f(&mut c);
            signer.sign(&c)
        };
        cases.push((
            "wrong issuer",
            mutate(&|c| c["iss"] = json!("https://evil.example.org/")),
            TokenError::Issuer,
        ));
        cases.push((
            "wrong audience",
            mutate(&|c| c["aud"] = json!("https://other.example.com/mcp")),
            TokenError::Audience,
        ));
        cases.push((
            "no audience",
            mutate(&|c| {
                c.as_object_mut().expect("object").remove("aud");
            }),
            TokenError::Claims,
        ));
        cases.push((
            "expired",
            mutate(&|c| c["exp"] = json!(now() - 120)),
            TokenError::Expired,
        ));
        cases.push((
            "not yet valid",
            mutate(&|c| c["nbf"] = json!(now() + 600)),
            TokenError::NotYetValid,
        ));
        cases.push((
            "no subject",
            mutate(&|c| {
                c.as_object_mut().expect("object").remove("sub");
            }),
            TokenError::Claims,
        ));
        let mut id_token = Header::new(Algorithm::ES256);
        id_token.typ = Some("JWT".into());
        id_token.kid = Some("k1".into());
        cases.push((
            "an ID token's typ",
            signer.sign_with(&id_token, &claims("a-1")),
            TokenError::Type,
        ));
        for (name, token, want) in cases {
            assert_eq!(check(&signer, &token).err(), Some(want), "{name}");
        }
    }

    /// HS256 "signed" with the public key's bytes as the HMAC secret: refused for its algorithm
    /// before any key is looked at, and an `oct` JWK never fits any allowed algorithm.
    #[test]
    fn an_hmac_token_keyed_by_the_public_key_never_verifies() {
        let signer = Signer::new("k1");
        let mut header = Header::new(Algorithm::HS256);
        header.typ = Some("at+jwt".into());
        header.kid = Some("k1".into());
        let public = signer.jwk["x"].as_str().expect("x").as_bytes().to_vec();
        let forged = jsonwebtoken::encode(
            &header,
            &claims("a-1"),
            &EncodingKey::from_secret(&public).expect("key"),
        )
        .expect("sign");
        assert_eq!(head(&forged, &rules()).err(), Some(TokenError::Algorithm));
        let oct: Jwk = serde_json::from_value(json!({"kty": "oct", "k": "c2VjcmV0", "kid": "k1"}))
            .expect("jwk");
        for alg in ALLOWED {
            assert!(!key_fits(&oct, *alg), "{alg:?}");
        }
        // An RSA algorithm claimed on an EC key does not fit either.
        assert!(!key_fits(&jwk(&signer), Algorithm::RS256));
    }

    #[test]
    fn a_plain_jwt_typ_is_accepted_only_when_configured() {
        let signer = Signer::new("k1");
        let mut header = Header::new(Algorithm::ES256);
        header.typ = Some("JWT".into());
        header.kid = Some("k1".into());
        let token = signer.sign_with(&header, &claims("a-1"));
        let mut lenient = rules();
        lenient.accept_plain_jwt = true;
        let head = head(&token, &lenient).expect("accepted");
        assert!(verify(&token, &head, &jwk(&signer), &lenient).is_ok());
    }

    #[test]
    fn principals_match_by_subject_verified_email_or_group_in_file_order() {
        let config = Config::from_json(
            br#"{"mailboxes": [{"alias": "finance", "address": "finance@example.com"}],
                 "principals": [
                   {"label": "ana", "match": {"sub": "a-1"}, "aliases": ["finance"]},
                   {"label": "bo", "match": {"email": "bo@example.org"}, "aliases": ["finance"]},
                   {"label": "team", "match": {"group": "finance-team"}, "aliases": ["finance"]}]}"#,
            Path::new("/etc/mailgate"),
        )
        .expect("config");
        let p = &config.principals;
        let parse = |v: Value| serde_json::from_value::<Claims>(v).expect("claims");
        let label = |c: &Claims| c.principal(p).map(|at| p[at].label.as_str().to_owned());
        assert_eq!(label(&parse(json!({"sub": "a-1"}))).as_deref(), Some("ana"));
        let bo = json!({"sub": "x", "email": "Bo@Example.org", "email_verified": true});
        assert_eq!(label(&parse(bo)).as_deref(), Some("bo"));
        let unverified = json!({"sub": "x", "email": "bo@example.org"});
        assert_eq!(label(&parse(unverified)), None);
        let group = json!({"sub": "x", "groups": ["other", "finance-team"]});
        assert_eq!(label(&parse(group)).as_deref(), Some("team"));
        let role = json!({"sub": "x", "roles": ["finance-team"]});
        assert_eq!(label(&parse(role)).as_deref(), Some("team"));
        let both = json!({"sub": "a-1", "groups": ["finance-team"]});
        assert_eq!(label(&parse(both)).as_deref(), Some("ana"), "file order");
        assert_eq!(label(&parse(json!({"sub": "nobody"}))), None);
        let scp = parse(json!({"sub": "x", "scp": "mail.read other"}));
        assert!(scp.has_scopes(&["mail.read".into()]));
        let scp_list = parse(json!({"sub": "x", "scp": ["mail.read"]}));
        assert!(scp_list.has_scopes(&["mail.read".into()]));
    }
}
