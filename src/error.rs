//! Startup failures: each is printed as one line on stderr and ends the process with a non-zero
//! exit before anything is served. Messages name the variable, key or rule, never a secret.
//! (Tool-call errors are mapped separately, once, in `tools`.)

use crate::config::ConfigError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum StartupError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("mailbox {alias}: its maildir folder could not be opened ({kind})")]
    MaildirUnavailable {
        alias: String,
        kind: std::io::ErrorKind,
    },
    #[error("the state folder (MAILGATE_HOME, default ~/.mailgate) is refused: {0}")]
    StateDir(crate::path_guard::PrivateDirError),
    #[error("the run journal (<state folder>/journal.jsonl) is refused: {0}")]
    Journal(crate::path_guard::PrivateFileError),
    #[error(
        "the download folder (MAILGATE_DOWNLOAD_DIR, default <state folder>/downloads) is \
         refused: {0}"
    )]
    DownloadDir(crate::path_guard::PrivateDirError),
    #[error("the handoff store (<state folder>/handoffs) is refused: {0}")]
    HandoffStore(String),
    #[error("mailbox {alias}: its IMAP connection settings are refused: {why}")]
    Imap { alias: String, why: String },
    #[error("the Microsoft Graph client could not be prepared: {0}")]
    Graph(crate::backends::graph::GraphSetupError),
    #[error("the send transport could not be prepared: {0}")]
    SendSetup(String),
    #[error(
        "the search memory file (PLUGIN_SEARCH_MEMORY_PATH or searchMemoryPath) is refused: {0}"
    )]
    SearchMemory(crate::path_guard::PrivateFileError),
    #[error("the cursor key ring (MAILGATE_CURSOR_KEYS_FILE) is refused: {0}")]
    CursorKeys(crate::coordination::KeyRingError),
    #[error("the shared index store (MAILGATE_INDEX_URL) is refused: {0}")]
    IndexStore(String),
    #[error("the demo could not be set up: {0}")]
    Demo(String),
    #[error("{0}")]
    Usage(String),
    #[error("the embeddings endpoint is refused: {0}")]
    Embeddings(String),
    #[error("the HTTP transport cannot start: {0}")]
    Http(#[from] HttpConfigError),
    #[error("the MCP transport failed: {0}")]
    Transport(String),
    #[error("could not write output ({0})")]
    Output(std::io::ErrorKind),
}

/// Why the HTTP transport refused to start. Messages name variables and rules; they quote only
/// the address the operator typed, never a token.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HttpConfigError {
    #[error(
        "{address} is not a loopback address: the HTTP transport leaves loopback only with the \
         OAuth resource server (MAILGATE_HTTP_OAUTH_ISSUER) and TLS (MAILGATE_HTTP_TLS_CERT and \
         MAILGATE_HTTP_TLS_KEY); the static bearer token is a loopback-only mode"
    )]
    NotLoopback { address: String },
    #[error("MAILGATE_HTTP_TLS_CERT and MAILGATE_HTTP_TLS_KEY are set together or not at all")]
    TlsIncomplete,
    #[error("{var} must be an absolute path")]
    TlsPath { var: &'static str },
    #[error(
        "MAILGATE_HTTP_BEHIND_PROXY needs the OAuth resource server and a loopback address (the \
         proxy terminates TLS and forwards to mailgate on this machine)"
    )]
    ProxyMode,
    #[error("{source_name} is not a host: use an IP address or localhost")]
    BadHost { source_name: &'static str },
    #[error("{source_name} must be a port number from 0 to 65535")]
    BadPort { source_name: &'static str },
    #[error(
        "--http takes HOST:PORT (127.0.0.1:3010, [::1]:3010, localhost:3010), or nothing to use \
         OUTLOOK_HTTP_HOST and OUTLOOK_HTTP_PORT"
    )]
    BadAddress,
    #[error(
        "OUTLOOK_HTTP_BEARER_TOKEN is not set (or is blank): the HTTP transport requires a bearer \
         token; set one, or set OUTLOOK_HTTP_ALLOW_NO_AUTH=true to serve without authentication"
    )]
    NoToken,
    #[error(
        "MAILGATE_HTTP_ALLOWED_ORIGINS contains invalid entries (count: {count}; values not shown): \
         each must be an origin such as https://app.example.com or http://localhost:6274 (scheme \
         http or https, no path, query or user), or null"
    )]
    BadOrigins { count: usize },
    #[error(
        "MAILGATE_HTTP_OAUTH_ISSUER and OUTLOOK_HTTP_BEARER_TOKEN are both set: the OAuth resource \
         server and the static bearer token are never on together (unset the token)"
    )]
    OAuthWithBearer,
    #[error(
        "{var} must be an https URL (http only to a loopback host), without user, query or \
         fragment"
    )]
    OAuthUrl { var: &'static str },
    #[error(
        "MAILGATE_HTTP_PUBLIC_URL is not set: with MAILGATE_HTTP_OAUTH_ISSUER, name the canonical \
         URL clients use (e.g. https://mail.example.com/mcp); tokens must be issued for it"
    )]
    PublicUrlMissing,
    #[error(
        "MAILGATE_HTTP_OAUTH_SCOPES must list at least one scope, space-separated, each of \
         printable ASCII without quotes or backslashes"
    )]
    Scopes,
    #[error("MAILGATE_HTTP_PERSON_REQUESTS_PER_MINUTE must be a whole number from 1 to 100000")]
    PersonRate,
    #[error(
        "the OAuth resource server has no principals: list the people in plugin.json \
         \"principals\" (nobody could call it otherwise)"
    )]
    NoPrincipals,
    #[error(transparent)]
    Config(#[from] ConfigError),
}
