//! The variable names mailgate recognises under its own and the reference plugin's prefixes,
//! and the startup check that reports any other name under those prefixes.
//!
//! Choice (issue 9): a name within two edits of a known one is a likely typo and aborts startup,
//! because mailgate cannot tell what it was meant to do: `PLUGIN_ALOW_WRITES=false` would have
//! closed a gate the file opens, `OUTLOOK_ALLOWED_RECIPIENT_DOMAIN` would have narrowed sending.
//! A name further from every known one (another program's `OUTLOOK_*`) is only a warning on
//! stderr, naming the closest known variable. Names are compared case-insensitively; values are
//! never read or shown.

use super::env::Env;
use super::{Config, ConfigError};

/// Prefixes whose variables mailgate and the reference plugin own.
const PREFIXES: [&str; 4] = ["MAILGATE_", "PLUGIN_", "OUTLOOK_", "MICROSOFT_GRAPH_"];

/// Every variable under [`PREFIXES`] mailgate reads, plus the reference plugin's own that
/// mailgate accepts and ignores (keychain settings, its state folder).
const KNOWN: &[&str] = &[
    // mailgate
    super::HOME_DIR_VAR,
    super::DOWNLOAD_DIR_VAR,
    super::JOURNAL_VAR,
    super::HANDOFF_TTL_VAR,
    super::MAILGATE_LOG_VAR,
    super::SEND_MAX_PER_HOUR_VAR,
    "MAILGATE_OUTPUT_SCHEMAS",
    // the delegated grant store's key (src/delegated/grants.rs, issue 37)
    "MAILGATE_GRANT_KEY_FILE",
    "MAILGATE_TEST_HANDOFF_CRASH_AT",
    super::graph::BASE_URL_VAR,
    super::graph::LOGIN_URL_VAR,
    super::graph::CERTIFICATE_VAR,
    super::graph::PRIVATE_KEY_VAR,
    super::HTTP_ALLOWED_ORIGINS_VAR,
    super::HTTP_OAUTH_ISSUER_VAR,
    super::HTTP_PUBLIC_URL_VAR,
    super::HTTP_OAUTH_SCOPES_VAR,
    super::HTTP_OAUTH_ACCEPT_PLAIN_JWT_VAR,
    super::HTTP_PERSON_RATE_VAR,
    super::HTTP_BEHIND_PROXY_VAR,
    super::HTTP_TLS_CERT_VAR,
    super::HTTP_TLS_KEY_VAR,
    super::INDEX_MAX_STALENESS_VAR,
    super::INDEX_HOLD_VAR,
    super::CURSOR_KEYS_FILE_VAR,
    super::embeddings::URL_VAR,
    super::embeddings::MODEL_VAR,
    super::embeddings::API_KEY_ENV_VAR,
    super::embeddings::PROXY_VAR,
    super::index_store::URL_VAR,
    super::index_store::PASSWORD_ENV_VAR,
    super::index_store::PASSWORD_FILE_VAR,
    super::index_store::CA_FILE_VAR,
    super::index_store::LEASE_TTL_VAR,
    // the reference plugin's, read by mailgate
    super::CONFIG_PATH_VAR,
    super::SEARCH_MEMORY_VAR,
    super::ALLOW_WRITES_VAR,
    super::ALLOW_HANDOFFS_VAR,
    super::ALLOW_SEND_VAR,
    super::HTTP_ALLOW_NO_AUTH_VAR,
    super::HTTP_HOST_VAR,
    super::HTTP_PORT_VAR,
    super::HTTP_BEARER_TOKEN_VAR,
    super::SEND_FROM_VAR,
    super::ALLOWED_SENDERS_VAR,
    super::ALLOWED_RECIPIENT_DOMAINS_VAR,
    // the reference plugin's Graph app credentials
    super::graph::CLIENT_ID_VAR,
    super::graph::CLIENT_SECRET_VAR,
    super::graph::TENANT_VAR,
    // the reference plugin's, accepted and not used
    "OUTLOOK_KEYCHAIN_PREFIX",
    "OUTLOOK_KEYCHAIN_QUIET",
    // the reference's run-journal folder; mailgate's journal lives in MAILGATE_HOME
    "OUTLOOK_STATE_DIR",
];

/// Edits within which an unknown name counts as a misspelling of the closest known one.
const TYPO_DISTANCE: usize = 2;

/// Checks every variable under [`PREFIXES`] (see the module doc). Credential variables the
/// config names (`passwordEnv`, `oauth2TokenEnv`, `auth.clientSecretEnv`) are known whatever
/// they are called.
pub(crate) fn check_unknown_variables(env: &Env, config: &Config) -> Result<(), ConfigError> {
    let named: Vec<String> = config
        .mailboxes
        .iter()
        .flat_map(|m| {
            let (servers, auth) = match &m.backend {
                super::BackendSpec::Graph { auth } => (vec![], auth.as_ref()),
                super::BackendSpec::Imap { imap, smtp, auth } => {
                    (vec![Some(imap), smtp.as_ref()], auth.as_ref())
                }
                super::BackendSpec::Maildir { smtp, .. } => (vec![smtp.as_ref()], None),
            };
            servers
                .into_iter()
                .flatten()
                .flat_map(|spec| {
                    [
                        spec.password_env.as_deref(),
                        spec.oauth2_token_env.as_deref(),
                    ]
                })
                .chain([auth.and_then(super::OAuthSpec::client_secret_env)])
                .flatten()
                .collect::<Vec<_>>()
        })
        .map(|name| name.to_ascii_uppercase())
        // The embeddings key's variable is named in the environment, not the config.
        .chain(
            env.get(super::embeddings::API_KEY_ENV_VAR)
                .map(str::to_ascii_uppercase),
        )
        // So is the index database's password variable.
        .chain(
            env.get(super::index_store::PASSWORD_ENV_VAR)
                .map(str::to_ascii_uppercase),
        )
        .collect();
    for name in env.names() {
        let upper = name.to_ascii_uppercase();
        if !PREFIXES.iter().any(|prefix| upper.starts_with(prefix))
            || (KNOWN.contains(&name))
            || named.contains(&upper)
            || is_keychain_alias(&upper)
        {
            continue;
        }
        let (closest, distance) = closest_known(&upper);
        if distance <= TYPO_DISTANCE {
            return Err(ConfigError::UnknownVariable {
                name: name.to_owned(),
                closest,
            });
        }
        tracing::warn!(
            variable = name,
            closest,
            "a variable with a mailgate or reference-plugin prefix is not one mailgate knows; \
             it is ignored"
        );
    }
    Ok(())
}

/// The reference's macOS keychain aliases, `OUTLOOK_KEYCHAIN_<VAR>_SERVICES`.
fn is_keychain_alias(upper: &str) -> bool {
    upper
        .strip_prefix("OUTLOOK_KEYCHAIN_")
        .and_then(|rest| rest.strip_suffix("_SERVICES"))
        .is_some_and(|var| !var.is_empty())
}

/// The known name nearest to `upper` and its Levenshtein distance.
fn closest_known(upper: &str) -> (&'static str, usize) {
    KNOWN
        .iter()
        .map(|known| (*known, strsim::levenshtein(upper, known)))
        .min_by_key(|(_, distance)| *distance)
        .unwrap_or(("", usize::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        Config::from_json(
            br#"{"mailboxes": [{"alias": "a", "address": "a@example.com",
                "backend": {"kind": "maildir", "path": "/m",
                  "smtp": {"host": "127.0.0.1", "port": 25, "security": "plain",
                           "passwordEnv": "MAILGATE_SMTP_SECRET"}}}]}"#,
            std::path::Path::new("/etc"),
        )
        .expect("valid")
    }

    fn check(pairs: &[(&str, &str)]) -> Result<(), ConfigError> {
        check_unknown_variables(&Env::from_pairs(pairs.iter().copied()), &config())
    }

    #[test]
    fn misspelled_variables_are_refused_with_the_closest_name() {
        for (name, closest) in [
            ("PLUGIN_ALOW_WRITES", "PLUGIN_ALLOW_WRITES"),
            ("plugin_allow_writes", "PLUGIN_ALLOW_WRITES"),
            (
                "OUTLOOK_ALLOWED_RECIPIENT_DOMAIN",
                "OUTLOOK_ALLOWED_RECIPIENT_DOMAINS",
            ),
            ("MAILGATE_JOURNALS", "MAILGATE_JOURNAL"),
        ] {
            match check(&[(name, "false")]) {
                Err(ConfigError::UnknownVariable {
                    name: n,
                    closest: c,
                }) => {
                    assert_eq!((n.as_str(), c), (name, closest));
                }
                other => panic!("{name}: {other:?}"),
            }
        }
        let message = check(&[("PLUGIN_ALOW_WRITES", "secret-value")])
            .expect_err("typo")
            .to_string();
        assert!(
            message.contains("did you mean PLUGIN_ALLOW_WRITES"),
            "{message}"
        );
        assert!(!message.contains("secret-value"), "{message}");
    }

    #[test]
    fn known_and_unrelated_variables_pass() {
        check(&[
            ("PLUGIN_ALLOW_WRITES", "true"),
            ("MICROSOFT_GRAPH_CLIENT_SECRET", "x"),
            (
                "OUTLOOK_KEYCHAIN_MICROSOFT_GRAPH_CLIENT_SECRET_SERVICES",
                "x",
            ),
            ("MAILGATE_SMTP_SECRET", "named by the config"),
            ("NODE_ENV", "test"),
            ("TARGET_USER_EMAIL", "test@example.com"),
            ("LOG_LEVEL", "error"),
            // Far from every known name: a warning, not a refusal.
            ("OUTLOOK_SOMETHING_ELSE_ENTIRELY", "x"),
        ])
        .expect("accepted");
    }

    #[test]
    fn the_client_secret_variable_an_auth_block_names_is_known() {
        let config = |auth: &str| {
            Config::from_json(
                format!(
                    r#"{{"mailboxes": [{{"alias": "a", "address": "a@example.com",
                        "backend": {{"kind": "graph", "auth": {{"kind": "oauth",
                          "provider": "microsoft", "clientId": "mailgate"{auth}}}}}}}]}}"#
                )
                .as_bytes(),
                std::path::Path::new("/etc"),
            )
            .expect("valid")
        };
        // Two edits from MAILGATE_LOG: a likely typo unless the config names it.
        let env = Env::from_pairs([("MAILGATE_LOGIN", "x")]);
        check_unknown_variables(&env, &config(r#", "clientSecretEnv": "mailgate_login""#))
            .expect("named by clientSecretEnv (compared case-insensitively)");
        assert!(matches!(
            check_unknown_variables(&env, &config("")),
            Err(ConfigError::UnknownVariable { .. })
        ));
    }

    #[test]
    fn embeddings_variables_and_the_key_variable_they_name_are_known() {
        check(&[
            ("MAILGATE_EMBEDDINGS_URL", "http://127.0.0.1:8080/v1"),
            ("MAILGATE_EMBEDDINGS_MODEL", "e5-small"),
            ("MAILGATE_EMBEDDINGS_API_KEY_ENV", "MAILGATE_LOGIN"),
            ("MAILGATE_EMBEDDINGS_PROXY", "http://127.0.0.1:3128"),
            // Two edits from MAILGATE_LOG, so a typo on its own, but named by the variable above.
            ("MAILGATE_LOGIN", "x"),
        ])
        .expect("accepted");
        assert!(
            matches!(
                check(&[("MAILGATE_LOGIN", "x")]),
                Err(ConfigError::UnknownVariable { .. })
            ),
            "not named: a likely typo"
        );
        match check(&[("MAILGATE_EMBEDDING_URL", "http://127.0.0.1:8080/v1")]) {
            Err(ConfigError::UnknownVariable { closest, .. }) => {
                assert_eq!(closest, "MAILGATE_EMBEDDINGS_URL");
            }
            other => panic!("a misspelled embeddings variable aborts: {other:?}"),
        }
        match check(&[("MAILGATE_EMBEDDING_PROXY", "http://127.0.0.1:3128")]) {
            Err(ConfigError::UnknownVariable { closest, .. }) => {
                assert_eq!(closest, "MAILGATE_EMBEDDINGS_PROXY");
            }
            other => panic!("a misspelled proxy variable aborts: {other:?}"),
        }
    }
}
