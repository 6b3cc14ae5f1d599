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
    /// An error of this one's class (the same failure, told to each item it stopped): an
    /// `AuthRequired` keeps its alias, so every item names the command that lifts it.
    pub(crate) fn same_class(&self) -> Self {
        match self {
            BackendError::Throttled { .. } => BackendError::Throttled { retry_after: None },
            BackendError::Unauthorised => BackendError::Unauthorised,
            BackendError::AuthRequired(alias) => BackendError::AuthRequired(alias.clone()),
            BackendError::Timeout => BackendError::Timeout,
            BackendError::Malformed => BackendError::Malformed,
            // What `fault` calls Unavailable.
            _ => BackendError::Unavailable,
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

#[cfg(test)]
mod tests {
    use super::BackendError;

    #[test]
    fn the_same_class_keeps_the_alias_a_sign_in_needs() {
        let again = BackendError::AuthRequired("personal".to_owned()).same_class();
        assert_eq!(
            again.to_string(),
            "the delegated sign-in of personal must be renewed (mailgate auth login personal)"
        );
        assert!(matches!(
            BackendError::Io(std::io::Error::other("x")).same_class(),
            BackendError::Unavailable
        ));
    }
}
