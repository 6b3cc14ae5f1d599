//! The IMAP logins of the mailboxes whose backend is `imap`, read from the environment once at
//! startup: each `imap` block names the variable holding its password (`passwordEnv`) or its
//! OAuth 2.0 access token for XOAUTH2 (`oauth2TokenEnv`), never the value.
//!
//! Invariants: every IMAP mailbox without `backend.auth` has exactly one credential, resolved
//! before anything is served; a block naming neither variable, or a variable that is unset or
//! empty, aborts startup naming the alias and the variable, never a value. A mailbox with
//! `backend.auth` (issue 37) logs in with its alias's delegated tokens, so it has no entry here
//! (and its blocks name neither variable: `oauth` refuses that). Mailboxes of other kinds need
//! nothing here.

use std::collections::BTreeMap;

use super::env::{Env, Secret};
use super::{BackendSpec, Config, ConfigError};
use crate::alias::Alias;

/// How an IMAP mailbox logs in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImapLogin {
    /// `LOGIN` (or `AUTHENTICATE PLAIN`) with the block's user name and this password.
    Password(Secret),
    /// `AUTHENTICATE XOAUTH2` with this bearer token.
    OAuth2(Secret),
}

/// The login of every IMAP mailbox, by alias.
pub(crate) fn resolve(
    env: &Env,
    config: &Config,
) -> Result<BTreeMap<Alias, ImapLogin>, ConfigError> {
    let mut logins = BTreeMap::new();
    for mailbox in &config.mailboxes {
        let BackendSpec::Imap {
            imap, auth: None, ..
        } = &mailbox.backend
        else {
            continue;
        };
        let alias = mailbox.alias.to_string();
        let (var, login): (&str, fn(Secret) -> ImapLogin) =
            match (&imap.password_env, &imap.oauth2_token_env) {
                (Some(var), _) => (var, ImapLogin::Password),
                (None, Some(var)) => (var, ImapLogin::OAuth2),
                (None, None) => return Err(ConfigError::ImapCredentialUnnamed { alias }),
            };
        let secret = env
            .secret(var)
            .ok_or_else(|| ConfigError::ImapCredentialMissing {
                alias,
                var: var.to_owned(),
            })?;
        logins.insert(mailbox.alias.clone(), login(secret));
    }
    Ok(logins)
}

#[cfg(test)]
mod tests {
    use super::*;

    const IMAP: &str = r#"{"host": "imap.example.com", "port": 993, "security": "tls"}"#;

    fn config(mailboxes: &str) -> Config {
        let json = format!(r#"{{"mailboxes": [{mailboxes}]}}"#);
        Config::from_json(json.as_bytes(), std::path::Path::new("/")).expect("config")
    }

    #[test]
    fn a_delegated_mailbox_needs_no_imap_credential_and_gets_no_login() {
        let config = config(&format!(
            r#"{{"alias": "gmail", "address": "robin@example.com", "backend": {{"kind": "imap",
                 "imap": {IMAP}, "auth": {{"kind": "oauth", "provider": "google",
                 "clientId": "app.apps.googleusercontent.com"}}}}}},
               {{"alias": "ops", "address": "ops@example.com", "backend": {{"kind": "imap",
                 "imap": {{"host": "imap.example.com", "port": 993, "security": "tls",
                 "passwordEnv": "OPS_PW"}}}}}}"#
        ));
        let logins = resolve(&Env::from_pairs([("OPS_PW", "pw")]), &config).expect("resolved");
        let aliases: Vec<&str> = logins.keys().map(Alias::as_str).collect();
        assert_eq!(aliases, ["ops"], "no entry for the delegated alias");
        // A block without auth still needs its variable.
        assert!(matches!(
            resolve(&Env::default(), &config),
            Err(ConfigError::ImapCredentialMissing { .. })
        ));
    }
}
