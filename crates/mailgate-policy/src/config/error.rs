//! [`ConfigError`], the one error type of startup configuration, and the wording of its
//! refusals.
//!
//! Invariant: every message is one line naming the variable, key or JSON path and the rule
//! broken, never a value from the file or the environment (the only exceptions are the config
//! file's own path and the name of an unknown variable), so a refusal can be printed or logged
//! without leaking a secret or an address. `Schema` errors are built through
//! `ConfigError::schema`, which every validating part of `config` shares.
//!
//! Who calls it: every part of `config` builds these; startup (`cli`, `policy explain/check`,
//! `demo`) and `gates` report them.

use super::env;
use super::gate_vars::{ALLOWED_RECIPIENT_DOMAINS_VAR, SendRefusal};
use crate::path_guard::PrivateFileError;

/// Why startup configuration failed. Display is one line naming the variable, key or JSON path
/// and the rule; it never contains a value from the file or the environment, except the config
/// file's own path ([`ConfigError::InFile`]) and the name of an unknown variable.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("the config file is not usable: {0}")]
    File(PrivateFileError),
    /// A failure of the config file, with the path it was read from (as given, or the default
    /// that was tried), so the operator knows which file to fix.
    #[error("{path}: {source}")]
    InFile {
        path: String,
        source: Box<ConfigError>,
    },
    #[error(
        "no config file: neither {primary} nor the reference plugin's {fallback} exists; \
         create one or set OUTLOOK_PLUGIN_CONFIG"
    )]
    NoConfigFile { primary: String, fallback: String },
    #[error("DOWNLOAD_DIR and MAILGATE_DOWNLOAD_DIR are both set and differ; set only one")]
    DownloadDirConflict,
    #[error(
        "{name} is not a variable mailgate knows; did you mean {closest}? (a misspelled \
         variable is refused: it may have been meant to narrow something)"
    )]
    UnknownVariable { name: String, closest: &'static str },
    #[error("the config file is not valid JSON (line {line}, column {column})")]
    Json { line: usize, column: usize },
    #[error(
        "the config file repeats an object key (line {line}, column {column}); each key may \
         appear only once in an object (mailgate refuses rather than pick one)"
    )]
    DuplicateKey { line: usize, column: usize },
    #[error("the config file is invalid: {path}: {rule}")]
    Schema { path: String, rule: String },
    #[error("{var} must be a boolean value (true/false, 1/0, yes/no, on/off)")]
    NotBoolean { var: &'static str },
    #[error("{var} is set but lists no entries")]
    EmptyList { var: &'static str },
    #[error(
        "{var} contains invalid entries (count: {count}; values not shown): {rule}",
        rule = list_rule(var)
    )]
    InvalidEntries { var: &'static str, count: usize },
    #[error("{var} is not a valid email address")]
    InvalidAddress { var: &'static str },
    #[error("the send gate cannot open: {0}")]
    Send(SendRefusal),
    #[error("{var} must be an absolute path")]
    NotAbsolute { var: &'static str },
    #[error("{var} must not contain control characters")]
    BadPathVar { var: &'static str },
    #[error(
        "HOME is not set (or not absolute) and the account has no home folder, so the {what} \
         cannot be located; set {instead}"
    )]
    NoHome {
        what: &'static str,
        instead: &'static str,
    },
    #[error("the current directory is not accessible, so a relative path cannot be resolved")]
    CurrentDir,
    #[error(".env in the working directory is not usable: {0}")]
    DotEnv(env::DotEnvError),
    #[error("MAILGATE_HANDOFF_TTL_HOURS must be a whole number of hours from 1 to 8784")]
    BadHandoffTtl,
    #[error(
        "MAILGATE_INDEX_MAX_STALENESS must be a duration such as 900, 90s, 15m or 2h \
         (1 second to 30 days)"
    )]
    BadIndexStaleness,
    #[error(
        "a Microsoft Graph mailbox is configured but its app credentials are missing or \
         malformed: {vars} (tenant and client id are UUIDs; the secret, or a certificate by \
         absolute path, is required; values not shown)"
    )]
    GraphCredentials { vars: String },
    #[error(
        "MICROSOFT_GRAPH_CLIENT_SECRET and a certificate (MICROSOFT_GRAPH_CLIENT_CERTIFICATE_PATH \
         or MICROSOFT_GRAPH_CLIENT_KEY_PATH) are both set; set only one"
    )]
    GraphCredentialConflict,
    #[error(
        "mailbox {alias}: its imap block names no credential; set passwordEnv (a password or \
         app password) or oauth2TokenEnv (an XOAUTH2 access token)"
    )]
    ImapCredentialUnnamed { alias: String },
    #[error("mailbox {alias}: {var} (its IMAP credential) is not set or is empty; value not shown")]
    ImapCredentialMissing { alias: String, var: String },
    #[cfg(debug_assertions)]
    #[error("MAILGATE_TEST_HANDOFF_CRASH_AT names no crash point")]
    BadCrashPoint,
}

/// What each entry of a comma-separated allowlist variable must be, for its refusal.
fn list_rule(var: &str) -> &'static str {
    if var == ALLOWED_RECIPIENT_DOMAINS_VAR {
        "each entry must be a domain name such as example.com (no scheme, @ or path)"
    } else {
        "each entry must be one email address such as name@example.com (no display name, \
         angle brackets, path or query)"
    }
}

impl ConfigError {
    pub(super) fn schema(path: impl Into<String>, rule: impl Into<String>) -> Self {
        ConfigError::Schema {
            path: path.into(),
            rule: rule.into(),
        }
    }
}
