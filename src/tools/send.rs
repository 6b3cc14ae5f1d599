//! The send family (gate `PLUGIN_ALLOW_SEND=true` plus a fully configured sender): one tool,
//! `send_email`.
//!
//! Invariants:
//! - No mailbox argument: the sender is the alias resolved at startup for `OUTLOOK_SEND_FROM`
//!   (`app.gates.send`), configured, never sayable.
//! - The handler never decides and never talks to a transport directly with its own arguments:
//!   it builds a [`Proposal`], asks [`OutboundPolicy`] for a [`Decision`], and hands the permit
//!   (consumed) to the transport chosen at startup ([`Transport`]). A denial is a tool error with
//!   the rule's code (`POLICY_DENIED`, or `RATE_LIMITED` for the per-process cap), never a
//!   retryable failure, and its text carries counts, not addresses.
//! - `inReplyTo` only threads: the message is looked up in the sending mailbox for its
//!   Message-ID and References; recipients are never taken from it.
//! - `dryRun` runs the same rules without a permit: nothing is sent, nothing counts against the
//!   cap, no idempotency key is used or recorded.
//! - `idempotencyKey` (per process, in memory): the first call that reaches a transport records
//!   its outcome (receipt or failure); a retry with the same key and the same content returns it
//!   without sending again (concurrent retries wait for the first); the same key with different
//!   content is `POLICY_DENIED` / `IDEMPOTENCY_MISMATCH`. A call refused before any send
//!   attempt records nothing.
//! - After a successful send exactly one copy is in the sender's Sent folder: the transport's
//!   own when it files one (`Transport::files_sent_copy`), else ours, through the registry's
//!   `SentFolder` handle (seen); a failed copy is a warning in the receipt, never a failed send.
//!
//! Who may call it: the catalog (the tool) and startup ([`SendState::open`]).

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::args::SendEmailArgs;
use super::{
    ErrorCode, Family, Hints, Mutates, ToolDef, ToolError, ToolOutput, handler, input_schema,
    output_schema,
};
use crate::backends::sending::{Transport, TransportSetupError};
use crate::backends::{Backend, BackendError, SentFolder};
use crate::config::Settings;
use crate::error::StartupError;
use crate::gates::SendSettings;
use crate::outbound::{
    Decision, DenyReason, OutboundPolicy, Proposal, SendPermit, SentMessage, Thread,
};
use crate::tools::CallScope;

/// How long an idempotency receipt is kept.
const RECEIPT_TTL: Duration = Duration::from_secs(24 * 3600);
/// The receipt warning when the Sent copy could not be filed.
const SENT_COPY_FAILED: &str = "sent_copy_failed";

#[derive(Clone, Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SendOut {
    /// sent | dry_run
    pub(crate) status: String,
    /// The sending mailbox's alias.
    pub(crate) mailbox: String,
    /// The RFC 5322 Message-ID of the sent message (status sent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) message_id: Option<String>,
    /// Number of envelope recipients (to + cc + bcc, duplicates counted once when allowed).
    pub(crate) recipients: usize,
    /// Size of the rendered message in bytes (when the policy allows it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) size_bytes: Option<u64>,
    /// How it left: smtp | outbox (a local Maildir; nothing left the machine).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) transport: Option<String>,
    /// The id of the copy in the sender's Sent folder, usable with get_message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) sent_item_id: Option<String>,
    /// dry_run only: "allow" or the refusal code a real send would get now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) verdict: Option<String>,
    /// dry_run only, when refused: the rule, in words (never an address).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
    /// dry_run only: the subject as it would be sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) subject: Option<String>,
    /// Problems that did not stop the send, e.g. sent_copy_failed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) warnings: Vec<String>,
}

pub(super) static TOOLS: &[ToolDef] = &[ToolDef {
    name: "send_email",
    title: "Send an email",
    description: "Send a new message from the configured sending mailbox. Every recipient \
                  must be in an allowed domain; a refusal is final, do not retry. dryRun \
                  shows the envelope and verdict without sending. inReplyTo only threads \
                  (recipients never come from it). idempotencyKey (UUIDv4): a retry returns \
                  the first receipt.",
    family: Family::Send,
    hints: Hints {
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: true,
    },
    mutates: Mutates::OutboundMail,
    graph_permission: "Mail.Send",
    imap_capability: "SMTP submission (and APPEND to Sent)",
    input_schema: input_schema::<SendEmailArgs>,
    output_schema: Some(output_schema::<SendOut>),
    call: handler!(SendEmailArgs, send_email),
}];

/// Everything the send tool needs, built once at startup when the send gate is open.
pub(crate) struct SendState {
    policy: OutboundPolicy,
    transport: Transport,
    receipts: Receipts,
}

impl SendState {
    /// Freezes the policy and opens the sending mailbox's transport
    /// ([`Transport::open`]: SMTP, the local outbox, or a refusal for an unbuilt kind).
    /// `open_state` is startup's checked opener of the state folder, passed in so tools do not
    /// call startup.
    /// `graph` is the sending mailbox's Graph client and `delegated` its alias's token source
    /// when it has `backend.auth` (startup's, as its backend got them).
    pub(crate) fn open(
        settings: &Settings,
        send: &SendSettings,
        graph: Option<&Arc<crate::backends::graph::client::GraphClient>>,
        delegated: Option<&crate::backends::bearer::DelegatedBearer>,
        open_state: impl FnOnce() -> Result<cap_std::fs::Dir, StartupError>,
    ) -> Result<Self, StartupError> {
        let setup = |what: &str| StartupError::SendSetup(what.to_owned());
        let entry = settings
            .config
            .mailboxes
            .iter()
            .find(|m| m.alias == send.from_alias)
            .ok_or_else(|| setup("the sending mailbox is not in the config"))?;
        let transport = Transport::open(
            entry,
            send.smtp_secret.as_ref(),
            delegated,
            graph,
            open_state,
        )
        .map_err(|e| match e {
            TransportSetupError::State(error) => error,
            TransportSetupError::Setting(what) => setup(&what),
        })?;
        Ok(Self {
            policy: OutboundPolicy::new(send),
            transport,
            receipts: Receipts::default(),
        })
    }
}

/// Hands the permit to the transport (one attempt, no retry); a failure names its class only.
/// A delegated sign-in to renew (or a refused token) is the backend's tool error
/// (`AUTH_REQUIRED`, `AUTH_FAILED`).
async fn transmit(transport: &Transport, permit: SendPermit) -> Result<SentMessage, ToolError> {
    transport.send(permit).await.map_err(|failure| {
        tracing::warn!(transport = transport.name(), class = %failure, "send attempt failed");
        let class = match failure.into_class() {
            Ok(backend) => return ToolError::from(backend),
            Err(class) => class,
        };
        ToolError::new(
            ErrorCode::BackendUnavailable,
            format!(
                "the message could not be sent ({class}); it was attempted once and not retried"
            ),
        )
    })
}

async fn send_email(app: CallScope, args: SendEmailArgs) -> Result<ToolOutput, ToolError> {
    let (Some(settings), Some(state)) = (app.gates.send.as_ref(), app.send.as_ref()) else {
        return Err(ToolError::new(
            ErrorCode::Unsupported,
            "the send gate is closed in this process",
        ));
    };
    let alias = settings.from_alias.as_str().to_owned();
    // The sending mailbox is the send gate's, and still the caller's to reach.
    let granted = app.grant(&alias).ok_or_else(|| {
        ToolError::new(
            ErrorCode::PolicyDenied,
            "the sending mailbox is not one this caller may reach",
        )
    })?;
    let backend = app.backends.get(&granted).ok_or_else(|| {
        ToolError::new(
            ErrorCode::BackendUnavailable,
            "the sending mailbox has no backend",
        )
    })?;

    if args.dry_run.unwrap_or(false) {
        let proposal = proposal(backend, &args).await?;
        let subject = proposal.subject.clone();
        let proposed = proposal.to.len() + proposal.cc.len() + proposal.bcc.len();
        let (verdict, reason, recipients, size_bytes) = match state.policy.preview(proposal) {
            Ok(preview) => (
                "allow".to_owned(),
                None,
                preview.recipients,
                Some(preview.size_bytes),
            ),
            Err(reason) => (
                reason.code().to_owned(),
                Some(reason.to_string()),
                proposed,
                None,
            ),
        };
        let summary =
            format!("Dry run: nothing was sent. Verdict for {recipients} recipient(s): {verdict}.");
        return Ok(ToolOutput::trusted(
            summary,
            SendOut {
                status: "dry_run".into(),
                mailbox: alias,
                message_id: None,
                recipients,
                size_bytes,
                transport: Some(state.transport.name().into()),
                sent_item_id: None,
                verdict: Some(verdict),
                reason,
                subject: Some(subject),
                warnings: Vec::new(),
            },
        ));
    }

    let sent_folder = app.backends.sent_folder(&granted);
    let attempt = || send_once(state, backend, sent_folder.as_ref(), &alias, &args);
    let (out, replayed) = match &args.idempotency_key {
        None => match attempt().await {
            Attempt::NotSent(error) => return Err(error),
            Attempt::Sent(outcome) => ((*outcome)?, false),
        },
        Some(key) => {
            state
                .receipts
                .once(&key.to_ascii_lowercase(), fingerprint(&args), attempt)
                .await?
        }
    };
    let mut summary = format!(
        "Sent to {} recipient(s) via {}.",
        out.recipients,
        out.transport.as_deref().unwrap_or("-")
    );
    if replayed {
        summary.push_str(
            " (Receipt of the first call with this idempotencyKey: nothing new was sent.)",
        );
    }
    if !out.warnings.is_empty() {
        summary.push_str(" The copy in the Sent folder could not be filed.");
    }
    Ok(ToolOutput::trusted(summary, out))
}

/// What one real attempt came to: refused before any transport saw it, or attempted.
enum Attempt {
    NotSent(ToolError),
    /// Boxed: a receipt is large next to a refusal.
    Sent(Box<Result<SendOut, ToolError>>),
}

async fn send_once(
    state: &SendState,
    backend: &Backend,
    sent_folder: Option<&SentFolder<'_>>,
    alias: &str,
    args: &SendEmailArgs,
) -> Attempt {
    let proposal = match proposal(backend, args).await {
        Ok(proposal) => proposal,
        Err(error) => return Attempt::NotSent(error),
    };
    // Refused before the policy runs, so an unusable transport takes no slot of the cap.
    if let Err(why) = state.transport.ready() {
        return Attempt::NotSent(ToolError::new(ErrorCode::Unsupported, why));
    }
    let permit = match state.policy.decide(proposal) {
        Decision::Allow(permit) => permit,
        Decision::Deny(reason) => return Attempt::NotSent(denied(reason)),
    };
    let size_bytes = u64::try_from(permit.bytes().len()).unwrap_or(u64::MAX);
    let sent = match transmit(&state.transport, permit).await {
        Ok(sent) => sent,
        Err(error) => return Attempt::Sent(Box::new(Err(error))),
    };
    tracing::info!(
        transport = state.transport.name(),
        recipients = sent.recipients,
        size_bytes,
        "message sent"
    );
    // One Sent copy: the transport's own (Graph's sendMail), else ours.
    let (sent_item_id, warnings) = if state.transport.files_sent_copy() {
        (None, Vec::new())
    } else {
        let filed = match sent_folder {
            Some(folder) => folder.file(&sent.bytes).await,
            None => Err(BackendError::Unsupported("sent folder")),
        };
        match filed {
            Ok(id) => (Some(id), Vec::new()),
            Err(error) => {
                tracing::warn!(
                    class = sent_copy_class(&error),
                    "the Sent copy could not be filed"
                );
                (None, vec![SENT_COPY_FAILED.to_owned()])
            }
        }
    };
    Attempt::Sent(Box::new(Ok(SendOut {
        status: "sent".into(),
        mailbox: alias.to_owned(),
        message_id: Some(sent.message_id),
        recipients: sent.recipients,
        size_bytes: Some(size_bytes),
        transport: Some(state.transport.name().into()),
        sent_item_id,
        verdict: None,
        reason: None,
        subject: None,
        warnings,
    })))
}

fn sent_copy_class(error: &BackendError) -> &'static str {
    match error {
        BackendError::Unsupported(_) => "unsupported",
        BackendError::TooLarge => "too_large",
        _ => "io",
    }
}

/// The proposal for `args`; `inReplyTo` is resolved in the sending mailbox for threading only.
async fn proposal(backend: &Backend, args: &SendEmailArgs) -> Result<Proposal, ToolError> {
    let thread = match &args.in_reply_to {
        None => None,
        Some(id) => {
            let original = backend.get_message(id).await?;
            let in_reply_to = original.internet_message_id.ok_or_else(|| {
                ToolError::new(
                    ErrorCode::InvalidArgument,
                    "the message named by inReplyTo has no Message-ID to thread with",
                )
            })?;
            Some(Thread {
                in_reply_to,
                references: original.references,
            })
        }
    };
    Ok(Proposal {
        to: args.to.clone(),
        cc: args.cc.clone().unwrap_or_default(),
        bcc: args.bcc.clone().unwrap_or_default(),
        subject: args.subject.clone(),
        body: args.body.clone(),
        thread,
        // No input asks for recipients from the original message, and none ever should.
        recipients_from_original: false,
    })
}

/// The tool error for a policy refusal: the cap has its own code (and the text does not repeat
/// it: the rendered error is `CODE: message`) and a retry-after hint (the text's "retry in N s"
/// and `_meta["mailgate/retryAfterSeconds"]`, as for a throttling server), every other rule is
/// `POLICY_DENIED` with the rule's code first in the text.
fn denied(reason: DenyReason) -> ToolError {
    match reason {
        DenyReason::RateLimited { .. } => {
            let mut error = ToolError::new(ErrorCode::RateLimited, reason.to_string());
            error.retry_after_secs = reason.retry_after_secs();
            error
        }
        _ => ToolError::new(
            ErrorCode::PolicyDenied,
            format!("{}: {reason}", reason.code()),
        ),
    }
}

/// SHA-256 over the content fields of a call (not dryRun, not the key itself).
fn fingerprint(args: &SendEmailArgs) -> [u8; 32] {
    let content = (
        &args.to,
        &args.cc,
        &args.bcc,
        &args.subject,
        &args.body,
        &args.in_reply_to,
    );
    // Serialising strings and vectors of strings cannot fail.
    let bytes = serde_json::to_vec(&content).unwrap_or_default();
    Sha256::digest(&bytes).into()
}

/// The per-process idempotency store (see the module doc).
#[derive(Default)]
struct Receipts {
    slots: Mutex<HashMap<String, (Instant, Slot)>>,
}

type Slot = Arc<tokio::sync::Mutex<Option<Recorded>>>;

struct Recorded {
    fingerprint: [u8; 32],
    outcome: Result<SendOut, ToolError>,
}

impl Receipts {
    fn busy() -> ToolError {
        ToolError::new(
            ErrorCode::BackendUnavailable,
            "the idempotency store is unavailable; nothing was sent",
        )
    }

    /// Runs `attempt` at most once per key; returns the outcome and whether it is a replay.
    async fn once<F, Fut>(
        &self,
        key: &str,
        fingerprint: [u8; 32],
        attempt: F,
    ) -> Result<(SendOut, bool), ToolError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Attempt>,
    {
        let slot = {
            let mut slots = self.slots.lock().map_err(|_| Self::busy())?;
            let now = Instant::now();
            slots.retain(|_, (created, slot)| {
                now.saturating_duration_since(*created) < RECEIPT_TTL || Arc::strong_count(slot) > 1
            });
            Arc::clone(
                &slots
                    .entry(key.to_owned())
                    .or_insert_with(|| (now, Slot::default()))
                    .1,
            )
        };
        // Held across the attempt: a concurrent retry with the same key waits here.
        let mut recorded = slot.lock().await;
        if let Some(previous) = recorded.as_ref() {
            if previous.fingerprint != fingerprint {
                return Err(ToolError::new(
                    ErrorCode::PolicyDenied,
                    "IDEMPOTENCY_MISMATCH: this idempotencyKey was already used for a different \
                     message; nothing was sent. Use a new key for a new message.",
                ));
            }
            return previous.outcome.clone().map(|out| (out, true));
        }
        match attempt().await {
            Attempt::Sent(outcome) => {
                *recorded = Some(Recorded {
                    fingerprint,
                    outcome: (*outcome).clone(),
                });
                outcome.map(|out| (out, false))
            }
            Attempt::NotSent(error) => {
                drop(recorded);
                self.forget_unused(key, &slot);
                Err(error)
            }
        }
    }

    /// Drops an empty slot nobody else holds (slots are only handed out under the map lock, so
    /// a count of two — the map's and ours — means no waiter can be using it).
    fn forget_unused(&self, key: &str, slot: &Slot) {
        if let Ok(mut slots) = self.slots.lock()
            && Arc::strong_count(slot) == 2
            && slot.try_lock().is_ok_and(|recorded| recorded.is_none())
        {
            slots.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(n: usize) -> SendOut {
        SendOut {
            status: "sent".into(),
            mailbox: "finance".into(),
            message_id: Some(format!("<{n}@example.com>")),
            recipients: n,
            size_bytes: Some(1),
            transport: Some(crate::backends::outbox::TRANSPORT.into()),
            sent_item_id: None,
            verdict: None,
            reason: None,
            subject: None,
            warnings: Vec::new(),
        }
    }

    #[tokio::test]
    async fn a_key_sends_once_and_replays_its_receipt() {
        let receipts = Receipts::default();
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let attempt = || async {
            let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Attempt::Sent(Box::new(Ok(out(n + 1))))
        };
        let (first, replayed) = receipts.once("k", [1; 32], attempt).await.unwrap();
        assert!(!replayed);
        let (second, replayed) = receipts.once("k", [1; 32], attempt).await.unwrap();
        assert!(replayed);
        assert_eq!(first.message_id, second.message_id);
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
        let mismatch = receipts.once("k", [2; 32], attempt).await.unwrap_err();
        assert_eq!(mismatch.code, ErrorCode::PolicyDenied);
        assert!(mismatch.message.starts_with("IDEMPOTENCY_MISMATCH"));
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_failed_attempt_is_recorded_but_a_refusal_is_not() {
        let receipts = Receipts::default();
        let failed = || async {
            Attempt::Sent(Box::new(Err(ToolError::new(
                ErrorCode::BackendUnavailable,
                "down",
            ))))
        };
        let error = receipts.once("f", [1; 32], failed).await.unwrap_err();
        assert_eq!(error.code, ErrorCode::BackendUnavailable);
        // The retry gets the same failure without a second attempt.
        let retry = || async { Attempt::Sent(Box::new(Ok(out(9)))) };
        assert_eq!(
            receipts.once("f", [1; 32], retry).await.unwrap_err().code,
            ErrorCode::BackendUnavailable
        );
        let refused = || async { Attempt::NotSent(ToolError::new(ErrorCode::RateLimited, "cap")) };
        assert!(receipts.once("r", [1; 32], refused).await.is_err());
        assert!(
            !receipts.slots.lock().unwrap().contains_key("r"),
            "nothing recorded"
        );
        let (later, replayed) = receipts.once("r", [1; 32], retry).await.unwrap();
        assert!(!replayed && later.recipients == 9);
    }

    #[tokio::test]
    async fn concurrent_calls_with_one_key_send_once() {
        let receipts = Arc::new(Receipts::default());
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let receipts = Arc::clone(&receipts);
            let calls = Arc::clone(&calls);
            tasks.push(tokio::spawn(async move {
                receipts
                    .once("c", [7; 32], || async {
                        calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        Attempt::Sent(Box::new(Ok(out(1))))
                    })
                    .await
                    .unwrap()
            }));
        }
        let mut replays = 0;
        for task in tasks {
            if task.await.unwrap().1 {
                replays += 1;
            }
        }
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(replays, 7);
    }

    #[test]
    fn denials_map_to_their_channel_without_addresses() {
        let error = denied(DenyReason::RecipientDomainNotAllowed { refused: 2 });
        assert_eq!(error.code, ErrorCode::PolicyDenied);
        assert!(
            error
                .message
                .starts_with("RECIPIENT_DOMAIN_NOT_ALLOWED: 2 recipient(s)")
        );
        let error = denied(DenyReason::RateLimited {
            max_per_hour: 20,
            retry_after: Duration::from_millis(90_500),
        });
        assert_eq!(error.code, ErrorCode::RateLimited);
        assert_eq!(
            error.retry_after_secs,
            Some(91),
            "rounded up, as the text says"
        );
        assert!(
            error.message.ends_with("retry in 91 s"),
            "{}",
            error.message
        );
        // Rendered as `RATE_LIMITED: <message>`: the code is not repeated inside the message.
        let rendered = crate::tools::render_error(&error).content[0]
            .as_text()
            .map(|t| t.text.clone())
            .unwrap_or_default();
        assert_eq!(rendered.matches("RATE_LIMITED").count(), 1, "{rendered}");
        let meta = crate::tools::render_error(&error).meta.expect("meta");
        assert_eq!(meta.0["mailgate/retryAfterSeconds"], 91);
    }
}
