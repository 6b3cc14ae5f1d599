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
    #[error("the demo could not be set up: {0}")]
    Demo(String),
    #[error("{0}")]
    Usage(String),
    #[error("the HTTP transport cannot start: {0}")]
    Http(#[from] crate::transport::http::HttpConfigError),
    #[error("the MCP transport failed: {0}")]
    Transport(String),
    #[error("could not write output ({0})")]
    Output(std::io::ErrorKind),
}
