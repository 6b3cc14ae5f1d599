//! Config: the validated, immutable view of `plugin.json` and the environment that every other
//! module sees.
//!
//! Two stages, fail closed (style rule 2): [`raw`] mirrors the file exactly (strict keys and
//! types, no logic); [`Config::from_json`] is the only way to build a [`Config`] and applies
//! every rule (alias syntax, address parsing, uniqueness, limit bounds, backend shape, plain
//! transport only to loopback). The first error aborts startup; there is no `validate()` to
//! forget. [`read_config`] then finds and reads the file and [`resolve_settings`] the state
//! directories and switches, once, from an [`env::Env`] snapshot; startup resolves the gates
//! between the two (`startup::load_settings`), since gates depend on config and not the reverse.
//!
//! Invariants: a `Config` has at least one mailbox, unique aliases, unique (lower-cased)
//! addresses, every limit within its published bounds, `maxHandoffStoreBytes >=
//! maxHandoffAttachmentBytes` and `maxDownloadFolderBytes >= maxDownloadBatchBytes`. No file key
//! can open a gate: `allowWrites` is only the fallback for an unset `PLUGIN_ALLOW_WRITES`, and
//! `allowSend` is an unknown key.
//!
//! Error messages ([`ConfigError`]) name the variable, key or JSON path and the rule, never a
//! value or a secret. The one path they show is the config file's, as the operator gave it
//! (`--config` or `OUTLOOK_PLUGIN_CONFIG`) or as the default resolved, so the operator knows
//! which file to fix.
//!
//! Layout: this file holds [`Config`], its mailbox list and the rules that span the whole file
//! (uniqueness, the limits that must hold one another); `backend` the server blocks, `oauth` a
//! backend's delegated sign-in (`auth`), `limits` the limit table, `load` finding the file and
//! resolving [`Settings`], `state` the state folders and lifetimes, `gate_vars` and `http` the
//! gate, send and HTTP variables, `values` the parsers of variable values, `error`
//! [`ConfigError`]. `raw` is the file's shape, `env` the environment snapshot, `vars` the
//! unknown-variable check, `graph` and `imap` the credentials, `embeddings` the semantic-recall
//! variable names. Every public item is re-exported here, so callers say `config::X` whichever
//! file holds it.
//!
//! Who may call it: startup (`cli`, `policy explain/check`, `demo`). Everything else receives a
//! finished [`Settings`] / [`Config`].

mod backend;
pub mod embeddings;
pub mod env;
mod error;
#[cfg(test)]
mod fixtures;
mod gate_vars;
pub mod graph;
mod http;
pub mod imap;
pub mod index_store;
mod limits;
mod load;
mod oauth;
mod principals;
pub(crate) mod raw;
mod state;
mod values;
mod vars;

pub use backend::{
    BackendSpec, DEFAULT_IMAP_PER_MINUTE, DEFAULT_SMTP_PER_HOUR, RateLimit, Security, ServerSpec,
    is_loopback_host,
};
pub use error::ConfigError;
pub use gate_vars::SendRefusal;
pub(crate) use gate_vars::{
    ALLOW_HANDOFFS_VAR, ALLOW_SEND_VAR, ALLOW_WRITES_VAR, ALLOWED_RECIPIENT_DOMAINS_VAR,
    ALLOWED_SENDERS_VAR, SEND_FROM_VAR, SEND_MAX_PER_HOUR_VAR,
};
pub use http::{
    HTTP_ALLOW_NO_AUTH_VAR, HTTP_ALLOWED_ORIGINS_VAR, HTTP_BEARER_TOKEN_VAR, HTTP_BEHIND_PROXY_VAR,
    HTTP_HOST_VAR, HTTP_OAUTH_ACCEPT_PLAIN_JWT_VAR, HTTP_OAUTH_ISSUER_VAR, HTTP_OAUTH_SCOPES_VAR,
    HTTP_PERSON_RATE_VAR, HTTP_PORT_VAR, HTTP_PUBLIC_URL_VAR, HTTP_TLS_CERT_VAR, HTTP_TLS_KEY_VAR,
    http_allow_no_auth, http_behind_proxy, http_oauth_accept_plain_jwt,
};
pub use limits::Limits;
pub(crate) use load::{CONFIG_PATH_VAR, JOURNAL_VAR, SEARCH_MEMORY_VAR};
pub use load::{LOG_LEVEL_VAR, MAILGATE_LOG_VAR, Settings, read_config, resolve_settings};
pub use oauth::{IssuerUrl, MicrosoftTenant, OAuthProvider, OAuthSpec, OidcScopes, SaslMechanism};
pub use principals::{Grant, Identity, MAX_CLAIM_CHARS, Principal, PrincipalLabel};
pub use state::{
    CURSOR_KEYS_FILE_VAR, CrashPoint, DOWNLOAD_DIR, INDEX_HOLD_VAR, INDEX_MAX_STALENESS_VAR,
    handoff_ttl, index_max_staleness, state_dir,
};
pub(crate) use state::{DOWNLOAD_DIR_VAR, HANDOFF_TTL_VAR, HOME_DIR_VAR};
pub(crate) use values::parse_bool;
pub use values::parse_seconds;
pub(crate) use vars::check_unknown_variables;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::address::EmailAddress;
use crate::alias::Alias;
use backend::backend_spec;
use limits::limits_from_raw;
use principals::principals_from_raw;
use raw::{RawAccess, RawConfig};

/// The validated `plugin.json`.
#[derive(Clone, Debug)]
pub struct Config {
    /// The allowlist, in config order.
    pub mailboxes: Vec<MailboxEntry>,
    pub limits: Limits,
    /// The file's `allowWrites` (default false); the effective gate is in `gates::Gates`.
    pub(crate) allow_writes: bool,
    /// `searchMemoryPath`, resolved against the config directory; [`read_config`] replaces it
    /// with `PLUGIN_SEARCH_MEMORY_PATH` when that is set.
    pub search_memory_path: Option<PathBuf>,
    /// The per-person policy of remote HTTP (`principals`), in the file's order (the first
    /// match is the caller); empty when the file has none.
    pub principals: Vec<Principal>,
}

/// One allowlisted mailbox.
#[derive(Clone, Debug)]
pub struct MailboxEntry {
    pub alias: Alias,
    pub address: EmailAddress,
    pub access: Access,
    pub backend: BackendSpec,
}

/// Per-alias narrowing (catalog.md): `read` refuses write and handoff tools for this alias.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    Full,
    Read,
}

impl Access {
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Full => "full",
            Access::Read => "read",
        }
    }
}

impl Config {
    /// Strictly parses `plugin.json` bytes; `base_dir` (normally the config file's directory)
    /// resolves relative `path`, `caFile` and `searchMemoryPath` values.
    pub fn from_json(bytes: &[u8], base_dir: &Path) -> Result<Config, ConfigError> {
        Config::from_raw(raw::parse(bytes)?, base_dir)
    }

    /// The entry for `alias`, if it is allowlisted (exact match).
    pub fn mailbox(&self, alias: &Alias) -> Option<&MailboxEntry> {
        self.mailboxes.iter().find(|entry| &entry.alias == alias)
    }

    /// The only constructor: every rule of the schema that serde cannot express.
    fn from_raw(raw: RawConfig, base_dir: &Path) -> Result<Config, ConfigError> {
        if raw.mailboxes.is_empty() {
            return Err(ConfigError::schema(
                "mailboxes",
                "must list at least one mailbox",
            ));
        }
        let limits = limits_from_raw(&raw)?;
        if limits.max_handoff_store_bytes < limits.max_handoff_attachment_bytes {
            return Err(ConfigError::schema(
                "maxHandoffStoreBytes",
                "must be at least maxHandoffAttachmentBytes",
            ));
        }
        if limits.max_download_folder_bytes < limits.max_download_batch_bytes {
            return Err(ConfigError::schema(
                "maxDownloadFolderBytes",
                "must be at least maxDownloadBatchBytes",
            ));
        }

        let mut mailboxes = Vec::with_capacity(raw.mailboxes.len());
        let mut seen_aliases: HashMap<Alias, usize> = HashMap::new();
        let mut seen_addresses: HashMap<EmailAddress, usize> = HashMap::new();
        for (index, entry) in raw.mailboxes.into_iter().enumerate() {
            let at = format!("mailboxes[{index}]");
            let alias = Alias::parse(&entry.alias)
                .map_err(|error| ConfigError::schema(format!("{at}.alias"), error.to_string()))?;
            if alias.as_str() != entry.alias {
                return Err(ConfigError::schema(
                    format!("{at}.alias"),
                    "must not have surrounding whitespace",
                ));
            }
            if let Some(first) = seen_aliases.insert(alias.clone(), index) {
                return Err(ConfigError::schema(
                    format!("{at}.alias"),
                    format!("duplicates mailboxes[{first}].alias"),
                ));
            }
            let address = EmailAddress::parse(&entry.address)
                .map_err(|error| ConfigError::schema(format!("{at}.address"), error.to_string()))?;
            if let Some(first) = seen_addresses.insert(address.clone(), index) {
                return Err(ConfigError::schema(
                    format!("{at}.address"),
                    format!("duplicates mailboxes[{first}].address (compared case-insensitively)"),
                ));
            }
            let access = match entry.access {
                None | Some(RawAccess::Full) => Access::Full,
                Some(RawAccess::Read) => Access::Read,
            };
            let backend = match entry.backend {
                None => BackendSpec::Graph { auth: None },
                Some(backend) => backend_spec(backend, &format!("{at}.backend"), base_dir)?,
            };
            mailboxes.push(MailboxEntry {
                alias,
                address,
                access,
                backend,
            });
        }

        let search_memory_path = raw
            .search_memory_path
            .map(|path| file_path(&path, "searchMemoryPath", base_dir))
            .transpose()?;
        let principals = principals_from_raw(raw.principals.unwrap_or_default(), &mailboxes)?;

        Ok(Config {
            mailboxes,
            limits,
            allow_writes: raw.allow_writes.unwrap_or(false),
            search_memory_path,
            principals,
        })
    }
}

/// A path value from the file: non-empty, no control characters, relative ones resolved against
/// `base_dir`.
fn file_path(value: &str, at: &str, base_dir: &Path) -> Result<PathBuf, ConfigError> {
    if value.trim().is_empty() || value.chars().any(char::is_control) {
        return Err(ConfigError::schema(
            at.to_owned(),
            "must be a non-empty path without control characters",
        ));
    }
    let path = Path::new(value);
    Ok(if path.is_absolute() {
        path.to_path_buf()
    } else {
        base_dir.join(path)
    })
}

#[cfg(test)]
mod tests {
    use super::limits::GIB;
    use super::*;
    use crate::config::fixtures::{FINANCE, parse, refusal, with_mailboxes};

    #[test]
    fn minimal_config_gets_defaults() {
        let config = parse(&with_mailboxes(FINANCE, "")).expect("valid");
        assert_eq!(config.mailboxes.len(), 1);
        let entry = &config.mailboxes[0];
        assert_eq!(entry.alias.as_str(), "finance");
        assert_eq!(entry.address.as_str(), "finance@example.com");
        assert_eq!(entry.access, Access::Full);
        assert!(matches!(entry.backend, BackendSpec::Graph { auth: None }));
        assert_eq!(config.limits, Limits::default());
        assert!(!config.allow_writes);
        assert_eq!(config.search_memory_path, None);
        let alias = Alias::parse("finance").expect("alias");
        assert!(config.mailbox(&alias).is_some());
        assert!(
            config
                .mailbox(&Alias::parse("other").expect("alias"))
                .is_none()
        );
    }

    #[test]
    fn full_config_is_resolved() {
        let json = r#"{
            "mailboxes": [
                {"alias": "finance", "address": "Finance@Example.com", "access": "read",
                 "backend": {"kind": "graph"}},
                {"alias": "support", "address": "support@example.org",
                 "backend": {"kind": "imap",
                    "imap": {"host": "IMAP.example.org", "port": 993, "security": "tls",
                             "username": "support@example.org", "passwordEnv": "SUPPORT_PW",
                             "caFile": "certs/ca.pem", "rateLimit": {"imapPerMinute": 30}},
                    "smtp": {"host": "127.0.0.1", "port": 10025, "security": "plain",
                             "rateLimit": {"smtpPerHour": 5}}}},
                {"alias": "archive", "address": "archive@example.net",
                 "backend": {"kind": "maildir", "path": "mail/archive",
                    "smtp": {"host": "::1", "port": 25, "security": "plain"}}},
                {"alias": "local", "address": "local@example.net",
                 "backend": {"kind": "maildir", "path": "/srv/mail/local"}}
            ],
            "allowWrites": true, "searchMemoryPath": "memory.yaml",
            "maxBodyChars": 500, "maxHandoffStoreBytes": 5368709120
        }"#;
        let config = parse(json).expect("valid");
        assert!(config.allow_writes);
        assert_eq!(config.limits.max_body_chars, 500);
        assert_eq!(config.limits.max_handoff_store_bytes, 5 * GIB);
        assert_eq!(
            config.search_memory_path,
            Some(PathBuf::from("/etc/mailgate/memory.yaml"))
        );
        assert_eq!(config.mailboxes[0].address.as_str(), "finance@example.com");
        assert_eq!(config.mailboxes[0].access, Access::Read);
        match &config.mailboxes[1].backend {
            BackendSpec::Imap {
                imap,
                smtp,
                auth: None,
            } => {
                assert_eq!(imap.host, "imap.example.org");
                assert_eq!(imap.port, 993);
                assert_eq!(imap.security, Security::Tls);
                assert_eq!(imap.password_env.as_deref(), Some("SUPPORT_PW"));
                assert_eq!(
                    imap.ca_file,
                    Some(PathBuf::from("/etc/mailgate/certs/ca.pem"))
                );
                assert_eq!(
                    imap.rate_limit,
                    Some(RateLimit {
                        imap_per_minute: Some(30),
                        smtp_per_hour: None
                    })
                );
                let smtp = smtp.as_ref().expect("smtp");
                assert_eq!(smtp.security, Security::Plain);
                assert_eq!(smtp.username, None);
                assert_eq!(smtp.rate_limit.and_then(|r| r.smtp_per_hour), Some(5));
                assert_eq!(imap.imap_per_minute(), 30, "configured");
                assert_eq!(smtp.smtp_per_hour(), 5, "configured");
            }
            other => panic!("expected imap, got {other:?}"),
        }
        match &config.mailboxes[2].backend {
            BackendSpec::Maildir { path, smtp } => {
                assert_eq!(path, &PathBuf::from("/etc/mailgate/mail/archive"));
                assert_eq!(smtp.as_ref().map(|s| s.host.as_str()), Some("::1"));
                assert_eq!(
                    smtp.as_ref().map(ServerSpec::smtp_per_hour),
                    Some(DEFAULT_SMTP_PER_HOUR),
                    "unset: the default"
                );
            }
            other => panic!("expected maildir, got {other:?}"),
        }
        match &config.mailboxes[3].backend {
            BackendSpec::Maildir { path, smtp: None } => {
                assert_eq!(path, &PathBuf::from("/srv/mail/local"));
            }
            other => panic!("expected maildir without smtp, got {other:?}"),
        }
    }

    #[test]
    fn refuses_unknown_keys_including_allow_send() {
        let (path, _) = refusal(&with_mailboxes(FINANCE, r#", "allowSend": true"#));
        assert_eq!(path, "allowSend");
        let (path, _) = refusal(&with_mailboxes(FINANCE, r#", "allowHandoffs": true"#));
        assert_eq!(path, "allowHandoffs");
        let (path, _) = refusal(&with_mailboxes(
            r#"{"alias": "finance", "address": "finance@example.com", "clientSecret": "x"}"#,
            "",
        ));
        assert_eq!(path, "mailboxes[0].clientSecret");
        let (path, _) = refusal(&with_mailboxes(
            r#"{"alias": "a", "address": "a@example.com", "backend": {"kind": "graph", "tenant": "t"}}"#,
            "",
        ));
        assert_eq!(path, "mailboxes[0].backend.tenant");
        let (path, _) = refusal(&with_mailboxes(
            r#"{"alias": "a", "address": "a@example.com", "backend": {"kind": "imap",
                "imap": {"host": "imap.example.com", "port": 993, "security": "tls",
                         "rateLimit": {"imapPerSecond": 1}}}}"#,
            "",
        ));
        assert_eq!(path, "mailboxes[0].backend.imap.rateLimit.imapPerSecond");
    }

    #[test]
    fn refuses_bad_mailbox_lists() {
        let (path, rule) = refusal(r#"{"mailboxes": []}"#);
        assert_eq!(
            (path.as_str(), rule.as_str()),
            ("mailboxes", "must list at least one mailbox")
        );
        let (path, _) = refusal(r#"{"allowWrites": true}"#);
        assert_eq!(path, "mailboxes");

        let dup_alias = with_mailboxes(
            &format!(r#"{FINANCE}, {{"alias": "finance", "address": "other@example.com"}}"#),
            "",
        );
        let (path, rule) = refusal(&dup_alias);
        assert_eq!(path, "mailboxes[1].alias");
        assert!(rule.contains("mailboxes[0]"), "{rule}");

        let dup_address = with_mailboxes(
            &format!(r#"{FINANCE}, {{"alias": "other", "address": "FINANCE@example.COM"}}"#),
            "",
        );
        let (path, rule) = refusal(&dup_address);
        assert_eq!(path, "mailboxes[1].address");
        assert!(!rule.contains("finance@"), "no address echoed: {rule}");

        for bad_alias in ["Finance", "FINANCE", " finance", "fin ance", "-finance", ""] {
            let json = with_mailboxes(
                &format!(r#"{{"alias": "{bad_alias}", "address": "finance@example.com"}}"#),
                "",
            );
            let (path, _) = refusal(&json);
            assert_eq!(path, "mailboxes[0].alias", "{bad_alias:?}");
        }
        let long = "a".repeat(65);
        let (path, _) = refusal(&with_mailboxes(
            &format!(r#"{{"alias": "{long}", "address": "finance@example.com"}}"#),
            "",
        ));
        assert_eq!(path, "mailboxes[0].alias");

        for bad_address in [
            "not-an-address",
            "Finance <finance@example.com>",
            "finance@example.com/../x",
            "finance@localhost",
            "finance@[127.0.0.1]",
            " finance@example.com",
        ] {
            let json = with_mailboxes(
                &format!(r#"{{"alias": "finance", "address": "{bad_address}"}}"#),
                "",
            );
            let (path, rule) = refusal(&json);
            assert_eq!(path, "mailboxes[0].address", "{bad_address:?}");
            assert!(!rule.contains("example.com"), "no value echoed: {rule}");
        }
    }

    #[test]
    fn handoff_store_must_hold_one_item() {
        let (path, rule) = refusal(&with_mailboxes(
            FINANCE,
            r#", "maxHandoffStoreBytes": 2048, "maxHandoffAttachmentBytes": 4096"#,
        ));
        assert_eq!(path, "maxHandoffStoreBytes");
        assert_eq!(rule, "must be at least maxHandoffAttachmentBytes");
        // Against the default item size (25 MiB) too.
        let (path, _) = refusal(&with_mailboxes(
            FINANCE,
            r#", "maxHandoffStoreBytes": 1048576"#,
        ));
        assert_eq!(path, "maxHandoffStoreBytes");
        assert!(
            parse(&with_mailboxes(
                FINANCE,
                r#", "maxHandoffStoreBytes": 4096, "maxHandoffAttachmentBytes": 4096"#
            ))
            .is_ok()
        );
    }

    #[test]
    fn download_folder_must_hold_one_batch() {
        let (path, rule) = refusal(&with_mailboxes(
            FINANCE,
            r#", "maxDownloadFolderBytes": 2048, "maxDownloadBatchBytes": 4096"#,
        ));
        assert_eq!(path, "maxDownloadFolderBytes");
        assert_eq!(rule, "must be at least maxDownloadBatchBytes");
        assert!(
            parse(&with_mailboxes(
                FINANCE,
                r#", "maxDownloadFolderBytes": 4096, "maxDownloadBatchBytes": 4096"#
            ))
            .is_ok()
        );
    }

    #[test]
    fn refuses_bad_search_memory_path() {
        let (path, _) = refusal(&with_mailboxes(FINANCE, r#", "searchMemoryPath": "  ""#));
        assert_eq!(path, "searchMemoryPath");
        let (path, _) = refusal(&with_mailboxes(FINANCE, r#", "searchMemoryPath": "a\nb""#));
        assert_eq!(path, "searchMemoryPath");
    }

    #[test]
    fn error_messages_are_one_line_without_values() {
        let errors = [
            parse(r#"{"mailboxes": [{"alias": "Hunter2", "address": "x@example.com"}]}"#)
                .expect_err("bad alias"),
            parse(r#"{"mailboxes": [{"alias": "a", "address": "hunter2"}]}"#)
                .expect_err("bad address"),
            parse(r#"{"mailboxes": [{"alias": "a", "address": "a@example.com", "secret": "hunter2"}]}"#)
                .expect_err("unknown key"),
            parse("{\"hunter2\" ").expect_err("bad json"),
        ];
        for error in errors {
            let message = error.to_string();
            assert!(
                !message.to_ascii_lowercase().contains("hunter2"),
                "{message}"
            );
            assert!(!message.contains('\n'), "{message}");
        }
    }
}
