//! Where a provider's authorization, token, device-authorization and revocation endpoints are,
//! and which issuer its ID tokens must name (issue 37).
//!
//! Why it is one table: every URL a refresh token, a client secret or an authorization code is
//! sent to comes from here, so a reviewer checks one file. Microsoft's and Google's endpoints
//! are fixed (Microsoft's under the login root the Graph backend already uses); only an `oidc`
//! provider's come from the network, from its discovery document, whose issuer must be the
//! configured one byte for byte (`wire::parse_discovery`).
//!
//! Invariants:
//! - Every endpoint is https, or http to a loopback host (tests, a local provider), without
//!   userinfo or fragment: the Microsoft login root is checked as the Graph backend checks it
//!   (`service_url::parse_root`), discovered URLs by `wire`.
//! - The discovery document is read with a size cap before it is parsed, and its fetch follows
//!   no redirect (the client's policy): a provider that moved is refused, not followed.
//! - [`IssuerRule`] is exact wherever the issuer is knowable; only Microsoft's multi-tenant
//!   authorities accept one issuer per tenant, and then only `{login}/{tid}/v2.0` for the ID
//!   token's own `tid`.
//!
//! Who calls it: the login (`mailgate auth login`) and the token source, which build a
//! `client::TokenClient` over the result.

use url::Url;

use super::client::{self, ClientError};
use super::wire;
use crate::config::env::Env;
use crate::config::graph::{DEFAULT_LOGIN_URL, LOGIN_URL_VAR};
use crate::config::{IssuerUrl, MicrosoftTenant, OAuthProvider};
use crate::service_url::{UrlError, parse_root};

/// The tenant every personal Microsoft account (Outlook.com) belongs to; its ID tokens name
/// it in `iss` and `tid`.
pub(crate) const MICROSOFT_CONSUMERS_TENANT_ID: &str = "9188040d-6c67-4c5b-b112-36a304b66dad";

const GOOGLE_AUTHORIZATION: &str = "https://accounts.google.com/o/oauth2/v2/auth";
const GOOGLE_TOKEN: &str = "https://oauth2.googleapis.com/token";
const GOOGLE_DEVICE: &str = "https://oauth2.googleapis.com/device/code";
const GOOGLE_REVOCATION: &str = "https://oauth2.googleapis.com/revoke";
const GOOGLE_ISSUER: &str = "https://accounts.google.com";
/// Google's documentation says an ID token's `iss` may also be the bare host.
const GOOGLE_ISSUER_BARE: &str = "accounts.google.com";
/// What Google's authorization request needs to return a refresh token: `access_type=offline`,
/// and `prompt=consent` so that a second sign-in (after `auth logout`, or on another machine)
/// gets one too (Google sends it only with a consent screen).
const GOOGLE_AUTHORIZE_EXTRAS: &[(&str, &str)] =
    &[("access_type", "offline"), ("prompt", "consent")];

/// What a generic OpenID Connect provider's authorization request adds (see `discover`).
const OIDC_AUTHORIZE_EXTRAS: &[(&str, &str)] = &[("prompt", "consent")];

/// Why a provider's endpoints could not be resolved (a rule or a class, never a value).
#[derive(Debug, thiserror::Error)]
pub(crate) enum EndpointError {
    #[error("{var} {0}", var = LOGIN_URL_VAR)]
    LoginUrl(UrlError),
    #[error("the OpenID Connect discovery document could not be read: {0}")]
    Discovery(#[source] ClientError),
}

/// Which `iss` an ID token from this provider may carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum IssuerRule {
    /// Exactly this string (OIDC Discovery §4.3; Microsoft with a tenant GUID or `consumers`).
    Exact(String),
    /// `https://accounts.google.com`, or `accounts.google.com` as Google says it may send.
    Google,
    /// Microsoft's multi-tenant authorities (`common`, `organizations`) and a tenant named by
    /// its domain, whose GUID is not known here: `{login}/{tid}/v2.0`, where `{tid}` is the ID
    /// token's own `tid` claim and a GUID (Microsoft's documented check for multi-tenant apps).
    /// The account binding (`identity`) is what ties the grant to the mailbox; this rule only
    /// keeps out tokens from another authority. `personal`: whether the consumers tenant (an
    /// Outlook.com account) is one of them (`common` only).
    MicrosoftAnyTenant { login: String, personal: bool },
}

impl IssuerRule {
    /// Whether an ID token with `iss` (and Microsoft's `tid`, when it has one) comes from the
    /// configured authority.
    pub(crate) fn accepts(&self, iss: &str, tid: Option<&str>) -> bool {
        match self {
            IssuerRule::Exact(issuer) => iss == issuer,
            IssuerRule::Google => iss == GOOGLE_ISSUER || iss == GOOGLE_ISSUER_BARE,
            IssuerRule::MicrosoftAnyTenant { login, personal } => {
                let Some(tid) = tid.filter(|tid| is_guid(tid)) else {
                    return false;
                };
                if !personal && tid.eq_ignore_ascii_case(MICROSOFT_CONSUMERS_TENANT_ID) {
                    return false;
                }
                iss == microsoft_issuer(login, tid)
            }
        }
    }
}

/// One provider's endpoints, checked.
#[derive(Clone, Debug)]
pub(crate) struct Endpoints {
    authorization: Url,
    token: Url,
    device: Option<Url>,
    revocation: Option<Url>,
    issuer: IssuerRule,
    /// Query parameters the provider's authorization request needs beyond RFC 6749's.
    authorize_extras: &'static [(&'static str, &'static str)],
}

impl Endpoints {
    /// The endpoints of `provider`. Microsoft's login root is `MAILGATE_GRAPH_LOGIN_URL` when
    /// set (a national cloud, the tests' fake), else the public cloud's; an `oidc` provider's
    /// discovery document is fetched with `http`.
    pub(crate) async fn resolve(
        provider: &OAuthProvider,
        env: &Env,
        http: &reqwest::Client,
    ) -> Result<Endpoints, EndpointError> {
        match provider {
            OAuthProvider::Microsoft { tenant } => {
                Endpoints::microsoft(env.get(LOGIN_URL_VAR).unwrap_or(DEFAULT_LOGIN_URL), tenant)
            }
            OAuthProvider::Google => Ok(Endpoints::google()),
            OAuthProvider::Oidc { issuer, .. } => Endpoints::discover(http, issuer).await,
        }
    }

    /// `{login}/{tenant}/oauth2/v2.0/{authorize,token,devicecode}`. Microsoft offers no
    /// RFC 7009 revocation endpoint (a grant is revoked in the account's settings, or by an
    /// administrator), so `revocation` is `None`.
    pub(crate) fn microsoft(
        login: &str,
        tenant: &MicrosoftTenant,
    ) -> Result<Endpoints, EndpointError> {
        let login = parse_root(login).map_err(EndpointError::LoginUrl)?;
        let root = login.as_str().trim_end_matches('/').to_owned();
        let endpoint = |last: &str| -> Result<Url, EndpointError> {
            let mut url = login.clone();
            url.path_segments_mut()
                .map_err(|()| EndpointError::LoginUrl(UrlError::Unparsable))?
                .pop_if_empty()
                .extend([tenant.as_str(), "oauth2", "v2.0", last]);
            Ok(url)
        };
        let tenant_name = tenant.as_str();
        let issuer = match tenant_name {
            "common" => IssuerRule::MicrosoftAnyTenant {
                login: root,
                personal: true,
            },
            "consumers" => {
                IssuerRule::Exact(microsoft_issuer(&root, MICROSOFT_CONSUMERS_TENANT_ID))
            }
            // Config lower-cases a GUID tenant, as Microsoft writes it in `iss`.
            guid if is_guid(guid) => IssuerRule::Exact(microsoft_issuer(&root, guid)),
            // `organizations`, or a domain (a work tenant, never the consumers one).
            _ => IssuerRule::MicrosoftAnyTenant {
                login: root,
                personal: false,
            },
        };
        Ok(Endpoints {
            authorization: endpoint("authorize")?,
            token: endpoint("token")?,
            device: Some(endpoint("devicecode")?),
            revocation: None,
            issuer,
            authorize_extras: &[],
        })
    }

    /// Google's fixed endpoints. Its device flow serves only a short list of scopes, which does
    /// not include Gmail's (`https://mail.google.com/`): Google answers `invalid_scope`, and a
    /// Gmail login takes `--browser`.
    pub(crate) fn google() -> Endpoints {
        let fixed = |url: &str| Url::parse(url).expect("invariant: a literal https URL");
        Endpoints {
            authorization: fixed(GOOGLE_AUTHORIZATION),
            token: fixed(GOOGLE_TOKEN),
            device: Some(fixed(GOOGLE_DEVICE)),
            revocation: Some(fixed(GOOGLE_REVOCATION)),
            issuer: IssuerRule::Google,
            authorize_extras: GOOGLE_AUTHORIZE_EXTRAS,
        }
    }

    /// An OpenID Connect provider's endpoints from
    /// `{issuer}/.well-known/openid-configuration` (Discovery §4.1: a trailing `/` of the
    /// issuer is dropped first). The document must name `issuer` exactly.
    pub(crate) async fn discover(
        http: &reqwest::Client,
        issuer: &IssuerUrl,
    ) -> Result<Endpoints, EndpointError> {
        let issuer = issuer.as_str();
        let at = format!(
            "{}/.well-known/openid-configuration",
            issuer.trim_end_matches('/')
        );
        let url = Url::parse(&at).map_err(|_| {
            EndpointError::Discovery(ClientError::Wire(wire::WireError::BadUrl("issuer")))
        })?;
        let (status, content_type, body) = client::get_capped(http, url, wire::MAX_DISCOVERY_BYTES)
            .await
            .map_err(EndpointError::Discovery)?;
        let found = wire::parse_discovery(status, content_type.as_deref(), &body, issuer)
            .map_err(|e| EndpointError::Discovery(ClientError::Wire(e)))?;
        Ok(Endpoints {
            authorization: found.authorization_endpoint,
            token: found.token_endpoint,
            device: found.device_authorization_endpoint,
            revocation: found.revocation_endpoint,
            issuer: IssuerRule::Exact(issuer.to_owned()),
            // OpenID Connect Core §11: a request for `offline_access` without `prompt=consent`
            // is to have that scope ignored (oidc-provider does), and no refresh token follows.
            authorize_extras: OIDC_AUTHORIZE_EXTRAS,
        })
    }

    /// Explicit endpoints (tests: a wiremock server's URLs).
    #[cfg(test)]
    pub(crate) fn for_tests(
        authorization: Url,
        token: Url,
        device: Option<Url>,
        revocation: Option<Url>,
        issuer: IssuerRule,
    ) -> Endpoints {
        Endpoints {
            authorization,
            token,
            device,
            revocation,
            issuer,
            authorize_extras: &[],
        }
    }

    pub(crate) fn authorization(&self) -> &Url {
        &self.authorization
    }

    pub(crate) fn token(&self) -> &Url {
        &self.token
    }

    /// The device authorization endpoint (RFC 8628), when the provider has one.
    pub(crate) fn device(&self) -> Option<&Url> {
        self.device.as_ref()
    }

    /// The RFC 7009 revocation endpoint, when the provider has one.
    pub(crate) fn revocation(&self) -> Option<&Url> {
        self.revocation.as_ref()
    }

    pub(crate) fn issuer(&self) -> &IssuerRule {
        &self.issuer
    }

    /// The provider's own authorization-request parameters (Google's offline access).
    pub(crate) fn authorize_extras(&self) -> &'static [(&'static str, &'static str)] {
        self.authorize_extras
    }
}

/// Microsoft's v2.0 issuer for a tenant: `{login}/{tid}/v2.0`.
fn microsoft_issuer(login: &str, tid: &str) -> String {
    format!("{login}/{tid}/v2.0")
}

/// `8-4-4-4-12` lower-case hex digits, as Microsoft writes a tenant id.
fn is_guid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::*;
    use crate::config::BackendSpec;

    const GUID: &str = "72f988bf-86f1-41af-91ab-2d7cd011db47";

    /// The provider of a one-mailbox config whose Graph backend has `auth` (the config types'
    /// fields are private: the file is their only constructor).
    fn provider(auth: &str) -> OAuthProvider {
        let json = format!(
            r#"{{"mailboxes": [{{"alias": "a", "address": "a@example.com",
                 "backend": {{"kind": "graph", "auth": {auth}}}}}]}}"#
        );
        let config = crate::config::Config::from_json(json.as_bytes(), Path::new("/etc/mailgate"))
            .unwrap_or_else(|e| panic!("{json}: {e}"));
        match &config.mailboxes[0].backend {
            BackendSpec::Graph { auth: Some(spec) } => spec.provider().clone(),
            other => panic!("{other:?}"),
        }
    }

    fn tenant(name: &str) -> MicrosoftTenant {
        let auth = format!(
            r#"{{"kind": "oauth", "provider": "microsoft", "clientId": "c", "tenant": "{name}"}}"#
        );
        match provider(&auth) {
            OAuthProvider::Microsoft { tenant } => tenant,
            other => panic!("{other:?}"),
        }
    }

    fn issuer_url(issuer: &str) -> IssuerUrl {
        let auth = format!(
            r#"{{"kind": "oauth", "provider": "oidc", "clientId": "c", "issuer": "{issuer}",
                 "scopes": ["openid"]}}"#
        );
        match provider(&auth) {
            OAuthProvider::Oidc { issuer, .. } => issuer,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn microsoft_endpoints_sit_under_the_login_root() {
        let e = Endpoints::microsoft(DEFAULT_LOGIN_URL, &tenant("common")).expect("endpoints");
        assert_eq!(
            e.authorization().as_str(),
            "https://login.microsoftonline.com/common/oauth2/v2.0/authorize"
        );
        assert_eq!(
            e.token().as_str(),
            "https://login.microsoftonline.com/common/oauth2/v2.0/token"
        );
        assert_eq!(
            e.device().map(Url::as_str),
            Some("https://login.microsoftonline.com/common/oauth2/v2.0/devicecode")
        );
        assert_eq!(e.revocation(), None, "Microsoft has no RFC 7009 endpoint");
        assert!(e.authorize_extras().is_empty());
        // An override with a path and a trailing slash keeps the path, once.
        let e = Endpoints::microsoft("http://127.0.0.1:8080/fake/", &tenant(GUID)).expect("ok");
        assert_eq!(
            e.token().as_str(),
            format!("http://127.0.0.1:8080/fake/{GUID}/oauth2/v2.0/token")
        );
        assert_eq!(
            e.issuer(),
            &IssuerRule::Exact(format!("http://127.0.0.1:8080/fake/{GUID}/v2.0"))
        );
    }

    #[test]
    fn microsoft_login_root_is_checked_like_graphs() {
        for (bad, why) in [
            ("http://login.example.com", UrlError::Insecure),
            ("ftp://login.example.com", UrlError::Insecure),
            ("https://user@login.example.com", UrlError::Extras),
            ("https://login.example.com/?x=1", UrlError::Extras),
            ("https://login.example.com/#f", UrlError::Extras),
            ("login.example.com", UrlError::Unparsable),
        ] {
            match Endpoints::microsoft(bad, &tenant("common")) {
                Err(EndpointError::LoginUrl(e)) => assert_eq!(e, why, "{bad}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
        let shown = Endpoints::microsoft("https://u:pw@x.example", &tenant("common"))
            .expect_err("refused")
            .to_string();
        assert!(
            shown.starts_with(LOGIN_URL_VAR) && !shown.contains("pw"),
            "{shown}"
        );
    }

    #[test]
    fn microsoft_issuer_rules_follow_the_tenant() {
        let login = DEFAULT_LOGIN_URL;
        let iss = |tid: &str| format!("{login}/{tid}/v2.0");
        let rule = |t: &str| {
            Endpoints::microsoft(login, &tenant(t))
                .expect("endpoints")
                .issuer()
                .clone()
        };
        let common = rule("common");
        assert!(common.accepts(&iss(GUID), Some(GUID)));
        assert!(common.accepts(
            &iss(MICROSOFT_CONSUMERS_TENANT_ID),
            Some(MICROSOFT_CONSUMERS_TENANT_ID)
        ));
        // The issuer must embed the token's own tid, a GUID.
        let other = "11111111-2222-4333-8444-555555555555";
        assert!(!common.accepts(&iss(GUID), Some(other)));
        assert!(!common.accepts(&iss(GUID), None));
        assert!(!common.accepts(&iss("common"), Some("common")));
        assert!(!common.accepts(&format!("https://evil.example/{GUID}/v2.0"), Some(GUID)));
        assert!(!common.accepts(&format!("{login}/{GUID}/v2.0/"), Some(GUID)));

        for work in ["organizations", "contoso.onmicrosoft.com"] {
            let rule = rule(work);
            assert!(rule.accepts(&iss(GUID), Some(GUID)), "{work}");
            assert!(
                !rule.accepts(
                    &iss(MICROSOFT_CONSUMERS_TENANT_ID),
                    Some(MICROSOFT_CONSUMERS_TENANT_ID)
                ),
                "{work}: no personal account"
            );
        }

        let consumers = rule("consumers");
        assert_eq!(
            consumers,
            IssuerRule::Exact(iss(MICROSOFT_CONSUMERS_TENANT_ID))
        );
        assert!(!consumers.accepts(&iss(GUID), Some(GUID)));

        let pinned = rule(GUID);
        assert_eq!(pinned, IssuerRule::Exact(iss(GUID)));
        assert!(!pinned.accepts(&iss(other), Some(other)));
    }

    #[test]
    fn google_endpoints_and_issuer() {
        let e = Endpoints::google();
        assert_eq!(e.authorization().as_str(), GOOGLE_AUTHORIZATION);
        assert_eq!(e.token().as_str(), GOOGLE_TOKEN);
        assert_eq!(e.device().map(Url::as_str), Some(GOOGLE_DEVICE));
        assert_eq!(e.revocation().map(Url::as_str), Some(GOOGLE_REVOCATION));
        assert!(e.issuer().accepts("https://accounts.google.com", None));
        assert!(e.issuer().accepts("accounts.google.com", None));
        assert!(!e.issuer().accepts("https://accounts.google.com/", None));
        assert!(!e.issuer().accepts("https://accounts.google.com.evil", None));
        assert!(e.authorize_extras().contains(&("access_type", "offline")));
    }

    #[tokio::test]
    async fn resolve_reads_the_login_override() {
        let http = client::http_client().expect("client");
        let provider = OAuthProvider::Microsoft {
            tenant: tenant("consumers"),
        };
        let env = Env::from_pairs([(LOGIN_URL_VAR, "http://127.0.0.1:9/")]);
        let e = Endpoints::resolve(&provider, &env, &http)
            .await
            .expect("endpoints");
        assert_eq!(
            e.token().as_str(),
            "http://127.0.0.1:9/consumers/oauth2/v2.0/token"
        );
        let e = Endpoints::resolve(
            &provider,
            &Env::from_pairs(Vec::<(&str, &str)>::new()),
            &http,
        )
        .await
        .expect("endpoints");
        assert!(e.token().as_str().starts_with(DEFAULT_LOGIN_URL));
        let google = Endpoints::resolve(&OAuthProvider::Google, &env, &http)
            .await
            .expect("endpoints");
        assert_eq!(
            google.token().as_str(),
            GOOGLE_TOKEN,
            "no override for Google"
        );
    }

    fn discovery_body(issuer: &str, with_optional: bool) -> String {
        let optional = if with_optional {
            format!(
                r#","device_authorization_endpoint":"{issuer}/device",
                   "revocation_endpoint":"{issuer}/revoke""#
            )
        } else {
            String::new()
        };
        format!(
            r#"{{"issuer":"{issuer}","authorization_endpoint":"{issuer}/authorize",
                "token_endpoint":"{issuer}/token"{optional}}}"#
        )
    }

    #[tokio::test]
    async fn oidc_endpoints_come_from_discovery() {
        let server = MockServer::start().await;
        let issuer = format!("{}/realms/mail", server.uri());
        Mock::given(method("GET"))
            .and(path("/realms/mail/.well-known/openid-configuration"))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_raw(discovery_body(&issuer, true), "application/json"),
            )
            .expect(2)
            .mount(&server)
            .await;
        let http = client::http_client().expect("client");
        let e = Endpoints::discover(&http, &issuer_url(&issuer))
            .await
            .expect("discovered");
        assert_eq!(e.token().as_str(), format!("{issuer}/token"));
        assert_eq!(
            e.device().map(Url::as_str),
            Some(format!("{issuer}/device").as_str())
        );
        assert_eq!(
            e.revocation().map(Url::as_str),
            Some(format!("{issuer}/revoke").as_str())
        );
        assert_eq!(e.issuer(), &IssuerRule::Exact(issuer.clone()));
        // A trailing slash on the configured issuer is dropped before the well-known path,
        // and the document must then name the issuer as configured (with the slash): refused.
        let slashed = issuer_url(&format!("{issuer}/"));
        match Endpoints::discover(&http, &slashed).await {
            Err(EndpointError::Discovery(ClientError::Wire(wire::WireError::IssuerMismatch))) => {}
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn oidc_discovery_refuses_other_issuers_oversize_and_redirects() {
        let server = MockServer::start().await;
        let issuer = server.uri();
        let json = |body: String| ResponseTemplate::new(200).set_body_raw(body, "application/json");
        Mock::given(path("/a/.well-known/openid-configuration"))
            .respond_with(json(discovery_body("https://other.example", false)))
            .mount(&server)
            .await;
        let padding = "x".repeat(wire::MAX_DISCOVERY_BYTES);
        Mock::given(path("/b/.well-known/openid-configuration"))
            .respond_with(json(format!(
                r#"{{"issuer":"{issuer}/b","pad":"{padding}"}}"#
            )))
            .mount(&server)
            .await;
        Mock::given(path("/c/.well-known/openid-configuration"))
            .respond_with(ResponseTemplate::new(302).insert_header(
                "location",
                format!("{issuer}/a/.well-known/openid-configuration"),
            ))
            .mount(&server)
            .await;
        let http = client::http_client().expect("client");
        let discover = |suffix: &str| {
            let issuer = issuer_url(&format!("{issuer}/{suffix}"));
            let http = http.clone();
            async move { Endpoints::discover(&http, &issuer).await }
        };
        assert!(matches!(
            discover("a").await,
            Err(EndpointError::Discovery(ClientError::Wire(
                wire::WireError::IssuerMismatch
            )))
        ));
        assert!(matches!(
            discover("b").await,
            Err(EndpointError::Discovery(ClientError::TooLarge))
        ));
        assert!(matches!(
            discover("c").await,
            Err(EndpointError::Discovery(ClientError::Wire(
                wire::WireError::UnexpectedStatus(302)
            )))
        ));
    }
}
