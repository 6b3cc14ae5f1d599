//! Who signed in, and whether that account may hold an alias's grant (issue 37, item 1).
//!
//! The account comes from the ID token the token endpoint returned with the grant. That token
//! reached us over the connection we opened to the configured token endpoint (TLS, or loopback
//! in tests), so its issuer is authenticated by that connection and its signature is not checked
//! here (OpenID Connect Core 1.0 §3.1.3.7, item 6); its `iss`, `aud`, `azp` and `exp` are.
//!
//! Invariants:
//! - An account is an address the provider vouches for: `email` only with
//!   `email_verified: true`; Microsoft's `preferred_username` only when it is an address (it is
//!   the sign-in name there, and Exchange checks it again at every IMAP or SMTP login, where the
//!   token must belong to the login's user).
//! - The grant is kept only when that account is the alias's mailbox address, or the address
//!   the configuration names in `delegatedFrom` (the person who may read a shared mailbox).
//!   Anything else is refused before the grant is saved.
//! - A refusal names the rule, never the addresses: the caller prints it to the operator and may
//!   log it, and the log carries aliases only.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::wire::IdToken;
use crate::address::EmailAddress;

/// Clock skew tolerated on the ID token's `exp` (it was issued moments ago by the endpoint we
/// just called; a minute covers a laptop's drift).
const EXP_SKEW_SECS: i64 = 60;
/// Longest ID token read (Microsoft's run to about 2 KiB; the wire cap is larger).
const MAX_ID_TOKEN_BYTES: usize = 16 * 1024;

/// Which claim named the account (for `auth status` and the closing note's tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AccountClaim {
    /// `email`, with `email_verified: true`.
    VerifiedEmail,
    /// Microsoft's `preferred_username`.
    PreferredUsername,
}

/// The signed-in account, as the ID token names it.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct SignedIn {
    pub(crate) account: EmailAddress,
    pub(crate) claim: AccountClaim,
}

/// The address is personal data: `Debug` says only which claim named it.
impl std::fmt::Debug for SignedIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignedIn")
            .field("account", &format_args!("<redacted>"))
            .field("claim", &self.claim)
            .finish()
    }
}

/// How the account relates to the alias.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Holder {
    /// The account is the mailbox itself.
    Mailbox,
    /// The account is the configured `delegatedFrom` (the mailbox is shared with it).
    Delegate,
}

/// Why a sign-in was not accepted as the alias's. Each names a rule, not a value.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum IdentityError {
    #[error(
        "the provider returned no ID token (the sign-in must request the openid scope), so the \
         signed-in account cannot be checked"
    )]
    NoIdToken,
    #[error("the ID token is not a readable JWT")]
    Malformed,
    #[error("the ID token was issued by another authority than the configured one")]
    WrongIssuer,
    #[error("the ID token was issued to another app registration (aud/azp is not the clientId)")]
    WrongAudience,
    #[error("the ID token has expired")]
    Expired,
    #[error(
        "the ID token names no account the provider verified (no email with email_verified, no \
         address as preferred_username)"
    )]
    NoVerifiedAccount,
    #[error(
        "the signed-in account is neither the mailbox address configured for this alias nor its \
         delegatedFrom; sign in as that account"
    )]
    NotThisMailbox,
}

/// What the account is checked against: the provider's way of naming accounts and issuers.
pub(crate) struct Expectation<'a> {
    pub(crate) client_id: &'a str,
    /// Whether `iss` is the configured authority (Microsoft's multi-tenant authorities accept
    /// one issuer per tenant, so this is a rule rather than a string).
    pub(crate) issuer_ok: &'a dyn Fn(&str, Option<&str>) -> bool,
    /// Microsoft: `preferred_username` may name the account.
    pub(crate) preferred_username_names_account: bool,
}

/// The claims read; everything else in the token is ignored.
#[derive(Deserialize)]
struct Claims {
    iss: String,
    aud: Audience,
    azp: Option<String>,
    exp: i64,
    /// Microsoft's tenant id, which its multi-tenant issuers embed.
    tid: Option<String>,
    email: Option<String>,
    #[serde(default, deserialize_with = "lenient_bool")]
    email_verified: bool,
    preferred_username: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Audience {
    One(String),
    Many(Vec<String>),
}

/// `email_verified` as a boolean, or as the string some providers send ("true").
fn lenient_bool<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Flag {
        Bool(bool),
        Text(String),
        Other(serde::de::IgnoredAny),
    }
    Ok(match Flag::deserialize(d)? {
        Flag::Bool(b) => b,
        Flag::Text(s) => s == "true",
        Flag::Other(_) => false,
    })
}

/// The account the ID token names, after checking it is for us, from our authority, and live.
pub(crate) fn signed_in(
    id_token: Option<&IdToken>,
    expect: &Expectation<'_>,
    now: DateTime<Utc>,
) -> Result<SignedIn, IdentityError> {
    let token = id_token.ok_or(IdentityError::NoIdToken)?.expose();
    let claims = read_claims(token)?;
    if !(expect.issuer_ok)(&claims.iss, claims.tid.as_deref()) {
        return Err(IdentityError::WrongIssuer);
    }
    let for_us = match &claims.aud {
        Audience::One(aud) => aud == expect.client_id,
        // With several audiences, the authorized party must be us (Core §3.1.3.7, items 3–5).
        Audience::Many(auds) => {
            auds.iter().any(|a| a == expect.client_id)
                && claims.azp.as_deref() == Some(expect.client_id)
        }
    };
    let azp_ok = claims
        .azp
        .as_deref()
        .is_none_or(|azp| azp == expect.client_id);
    if !for_us || !azp_ok {
        return Err(IdentityError::WrongAudience);
    }
    if claims.exp + EXP_SKEW_SECS < now.timestamp() {
        return Err(IdentityError::Expired);
    }
    let verified_email = claims
        .email
        .as_deref()
        .filter(|_| claims.email_verified)
        .and_then(|e| EmailAddress::parse(e).ok());
    if let Some(account) = verified_email {
        return Ok(SignedIn {
            account,
            claim: AccountClaim::VerifiedEmail,
        });
    }
    if expect.preferred_username_names_account
        && let Some(account) = claims
            .preferred_username
            .as_deref()
            .and_then(|p| EmailAddress::parse(p).ok())
    {
        return Ok(SignedIn {
            account,
            claim: AccountClaim::PreferredUsername,
        });
    }
    Err(IdentityError::NoVerifiedAccount)
}

/// Whether `account` may hold the grant of the mailbox at `mailbox` (see the module invariants).
pub(crate) fn holder(
    account: &EmailAddress,
    mailbox: &EmailAddress,
    delegated_from: Option<&EmailAddress>,
) -> Result<Holder, IdentityError> {
    // Addresses are stored lower-cased, so equality is the case-insensitive comparison mail
    // providers apply to their own account names.
    if account == mailbox {
        Ok(Holder::Mailbox)
    } else if delegated_from == Some(account) {
        Ok(Holder::Delegate)
    } else {
        Err(IdentityError::NotThisMailbox)
    }
}

fn read_claims(token: &str) -> Result<Claims, IdentityError> {
    if token.len() > MAX_ID_TOKEN_BYTES {
        return Err(IdentityError::Malformed);
    }
    let mut parts = token.split('.');
    let (Some(_header), Some(payload), Some(_signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(IdentityError::Malformed);
    };
    let json = URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .map_err(|_| IdentityError::Malformed)?;
    serde_json::from_slice(&json).map_err(|_| IdentityError::Malformed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const CLIENT: &str = "client-1";
    const ISSUER: &str = "https://issuer.example.com";

    fn token(claims: serde_json::Value) -> IdToken {
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"RS256"}"#);
        let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
        IdToken::for_tests(format!("{header}.{payload}.c2ln"))
    }

    fn now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).unwrap()
    }

    fn base() -> serde_json::Value {
        json!({"iss": ISSUER, "aud": CLIENT, "exp": 1_800_000_600i64,
               "email": "Ada@Example.com", "email_verified": true})
    }

    fn exact(iss: &str, _tid: Option<&str>) -> bool {
        iss == ISSUER
    }

    fn expect(preferred: bool) -> Expectation<'static> {
        Expectation {
            client_id: CLIENT,
            issuer_ok: &exact,
            preferred_username_names_account: preferred,
        }
    }

    fn with(mut v: serde_json::Value, key: &str, value: serde_json::Value) -> serde_json::Value {
        v[key] = value;
        v
    }

    fn address(s: &str) -> EmailAddress {
        EmailAddress::parse(s).unwrap()
    }

    #[test]
    fn a_verified_email_names_the_account_lower_cased() {
        let who = signed_in(Some(&token(base())), &expect(false), now()).unwrap();
        assert_eq!(who.account, address("ada@example.com"));
        assert_eq!(who.claim, AccountClaim::VerifiedEmail);
        assert!(!format!("{who:?}").contains("ada"));
    }

    #[test]
    fn an_unverified_email_names_no_account() {
        for flag in [json!(false), json!("false"), json!(null), json!(1)] {
            let t = token(with(base(), "email_verified", flag.clone()));
            assert_eq!(
                signed_in(Some(&t), &expect(false), now()),
                Err(IdentityError::NoVerifiedAccount),
                "{flag}"
            );
        }
        let t = token(with(base(), "email_verified", json!("true")));
        assert!(signed_in(Some(&t), &expect(false), now()).is_ok());
    }

    #[test]
    fn preferred_username_counts_only_where_the_provider_says_so() {
        let mut claims = base();
        claims.as_object_mut().unwrap().remove("email");
        claims["preferred_username"] = json!("eve@example.org");
        let t = token(claims);
        assert_eq!(
            signed_in(Some(&t), &expect(false), now()),
            Err(IdentityError::NoVerifiedAccount)
        );
        let who = signed_in(Some(&t), &expect(true), now()).unwrap();
        assert_eq!(who.account, address("eve@example.org"));
        assert_eq!(who.claim, AccountClaim::PreferredUsername);
        let not_an_address = token(with(base(), "email_verified", json!(false)));
        let mut c = base();
        c["email_verified"] = json!(false);
        c["preferred_username"] = json!("Eve Example");
        assert_eq!(
            signed_in(Some(&token(c)), &expect(true), now()),
            Err(IdentityError::NoVerifiedAccount)
        );
        drop(not_an_address);
    }

    #[test]
    fn issuer_audience_and_expiry_are_checked() {
        let e = expect(false);
        let cases = [
            (
                with(base(), "iss", json!("https://other.example.com")),
                IdentityError::WrongIssuer,
            ),
            (
                with(base(), "aud", json!("client-2")),
                IdentityError::WrongAudience,
            ),
            (
                with(base(), "aud", json!(["client-2", CLIENT])),
                IdentityError::WrongAudience,
            ),
            (
                with(base(), "azp", json!("client-2")),
                IdentityError::WrongAudience,
            ),
            (
                with(base(), "exp", json!(1_799_999_000i64)),
                IdentityError::Expired,
            ),
        ];
        for (claims, want) in cases {
            assert_eq!(signed_in(Some(&token(claims)), &e, now()), Err(want));
        }
        let many = with(
            with(base(), "aud", json!(["client-2", CLIENT])),
            "azp",
            json!(CLIENT),
        );
        assert!(signed_in(Some(&token(many)), &e, now()).is_ok());
        // Within the skew, still live.
        let just = with(base(), "exp", json!(1_799_999_970i64));
        assert!(signed_in(Some(&token(just)), &e, now()).is_ok());
    }

    #[test]
    fn unreadable_tokens_are_malformed() {
        let e = expect(false);
        assert_eq!(signed_in(None, &e, now()), Err(IdentityError::NoIdToken));
        for raw in [
            "",
            "a.b",
            "a.b.c.d",
            "a.!!!.c",
            "a.e30.c",
            &"x".repeat(20_000),
        ] {
            let t = IdToken::for_tests(raw.to_owned());
            assert_eq!(
                signed_in(Some(&t), &e, now()),
                Err(IdentityError::Malformed),
                "{raw:.20}"
            );
        }
    }

    #[test]
    fn the_tenant_reaches_the_issuer_rule() {
        let ms = |iss: &str, tid: Option<&str>| {
            tid.is_some_and(|t| iss == format!("https://login.example.com/{t}/v2.0"))
        };
        let e = Expectation {
            client_id: CLIENT,
            issuer_ok: &ms,
            preferred_username_names_account: true,
        };
        let good = with(
            with(base(), "iss", json!("https://login.example.com/t-1/v2.0")),
            "tid",
            json!("t-1"),
        );
        assert!(signed_in(Some(&token(good)), &e, now()).is_ok());
        let bad = with(
            with(base(), "iss", json!("https://login.example.com/t-1/v2.0")),
            "tid",
            json!("t-2"),
        );
        assert_eq!(
            signed_in(Some(&token(bad)), &e, now()),
            Err(IdentityError::WrongIssuer)
        );
    }

    #[test]
    fn only_the_mailbox_or_its_delegate_holds_the_grant() {
        let mailbox = address("shared@example.com");
        let ada = address("ada@example.com");
        let eve = address("eve@example.org");
        assert_eq!(holder(&mailbox, &mailbox, None), Ok(Holder::Mailbox));
        assert_eq!(holder(&ada, &mailbox, Some(&ada)), Ok(Holder::Delegate));
        assert_eq!(
            holder(&eve, &mailbox, Some(&ada)),
            Err(IdentityError::NotThisMailbox)
        );
        assert_eq!(
            holder(&ada, &mailbox, None),
            Err(IdentityError::NotThisMailbox)
        );
        let message = IdentityError::NotThisMailbox.to_string();
        assert!(!message.contains('@'), "{message}");
    }
}
