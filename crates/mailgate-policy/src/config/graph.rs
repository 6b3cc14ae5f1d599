//! The Microsoft Graph app-only credentials and endpoints, read from the environment once at
//! startup when the config lists at least one Graph mailbox (an entry without `backend`) that
//! has no `backend.auth`: a mailbox with it reaches Graph with its alias's delegated token
//! (issue 37), so a config of delegated Graph mailboxes only needs no app registration.
//!
//! Invariants: the three reference variables mean what they mean to the reference plugin
//! (tenant and client id are UUIDs, the client secret is non-empty); a certificate (key and
//! certificate by path) may replace the secret, and setting both is refused rather than one
//! silently preferred. A missing or malformed credential aborts startup with every offending
//! variable named together and no value shown. With no app-only Graph mailbox configured
//! nothing here is required. The endpoint URLs are only carried: the Graph client parses and checks them
//! (`https`, or `http` to a loopback host), because it owns the URL type.

use std::path::PathBuf;

use super::env::{Env, Secret};
use super::{BackendSpec, Config, ConfigError};

pub const TENANT_VAR: &str = "MICROSOFT_GRAPH_TENANT_ID";
pub const CLIENT_ID_VAR: &str = "MICROSOFT_GRAPH_CLIENT_ID";
pub const CLIENT_SECRET_VAR: &str = "MICROSOFT_GRAPH_CLIENT_SECRET";
/// PEM certificate registered on the app (its SHA-256 thumbprint identifies the key).
pub const CERTIFICATE_VAR: &str = "MICROSOFT_GRAPH_CLIENT_CERTIFICATE_PATH";
/// PEM private key of that certificate; defaults to the certificate file (one PEM holding
/// both, as the Azure tools write it).
pub const PRIVATE_KEY_VAR: &str = "MICROSOFT_GRAPH_CLIENT_KEY_PATH";
pub const BASE_URL_VAR: &str = "MAILGATE_GRAPH_BASE_URL";
pub const LOGIN_URL_VAR: &str = "MAILGATE_GRAPH_LOGIN_URL";

/// The public cloud's endpoints.
pub const DEFAULT_BASE_URL: &str = "https://graph.microsoft.com/v1.0";
pub const DEFAULT_LOGIN_URL: &str = "https://login.microsoftonline.com";

/// How the app proves who it is to the token endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GraphCredential {
    ClientSecret(Secret),
    /// A signed client assertion; the files are read (owner- and mode-checked) by the client.
    Certificate {
        certificate: PathBuf,
        private_key: PathBuf,
    },
}

/// Everything the Graph client needs, resolved from the environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GraphSettings {
    /// A UUID, lower-cased.
    pub tenant_id: String,
    /// A UUID, lower-cased.
    pub client_id: String,
    pub credential: GraphCredential,
    /// `MAILGATE_GRAPH_BASE_URL` or [`DEFAULT_BASE_URL`], unparsed.
    pub base_url: String,
    /// `MAILGATE_GRAPH_LOGIN_URL` or [`DEFAULT_LOGIN_URL`], unparsed.
    pub login_url: String,
}

/// The Graph settings when `config` lists a Graph mailbox without `backend.auth` (one the
/// app reaches), else `None` (nothing is required).
pub(crate) fn resolve(env: &Env, config: &Config) -> Result<Option<GraphSettings>, ConfigError> {
    if !config
        .mailboxes
        .iter()
        .any(|m| matches!(m.backend, BackendSpec::Graph { auth: None }))
    {
        return Ok(None);
    }
    let mut problems: Vec<&'static str> = Vec::new();
    let mut uuid = |var: &'static str| match env.get(var).map(str::trim) {
        Some(v) if is_uuid(v) => Some(v.to_ascii_lowercase()),
        _ => {
            problems.push(var);
            None
        }
    };
    let tenant_id = uuid(TENANT_VAR);
    let client_id = uuid(CLIENT_ID_VAR);
    let secret = env.secret(CLIENT_SECRET_VAR);
    let certificate = env.get(CERTIFICATE_VAR).map(str::trim);
    let private_key = env.get(PRIVATE_KEY_VAR).map(str::trim);
    let absolute = |var: &'static str, raw: &str, problems: &mut Vec<&'static str>| {
        let path = PathBuf::from(raw);
        if path.is_absolute() && !raw.chars().any(char::is_control) {
            Some(path)
        } else {
            problems.push(var);
            None
        }
    };
    let credential = match (secret, certificate, private_key) {
        (Some(_), Some(_), _) | (Some(_), None, Some(_)) => {
            return Err(ConfigError::GraphCredentialConflict);
        }
        (Some(secret), None, None) if !secret.expose().trim().is_empty() => {
            Some(GraphCredential::ClientSecret(secret))
        }
        (None, Some(cert), key) => {
            let certificate = absolute(CERTIFICATE_VAR, cert, &mut problems);
            let private_key = match key {
                Some(key) => absolute(PRIVATE_KEY_VAR, key, &mut problems),
                None => certificate.clone(),
            };
            certificate
                .zip(private_key)
                .map(|(certificate, private_key)| GraphCredential::Certificate {
                    certificate,
                    private_key,
                })
        }
        (None, None, Some(_)) => {
            problems.push(CERTIFICATE_VAR);
            None
        }
        _ => {
            problems.push(CLIENT_SECRET_VAR);
            None
        }
    };
    match (tenant_id, client_id, credential) {
        (Some(tenant_id), Some(client_id), Some(credential)) if problems.is_empty() => {
            Ok(Some(GraphSettings {
                tenant_id,
                client_id,
                credential,
                base_url: env.get(BASE_URL_VAR).unwrap_or(DEFAULT_BASE_URL).to_owned(),
                login_url: env
                    .get(LOGIN_URL_VAR)
                    .unwrap_or(DEFAULT_LOGIN_URL)
                    .to_owned(),
            }))
        }
        _ => Err(ConfigError::GraphCredentials {
            vars: problems.join(", "),
        }),
    }
}

/// `8-4-4-4-12` hex digits, any case (what the reference's env schema accepts).
pub(super) fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, len)| g.len() == len && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TENANT: &str = "22222222-2222-4222-8222-222222222222";
    const CLIENT: &str = "11111111-1111-4111-8111-111111111111";

    fn config(graph: bool) -> Config {
        let json = if graph {
            r#"{"mailboxes":[{"alias":"finance","address":"finance@example.com"}]}"#
        } else {
            r#"{"mailboxes":[{"alias":"a","address":"a@example.com","backend":{"kind":"maildir","path":"/srv/a"}}]}"#
        };
        Config::from_json(json.as_bytes(), std::path::Path::new("/")).expect("config")
    }

    fn resolve_with(pairs: &[(&str, &str)]) -> Result<Option<GraphSettings>, ConfigError> {
        resolve(&Env::from_pairs(pairs.iter().copied()), &config(true))
    }

    #[test]
    fn nothing_is_required_without_a_graph_mailbox() {
        let env = Env::from_pairs([(TENANT_VAR, "not-a-uuid")]);
        assert_eq!(resolve(&env, &config(false)).expect("ok"), None);
    }

    /// Delegated Graph mailboxes need no app registration; one app-only mailbox beside them
    /// does.
    #[test]
    fn only_an_app_only_graph_mailbox_needs_the_app_credentials() {
        let delegated = format!(
            r#"{{"alias": "me", "address": "robin@example.com", "backend": {{"kind": "graph",
                 "auth": {{"kind": "oauth", "provider": "microsoft", "clientId": "{CLIENT}",
                 "tenant": "consumers"}}}}}}"#
        );
        let parse = |mailboxes: &str| {
            let json = format!(r#"{{"mailboxes": [{mailboxes}]}}"#);
            Config::from_json(json.as_bytes(), std::path::Path::new("/")).expect("config")
        };
        let env = Env::default();
        assert_eq!(resolve(&env, &parse(&delegated)).expect("ok"), None);
        let both =
            format!(r#"{delegated}, {{"alias": "finance", "address": "finance@example.com"}}"#);
        assert!(matches!(
            resolve(&env, &parse(&both)),
            Err(ConfigError::GraphCredentials { .. })
        ));
    }

    #[test]
    fn a_secret_credential_resolves_with_the_default_endpoints() {
        let s = resolve_with(&[
            (TENANT_VAR, TENANT),
            (CLIENT_ID_VAR, &CLIENT.to_uppercase()),
            (CLIENT_SECRET_VAR, "s3cret-value"),
        ])
        .expect("ok")
        .expect("graph");
        assert_eq!(s.client_id, CLIENT, "lower-cased");
        assert_eq!(s.base_url, DEFAULT_BASE_URL);
        assert_eq!(s.login_url, DEFAULT_LOGIN_URL);
        assert!(matches!(s.credential, GraphCredential::ClientSecret(_)));
        assert!(!format!("{s:?}").contains("s3cret"), "Debug redacts");
    }

    #[test]
    fn missing_and_malformed_values_are_named_together_without_values() {
        let err = resolve_with(&[
            (TENANT_VAR, "contoso-tenant-secretish"),
            (CLIENT_SECRET_VAR, "   "),
        ])
        .expect_err("refused");
        let text = err.to_string();
        for var in [TENANT_VAR, CLIENT_ID_VAR, CLIENT_SECRET_VAR] {
            assert!(text.contains(var), "{text}");
        }
        assert!(!text.contains("contoso"), "no value shown: {text}");
    }

    #[test]
    fn a_certificate_replaces_the_secret_and_both_are_refused() {
        let s = resolve_with(&[
            (TENANT_VAR, TENANT),
            (CLIENT_ID_VAR, CLIENT),
            (CERTIFICATE_VAR, "/etc/mailgate/app.pem"),
        ])
        .expect("ok")
        .expect("graph");
        assert_eq!(
            s.credential,
            GraphCredential::Certificate {
                certificate: "/etc/mailgate/app.pem".into(),
                private_key: "/etc/mailgate/app.pem".into(),
            },
            "one PEM holds both by default"
        );
        let both = resolve_with(&[
            (TENANT_VAR, TENANT),
            (CLIENT_ID_VAR, CLIENT),
            (CLIENT_SECRET_VAR, "x"),
            (CERTIFICATE_VAR, "/etc/mailgate/app.pem"),
        ]);
        assert!(matches!(both, Err(ConfigError::GraphCredentialConflict)));
        let relative = resolve_with(&[
            (TENANT_VAR, TENANT),
            (CLIENT_ID_VAR, CLIENT),
            (CERTIFICATE_VAR, "app.pem"),
        ])
        .expect_err("relative");
        assert!(relative.to_string().contains(CERTIFICATE_VAR));
        let key_only = resolve_with(&[
            (TENANT_VAR, TENANT),
            (CLIENT_ID_VAR, CLIENT),
            (PRIVATE_KEY_VAR, "/etc/mailgate/key.pem"),
        ])
        .expect_err("key without certificate");
        assert!(key_only.to_string().contains(CERTIFICATE_VAR));
    }

    #[test]
    fn uuid_shape() {
        assert!(is_uuid(TENANT));
        for bad in [
            "",
            "2222222-2222-4222-8222-222222222222",
            "22222222-2222-4222-8222-22222222222g",
            "22222222222242228222222222222222",
            "22222222-2222-4222-8222-222222222222-1",
        ] {
            assert!(!is_uuid(bad), "{bad}");
        }
    }
}
