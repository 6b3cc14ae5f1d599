//! The names of the gate and send variables, and [`SendRefusal`]: why the send gate stayed
//! shut although `PLUGIN_ALLOW_SEND` is on.
//!
//! Only names and the refusal live here; `gates` reads the values and decides, after the config
//! is loaded, because a gate depends on the config and never the reverse (it re-exports these
//! so its callers say `gates::…`). Invariant: no gate opens from a file key, only from its
//! variable (`allowWrites` is the fallback for an unset `PLUGIN_ALLOW_WRITES`), and a refusal
//! names variables and the rule, never an address. The unknown-variable check (`vars`) lists
//! these names, so a misspelled gate variable aborts startup.
//!
//! Who calls it: `gates`, the send-gate fuzz oracle (`fuzzing`), `vars`, and [`ConfigError`]'s
//! messages.
//!
//! [`ConfigError`]: super::ConfigError

// The gate variables (read by `gates`, which re-exports them).
/// `PLUGIN_ALLOW_WRITES`: tri-state, overrides the file's `allowWrites` when set.
pub(crate) const ALLOW_WRITES_VAR: &str = "PLUGIN_ALLOW_WRITES";
/// `PLUGIN_ALLOW_LOCAL_HANDOFFS`: environment only.
pub(crate) const ALLOW_HANDOFFS_VAR: &str = "PLUGIN_ALLOW_LOCAL_HANDOFFS";
/// `PLUGIN_ALLOW_SEND`: environment only, plus a fully configured sender.
pub(crate) const ALLOW_SEND_VAR: &str = "PLUGIN_ALLOW_SEND";
/// The mailbox address new messages are sent from.
pub(crate) const SEND_FROM_VAR: &str = "OUTLOOK_SEND_FROM";
/// Comma list of addresses allowed to send.
pub(crate) const ALLOWED_SENDERS_VAR: &str = "OUTLOOK_ALLOWED_SENDERS";
/// Comma list of recipient domains (leading `@` optional).
pub(crate) const ALLOWED_RECIPIENT_DOMAINS_VAR: &str = "OUTLOOK_ALLOWED_RECIPIENT_DOMAINS";
/// Per-process cap on messages sent per hour (a sliding window on a monotonic clock).
pub(crate) const SEND_MAX_PER_HOUR_VAR: &str = "MAILGATE_SEND_MAX_PER_HOUR";

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
