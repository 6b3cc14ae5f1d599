//! The one error type of every backend, in the classes remote mailboxes need. Each class maps
//! once to a tool code (`tools::ToolError::from_backend`) and once to search evidence
//! (`search::engine`); a backend picks the class, never the code.

use std::time::Duration;

/// Why a backend operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum BackendError {
    #[error("the requested item does not exist")]
    NotFound,
    #[error("the id is not one this mailbox issued")]
    BadId,
    /// The id was issued for an earlier state of its folder, which the server has since reset
    /// (IMAP's UIDVALIDITY changed): the message it named cannot be told from others.
    #[error("the id belongs to an earlier state of its folder")]
    Outdated,
    /// The backend kind, or this operation on it, is not available (names the kind).
    #[error("the {0} backend does not support this operation in this build")]
    Unsupported(&'static str),
    /// The mail server lacks a protocol capability the operation needs (names it, e.g.
    /// `MOVE`): refused rather than emulated.
    #[error("the mail server lacks the {0} capability this operation needs")]
    ServerLacks(&'static str),
    #[error("a server-side limit was exceeded")]
    TooLarge,
    /// The server asked us to slow down (HTTP 429/503), or the mailbox's own rate limit
    /// (mailgate's per-account bucket) is spent.
    #[error("requests to the mailbox are rate-limited")]
    Throttled { retry_after: Option<Duration> },
    /// Credentials were refused or have expired.
    #[error("the mail server refused the credentials")]
    Unauthorised,
    /// The alias's delegated grant is missing, expired or revoked (issue 37): only the
    /// operator's `mailgate auth login ALIAS` lifts it. Holds the alias, never an address.
    #[error("the delegated sign-in of {0} must be renewed (mailgate auth login {0})")]
    AuthRequired(String),
    /// The operation's deadline passed.
    #[error("the mail server did not answer in time")]
    Timeout,
    /// A transient failure (connection refused or dropped, 5xx): retrying later may work.
    #[error("the mail server is unavailable")]
    Unavailable,
    /// The server answered something we cannot read (bad JSON, a protocol violation).
    #[error("the mail server sent a malformed response")]
    Malformed,
    /// Local storage failed (Maildir).
    #[error("the mailbox storage could not be read")]
    Io(#[source] std::io::Error),
}

impl BackendError {
    /// An error of `fault`'s class (the same failure, told to each item it stopped).
    pub(crate) fn from_fault(fault: super::model::Fault) -> Self {
        use super::model::Fault;
        match fault {
            Fault::Throttled => BackendError::Throttled { retry_after: None },
            Fault::Unauthorised => BackendError::Unauthorised,
            Fault::AuthRequired => BackendError::AuthRequired(String::new()),
            Fault::Timeout => BackendError::Timeout,
            Fault::Unavailable => BackendError::Unavailable,
            Fault::Malformed => BackendError::Malformed,
        }
    }

    /// The class of this failure when it ends a paged scan part-way.
    pub(crate) fn fault(&self) -> super::model::Fault {
        use super::model::Fault;
        match self {
            BackendError::Throttled { .. } => Fault::Throttled,
            BackendError::Unauthorised => Fault::Unauthorised,
            BackendError::AuthRequired(_) => Fault::AuthRequired,
            BackendError::Timeout => Fault::Timeout,
            BackendError::Malformed => Fault::Malformed,
            _ => Fault::Unavailable,
        }
    }
}

impl From<std::io::Error> for BackendError {
    fn from(err: std::io::Error) -> Self {
        if err.kind() == std::io::ErrorKind::NotFound {
            BackendError::NotFound
        } else {
            BackendError::Io(err)
        }
    }
}
