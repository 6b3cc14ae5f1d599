//! The IMAP logins of the mailboxes whose backend is `imap`, read from the environment once at
//! startup: each `imap` block names the variable holding its password (`passwordEnv`) or its
//! OAuth 2.0 access token for XOAUTH2 (`oauth2TokenEnv`), never the value.
//!
//! Invariants: every IMAP mailbox has exactly one credential, resolved before anything is
//! served; a block naming neither variable, or a variable that is unset or empty, aborts
//! startup naming the alias and the variable, never a value. Mailboxes of other kinds need
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
        let BackendSpec::Imap { imap, .. } = &mailbox.backend else {
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
