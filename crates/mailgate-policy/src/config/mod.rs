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
//! Who may call it: startup (`cli`, `policy explain/check`, `demo`). Everything else receives a
//! finished [`Settings`] / [`Config`].

pub mod embeddings;
pub mod env;
pub mod graph;
pub mod imap;
pub(crate) mod raw;
mod vars;

pub(crate) use vars::check_unknown_variables;

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use crate::address::EmailAddress;
use crate::alias::Alias;
use crate::path_guard::{self, PrivateFileError};
use raw::{RawAccess, RawBackend, RawBackendKind, RawConfig, RawSecurity, RawServer};

/// Largest `plugin.json` accepted: it lists mailboxes and limits, never data.
pub(crate) const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// Environment variable naming the config file.
pub(crate) const CONFIG_PATH_VAR: &str = "OUTLOOK_PLUGIN_CONFIG";
/// Environment variable naming the state directory (absolute).
pub(crate) const HOME_DIR_VAR: &str = "MAILGATE_HOME";
/// Environment variable naming the download directory (absolute).
pub(crate) const DOWNLOAD_DIR_VAR: &str = "MAILGATE_DOWNLOAD_DIR";
/// The reference plugin's name for the same folder; both set and different is refused.
pub(crate) const REFERENCE_DOWNLOAD_DIR_VAR: &str = "DOWNLOAD_DIR";
/// The reference plugin's log level (error|warn|info|debug); `MAILGATE_LOG` wins when set.
pub const LOG_LEVEL_VAR: &str = "LOG_LEVEL";
/// mailgate's own log level variable (read by `cli` for `telemetry::init_tracing`).
pub const MAILGATE_LOG_VAR: &str = "MAILGATE_LOG";
/// The download folder's name inside the state folder, when `MAILGATE_DOWNLOAD_DIR` is unset.
pub const DOWNLOAD_DIR: &str = "downloads";
/// Environment variable switching the run journal on.
pub(crate) const JOURNAL_VAR: &str = "MAILGATE_JOURNAL";
/// Lifetime of a handoff bundle in hours (security.md §4).
pub(crate) const HANDOFF_TTL_VAR: &str = "MAILGATE_HANDOFF_TTL_HOURS";
/// How old a local index may be before its absence claims are downgraded (`index_stale`).
pub const INDEX_MAX_STALENESS_VAR: &str = "MAILGATE_INDEX_MAX_STALENESS";
/// Interruption tests of the index sync (debug builds only): hold at a point (`fetch:N`,
/// `commit:N` or `folder:N`; a bare `N` is `commit:N`) until signalled, paused or killed.
pub const INDEX_HOLD_VAR: &str = "MAILGATE_TEST_INDEX_HOLD_AT";
const DEFAULT_INDEX_MAX_STALENESS_SECS: u64 = 15 * 60;
const MAX_INDEX_MAX_STALENESS_SECS: u64 = 30 * 24 * 3600;
pub(crate) const DEFAULT_HANDOFF_TTL_HOURS: u64 = 7 * 24;
pub(crate) const MAX_HANDOFF_TTL_HOURS: u64 = 366 * 24;
/// Debug builds only: abort at a named step of a handoff create (crash tests).
#[cfg(debug_assertions)]
pub(crate) const HANDOFF_CRASH_VAR: &str = "MAILGATE_TEST_HANDOFF_CRASH_AT";
/// Environment variable overriding `searchMemoryPath`.
pub(crate) const SEARCH_MEMORY_VAR: &str = "PLUGIN_SEARCH_MEMORY_PATH";

// The gate variables (read by `gates`, which re-exports them).
/// `PLUGIN_ALLOW_WRITES`: tri-state, overrides the file's `allowWrites` when set.
pub(crate) const ALLOW_WRITES_VAR: &str = "PLUGIN_ALLOW_WRITES";
/// `PLUGIN_ALLOW_LOCAL_HANDOFFS`: environment only.
pub(crate) const ALLOW_HANDOFFS_VAR: &str = "PLUGIN_ALLOW_LOCAL_HANDOFFS";
/// `PLUGIN_ALLOW_SEND`: environment only, plus a fully configured sender.
pub(crate) const ALLOW_SEND_VAR: &str = "PLUGIN_ALLOW_SEND";
/// `OUTLOOK_HTTP_ALLOW_NO_AUTH`: validated with the gates as a strict boolean (so a misspelled
/// value aborts every command); the HTTP transport reads it through [`http_allow_no_auth`].
pub const HTTP_ALLOW_NO_AUTH_VAR: &str = "OUTLOOK_HTTP_ALLOW_NO_AUTH";
// The HTTP transport's other variables (the reference plugin's names, plus mailgate's origin
// allowlist), read by the server crate's `transport::http::settings`.
/// Loopback host the HTTP transport binds (default 127.0.0.1).
pub const HTTP_HOST_VAR: &str = "OUTLOOK_HTTP_HOST";
/// Port the HTTP transport binds (default 3010).
pub const HTTP_PORT_VAR: &str = "OUTLOOK_HTTP_PORT";
/// The bearer token HTTP clients must present; blank counts as missing.
pub const HTTP_BEARER_TOKEN_VAR: &str = "OUTLOOK_HTTP_BEARER_TOKEN";
/// Comma list of browser origins allowed besides the bound port's loopback origins.
pub const HTTP_ALLOWED_ORIGINS_VAR: &str = "MAILGATE_HTTP_ALLOWED_ORIGINS";

/// `OUTLOOK_HTTP_ALLOW_NO_AUTH` as a strict boolean; unset or blank is `false`.
pub fn http_allow_no_auth(env: &env::Env) -> Result<bool, ConfigError> {
    Ok(parse_bool(HTTP_ALLOW_NO_AUTH_VAR, env.raw(HTTP_ALLOW_NO_AUTH_VAR))? == Some(true))
}
/// The mailbox address new messages are sent from.
pub(crate) const SEND_FROM_VAR: &str = "OUTLOOK_SEND_FROM";
/// Comma list of addresses allowed to send.
pub(crate) const ALLOWED_SENDERS_VAR: &str = "OUTLOOK_ALLOWED_SENDERS";
/// Comma list of recipient domains (leading `@` optional).
pub(crate) const ALLOWED_RECIPIENT_DOMAINS_VAR: &str = "OUTLOOK_ALLOWED_RECIPIENT_DOMAINS";
/// Per-process cap on messages sent per hour (a sliding window on a monotonic clock).
pub(crate) const SEND_MAX_PER_HOUR_VAR: &str = "MAILGATE_SEND_MAX_PER_HOUR";

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

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
    fn schema(path: impl Into<String>, rule: impl Into<String>) -> Self {
        ConfigError::Schema {
            path: path.into(),
            rule: rule.into(),
        }
    }
}

/// Why the send gate could not open although `PLUGIN_ALLOW_SEND` is on. Messages name the
/// variables and the rule, never an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendRefusal {
    #[error("PLUGIN_ALLOW_SEND is on but OUTLOOK_SEND_FROM is not set")]
    FromMissing,
    #[error("OUTLOOK_SEND_FROM does not match any mailbox address in the config")]
    FromNotAllowlisted,
    #[error("the mailbox named by OUTLOOK_SEND_FROM has access \"read\" and cannot send")]
    FromReadOnly,
    #[error("PLUGIN_ALLOW_SEND is on but OUTLOOK_ALLOWED_SENDERS is not set")]
    SendersMissing,
    #[error("OUTLOOK_ALLOWED_SENDERS does not contain the OUTLOOK_SEND_FROM address")]
    SendersDoNotCoverFrom,
    #[error("MAILGATE_SEND_MAX_PER_HOUR must be a whole number from 1 to 1000")]
    BadSendCap,
    #[error(
        "the sending mailbox's smtp block names a credential variable (passwordEnv or \
         oauth2TokenEnv) that is not set"
    )]
    SmtpSecretMissing,
}

/// Strict boolean: trimmed and lower-cased, `true/1/yes/on` or `false/0/no/off`; absent or blank
/// is `Ok(None)` ("not set"); anything else is an error naming `var` (never the value).
pub(crate) fn parse_bool(
    var: &'static str,
    value: Option<&str>,
) -> Result<Option<bool>, ConfigError> {
    let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(Some(true)),
        "false" | "0" | "no" | "off" => Ok(Some(false)),
        _ => Err(ConfigError::NotBoolean { var }),
    }
}

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

/// Which backend serves a mailbox. Paths are absolute when the config path was.
#[derive(Clone, Debug)]
pub enum BackendSpec {
    Graph,
    Imap {
        imap: ServerSpec,
        smtp: Option<ServerSpec>,
    },
    Maildir {
        path: PathBuf,
        smtp: Option<ServerSpec>,
    },
}

/// An IMAP or SMTP server block. Credentials are only ever names of environment variables.
#[derive(Clone, Debug)]
pub struct ServerSpec {
    /// Lower-cased host name or IP address.
    pub host: String,
    pub port: u16,
    pub security: Security,
    /// `None`: log in as the mailbox address.
    pub username: Option<String>,
    pub password_env: Option<String>,
    pub oauth2_token_env: Option<String>,
    pub ca_file: Option<PathBuf>,
    /// Overrides of the default rate limits ([`DEFAULT_IMAP_PER_MINUTE`],
    /// [`DEFAULT_SMTP_PER_HOUR`]); read them through [`ServerSpec::imap_per_minute`] and
    /// [`ServerSpec::smtp_per_hour`], which apply the defaults.
    pub rate_limit: Option<RateLimit>,
}

impl ServerSpec {
    /// IMAP commands per minute for this account: the `imap` block's `rateLimit.imapPerMinute`,
    /// else [`DEFAULT_IMAP_PER_MINUTE`]. Meaningful on an `imap` block only (the config refuses
    /// the key elsewhere, so an `smtp` block always answers the default).
    pub fn imap_per_minute(&self) -> u32 {
        self.rate_limit
            .and_then(|limit| limit.imap_per_minute)
            .unwrap_or(DEFAULT_IMAP_PER_MINUTE)
    }

    /// SMTP sends per hour for this account: the `smtp` block's `rateLimit.smtpPerHour`, else
    /// [`DEFAULT_SMTP_PER_HOUR`]. Meaningful on an `smtp` block only.
    pub fn smtp_per_hour(&self) -> u32 {
        self.rate_limit
            .and_then(|limit| limit.smtp_per_hour)
            .unwrap_or(DEFAULT_SMTP_PER_HOUR)
    }
}

/// Transport security. `Plain` is only accepted for loopback hosts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Security {
    Tls,
    Starttls,
    Plain,
}

/// Rate-limit overrides for one server block (`imapPerMinute` on `imap`, `smtpPerHour` on
/// `smtp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit {
    pub(crate) imap_per_minute: Option<u32>,
    pub(crate) smtp_per_hour: Option<u32>,
}

/// IMAP commands per minute per account when the `imap` block sets no
/// `rateLimit.imapPerMinute` (issue 12: the backend's token bucket holds this many and refills
/// them over a minute, so a full minute's worth may go out at once).
pub const DEFAULT_IMAP_PER_MINUTE: u32 = 60;
/// SMTP sends per hour per account when the `smtp` block sets no `rateLimit.smtpPerHour`
/// (issue 12). The process-wide send cap (`MAILGATE_SEND_MAX_PER_HOUR`, default 20) also applies
/// and the smaller wins, so with both unset the effective limit is 20 an hour.
pub const DEFAULT_SMTP_PER_HOUR: u32 = 100;

/// Bounds for `rateLimit.imapPerMinute`.
pub(crate) const IMAP_PER_MINUTE_BOUNDS: (u32, u32) = (1, 6_000);
/// Bounds for `rateLimit.smtpPerHour`.
pub(crate) const SMTP_PER_HOUR_BOUNDS: (u32, u32) = (1, 10_000);

/// One limit key with its bounds and default, as published in catalog.md (tests check the
/// schema against it).
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LimitBound {
    pub(crate) key: &'static str,
    pub(crate) min: u64,
    pub(crate) max: u64,
    pub(crate) default: u64,
}

/// Converts a bounds-checked limit into its field type.
trait FromLimit: Sized {
    fn from_limit(value: u64) -> Option<Self>;
}

impl FromLimit for u64 {
    fn from_limit(value: u64) -> Option<Self> {
        Some(value)
    }
}

impl FromLimit for usize {
    fn from_limit(value: u64) -> Option<Self> {
        usize::try_from(value).ok()
    }
}

fn limit<T: FromLimit>(
    key: &'static str,
    value: Option<u64>,
    min: u64,
    max: u64,
    default: u64,
) -> Result<T, ConfigError> {
    let value = value.unwrap_or(default);
    if value < min || value > max {
        return Err(ConfigError::schema(
            key,
            format!("must be between {min} and {max}"),
        ));
    }
    T::from_limit(value)
        .ok_or_else(|| ConfigError::schema(key, "does not fit this platform's integer size"))
}

/// Declares [`Limits`], its defaults, the `LIMIT_BOUNDS` table and the raw → validated step
/// from one list, so the three cannot drift apart.
macro_rules! limits {
    ($($field:ident: $ty:ty = $key:literal, $min:expr, $max:expr, $default:expr;)*) => {
        /// Resource limits from `plugin.json` (catalog.md "Limits"), each within its bounds.
        #[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
        #[serde(rename_all = "camelCase")]
        pub struct Limits {
            $(pub $field: $ty,)*
        }

        /// Every limit key with min, max and default, in catalog order.
        #[cfg(test)]
        pub(crate) const LIMIT_BOUNDS: &[LimitBound] = &[
            $(LimitBound { key: $key, min: $min, max: $max, default: $default },)*
        ];

        impl Default for Limits {
            fn default() -> Self {
                Limits {
                    $($field: <$ty as FromLimit>::from_limit($default)
                        .expect("invariant: every default fits its field type"),)*
                }
            }
        }

        fn limits_from_raw(raw: &RawConfig) -> Result<Limits, ConfigError> {
            Ok(Limits {
                $($field: limit::<$ty>($key, raw.$field, $min, $max, $default)?,)*
            })
        }
    };
}

limits! {
    max_concurrent_mailboxes: usize = "maxConcurrentMailboxes", 1, 8, 3;
    max_mailboxes_per_search: usize = "maxMailboxesPerSearch", 1, 32, 8;
    max_results_per_mailbox: usize = "maxResultsPerMailbox", 1, 100, 20;
    max_body_chars: usize = "maxBodyChars", 1, 12_000, 12_000;
    max_attachment_input_bytes: u64 = "maxAttachmentInputBytes", KIB, 50 * MIB, 15 * MIB;
    max_extracted_chars: usize = "maxExtractedChars", 1_000, 1_000_000, 200_000;
    max_raw_attachment_bytes: u64 = "maxRawAttachmentBytes", KIB, MIB, 256 * KIB;
    max_concurrent_extractions: usize = "maxConcurrentExtractions", 1, 8, 2;
    max_batch_size: usize = "maxBatchSize", 1, 100, 25;
    max_download_batch_bytes: u64 = "maxDownloadBatchBytes", KIB, 500 * MIB, 50 * MIB;
    max_download_folder_bytes: u64 = "maxDownloadFolderBytes", KIB, 1024 * GIB, GIB;
    max_handoff_attachment_bytes: u64 = "maxHandoffAttachmentBytes", KIB, 100 * MIB, 25 * MIB;
    max_handoff_store_bytes: u64 = "maxHandoffStoreBytes", KIB, 5 * GIB, 500 * MIB;
    max_handoff_store_entries: usize = "maxHandoffStoreEntries", 1, 10_000, 1_000;
    max_queries_per_batch: usize = "maxQueriesPerBatch", 1, 25, 10;
    max_batch_result_messages: usize = "maxBatchResultMessages", 1, 5_000, 500;
    max_batch_result_bytes: u64 = "maxBatchResultBytes", KIB, 10 * MIB, 2 * MIB;
    max_batch_context_chars: usize = "maxBatchContextChars", 1_000, 5_000_000, 500_000;
    max_batch_attachments: usize = "maxBatchAttachments", 1, 10_000, 1_000;
    max_zip_entries: usize = "maxZipEntries", 1, 1_000, 200;
    max_zip_uncompressed_bytes: u64 = "maxZipUncompressedBytes", KIB, 200 * MIB, 50 * MIB;
    max_container_entries: usize = "maxContainerEntries", 1, 20_000, 1_000;
    max_container_uncompressed_bytes: u64 =
        "maxContainerUncompressedBytes", KIB, 500 * MIB, 100 * MIB;
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
                None => BackendSpec::Graph,
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

        Ok(Config {
            mailboxes,
            limits,
            allow_writes: raw.allow_writes.unwrap_or(false),
            search_memory_path,
        })
    }
}

/// Which server block is being validated (decides the allowed `rateLimit` key).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Imap,
    Smtp,
}

fn backend_spec(raw: RawBackend, at: &str, base_dir: &Path) -> Result<BackendSpec, ConfigError> {
    let not_allowed = |key: &str, kind: &str| {
        ConfigError::schema(
            format!("{at}.{key}"),
            format!("is not allowed for kind {kind}"),
        )
    };
    let smtp = |raw: Option<RawServer>| {
        raw.map(|server| server_spec(server, &format!("{at}.smtp"), Role::Smtp, base_dir))
            .transpose()
    };
    match raw.kind {
        RawBackendKind::Graph => {
            if raw.path.is_some() {
                return Err(not_allowed("path", "graph"));
            }
            if raw.imap.is_some() {
                return Err(not_allowed("imap", "graph"));
            }
            if raw.smtp.is_some() {
                return Err(not_allowed("smtp", "graph"));
            }
            Ok(BackendSpec::Graph)
        }
        RawBackendKind::Imap => {
            if raw.path.is_some() {
                return Err(not_allowed("path", "imap"));
            }
            let Some(imap) = raw.imap else {
                return Err(ConfigError::schema(
                    format!("{at}.imap"),
                    "is required for kind imap",
                ));
            };
            Ok(BackendSpec::Imap {
                imap: server_spec(imap, &format!("{at}.imap"), Role::Imap, base_dir)?,
                smtp: smtp(raw.smtp)?,
            })
        }
        RawBackendKind::Maildir => {
            if raw.imap.is_some() {
                return Err(not_allowed("imap", "maildir"));
            }
            let Some(path) = raw.path else {
                return Err(ConfigError::schema(
                    format!("{at}.path"),
                    "is required for kind maildir",
                ));
            };
            Ok(BackendSpec::Maildir {
                path: file_path(&path, &format!("{at}.path"), base_dir)?,
                smtp: smtp(raw.smtp)?,
            })
        }
    }
}

fn server_spec(
    raw: RawServer,
    at: &str,
    role: Role,
    base_dir: &Path,
) -> Result<ServerSpec, ConfigError> {
    let host = parse_host(&raw.host).ok_or_else(|| {
        ConfigError::schema(format!("{at}.host"), "must be a host name or an IP address")
    })?;
    if raw.port == 0 {
        return Err(ConfigError::schema(
            format!("{at}.port"),
            "must be between 1 and 65535",
        ));
    }
    let security = match raw.security {
        RawSecurity::Tls => Security::Tls,
        RawSecurity::Starttls => Security::Starttls,
        RawSecurity::Plain => Security::Plain,
    };
    if security == Security::Plain && !is_loopback_host(&host) {
        return Err(ConfigError::schema(
            format!("{at}.security"),
            "plain is only allowed to a loopback host (127.0.0.0/8, ::1, localhost)",
        ));
    }
    let bad_username =
        |name: &String| name.is_empty() || name.len() > 320 || name.chars().any(char::is_control);
    if raw.username.as_ref().is_some_and(bad_username) {
        return Err(ConfigError::schema(
            format!("{at}.username"),
            "must be 1-320 characters without control characters",
        ));
    }
    for (key, value) in [
        ("passwordEnv", &raw.password_env),
        ("oauth2TokenEnv", &raw.oauth2_token_env),
    ] {
        if value.as_deref().is_some_and(|name| !is_env_var_name(name)) {
            return Err(ConfigError::schema(
                format!("{at}.{key}"),
                "must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*, at most 128)",
            ));
        }
    }
    if raw.password_env.is_some() && raw.oauth2_token_env.is_some() {
        return Err(ConfigError::schema(
            at.to_owned(),
            "set at most one of passwordEnv and oauth2TokenEnv",
        ));
    }
    let ca_file = raw
        .ca_file
        .map(|path| file_path(&path, &format!("{at}.caFile"), base_dir))
        .transpose()?;
    let rate_limit = match raw.rate_limit {
        None => None,
        Some(limits) => {
            let check = |key: &str, value: Option<u32>, allowed: bool, (min, max): (u32, u32)| {
                match value {
                    Some(_) if !allowed => Err(ConfigError::schema(
                        format!("{at}.rateLimit.{key}"),
                        "does not apply to this server block",
                    )),
                    Some(v) if v < min || v > max => Err(ConfigError::schema(
                        format!("{at}.rateLimit.{key}"),
                        format!("must be between {min} and {max}"),
                    )),
                    _ => Ok(value),
                }
            };
            let imap_per_minute = check(
                "imapPerMinute",
                limits.imap_per_minute,
                role == Role::Imap,
                IMAP_PER_MINUTE_BOUNDS,
            )?;
            let smtp_per_hour = check(
                "smtpPerHour",
                limits.smtp_per_hour,
                role == Role::Smtp,
                SMTP_PER_HOUR_BOUNDS,
            )?;
            (imap_per_minute.is_some() || smtp_per_hour.is_some()).then_some(RateLimit {
                imap_per_minute,
                smtp_per_hour,
            })
        }
    };
    Ok(ServerSpec {
        host,
        port: raw.port,
        security,
        username: raw.username,
        password_env: raw.password_env,
        oauth2_token_env: raw.oauth2_token_env,
        ca_file,
        rate_limit,
    })
}

/// A bare IP address (v4, or v6 without brackets) or a DNS host name (single labels such as
/// `localhost` allowed), lower-cased. A name whose last label is all digits is refused: resolvers
/// may read `127.1` as an IPv4 address, which would defeat the loopback rule's intent.
fn parse_host(host: &str) -> Option<String> {
    if host.parse::<IpAddr>().is_ok() {
        return Some(host.to_ascii_lowercase());
    }
    if host.is_empty() || host.len() > 253 || !host.is_ascii() {
        return None;
    }
    let lower = host.to_ascii_lowercase();
    let labels_ok = lower.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    });
    let numeric_tail = lower
        .rsplit('.')
        .next()
        .is_some_and(|last| last.bytes().all(|b| b.is_ascii_digit()));
    (labels_ok && !numeric_tail).then_some(lower)
}

/// Loopback: `localhost`, 127.0.0.0/8 or `::1` (IPv4-mapped forms are not accepted). The rule
/// for `security: plain`; the SMTP transport checks it again with this same function when it is
/// built, so it does not depend on the config having run it.
pub fn is_loopback_host(host: &str) -> bool {
    host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn is_env_var_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    name.len() <= 128
        && bytes
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
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

/// A step of a create, for crash tests: a debug build started with
/// `MAILGATE_TEST_HANDOFF_CRASH_AT=<step>` aborts the process there (`handoff::store`). Release builds
/// never read the variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashPoint {
    /// The payload temp file is written and fsynced, not yet renamed.
    AfterPayloadTemp,
    /// `payload.bin` is in place; no manifest yet.
    AfterPayloadRename,
    /// Half of the manifest temp file is written.
    DuringManifest,
    /// The manifest temp file is complete; the commit rename has not happened.
    BeforeCommit,
    /// Not a crash: staged and about to take the store lock, the create waits for a shared lock
    /// on the file `handoff::RELEASE` in the handoff root. A concurrency test holds it exclusively
    /// until every process is parked here, then lets them all race for the store lock at once.
    HoldBeforeLock,
}

// Only debug builds read the crash variable (see `resolve_settings`).
#[cfg(debug_assertions)]
impl CrashPoint {
    pub const ALL: [CrashPoint; 4] = [
        CrashPoint::AfterPayloadTemp,
        CrashPoint::AfterPayloadRename,
        CrashPoint::DuringManifest,
        CrashPoint::BeforeCommit,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CrashPoint::AfterPayloadTemp => "after_payload_temp",
            CrashPoint::AfterPayloadRename => "after_payload_rename",
            CrashPoint::DuringManifest => "during_manifest",
            CrashPoint::BeforeCommit => "before_commit",
            CrashPoint::HoldBeforeLock => "hold_before_lock",
        }
    }

    pub fn parse(s: &str) -> Option<CrashPoint> {
        if s == "hold_before_lock" {
            return Some(CrashPoint::HoldBeforeLock);
        }
        CrashPoint::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// Everything resolved once at startup.
#[derive(Clone, Debug)]
pub struct Settings {
    pub config: Config,
    /// Absolute path of the config file that was read.
    #[cfg_attr(not(test), expect(dead_code, reason = "read by the unit tests only"))]
    pub(crate) config_path: PathBuf,
    /// `None` when no home folder is known: fine until something needs the state folder
    /// ([`Settings::state_dir`] then names the variable to set).
    state_dir: Option<PathBuf>,
    /// `None` exactly when no download variable is set and the state folder is unknown.
    download_dir: Option<PathBuf>,
    pub journal: bool,
    /// Whether `tools/list` declares output schemas ([`env::OUTPUT_SCHEMAS_VAR`]).
    pub output_schemas: bool,
    /// How long a handoff bundle is served ([`HANDOFF_TTL_VAR`]).
    pub handoff_ttl: std::time::Duration,
    /// How old a local index may be before it proves no absence ([`INDEX_MAX_STALENESS_VAR`]).
    pub index_max_staleness: std::time::Duration,
    /// Crash tests only; always `None` in release builds.
    pub handoff_crash_at: Option<CrashPoint>,
    /// The Graph app credentials and endpoints; `Some` exactly when a Graph mailbox is listed.
    pub graph: Option<graph::GraphSettings>,
    /// The login of every IMAP mailbox, by alias (empty when none is listed).
    pub imap_logins: std::collections::BTreeMap<Alias, imap::ImapLogin>,
}

impl Settings {
    /// The state folder, or the refusal naming `MAILGATE_HOME` when no home folder is known.
    /// Only what is opened (journal, handoff store, outbox, default downloads) asks for it, so
    /// a process whose open gates need no state folder starts without `HOME`.
    pub fn state_dir(&self) -> Result<&Path, ConfigError> {
        self.state_dir.as_deref().ok_or(ConfigError::NoHome {
            what: "state directory",
            instead: HOME_DIR_VAR,
        })
    }

    /// The download folder (`MAILGATE_DOWNLOAD_DIR` or `DOWNLOAD_DIR`, else
    /// `<state folder>/downloads`).
    pub fn download_dir(&self) -> Result<&Path, ConfigError> {
        self.download_dir.as_deref().ok_or(ConfigError::NoHome {
            what: "download folder",
            instead: DOWNLOAD_DIR_VAR,
        })
    }
}

/// Reads and validates the config file and checks the environment's variable names: the first
/// half of what startup needs (`startup::load_settings` resolves the gates, then
/// [`resolve_settings`]), failing closed on the first problem. Returns the config and the
/// absolute path it was read from.
///
/// - Config path: `config_override` > `OUTLOOK_PLUGIN_CONFIG` (blank = absent) >
///   `~/.config/mailgate/plugin.json` > the reference plugin's `~/.config/mcp-outlook/plugin.json`
///   (only when mailgate's default does not exist); read with [`path_guard::read_private_file`].
///   `~` is `HOME`, else the account's home folder ([`env::Env::home`]).
/// - `searchMemoryPath`: `PLUGIN_SEARCH_MEMORY_PATH` (trimmed, non-empty) wins over the file.
/// - Unknown variables with a reserved prefix: [`check_unknown_variables`].
pub fn read_config(
    env: &env::Env,
    config_override: Option<&Path>,
) -> Result<(Config, PathBuf), ConfigError> {
    let (config_path, shown_path, bytes) = read_config_file(env, config_override)?;
    let base_dir = config_path.parent().unwrap_or(Path::new("/"));
    let mut config = Config::from_json(&bytes, base_dir).map_err(|e| ConfigError::InFile {
        path: shown_path,
        source: Box::new(e),
    })?;

    if let Some(path) = env.get(SEARCH_MEMORY_VAR) {
        reject_control_chars(path, SEARCH_MEMORY_VAR)?;
        config.search_memory_path =
            Some(std::path::absolute(path).map_err(|_| ConfigError::CurrentDir)?);
    }

    check_unknown_variables(env, &config)?;
    Ok((config, config_path))
}

/// The second half (after the gates): the state directories and the switches.
///
/// - State dir: `MAILGATE_HOME` (absolute) > `~/.mailgate`; unknown is not an error here.
///   Download dir: `MAILGATE_DOWNLOAD_DIR` or the reference's `DOWNLOAD_DIR` (absolute; both set
///   and different is refused) > `<state dir>/downloads`. Nothing is created here.
/// - Journal: `MAILGATE_JOURNAL`, strict boolean, default off. Output schemas in `tools/list`:
///   `MAILGATE_OUTPUT_SCHEMAS`, strict boolean, default off.
pub fn resolve_settings(
    env: &env::Env,
    config: Config,
    config_path: PathBuf,
) -> Result<Settings, ConfigError> {
    let state_dir = match state_dir(env) {
        Ok(dir) => Some(dir),
        Err(ConfigError::NoHome { .. }) => None,
        Err(other) => return Err(other),
    };
    let download_dir = match download_var(env)? {
        Some(path) => Some(path),
        None => state_dir.as_ref().map(|state| state.join(DOWNLOAD_DIR)),
    };
    let journal = parse_bool(JOURNAL_VAR, env.raw(JOURNAL_VAR))?.unwrap_or(false);
    let output_schemas =
        parse_bool(env::OUTPUT_SCHEMAS_VAR, env.raw(env::OUTPUT_SCHEMAS_VAR))?.unwrap_or(false);
    let handoff_ttl = handoff_ttl(env)?;
    let index_max_staleness = index_max_staleness(env)?;
    let graph = graph::resolve(env, &config)?;
    let imap_logins = imap::resolve(env, &config)?;
    #[cfg(debug_assertions)]
    let handoff_crash_at = env
        .get(HANDOFF_CRASH_VAR)
        .map(|s| CrashPoint::parse(s).ok_or(ConfigError::BadCrashPoint))
        .transpose()?;
    #[cfg(not(debug_assertions))]
    let handoff_crash_at = None;

    Ok(Settings {
        config,
        config_path,
        state_dir,
        download_dir,
        journal,
        output_schemas,
        handoff_ttl,
        index_max_staleness,
        handoff_crash_at,
        graph,
        imap_logins,
    })
}

/// Finds and reads the config file (see [`read_config`]): its absolute path, the path as the
/// operator gave it (for messages) and its bytes. Every failure names the file it tried, as
/// given (a default is shown as resolved).
fn read_config_file(
    env: &env::Env,
    config_override: Option<&Path>,
) -> Result<(PathBuf, String, Vec<u8>), ConfigError> {
    let given = match (config_override, env.get(CONFIG_PATH_VAR)) {
        (Some(path), _) => Some(path.to_path_buf()),
        (None, Some(path)) => {
            reject_control_chars(path, CONFIG_PATH_VAR)?;
            Some(PathBuf::from(path))
        }
        (None, None) => None,
    };
    let read = |path: &Path| -> Result<(PathBuf, String, Vec<u8>), ConfigError> {
        let absolute = std::path::absolute(path).map_err(|_| ConfigError::CurrentDir)?;
        path_guard::read_private_file(&absolute, MAX_CONFIG_BYTES)
            .map(|bytes| (absolute, shown(path), bytes))
            .map_err(|e| in_file(path, ConfigError::File(e)))
    };
    if let Some(path) = given {
        return read(&path);
    }
    let home = env.home().ok_or(ConfigError::NoHome {
        what: "config file",
        instead: CONFIG_PATH_VAR,
    })?;
    let primary = home.join(".config").join("mailgate").join("plugin.json");
    match read(&primary) {
        Err(ConfigError::InFile { source, .. })
            if matches!(*source, ConfigError::File(PrivateFileError::NotAvailable)) =>
        {
            // A reference user's file is used as it is, but only when mailgate's own default
            // is absent: a mailgate file is never shadowed.
            let fallback = home.join(".config").join("mcp-outlook").join("plugin.json");
            match read(&fallback) {
                Err(ConfigError::InFile { source, .. })
                    if matches!(*source, ConfigError::File(PrivateFileError::NotAvailable)) =>
                {
                    Err(ConfigError::NoConfigFile {
                        primary: shown(&primary),
                        fallback: shown(&fallback),
                    })
                }
                other => other,
            }
        }
        other => other,
    }
}

/// `error` with the config file it came from.
fn in_file(path: &Path, error: ConfigError) -> ConfigError {
    ConfigError::InFile {
        path: shown(path),
        source: Box::new(error),
    }
}

/// A path for a one-line message: as given, with control characters escaped so a name cannot
/// break the line (only `--config` can carry them; the variable refuses them).
fn shown(path: &Path) -> String {
    path.to_string_lossy()
        .chars()
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_debug().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect()
}

/// The download folder from the environment: `MAILGATE_DOWNLOAD_DIR` and the reference's
/// `DOWNLOAD_DIR` mean the same; both set to different paths is refused rather than guessed.
fn download_var(env: &env::Env) -> Result<Option<PathBuf>, ConfigError> {
    let ours = env
        .get(DOWNLOAD_DIR_VAR)
        .map(|path| absolute_var(path, DOWNLOAD_DIR_VAR))
        .transpose()?;
    let theirs = env
        .get(REFERENCE_DOWNLOAD_DIR_VAR)
        .map(|path| absolute_var(path, REFERENCE_DOWNLOAD_DIR_VAR))
        .transpose()?;
    match (ours, theirs) {
        (Some(a), Some(b)) if a != b => Err(ConfigError::DownloadDirConflict),
        (Some(a), _) => Ok(Some(a)),
        (None, b) => Ok(b),
    }
}

/// [`HANDOFF_TTL_VAR`]: whole hours, 1 to [`MAX_HANDOFF_TTL_HOURS`], default seven days. Also
/// read by `mailgate handoff`, which needs no plugin.json.
pub fn handoff_ttl(env: &env::Env) -> Result<std::time::Duration, ConfigError> {
    let hours = match env.get(HANDOFF_TTL_VAR) {
        None => DEFAULT_HANDOFF_TTL_HOURS,
        Some(raw) => raw
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|h| (1..=MAX_HANDOFF_TTL_HOURS).contains(h))
            .ok_or(ConfigError::BadHandoffTtl)?,
    };
    Ok(std::time::Duration::from_secs(hours * 3600))
}

/// [`INDEX_MAX_STALENESS_VAR`]: seconds, or a number with `s`, `m` or `h`; 1 s to 30 days,
/// default 15 minutes.
pub fn index_max_staleness(env: &env::Env) -> Result<std::time::Duration, ConfigError> {
    let Some(raw) = env.get(INDEX_MAX_STALENESS_VAR) else {
        return Ok(std::time::Duration::from_secs(
            DEFAULT_INDEX_MAX_STALENESS_SECS,
        ));
    };
    parse_seconds(raw)
        .filter(|s| (1..=MAX_INDEX_MAX_STALENESS_SECS).contains(s))
        .map(std::time::Duration::from_secs)
        .ok_or(ConfigError::BadIndexStaleness)
}

/// A duration as an operator writes one: whole seconds, or a number with `s`, `m` or `h`
/// (`900`, `90s`, `15m`, `2h`), surrounding spaces ignored; `None` for anything else.
pub fn parse_seconds(raw: &str) -> Option<u64> {
    let raw = raw.trim();
    let (digits, unit) = match raw.char_indices().last() {
        Some((i, 's')) => (&raw[..i], 1),
        Some((i, 'm')) => (&raw[..i], 60),
        Some((i, 'h')) => (&raw[..i], 3600),
        _ => (raw, 1),
    };
    digits
        .parse::<u64>()
        .ok()
        .filter(|_| digits.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|n| n.checked_mul(unit))
}

/// The state directory: `MAILGATE_HOME` (must be absolute) > `~/.mailgate` (`HOME` when set
/// and absolute, else the account's home folder, as the reference plugin resolves `~`).
/// Nothing is created here.
pub fn state_dir(env: &env::Env) -> Result<PathBuf, ConfigError> {
    match env.get(HOME_DIR_VAR) {
        Some(path) => absolute_var(path, HOME_DIR_VAR),
        None => env
            .home()
            .map(|home| home.join(".mailgate"))
            .ok_or(ConfigError::NoHome {
                what: "state directory",
                instead: HOME_DIR_VAR,
            }),
    }
}

fn reject_control_chars(value: &str, var: &'static str) -> Result<(), ConfigError> {
    if value.chars().any(char::is_control) {
        Err(ConfigError::BadPathVar { var })
    } else {
        Ok(())
    }
}

fn absolute_var(value: &str, var: &'static str) -> Result<PathBuf, ConfigError> {
    reject_control_chars(value, var)?;
    let path = PathBuf::from(value);
    if path.is_absolute() {
        Ok(path)
    } else {
        Err(ConfigError::NotAbsolute { var })
    }
}

#[cfg(test)]
#[expect(
    clippy::disallowed_methods,
    reason = "tests write fixture config files inside a tempdir"
)]
mod tests {
    use super::env::Env;
    use super::*;

    /// Startup's whole resolution (file, gates, paths), in the order `startup::load_settings`
    /// of the main crate runs it (that function is these three calls; it cannot be called from
    /// this crate).
    fn load_settings_and_gates(
        env: &Env,
        config: Option<&Path>,
    ) -> Result<(Settings, crate::gates::Gates), ConfigError> {
        let (config, config_path) = read_config(env, config)?;
        let gates = crate::gates::Gates::resolve(env, &config)?;
        let settings = resolve_settings(env, config, config_path)?;
        Ok((settings, gates))
    }

    fn load_settings(env: &Env, config: Option<&Path>) -> Result<Settings, ConfigError> {
        load_settings_and_gates(env, config).map(|(settings, _gates)| settings)
    }

    const BASE: &str = "/etc/mailgate";

    #[test]
    fn index_staleness_takes_seconds_or_a_unit_and_refuses_the_rest() {
        let of = |v: &str| index_max_staleness(&Env::from_pairs([(INDEX_MAX_STALENESS_VAR, v)]));
        let secs = |n: u64| Ok::<_, ConfigError>(std::time::Duration::from_secs(n));
        let unset: [(&str, &str); 0] = [];
        assert_eq!(
            index_max_staleness(&Env::from_pairs(unset)).ok(),
            secs(900).ok()
        );
        for (raw, want) in [
            ("900", 900),
            ("90s", 90),
            ("15m", 900),
            ("2h", 7200),
            (" 1 ", 1),
        ] {
            assert_eq!(of(raw).ok(), secs(want).ok(), "{raw}");
        }
        for bad in [
            "0",
            "-5",
            "15 m",
            "1d",
            "m",
            "99999999999999999999",
            "31000000",
            "+5",
        ] {
            assert!(
                matches!(of(bad), Err(ConfigError::BadIndexStaleness)),
                "{bad} must be refused"
            );
        }
    }

    fn parse(json: &str) -> Result<Config, ConfigError> {
        Config::from_json(json.as_bytes(), Path::new(BASE))
    }

    fn refusal(json: &str) -> (String, String) {
        match parse(json) {
            Err(ConfigError::Schema { path, rule }) => (path, rule),
            Err(other) => panic!("expected a schema error, got {other}"),
            Ok(_) => panic!("expected a schema error, got a config"),
        }
    }

    fn with_mailboxes(mailboxes: &str, extra: &str) -> String {
        format!(r#"{{"mailboxes": [{mailboxes}]{extra}}}"#)
    }

    const FINANCE: &str = r#"{"alias": "finance", "address": "finance@example.com"}"#;
    /// A Maildir mailbox: loading settings for it needs no Graph credentials.
    const LOCAL: &str = r#"{"alias": "finance", "address": "finance@example.com",
        "backend": {"kind": "maildir", "path": "/srv/mail/finance"}}"#;

    #[test]
    fn rate_limits_default_to_issue_12s_numbers_and_take_the_configured_override() {
        let spec = |rate_limit| ServerSpec {
            host: "imap.example.org".to_owned(),
            port: 993,
            security: Security::Tls,
            username: None,
            password_env: None,
            oauth2_token_env: None,
            ca_file: None,
            rate_limit,
        };
        let unset = spec(None);
        assert_eq!(unset.imap_per_minute(), 60);
        assert_eq!(unset.smtp_per_hour(), 100);
        let imap_only = spec(Some(RateLimit {
            imap_per_minute: Some(12),
            smtp_per_hour: None,
        }));
        assert_eq!(imap_only.imap_per_minute(), 12);
        assert_eq!(imap_only.smtp_per_hour(), DEFAULT_SMTP_PER_HOUR);
        let smtp_only = spec(Some(RateLimit {
            imap_per_minute: None,
            smtp_per_hour: Some(7),
        }));
        assert_eq!(smtp_only.imap_per_minute(), DEFAULT_IMAP_PER_MINUTE);
        assert_eq!(smtp_only.smtp_per_hour(), 7);
        // The defaults lie inside the bounds a configured value must respect.
        for (default, (min, max)) in [
            (DEFAULT_IMAP_PER_MINUTE, IMAP_PER_MINUTE_BOUNDS),
            (DEFAULT_SMTP_PER_HOUR, SMTP_PER_HOUR_BOUNDS),
        ] {
            assert!((min..=max).contains(&default));
        }
    }

    #[test]
    fn minimal_config_gets_defaults() {
        let config = parse(&with_mailboxes(FINANCE, "")).expect("valid");
        assert_eq!(config.mailboxes.len(), 1);
        let entry = &config.mailboxes[0];
        assert_eq!(entry.alias.as_str(), "finance");
        assert_eq!(entry.address.as_str(), "finance@example.com");
        assert_eq!(entry.access, Access::Full);
        assert!(matches!(entry.backend, BackendSpec::Graph));
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
            BackendSpec::Imap { imap, smtp } => {
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
    fn every_limit_is_bounded_on_both_sides() {
        assert_eq!(LIMIT_BOUNDS.len(), 23);
        for bound in LIMIT_BOUNDS {
            for value in [bound.min - 1, bound.max + 1] {
                let json = with_mailboxes(FINANCE, &format!(r#", "{}": {value}"#, bound.key));
                let (path, rule) = refusal(&json);
                assert_eq!(path, bound.key, "{} = {value}", bound.key);
                assert_eq!(
                    rule,
                    format!("must be between {} and {}", bound.min, bound.max)
                );
            }
            for value in [bound.min, bound.max, bound.default] {
                let mut extra = format!(r#", "{}": {value}"#, bound.key);
                if bound.key == "maxHandoffStoreBytes" {
                    extra.push_str(r#", "maxHandoffAttachmentBytes": 1024"#);
                }
                if bound.key == "maxDownloadFolderBytes" {
                    extra.push_str(r#", "maxDownloadBatchBytes": 1024"#);
                }
                let json = with_mailboxes(FINANCE, &extra);
                assert!(
                    parse(&json).is_ok(),
                    "{} = {value} must be accepted",
                    bound.key
                );
            }
        }
    }

    /// The published limits (docs/operator.md "plugin.json", spec catalog.md), written out as
    /// literals so the `limits!` table is checked against the documents rather than against
    /// itself: (key, default, min, max).
    const PUBLISHED_LIMITS: [(&str, u64, u64, u64); 23] = [
        ("maxConcurrentMailboxes", 3, 1, 8),
        ("maxMailboxesPerSearch", 8, 1, 32),
        ("maxResultsPerMailbox", 20, 1, 100),
        ("maxBodyChars", 12_000, 1, 12_000),
        ("maxAttachmentInputBytes", 15_728_640, 1_024, 52_428_800),
        ("maxExtractedChars", 200_000, 1_000, 1_000_000),
        ("maxRawAttachmentBytes", 262_144, 1_024, 1_048_576),
        ("maxConcurrentExtractions", 2, 1, 8),
        ("maxBatchSize", 25, 1, 100),
        ("maxDownloadBatchBytes", 52_428_800, 1_024, 524_288_000),
        (
            "maxDownloadFolderBytes",
            1_073_741_824,
            1_024,
            1_099_511_627_776,
        ),
        ("maxHandoffAttachmentBytes", 26_214_400, 1_024, 104_857_600),
        ("maxHandoffStoreBytes", 524_288_000, 1_024, 5_368_709_120),
        ("maxHandoffStoreEntries", 1_000, 1, 10_000),
        ("maxQueriesPerBatch", 10, 1, 25),
        ("maxBatchResultMessages", 500, 1, 5_000),
        ("maxBatchResultBytes", 2_097_152, 1_024, 10_485_760),
        ("maxBatchContextChars", 500_000, 1_000, 5_000_000),
        ("maxBatchAttachments", 1_000, 1, 10_000),
        ("maxZipEntries", 200, 1, 1_000),
        ("maxZipUncompressedBytes", 52_428_800, 1_024, 209_715_200),
        ("maxContainerEntries", 1_000, 1, 20_000),
        (
            "maxContainerUncompressedBytes",
            104_857_600,
            1_024,
            524_288_000,
        ),
    ];

    #[test]
    fn limit_table_matches_the_struct_and_the_defaults() {
        let table: Vec<(&str, u64, u64, u64)> = LIMIT_BOUNDS
            .iter()
            .map(|b| (b.key, b.default, b.min, b.max))
            .collect();
        assert_eq!(table, PUBLISHED_LIMITS);
        // The struct's defaults, as serialized (the names a config file uses), are the same.
        let defaults = serde_json::to_value(Limits::default()).expect("serializes");
        let defaults: Vec<(&str, u64)> = defaults
            .as_object()
            .expect("object")
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_u64().expect("a number")))
            .collect();
        let mut published: Vec<(&str, u64)> = PUBLISHED_LIMITS
            .iter()
            .map(|(k, d, _, _)| (*k, *d))
            .collect();
        published.sort();
        let mut defaults = defaults;
        defaults.sort();
        assert_eq!(defaults, published);
        // Each bound is enforced by the parser: min and max accepted, one beyond refused.
        for (key, _, min, max) in PUBLISHED_LIMITS {
            // The store and folder bounds must also hold one item / one batch.
            let mut pair = String::new();
            if key == "maxHandoffStoreBytes" {
                pair.push_str(r#", "maxHandoffAttachmentBytes": 1024"#);
            }
            if key == "maxDownloadFolderBytes" {
                pair.push_str(r#", "maxDownloadBatchBytes": 1024"#);
            }
            for (value, ok) in [(min, true), (max, true), (min - 1, false), (max + 1, false)] {
                let json = with_mailboxes(FINANCE, &format!(r#", "{key}": {value}{pair}"#));
                assert_eq!(parse(&json).is_ok(), ok, "{key} = {value}");
            }
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

    fn server_refusal(server: &str) -> (String, String) {
        refusal(&with_mailboxes(
            &format!(
                r#"{{"alias": "a", "address": "a@example.com",
                     "backend": {{"kind": "imap", "imap": {server}}}}}"#
            ),
            "",
        ))
    }

    #[test]
    fn plain_security_only_to_loopback() {
        for host in [
            "imap.example.com",
            "10.0.0.1",
            "::ffff:127.0.0.1",
            "127.1",
            "localhost.example.com",
        ] {
            let (path, rule) = server_refusal(&format!(
                r#"{{"host": "{host}", "port": 143, "security": "plain"}}"#
            ));
            if host == "127.1" {
                assert_eq!(path, "mailboxes[0].backend.imap.host", "{host}");
            } else {
                assert_eq!(path, "mailboxes[0].backend.imap.security", "{host}");
                assert!(rule.contains("loopback"), "{rule}");
            }
        }
        for host in ["127.0.0.1", "127.3.4.5", "::1", "localhost", "LOCALHOST"] {
            let json = with_mailboxes(
                &format!(
                    r#"{{"alias": "a", "address": "a@example.com", "backend": {{"kind": "maildir",
                        "path": "/srv/a", "smtp": {{"host": "{host}", "port": 25, "security": "plain"}}}}}}"#
                ),
                "",
            );
            assert!(parse(&json).is_ok(), "{host}");
        }
        let json = with_mailboxes(
            r#"{"alias": "a", "address": "a@example.com", "backend": {"kind": "maildir",
                "path": "/srv/a", "smtp": {"host": "smtp.example.com", "port": 25, "security": "plain"}}}"#,
            "",
        );
        let (path, _) = refusal(&json);
        assert_eq!(path, "mailboxes[0].backend.smtp.security");
    }

    #[test]
    fn refuses_bad_server_blocks() {
        let cases = [
            (
                r#"{"host": "", "port": 993, "security": "tls"}"#,
                "imap.host",
            ),
            (
                r#"{"host": "imap example.com", "port": 993, "security": "tls"}"#,
                "imap.host",
            ),
            (
                r#"{"host": "-imap.example.com", "port": 993, "security": "tls"}"#,
                "imap.host",
            ),
            (
                r#"{"host": "imap.example.com/x", "port": 993, "security": "tls"}"#,
                "imap.host",
            ),
            (
                r#"{"host": "imap.example.com", "port": 0, "security": "tls"}"#,
                "imap.port",
            ),
            (
                r#"{"host": "imap.example.com", "port": 993, "security": "ssl"}"#,
                "imap.security",
            ),
            (
                r#"{"host": "imap.example.com", "port": 993}"#,
                "imap.security",
            ),
            (
                r#"{"host": "imap.example.com", "port": 993, "security": "tls", "username": ""}"#,
                "imap.username",
            ),
            (
                r#"{"host": "imap.example.com", "port": 993, "security": "tls", "passwordEnv": "1BAD"}"#,
                "imap.passwordEnv",
            ),
            (
                r#"{"host": "imap.example.com", "port": 993, "security": "tls", "oauth2TokenEnv": "A-B"}"#,
                "imap.oauth2TokenEnv",
            ),
            (
                r#"{"host": "imap.example.com", "port": 993, "security": "tls", "passwordEnv": "A", "oauth2TokenEnv": "B"}"#,
                "imap",
            ),
            (
                r#"{"host": "imap.example.com", "port": 993, "security": "tls", "caFile": ""}"#,
                "imap.caFile",
            ),
            (
                r#"{"host": "imap.example.com", "port": 993, "security": "tls", "rateLimit": {"imapPerMinute": 0}}"#,
                "imap.rateLimit.imapPerMinute",
            ),
            (
                r#"{"host": "imap.example.com", "port": 993, "security": "tls", "rateLimit": {"imapPerMinute": 6001}}"#,
                "imap.rateLimit.imapPerMinute",
            ),
            (
                r#"{"host": "imap.example.com", "port": 993, "security": "tls", "rateLimit": {"smtpPerHour": 10}}"#,
                "imap.rateLimit.smtpPerHour",
            ),
        ];
        for (server, suffix) in cases {
            let (path, _) = server_refusal(server);
            assert_eq!(path, format!("mailboxes[0].backend.{suffix}"), "{server}");
        }
    }

    #[test]
    fn refuses_mismatched_backend_shapes() {
        let backend = |b: &str| {
            refusal(&with_mailboxes(
                &format!(r#"{{"alias": "a", "address": "a@example.com", "backend": {b}}}"#),
                "",
            ))
            .0
        };
        let imap = r#"{"host": "imap.example.com", "port": 993, "security": "tls"}"#;
        assert_eq!(
            backend(r#"{"kind": "maildir"}"#),
            "mailboxes[0].backend.path"
        );
        assert_eq!(
            backend(r#"{"kind": "maildir", "path": ""}"#),
            "mailboxes[0].backend.path"
        );
        assert_eq!(
            backend(&format!(
                r#"{{"kind": "maildir", "path": "/m", "imap": {imap}}}"#
            )),
            "mailboxes[0].backend.imap"
        );
        assert_eq!(backend(r#"{"kind": "imap"}"#), "mailboxes[0].backend.imap");
        assert_eq!(
            backend(&format!(
                r#"{{"kind": "imap", "imap": {imap}, "path": "/m"}}"#
            )),
            "mailboxes[0].backend.path"
        );
        assert_eq!(
            backend(r#"{"kind": "graph", "path": "/m"}"#),
            "mailboxes[0].backend.path"
        );
        assert_eq!(
            backend(&format!(r#"{{"kind": "graph", "smtp": {imap}}}"#)),
            "mailboxes[0].backend.smtp"
        );
        assert_eq!(backend(r#"{"kind": "pop3"}"#), "mailboxes[0].backend.kind");
        assert_eq!(backend(r#"{"path": "/m"}"#), "mailboxes[0].backend.kind");
    }

    #[test]
    fn refuses_bad_search_memory_path() {
        let (path, _) = refusal(&with_mailboxes(FINANCE, r#", "searchMemoryPath": "  ""#));
        assert_eq!(path, "searchMemoryPath");
        let (path, _) = refusal(&with_mailboxes(FINANCE, r#", "searchMemoryPath": "a\nb""#));
        assert_eq!(path, "searchMemoryPath");
    }

    // --- load_settings ---------------------------------------------------------------------

    use std::os::unix::fs::PermissionsExt as _;

    fn write_config(dir: &Path, name: &str, body: &str, mode: u32) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, body).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        path
    }

    #[test]
    fn load_settings_resolves_paths_and_defaults() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join(".config/mailgate")).expect("mkdir");
        write_config(
            &home.join(".config/mailgate"),
            "plugin.json",
            &with_mailboxes(
                r#"{"alias": "archive", "address": "archive@example.net",
                    "backend": {"kind": "maildir", "path": "mail"}}"#,
                r#", "allowWrites": true"#,
            ),
            0o600,
        );
        let env = Env::from_pairs([("HOME", home.to_str().expect("utf-8"))]);
        let (settings, gates) = load_settings_and_gates(&env, None).expect("loads");
        assert_eq!(
            settings.config_path,
            home.join(".config/mailgate/plugin.json")
        );
        assert_eq!(settings.state_dir().expect("known"), home.join(".mailgate"));
        assert_eq!(
            settings.download_dir().expect("known"),
            home.join(".mailgate/downloads")
        );
        assert!(!settings.journal);
        assert!(
            gates.writes,
            "file allowWrites applies when the env is silent"
        );
        assert!(!gates.handoffs);
        assert!(gates.send.is_none());
        match &settings.config.mailboxes[0].backend {
            BackendSpec::Maildir { path, .. } => {
                assert_eq!(path, &home.join(".config/mailgate/mail"));
            }
            other => panic!("expected maildir, got {other:?}"),
        }
    }

    #[test]
    fn load_settings_precedence_and_refusals() {
        let dir = tempfile::tempdir().expect("tempdir");
        let good = write_config(dir.path(), "good.json", &with_mailboxes(LOCAL, ""), 0o600);
        let other = write_config(dir.path(), "other.json", &with_mailboxes(LOCAL, ""), 0o600);
        let open = write_config(dir.path(), "open.json", &with_mailboxes(LOCAL, ""), 0o644);
        let state = dir.path().join("state");
        let good_s = good.to_str().expect("utf-8");
        let state_s = state.to_str().expect("utf-8");

        // The override argument beats OUTLOOK_PLUGIN_CONFIG; MAILGATE_HOME beats HOME.
        let env = Env::from_pairs([
            (CONFIG_PATH_VAR, good_s),
            (HOME_DIR_VAR, state_s),
            (DOWNLOAD_DIR_VAR, "/srv/downloads"),
            (JOURNAL_VAR, " Yes "),
            (SEARCH_MEMORY_VAR, "/srv/memory.yaml"),
        ]);
        let settings = load_settings(&env, Some(&other)).expect("loads");
        assert_eq!(settings.config_path, other);
        assert_eq!(settings.state_dir().expect("known"), state);
        assert_eq!(
            settings.download_dir().expect("known"),
            PathBuf::from("/srv/downloads")
        );
        assert!(settings.journal);
        assert_eq!(
            settings.config.search_memory_path,
            Some(PathBuf::from("/srv/memory.yaml"))
        );
        assert_eq!(load_settings(&env, None).expect("loads").config_path, good);

        // Blank OUTLOOK_PLUGIN_CONFIG counts as absent: falls back to HOME, which is missing.
        let env = Env::from_pairs([(CONFIG_PATH_VAR, "  "), (HOME_DIR_VAR, state_s)]);
        assert!(matches!(
            load_settings(&env, None),
            Err(ConfigError::NoHome {
                what: "config file",
                ..
            })
        ));

        let env = Env::from_pairs([(HOME_DIR_VAR, "relative/state")]);
        assert!(matches!(
            load_settings(&env, Some(&good)),
            Err(ConfigError::NotAbsolute { var: HOME_DIR_VAR })
        ));
        let env = Env::from_pairs([(HOME_DIR_VAR, state_s), (DOWNLOAD_DIR_VAR, "downloads")]);
        assert!(matches!(
            load_settings(&env, Some(&good)),
            Err(ConfigError::NotAbsolute {
                var: DOWNLOAD_DIR_VAR
            })
        ));
        let env = Env::from_pairs([(HOME_DIR_VAR, state_s), (JOURNAL_VAR, "sometimes")]);
        assert!(matches!(
            load_settings(&env, Some(&good)),
            Err(ConfigError::NotBoolean { var: JOURNAL_VAR })
        ));
        // No usable home: the settings load (a read-only process needs no state folder) and
        // only asking for the state folder names the variable to set.
        let env = Env::from_pairs([("HOME", "relative-home")]);
        let settings = load_settings(&env, Some(&good)).expect("loads without a home");
        assert!(matches!(
            settings.state_dir(),
            Err(ConfigError::NoHome {
                what: "state directory",
                instead: HOME_DIR_VAR,
            })
        ));
        assert!(matches!(
            settings.download_dir(),
            Err(ConfigError::NoHome {
                instead: DOWNLOAD_DIR_VAR,
                ..
            })
        ));

        let env = Env::from_pairs([(HOME_DIR_VAR, state_s)]);
        // Each refusal names the file it tried, as given (issue 9).
        let refused = |path: &Path| match load_settings(&env, Some(path)) {
            Err(ConfigError::InFile {
                path: shown,
                source,
            }) => {
                assert_eq!(shown, path.to_string_lossy());
                *source
            }
            other => panic!("expected a file error, got {other:?}"),
        };
        let error = load_settings(&env, Some(&open)).expect_err("0644 refused");
        assert!(
            error
                .to_string()
                .starts_with(&format!("{}: ", open.display())),
            "{error}"
        );
        assert!(matches!(
            refused(&open),
            ConfigError::File(PrivateFileError::TooPermissive)
        ));
        assert!(matches!(
            refused(&dir.path().join("missing.json")),
            ConfigError::File(PrivateFileError::NotAvailable)
        ));
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&good, &link).expect("symlink");
        assert!(matches!(
            refused(&link),
            ConfigError::File(PrivateFileError::NotRegularFile)
        ));
        let bad = write_config(dir.path(), "bad.json", "{\"mailboxes\": []}", 0o600);
        assert!(matches!(refused(&bad), ConfigError::Schema { .. }));
        // A relative path is shown as given, not resolved.
        let relative = Path::new("relative-missing.json");
        assert!(matches!(
            refused(relative),
            ConfigError::File(PrivateFileError::NotAvailable)
        ));
    }

    #[test]
    fn the_reference_default_config_is_the_fallback() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path();
        let home_s = home.to_str().expect("utf-8");
        let env = Env::from_pairs([("HOME", home_s)]);
        // Neither file: the error names both.
        let error = load_settings(&env, None).expect_err("no file");
        let message = error.to_string();
        assert!(
            message.contains(".config/mailgate/plugin.json"),
            "{message}"
        );
        assert!(
            message.contains(".config/mcp-outlook/plugin.json"),
            "{message}"
        );

        std::fs::create_dir_all(home.join(".config/mcp-outlook")).expect("mkdir");
        let reference = write_config(
            &home.join(".config/mcp-outlook"),
            "plugin.json",
            &with_mailboxes(LOCAL, ""),
            0o600,
        );
        assert_eq!(
            load_settings(&env, None).expect("loads").config_path,
            reference
        );

        // mailgate's own default wins when it exists, even if it is refused.
        std::fs::create_dir_all(home.join(".config/mailgate")).expect("mkdir");
        let ours = write_config(
            &home.join(".config/mailgate"),
            "plugin.json",
            &with_mailboxes(LOCAL, ""),
            0o644,
        );
        match load_settings(&env, None) {
            Err(ConfigError::InFile { path, .. }) => assert_eq!(path, ours.to_string_lossy()),
            other => panic!("expected mailgate's file to be refused, got {other:?}"),
        }
    }

    #[test]
    fn download_dir_accepts_the_reference_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        let good = write_config(dir.path(), "good.json", &with_mailboxes(LOCAL, ""), 0o600);
        let with = |pairs: &[(&str, &str)]| {
            load_settings(&Env::from_pairs(pairs.iter().copied()), Some(&good))
        };
        let settings = with(&[(REFERENCE_DOWNLOAD_DIR_VAR, "/srv/dl")]).expect("loads");
        assert_eq!(settings.download_dir().expect("set"), Path::new("/srv/dl"));
        assert!(settings.state_dir().is_err(), "no home in this env");
        let settings = with(&[
            (REFERENCE_DOWNLOAD_DIR_VAR, "/srv/dl"),
            (DOWNLOAD_DIR_VAR, "/srv/dl"),
        ])
        .expect("same path twice is fine");
        assert_eq!(settings.download_dir().expect("set"), Path::new("/srv/dl"));
        assert!(matches!(
            with(&[
                (REFERENCE_DOWNLOAD_DIR_VAR, "/srv/a"),
                (DOWNLOAD_DIR_VAR, "/srv/b")
            ]),
            Err(ConfigError::DownloadDirConflict)
        ));
        assert!(matches!(
            with(&[(REFERENCE_DOWNLOAD_DIR_VAR, "relative")]),
            Err(ConfigError::NotAbsolute {
                var: REFERENCE_DOWNLOAD_DIR_VAR
            })
        ));
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
