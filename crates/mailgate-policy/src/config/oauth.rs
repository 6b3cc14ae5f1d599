//! A mailbox backend's delegated OAuth sign-in (`mailboxes[].backend.auth`, issue 37), validated
//! from the raw file into an [`OAuthSpec`].
//!
//! Invariants: an [`OAuthSpec`] only exists with a client id of `[A-Za-z0-9._~-]` (1-200); a
//! Microsoft tenant that is `common` (the default), `consumers`, `organizations`, a GUID or a DNS
//! domain, lower-cased; an OIDC issuer that is an `https://` URL (`http://` only to a loopback
//! host) without user info, query or fragment, kept exactly as written because the provider's
//! `iss` must equal it; OIDC scopes (1-16 RFC 6749 scope tokens, no repeats) only for `oidc`,
//! since for Microsoft and Google the catalog decides the scopes (`delegated::scopes`); a secret
//! only ever as the name of a variable; a lower-cased `delegatedFrom` address. The fields are
//! private, so no other module can build one that breaks these. Which backend kinds take `auth`,
//! and that its server blocks then name no password or token, is `backend.rs`'s rule. Errors name
//! the JSON path and the rule, never a value.
//!
//! Who calls it: `backend::backend_spec` only; the backends, the grant store and `auth login`
//! read the resulting [`OAuthSpec`].

use std::collections::HashSet;
use std::net::Ipv6Addr;

use super::ConfigError;
use super::backend::{ENV_VAR_RULE, is_env_var_name, is_loopback_host, parse_host};
use super::graph::is_uuid;
use super::raw::{RawAuth, RawAuthKind, RawBackendKind, RawOAuthProvider, RawSaslMechanism};
use crate::address::{Domain, EmailAddress};

/// Longest `clientId` accepted.
const CLIENT_ID_MAX_LEN: usize = 200;
/// Longest `issuer` accepted.
const ISSUER_MAX_LEN: usize = 1024;
/// Most `scopes` entries accepted.
const SCOPES_MAX: usize = 16;
/// Longest scope accepted.
const SCOPE_MAX_LEN: usize = 200;

/// How a mailbox signs in on the operator's behalf: the app registration (client id, optional
/// secret variable), the provider, the account when it is not the mailbox's own, and the SASL
/// mechanism of an IMAP/SMTP backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OAuthSpec {
    provider: OAuthProvider,
    client_id: String,
    client_secret_env: Option<String>,
    delegated_from: Option<EmailAddress>,
    mechanism: SaslMechanism,
}

impl OAuthSpec {
    pub fn provider(&self) -> &OAuthProvider {
        &self.provider
    }

    /// The app registration's client id, as written (`[A-Za-z0-9._~-]`, 1-200).
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// The name of the variable holding the client secret, when the app has one.
    pub fn client_secret_env(&self) -> Option<&str> {
        self.client_secret_env.as_deref()
    }

    /// The account that signs in when it is not the mailbox address (a shared mailbox the user
    /// may read); `None`: the mailbox address itself.
    pub fn delegated_from(&self) -> Option<&EmailAddress> {
        self.delegated_from.as_ref()
    }

    /// The SASL mechanism of an `imap` backend's IMAP and SMTP logins (default
    /// [`SaslMechanism::XOAuth2`]). A `graph` backend cannot name one and always answers the
    /// default, which it has no use for.
    pub fn mechanism(&self) -> SaslMechanism {
        self.mechanism
    }
}

/// Who issues the grant, with what the provider needs to find its endpoints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OAuthProvider {
    /// The Microsoft identity platform (Outlook.com, Microsoft 365).
    Microsoft {
        tenant: MicrosoftTenant,
    },
    Google,
    /// Any OpenID Connect provider, found through its discovery document. Its scope names are
    /// its own, so the config lists them.
    Oidc {
        issuer: IssuerUrl,
        scopes: OidcScopes,
    },
}

impl OAuthProvider {
    /// The file's name for the provider (`microsoft`, `google`, `oidc`).
    pub fn name(&self) -> &'static str {
        match self {
            OAuthProvider::Microsoft { .. } => "microsoft",
            OAuthProvider::Google => "google",
            OAuthProvider::Oidc { .. } => "oidc",
        }
    }
}

/// A Microsoft tenant: `common`, `consumers`, `organizations`, a GUID or a domain, lower-cased.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MicrosoftTenant(String);

impl MicrosoftTenant {
    /// The default when `tenant` is absent: any account, work or personal.
    pub const COMMON: &'static str = "common";

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// An OIDC issuer URL: `https://` (or `http://` to a loopback host), host, optional port and
/// path; no user info, query or fragment. Exactly as written (not normalized).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IssuerUrl(String);

impl IssuerUrl {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The scopes an OIDC sign-in asks for: 1-16 distinct RFC 6749 scope tokens, in file order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OidcScopes(Vec<String>);

impl OidcScopes {
    pub fn as_slice(&self) -> &[String] {
        &self.0
    }
}

/// The SASL mechanism IMAP and SMTP authenticate with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaslMechanism {
    /// Google's and Microsoft's `XOAUTH2`.
    XOAuth2,
    /// RFC 7628 `OAUTHBEARER`.
    OAuthBearer,
}

impl SaslMechanism {
    /// The SASL mechanism name as sent on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            SaslMechanism::XOAuth2 => "XOAUTH2",
            SaslMechanism::OAuthBearer => "OAUTHBEARER",
        }
    }
}

/// Validates `raw` found at `at` (`mailboxes[i].backend.auth`) on a backend of `kind` (`graph`
/// or `imap`; the caller refuses `auth` on `maildir`).
pub(super) fn oauth_spec(
    raw: RawAuth,
    at: &str,
    kind: RawBackendKind,
) -> Result<OAuthSpec, ConfigError> {
    let refuse = |key: &str, rule: &str| ConfigError::schema(format!("{at}.{key}"), rule);
    // Exhaustive on purpose: another kind must be validated here before it can be accepted.
    let RawAuthKind::Oauth = raw.kind;
    if !is_client_id(&raw.client_id) {
        return Err(refuse(
            "clientId",
            "must be 1-200 characters of A-Z a-z 0-9 . _ ~ -",
        ));
    }
    let only_microsoft = "is only allowed for provider microsoft";
    let only_oidc = "is only allowed for provider oidc";
    let catalog_scopes = "is only allowed for provider oidc: for microsoft and google the \
                          catalog decides the scopes";
    let provider = match raw.provider {
        RawOAuthProvider::Microsoft => {
            if raw.issuer.is_some() {
                return Err(refuse("issuer", only_oidc));
            }
            if raw.scopes.is_some() {
                return Err(refuse("scopes", catalog_scopes));
            }
            let tenant = match raw.tenant {
                None => MicrosoftTenant(MicrosoftTenant::COMMON.to_owned()),
                Some(tenant) => parse_tenant(&tenant).ok_or_else(|| {
                    refuse(
                        "tenant",
                        "must be common, consumers, organizations, a tenant id (GUID) or a \
                         domain name such as example.onmicrosoft.com",
                    )
                })?,
            };
            OAuthProvider::Microsoft { tenant }
        }
        RawOAuthProvider::Google => {
            if kind == RawBackendKind::Graph {
                return Err(refuse(
                    "provider",
                    "google cannot sign in to Microsoft Graph (use microsoft, or kind imap)",
                ));
            }
            if raw.tenant.is_some() {
                return Err(refuse("tenant", only_microsoft));
            }
            if raw.issuer.is_some() {
                return Err(refuse("issuer", only_oidc));
            }
            if raw.scopes.is_some() {
                return Err(refuse("scopes", catalog_scopes));
            }
            OAuthProvider::Google
        }
        RawOAuthProvider::Oidc => {
            if raw.tenant.is_some() {
                return Err(refuse("tenant", only_microsoft));
            }
            let Some(issuer) = raw.issuer else {
                return Err(refuse("issuer", "is required for provider oidc"));
            };
            let issuer = parse_issuer(&issuer).map_err(|rule| refuse("issuer", rule))?;
            let Some(scopes) = raw.scopes else {
                return Err(refuse(
                    "scopes",
                    "is required for provider oidc (its scope names are its own)",
                ));
            };
            let scopes = parse_scopes(scopes, at)?;
            OAuthProvider::Oidc { issuer, scopes }
        }
    };
    if raw
        .client_secret_env
        .as_deref()
        .is_some_and(|name| !is_env_var_name(name))
    {
        return Err(refuse("clientSecretEnv", ENV_VAR_RULE));
    }
    let delegated_from = raw
        .delegated_from
        .map(|address| {
            EmailAddress::parse(&address)
                .map_err(|error| refuse("delegatedFrom", &error.to_string()))
        })
        .transpose()?;
    let mechanism = match (raw.mechanism, kind) {
        (Some(_), RawBackendKind::Graph | RawBackendKind::Maildir) => {
            return Err(refuse(
                "mechanism",
                "is only allowed for backend kind imap (it names the IMAP/SMTP SASL mechanism)",
            ));
        }
        (None, _) | (Some(RawSaslMechanism::Xoauth2), _) => SaslMechanism::XOAuth2,
        (Some(RawSaslMechanism::Oauthbearer), _) => SaslMechanism::OAuthBearer,
    };
    Ok(OAuthSpec {
        provider,
        client_id: raw.client_id,
        client_secret_env: raw.client_secret_env,
        delegated_from,
        mechanism,
    })
}

/// 1-200 of `[A-Za-z0-9._~-]` (RFC 3986 unreserved): Microsoft's GUIDs, Google's
/// `NNN-xxx.apps.googleusercontent.com`, and whatever an OIDC provider issues within that.
fn is_client_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= CLIENT_ID_MAX_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'~' | b'-'))
}

/// A tenant form Microsoft's endpoints accept in their path, lower-cased (tenant names are
/// case-insensitive). A domain needs two labels, so `common` and its kin cannot be read as one.
fn parse_tenant(tenant: &str) -> Option<MicrosoftTenant> {
    let lower = tenant.to_ascii_lowercase();
    if matches!(lower.as_str(), "common" | "consumers" | "organizations") || is_uuid(&lower) {
        return Some(MicrosoftTenant(lower));
    }
    // `Domain::parse` takes `@example.com` for allowlists; a tenant never has one.
    if tenant.starts_with('@') {
        return None;
    }
    Domain::parse(tenant)
        .ok()
        .map(|domain| MicrosoftTenant(domain.as_str().to_owned()))
}

/// Checks an issuer URL by hand (the policy crate has no URL parser, and a strict subset is
/// all an issuer needs): see [`IssuerUrl`]. The error is the rule broken.
fn parse_issuer(issuer: &str) -> Result<IssuerUrl, &'static str> {
    const SHAPE: &str = "must be an https:// URL of a host, an optional port and a path \
                         (no user info, spaces or control characters, at most 1024 characters)";
    if issuer.len() > ISSUER_MAX_LEN
        || !issuer.is_ascii()
        || issuer.bytes().any(|b| b.is_ascii_control() || b == b' ')
    {
        return Err(SHAPE);
    }
    if issuer.contains(['?', '#']) {
        return Err("must not have a query or fragment (OpenID Connect issuers have neither)");
    }
    let (secure, rest) = if let Some(rest) = issuer.strip_prefix("https://") {
        (true, rest)
    } else if let Some(rest) = issuer.strip_prefix("http://") {
        (false, rest)
    } else {
        return Err(SHAPE);
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        let (v6, after) = bracketed.split_once(']').ok_or(SHAPE)?;
        if v6.parse::<Ipv6Addr>().is_err() {
            return Err(SHAPE);
        }
        (v6.to_ascii_lowercase(), after)
    } else {
        let (name, after) = authority.split_at(authority.find(':').unwrap_or(authority.len()));
        // A name with `@` (user info) or anything but a host fails here.
        (parse_host(name).ok_or(SHAPE)?, after)
    };
    if !port.is_empty() {
        let digits = port.strip_prefix(':').ok_or(SHAPE)?;
        let valid = !digits.is_empty()
            && digits.len() <= 5
            && digits.bytes().all(|b| b.is_ascii_digit())
            && digits.parse::<u16>().is_ok_and(|p| p != 0);
        if !valid {
            return Err(SHAPE);
        }
    }
    if !is_issuer_path(path) {
        return Err(SHAPE);
    }
    if !secure && !is_loopback_host(&host) {
        return Err(
            "may use http:// only to a loopback host (127.0.0.0/8, ::1, localhost); \
                    use https://",
        );
    }
    Ok(IssuerUrl(issuer.to_owned()))
}

/// Empty, or `/`-separated segments of RFC 3986 `pchar` (percent escapes complete), none of
/// them `.` or `..` and none empty but a trailing one.
fn is_issuer_path(path: &str) -> bool {
    let Some(rest) = path.strip_prefix('/') else {
        return path.is_empty();
    };
    let segments: Vec<&str> = rest.split('/').collect();
    let last = segments.len() - 1;
    segments.iter().enumerate().all(|(index, segment)| {
        (!segment.is_empty() || index == last)
            && *segment != "."
            && *segment != ".."
            && is_pchars(segment)
    })
}

fn is_pchars(segment: &str) -> bool {
    let bytes = segment.as_bytes();
    let mut index = 0;
    while let Some(&b) = bytes.get(index) {
        if b == b'%' {
            let escape = bytes.get(index + 1..index + 3);
            if !escape.is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit)) {
                return false;
            }
            index += 3;
        } else if b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@".contains(&b) {
            index += 1;
        } else {
            return false;
        }
    }
    true
}

/// 1-16 distinct scope tokens: RFC 6749's `%x21 / %x23-5B / %x5D-7E` (printable ASCII without
/// space, `"` or `\`), and without `'` too, 1-200 each.
fn parse_scopes(scopes: Vec<String>, at: &str) -> Result<OidcScopes, ConfigError> {
    if scopes.is_empty() || scopes.len() > SCOPES_MAX {
        return Err(ConfigError::schema(
            format!("{at}.scopes"),
            "must list 1 to 16 scopes",
        ));
    }
    let mut seen = HashSet::new();
    for (index, scope) in scopes.iter().enumerate() {
        let token = !scope.is_empty()
            && scope.len() <= SCOPE_MAX_LEN
            && scope
                .bytes()
                .all(|b| b.is_ascii_graphic() && !matches!(b, b'"' | b'\'' | b'\\'));
        if !token {
            return Err(ConfigError::schema(
                format!("{at}.scopes[{index}]"),
                "must be 1-200 printable ASCII characters without spaces, quotes or backslashes",
            ));
        }
        if !seen.insert(scope.as_str()) {
            return Err(ConfigError::schema(
                format!("{at}.scopes[{index}]"),
                "repeats an earlier scope",
            ));
        }
    }
    Ok(OidcScopes(scopes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::fixtures::{parse, refusal, with_mailboxes};
    use crate::config::{BackendSpec, Config};
    use proptest::prelude::*;

    const IMAP: &str = r#"{"host": "imap.example.com", "port": 993, "security": "tls"}"#;
    const SMTP: &str = r#"{"host": "smtp.example.com", "port": 465, "security": "tls"}"#;
    const GUID: &str = "11111111-1111-4111-8111-111111111111";

    /// A config of one mailbox whose backend is `backend` (JSON object text).
    fn one(backend: &str) -> String {
        with_mailboxes(
            &format!(r#"{{"alias": "a", "address": "a@example.com", "backend": {backend}}}"#),
            "",
        )
    }

    fn graph(auth: &str) -> String {
        one(&format!(r#"{{"kind": "graph", "auth": {auth}}}"#))
    }

    fn imap(auth: &str) -> String {
        one(&format!(
            r#"{{"kind": "imap", "imap": {IMAP}, "smtp": {SMTP}, "auth": {auth}}}"#
        ))
    }

    fn auth_of(config: &Config) -> Option<&OAuthSpec> {
        match &config.mailboxes[0].backend {
            BackendSpec::Graph { auth } | BackendSpec::Imap { auth, .. } => auth.as_ref(),
            BackendSpec::Maildir { .. } => None,
        }
    }

    fn accepted(json: &str) -> OAuthSpec {
        let config = parse(json).unwrap_or_else(|error| panic!("{json}: {error}"));
        auth_of(&config).expect("an auth block").clone()
    }

    /// Asserts the refusal names `path` (after `mailboxes[0].backend.`) and a rule containing
    /// `rule`.
    fn assert_refused(json: &str, path: &str, rule: &str) {
        let (got_path, got_rule) = refusal(json);
        assert_eq!(got_path, format!("mailboxes[0].backend.{path}"), "{json}");
        assert!(
            got_rule.contains(rule),
            "{got_rule:?} lacks {rule:?}: {json}"
        );
    }

    fn microsoft_with(extra: &str) -> String {
        format!(r#"{{"kind": "oauth", "provider": "microsoft", "clientId": "{GUID}"{extra}}}"#)
    }

    fn oidc_with(issuer: &str, scopes: &str) -> String {
        format!(
            r#"{{"kind": "oauth", "provider": "oidc", "clientId": "mailgate",
                 "issuer": "{issuer}", "scopes": {scopes}}}"#
        )
    }

    #[test]
    fn a_full_microsoft_graph_auth_parses_to_its_spec() {
        let spec = accepted(&graph(&microsoft_with(
            r#", "tenant": "Example.OnMicrosoft.com", "clientSecretEnv": "MAILGATE_APP_SECRET",
                "delegatedFrom": "Ana.Lima@Example.com""#,
        )));
        assert_eq!(
            spec.provider(),
            &OAuthProvider::Microsoft {
                tenant: MicrosoftTenant("example.onmicrosoft.com".to_owned())
            }
        );
        assert_eq!(spec.provider().name(), "microsoft");
        assert_eq!(spec.client_id(), GUID);
        assert_eq!(spec.client_secret_env(), Some("MAILGATE_APP_SECRET"));
        assert_eq!(
            spec.delegated_from().map(EmailAddress::as_str),
            Some("ana.lima@example.com"),
            "lower-cased"
        );
        assert_eq!(spec.mechanism(), SaslMechanism::XOAuth2);
    }

    #[test]
    fn a_full_google_imap_auth_parses_to_its_spec() {
        let json = imap(
            r#"{"kind": "oauth", "provider": "google",
                "clientId": "123456789012-abc_def.apps.googleusercontent.com",
                "clientSecretEnv": "GMAIL_CLIENT_SECRET", "mechanism": "oauthbearer"}"#,
        );
        let config = parse(&json).expect("valid");
        let BackendSpec::Imap { imap, smtp, auth } = &config.mailboxes[0].backend else {
            panic!("expected imap");
        };
        assert_eq!(imap.host, "imap.example.com");
        assert!(smtp.is_some());
        let spec = auth.as_ref().expect("auth");
        assert_eq!(spec.provider(), &OAuthProvider::Google);
        assert_eq!(
            spec.client_id(),
            "123456789012-abc_def.apps.googleusercontent.com"
        );
        assert_eq!(spec.client_secret_env(), Some("GMAIL_CLIENT_SECRET"));
        assert_eq!(spec.delegated_from(), None);
        assert_eq!(spec.mechanism(), SaslMechanism::OAuthBearer);
        assert_eq!(spec.mechanism().as_str(), "OAUTHBEARER");
    }

    #[test]
    fn a_full_oidc_auth_parses_to_its_spec() {
        for (backend, issuer) in [
            ("imap", "https://id.example.org/realms/mail"),
            ("graph", "http://127.0.0.1:3000"),
            ("imap", "http://localhost:8443/oidc/"),
            ("imap", "http://[::1]:9000/a%2Fb"),
        ] {
            let auth = oidc_with(issuer, r#"["openid", "email", "mail:read"]"#);
            let json = if backend == "graph" {
                graph(&auth)
            } else {
                imap(&auth)
            };
            let spec = accepted(&json);
            let OAuthProvider::Oidc {
                issuer: got,
                scopes,
            } = spec.provider()
            else {
                panic!("expected oidc: {spec:?}");
            };
            assert_eq!(got.as_str(), issuer, "kept exactly as written");
            assert_eq!(scopes.as_slice(), ["openid", "email", "mail:read"]);
            assert_eq!(spec.client_id(), "mailgate");
            assert_eq!(spec.mechanism(), SaslMechanism::XOAuth2, "the default");
        }
    }

    #[test]
    fn defaults_are_tenant_common_and_mechanism_xoauth2() {
        let spec = accepted(&imap(&microsoft_with("")));
        assert_eq!(
            spec.provider(),
            &OAuthProvider::Microsoft {
                tenant: MicrosoftTenant("common".to_owned())
            }
        );
        assert_eq!(spec.mechanism(), SaslMechanism::XOAuth2);
        assert_eq!(spec.mechanism().as_str(), "XOAUTH2");
        assert_eq!(spec.client_secret_env(), None);
        let explicit = accepted(&imap(&microsoft_with(r#", "mechanism": "xoauth2""#)));
        assert_eq!(explicit.mechanism(), SaslMechanism::XOAuth2);
    }

    #[test]
    fn configs_without_auth_parse_as_before() {
        let config = parse(&with_mailboxes(
            &format!(
                r#"{{"alias": "a", "address": "a@example.com"}},
                   {{"alias": "b", "address": "b@example.com", "backend": {{"kind": "graph"}}}},
                   {{"alias": "c", "address": "c@example.com", "backend": {{"kind": "imap",
                     "imap": {{"host": "imap.example.com", "port": 993, "security": "tls",
                               "passwordEnv": "C_PASSWORD"}},
                     "smtp": {{"host": "smtp.example.com", "port": 465, "security": "tls",
                               "oauth2TokenEnv": "C_TOKEN"}}}}}},
                   {{"alias": "d", "address": "d@example.com",
                     "backend": {{"kind": "maildir", "path": "/srv/d", "smtp": {SMTP}}}}}"#
            ),
            "",
        ))
        .expect("valid");
        assert!(matches!(
            config.mailboxes[0].backend,
            BackendSpec::Graph { auth: None }
        ));
        assert!(matches!(
            config.mailboxes[1].backend,
            BackendSpec::Graph { auth: None }
        ));
        let BackendSpec::Imap { imap, smtp, auth } = &config.mailboxes[2].backend else {
            panic!("expected imap");
        };
        assert_eq!(auth, &None);
        assert_eq!(imap.password_env.as_deref(), Some("C_PASSWORD"));
        assert_eq!(
            smtp.as_ref().and_then(|s| s.oauth2_token_env.as_deref()),
            Some("C_TOKEN")
        );
        assert!(matches!(
            config.mailboxes[3].backend,
            BackendSpec::Maildir { .. }
        ));
    }

    #[test]
    fn refuses_auth_on_maildir() {
        let json = one(&format!(
            r#"{{"kind": "maildir", "path": "/srv/a", "auth": {}}}"#,
            microsoft_with("")
        ));
        assert_refused(&json, "auth", "is not allowed for kind maildir");
    }

    #[test]
    fn with_auth_the_server_blocks_name_no_password_or_token() {
        for (block, key) in [
            ("imap", "passwordEnv"),
            ("imap", "oauth2TokenEnv"),
            ("smtp", "passwordEnv"),
            ("smtp", "oauth2TokenEnv"),
        ] {
            let credential = format!(
                r#"{{"host": "{block}.example.com", "port": 993, "security": "tls",
                     "{key}": "A_SECRET"}}"#
            );
            let (imap_block, smtp_block) = if block == "imap" {
                (credential.as_str(), SMTP)
            } else {
                (IMAP, credential.as_str())
            };
            let json = one(&format!(
                r#"{{"kind": "imap", "imap": {imap_block}, "smtp": {smtp_block},
                     "auth": {}}}"#,
                microsoft_with("")
            ));
            assert_refused(
                &json,
                &format!("{block}.{key}"),
                "the grant authenticates this mailbox",
            );
        }
    }

    #[test]
    fn refuses_bad_and_missing_client_ids() {
        for bad in ["", "a b", "client/id", "id?x", "é", &"a".repeat(201)] {
            let json = imap(&format!(
                r#"{{"kind": "oauth", "provider": "google", "clientId": "{bad}"}}"#
            ));
            assert_refused(&json, "auth.clientId", "must be 1-200 characters");
        }
        assert_refused(
            &imap(r#"{"kind": "oauth", "provider": "google"}"#),
            "auth.clientId",
            "is required",
        );
        assert!(
            parse(&imap(&format!(
                r#"{{"kind": "oauth", "provider": "google", "clientId": "{}"}}"#,
                "a".repeat(200)
            )))
            .is_ok()
        );
    }

    #[test]
    fn refuses_unknown_kinds_providers_mechanisms_and_keys() {
        assert_refused(
            &imap(r#"{"kind": "password", "provider": "google", "clientId": "x"}"#),
            "auth.kind",
            "must be one of: oauth",
        );
        assert_refused(
            &imap(r#"{"provider": "google", "clientId": "x"}"#),
            "auth.kind",
            "is required",
        );
        assert_refused(
            &imap(r#"{"kind": "oauth", "provider": "yahoo", "clientId": "x"}"#),
            "auth.provider",
            "must be one of: microsoft, google, oidc",
        );
        assert_refused(
            &imap(&microsoft_with(r#", "mechanism": "plain""#)),
            "auth.mechanism",
            "must be one of: xoauth2, oauthbearer",
        );
        assert_refused(
            &imap(&microsoft_with(r#", "clientSecret": "hunter2""#)),
            "auth.clientSecret",
            "is not a known key",
        );
    }

    #[test]
    fn refuses_tenant_outside_microsoft_and_bad_tenants() {
        assert_refused(
            &imap(
                r#"{"kind": "oauth", "provider": "google", "clientId": "x", "tenant": "common"}"#,
            ),
            "auth.tenant",
            "is only allowed for provider microsoft",
        );
        assert_refused(
            &imap(
                r#"{"kind": "oauth", "provider": "oidc", "clientId": "x", "tenant": "common",
                    "issuer": "https://id.example.org", "scopes": ["openid"]}"#,
            ),
            "auth.tenant",
            "is only allowed for provider microsoft",
        );
        for bad in [
            "",
            "contoso",
            "@example.com",
            "example.com.",
            "https://login.example.com",
            "example.com/x",
            "1111111-1111-4111-8111-111111111111",
            "127.0.0.1",
            "common ",
        ] {
            assert_refused(
                &imap(&microsoft_with(&format!(r#", "tenant": "{bad}""#))),
                "auth.tenant",
                "must be common, consumers, organizations, a tenant id (GUID) or a domain",
            );
        }
    }

    #[test]
    fn accepts_every_tenant_form_lower_cased() {
        for (tenant, stored) in [
            ("common", "common"),
            ("Consumers", "consumers"),
            ("organizations", "organizations"),
            (&GUID.to_uppercase(), GUID),
            ("example.onmicrosoft.com", "example.onmicrosoft.com"),
            ("Mail.Example.ORG", "mail.example.org"),
        ] {
            let spec = accepted(&graph(&microsoft_with(&format!(
                r#", "tenant": "{tenant}""#
            ))));
            assert_eq!(
                spec.provider(),
                &OAuthProvider::Microsoft {
                    tenant: MicrosoftTenant(stored.to_owned())
                },
                "{tenant}"
            );
        }
    }

    #[test]
    fn refuses_issuer_outside_oidc_and_requires_it_there() {
        assert_refused(
            &imap(&microsoft_with(r#", "issuer": "https://id.example.org""#)),
            "auth.issuer",
            "is only allowed for provider oidc",
        );
        assert_refused(
            &imap(
                r#"{"kind": "oauth", "provider": "google", "clientId": "x",
                    "issuer": "https://accounts.example.com"}"#,
            ),
            "auth.issuer",
            "is only allowed for provider oidc",
        );
        assert_refused(
            &imap(
                r#"{"kind": "oauth", "provider": "oidc", "clientId": "x", "scopes": ["openid"]}"#,
            ),
            "auth.issuer",
            "is required for provider oidc",
        );
    }

    #[test]
    fn refuses_bad_issuers() {
        let shape = "must be an https:// URL";
        for (issuer, rule) in [
            ("", shape),
            ("id.example.org", shape),
            ("ftp://id.example.org", shape),
            ("HTTPS://id.example.org", shape),
            ("https://", shape),
            ("https:///path", shape),
            ("https://user@id.example.org", shape),
            ("https://user:pw@id.example.org", shape),
            ("https://id example.org", shape),
            ("https://id.example.org:0", shape),
            ("https://id.example.org:65536", shape),
            ("https://id.example.org:", shape),
            ("https://id.example.org:44x", shape),
            ("https://::1/", shape),
            ("https://[::g]/", shape),
            ("https://[::1", shape),
            ("https://[::1]x/", shape),
            ("https://id.example.org/a/../b", shape),
            ("https://id.example.org/./b", shape),
            ("https://id.example.org//b", shape),
            ("https://id.example.org/a b", shape),
            ("https://id.example.org/%zz", shape),
            ("https://id.example.org/a\\\\b", shape),
            ("https://id.example.org/é", shape),
            (
                "https://id.example.org?x=1",
                "must not have a query or fragment",
            ),
            (
                "https://id.example.org/a#b",
                "must not have a query or fragment",
            ),
            ("http://id.example.org", "http:// only to a loopback host"),
            ("http://10.0.0.1:8080", "http:// only to a loopback host"),
            (
                "http://[::ffff:127.0.0.1]",
                "http:// only to a loopback host",
            ),
            (
                "http://localhost.example.com",
                "http:// only to a loopback host",
            ),
        ] {
            assert_refused(
                &imap(&oidc_with(issuer, r#"["openid"]"#)),
                "auth.issuer",
                rule,
            );
        }
        let long = format!("https://id.example.org/{}", "a".repeat(1024));
        assert_refused(
            &imap(&oidc_with(&long, r#"["openid"]"#)),
            "auth.issuer",
            shape,
        );
    }

    #[test]
    fn refuses_scopes_outside_oidc_and_bad_scope_lists() {
        for provider in ["microsoft", "google"] {
            assert_refused(
                &imap(&format!(
                    r#"{{"kind": "oauth", "provider": "{provider}", "clientId": "x",
                         "scopes": ["https://mail.google.com/"]}}"#
                )),
                "auth.scopes",
                "the catalog decides the scopes",
            );
        }
        assert_refused(
            &imap(
                r#"{"kind": "oauth", "provider": "oidc", "clientId": "x",
                    "issuer": "https://id.example.org"}"#,
            ),
            "auth.scopes",
            "is required for provider oidc",
        );
        let issuer = "https://id.example.org";
        assert_refused(
            &imap(&oidc_with(issuer, "[]")),
            "auth.scopes",
            "must list 1 to 16 scopes",
        );
        let seventeen: Vec<String> = (0..17).map(|i| format!("\"s{i}\"")).collect();
        assert_refused(
            &imap(&oidc_with(issuer, &format!("[{}]", seventeen.join(",")))),
            "auth.scopes",
            "must list 1 to 16 scopes",
        );
        let sixteen: Vec<String> = (0..16).map(|i| format!("\"s{i}\"")).collect();
        assert!(
            parse(&imap(&oidc_with(
                issuer,
                &format!("[{}]", sixteen.join(","))
            )))
            .is_ok()
        );
        for bad in [
            r#""""#,
            r#""mail read""#,
            r#""mail\"read""#,
            r#""mail'read""#,
            r#""mail\\read""#,
            r#""mail\u0001""#,
            r#""é""#,
        ] {
            assert_refused(
                &imap(&oidc_with(issuer, &format!(r#"["openid", {bad}]"#))),
                "auth.scopes[1]",
                "must be 1-200 printable ASCII characters without spaces, quotes or backslashes",
            );
        }
        assert_refused(
            &imap(&oidc_with(issuer, &format!(r#"["{}"]"#, "s".repeat(201)))),
            "auth.scopes[0]",
            "must be 1-200 printable ASCII",
        );
        assert_refused(
            &imap(&oidc_with(issuer, r#"["openid", "email", "openid"]"#)),
            "auth.scopes[2]",
            "repeats an earlier scope",
        );
    }

    #[test]
    fn refuses_google_on_graph() {
        assert_refused(
            &graph(r#"{"kind": "oauth", "provider": "google", "clientId": "x"}"#),
            "auth.provider",
            "google cannot sign in to Microsoft Graph",
        );
    }

    #[test]
    fn refuses_a_bad_client_secret_variable() {
        for bad in ["", "1SECRET", "A-B", "A B", &"A".repeat(129)] {
            assert_refused(
                &imap(&microsoft_with(&format!(r#", "clientSecretEnv": "{bad}""#))),
                "auth.clientSecretEnv",
                "must be an environment variable name",
            );
        }
    }

    #[test]
    fn refuses_a_bad_delegated_from_without_echoing_it() {
        for bad in [
            "not-an-address",
            "Ana <ana@example.com>",
            "ana@localhost",
            "ana!x@example.com",
        ] {
            let json = imap(&microsoft_with(&format!(r#", "delegatedFrom": "{bad}""#)));
            let (path, rule) = refusal(&json);
            assert_eq!(path, "mailboxes[0].backend.auth.delegatedFrom", "{bad}");
            let expected = EmailAddress::parse(bad).expect_err("a bad address");
            assert_eq!(rule, expected.to_string(), "the address parser's rule");
            assert!(!rule.contains("example.com"), "no value echoed: {rule}");
        }
    }

    #[test]
    fn refuses_mechanism_on_graph() {
        assert_refused(
            &graph(&microsoft_with(r#", "mechanism": "xoauth2""#)),
            "auth.mechanism",
            "is only allowed for backend kind imap",
        );
    }

    proptest! {
        #[test]
        fn client_ids_are_accepted_exactly_over_their_charset(
            base in "[A-Za-z0-9._~-]{0,205}",
            // At most one character from outside the charset, so most cases sit on its edge.
            stray in proptest::option::of((any::<prop::sample::Index>(), "[ /@:+?#%!*=,;é]")),
        ) {
            let mut id = base;
            if let Some((at, c)) = stray {
                let at = at.index(id.len() + 1);
                id.insert_str(at, &c);
            }
            let expected = !id.is_empty()
                && id.len() <= 200
                && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"._~-".contains(&b));
            let json = imap(&format!(
                r#"{{"kind": "oauth", "provider": "google", "clientId": "{id}"}}"#
            ));
            match parse(&json) {
                Ok(config) => {
                    prop_assert!(expected, "accepted {id:?}");
                    let spec = auth_of(&config).expect("auth");
                    prop_assert_eq!(spec.client_id(), id.as_str());
                }
                Err(_) => prop_assert!(!expected, "refused {id:?}"),
            }
        }

        #[test]
        fn tenant_domains_and_guids_are_accepted_lower_cased(
            domain in "[a-zA-Z0-9]{1,12}(\\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,10}[a-zA-Z0-9])?){0,2}\\.[a-zA-Z]{2,6}",
            guid in "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
        ) {
            for tenant in [&domain, &guid] {
                let parsed = parse_tenant(tenant);
                let lower = tenant.to_ascii_lowercase();
                prop_assert_eq!(
                    parsed.as_ref().map(MicrosoftTenant::as_str),
                    Some(lower.as_str())
                );
            }
        }

        #[test]
        fn an_accepted_tenant_is_a_known_form(tenant in "[a-zA-Z0-9.@:/ _-]{0,40}") {
            if let Some(parsed) = parse_tenant(&tenant) {
                let value = parsed.as_str();
                prop_assert_eq!(value, tenant.to_ascii_lowercase());
                let well_known = ["common", "consumers", "organizations"].contains(&value);
                prop_assert!(
                    well_known || is_uuid(value) || Domain::parse(value).is_ok(),
                    "{value:?}"
                );
                prop_assert!(!value.contains(['@', ':', '/', ' ', '_']), "{value:?}");
            }
        }
    }
}
