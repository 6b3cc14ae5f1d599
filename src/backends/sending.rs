//! Mail sending: the send transport of the sending mailbox (not the MCP transports of
//! `crate::transport`), chosen once at startup from its config: SMTP when the mailbox has an
//! `smtp` block, Graph's `sendMail` for a Graph mailbox, the local outbox for a Maildir mailbox
//! without one, and a refusal for an IMAP mailbox without SMTP. Each transport takes the outbound
//! policy's [`SendPermit`] by value (the only value that can be sent) and says whether it files
//! the Sent copy itself ([`Transport::files_sent_copy`]: Graph's `sendMail` does, SMTP does not),
//! so the send tool files one copy, never two and never none.
//!
//! Who may call it: `tools::send` (opened once by `SendState::open`, used by `send_email`).

use std::sync::Arc;

use super::BackendError;
use super::bearer::DelegatedBearer;
use super::graph::GraphSender;
use super::graph::client::GraphClient;
use super::outbox::{self, Outbox};
use super::smtp::SmtpSender;
use crate::config::env::Secret;
use crate::config::{BackendSpec, MailboxEntry};
use crate::outbound::{SendPermit, SentMessage};

/// Why the transport could not be set up at startup.
#[derive(Debug)]
pub(crate) enum TransportSetupError<E> {
    /// The state folder (the outbox's home) was refused; the opener's own error, unchanged.
    State(E),
    /// A setting of the mailbox's block (the text names it, never a secret).
    Setting(String),
}

/// Why one send attempt failed, as a class that names no address.
#[derive(Debug, thiserror::Error)]
#[error("{text}")]
pub(crate) struct SendFailure {
    text: String,
    /// A failure the tool reports by its backend class rather than as a failed send: the
    /// delegated alias's sign-in must be renewed (`AuthRequired`), or its token was refused.
    class: Option<BackendError>,
}

impl SendFailure {
    fn new(text: String) -> Self {
        Self { text, class: None }
    }

    /// See the field: `Some` when the tool answers with the backend's class.
    pub(crate) fn into_class(self) -> Result<BackendError, Self> {
        match self.class {
            Some(class) => Ok(class),
            None => Err(self),
        }
    }
}

/// Graph's failure of a delegated sign-in keeps its class; the rest are send failures.
fn graph_failure(error: &super::graph::GraphSendError) -> SendFailure {
    let class = match &error.0 {
        BackendError::AuthRequired(alias) => Some(BackendError::AuthRequired(alias.clone())),
        _ => None,
    };
    SendFailure {
        text: error.to_string(),
        class,
    }
}

/// The transport of the sending mailbox.
pub(crate) enum Transport {
    Smtp(SmtpSender),
    Graph(GraphSender),
    Outbox(Outbox),
    NotBuilt { why: &'static str },
}

impl Transport {
    /// Opens the transport for `entry`. `smtp_secret` is the value of its `passwordEnv` /
    /// `oauth2TokenEnv`; `delegated` the alias's token source when it has `backend.auth` (its
    /// SMTP then authenticates with XOAUTH2 and a fresh token); `graph` is the mailbox's Graph
    /// client (the process's app-only one, or its own delegated one); `open_state` opens the
    /// checked state folder (the outbox lives there) and is called only when the outbox is the
    /// transport.
    pub(crate) fn open<E>(
        entry: &MailboxEntry,
        smtp_secret: Option<&Secret>,
        delegated: Option<&DelegatedBearer>,
        graph: Option<&Arc<GraphClient>>,
        open_state: impl FnOnce() -> Result<cap_std::fs::Dir, E>,
    ) -> Result<Self, TransportSetupError<E>> {
        let setup = |what: String| TransportSetupError::Setting(what);
        let smtp = match &entry.backend {
            BackendSpec::Maildir { smtp, .. } | BackendSpec::Imap { smtp, .. } => smtp.as_ref(),
            BackendSpec::Graph { .. } => None,
        };
        Ok(match (smtp, &entry.backend) {
            (Some(spec), _) => {
                let ca = super::ca_file(spec, "smtp").map_err(setup)?;
                let sender = match delegated {
                    Some(tokens) => {
                        SmtpSender::delegated(spec, &entry.address, tokens.clone(), ca.as_deref())
                    }
                    None => SmtpSender::new(spec, &entry.address, smtp_secret, ca.as_deref()),
                }
                .map_err(|e| setup(e.to_string()))?;
                Transport::Smtp(sender)
            }
            (None, BackendSpec::Maildir { .. }) => {
                let state = open_state().map_err(TransportSetupError::State)?;
                let outbox = Outbox::open(&state).map_err(|e| {
                    setup(format!(
                        "the outbox folder (<state folder>/outbox) is refused: {e}"
                    ))
                })?;
                Transport::Outbox(outbox)
            }
            (None, BackendSpec::Imap { .. }) => Transport::NotBuilt {
                why: "the sending IMAP mailbox has no smtp block",
            },
            (None, BackendSpec::Graph { .. }) => match graph {
                Some(client) => Transport::Graph(GraphSender::new(Arc::clone(client))),
                None => Transport::NotBuilt {
                    why: "the Microsoft Graph client is not configured",
                },
            },
        })
    }

    /// The transport's name in receipts and logs.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Transport::Smtp(_) => "smtp",
            Transport::Graph(_) => "graph",
            Transport::Outbox(_) => outbox::TRANSPORT,
            Transport::NotBuilt { .. } => "unavailable",
        }
    }

    /// `Err(why)` when this transport cannot send at all, so the caller refuses before the
    /// policy runs (an unusable transport takes no slot of the send cap).
    pub(crate) fn ready(&self) -> Result<(), &'static str> {
        match self {
            Transport::NotBuilt { why } => Err(why),
            _ => Ok(()),
        }
    }

    /// Whether a successful send already left a copy in the sender's Sent folder. SMTP and the
    /// outbox do not; Graph's `sendMail` does (`saveToSentItems`).
    pub(crate) fn files_sent_copy(&self) -> bool {
        match self {
            Transport::Graph(_) => true,
            Transport::Smtp(_) | Transport::Outbox(_) | Transport::NotBuilt { .. } => false,
        }
    }

    /// Hands the permit to the transport: one attempt, no retry.
    pub(crate) async fn send(&self, permit: SendPermit) -> Result<SentMessage, SendFailure> {
        match self {
            Transport::Smtp(smtp) => smtp.send(permit).await.map_err(|e| SendFailure {
                text: e.to_string(),
                class: e.backend_class(),
            }),
            Transport::Graph(graph) => graph.send(permit).await.map_err(|e| graph_failure(&e)),
            Transport::Outbox(outbox) => outbox
                .deliver(permit)
                .await
                .map_err(|e| SendFailure::new(format!("local delivery failed: {}", e.kind()))),
            Transport::NotBuilt { why } => {
                drop(permit);
                Err(SendFailure::new((*why).to_owned()))
            }
        }
    }
}
