//! The send family (gate `PLUGIN_ALLOW_SEND=true` plus a fully configured sender). The tool has
//! no mailbox argument: the sender is `OUTLOOK_SEND_FROM`, configured, never sayable. Name, schema
//! and annotations are final; delivery through the outbound policy arrives with the send issue.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;

use super::args::SendEmailArgs;
use super::{
    App, Family, Hints, Mutates, ToolDef, ToolError, ToolOutput, handler, input_schema, not_yet,
    output_schema,
};

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SendOut {
    /// sent | dry_run
    pub(crate) status: String,
    /// The sending mailbox's alias.
    pub(crate) mailbox: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) message_id: Option<String>,
    /// Number of to + cc + bcc recipients.
    pub(crate) recipients: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) size_bytes: Option<u64>,
}

pub(super) static TOOLS: &[ToolDef] = &[ToolDef {
    name: "send_email",
    title: "Send an email",
    description: "Send a new message from the configured sending mailbox. Every recipient must \
                  be in an allowed domain; a refusal is final, do not retry it. dryRun shows \
                  the envelope and the policy verdict without sending.",
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

async fn send_email(app: Arc<App>, args: SendEmailArgs) -> Result<ToolOutput, ToolError> {
    not_yet(app, args).await
}
