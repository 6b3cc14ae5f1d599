//! The local-handoff family (gate `PLUGIN_ALLOW_LOCAL_HANDOFFS`). Names, schemas and annotations
//! are final; the bundle store arrives with the handoff issue, until then the handlers validate,
//! apply alias narrowing and answer `UNSUPPORTED`.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;

use super::args::{CreateHandoffArgs, GetHandoffArgs};
use super::{
    App, Family, Hints, Mutates, READ_HINTS, ToolDef, ToolError, ToolOutput, handler, input_schema,
    not_yet, output_schema,
};

/// What both handoff tools return: never bytes, paths or the request fingerprint.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HandoffOut {
    /// Opaque id: `oh_` + 43 url-safe characters.
    pub(crate) handoff_id: String,
    /// Sanitised attachment name (untrusted).
    pub(crate) filename: String,
    pub(crate) content_type: String,
    pub(crate) size: u64,
    pub(crate) sha256: String,
    pub(crate) created_at: String,
    /// Always `ready` for a committed bundle.
    pub(crate) status: String,
    /// True when an earlier call with the same idempotency key created it.
    pub(crate) replayed: bool,
}

pub(super) static TOOLS: &[ToolDef] = &[
    ToolDef {
        name: "create_attachment_handoff",
        title: "Hand an attachment to a local program",
        description: "Store one attachment as a private local bundle for a program on this \
                      machine, without its bytes passing through the conversation. Returns an \
                      opaque handoff id, size and SHA-256. The same idempotencyKey and request \
                      return the same handoff.",
        family: Family::Handoff,
        hints: Hints {
            read_only: false,
            destructive: false,
            idempotent: true,
            open_world: false,
        },
        mutates: Mutates::LocalDisk,
        graph_permission: "Mail.Read",
        imap_capability: "IMAP4rev1 read (FETCH BODY.PEEK)",
        input_schema: input_schema::<CreateHandoffArgs>,
        output_schema: Some(output_schema::<HandoffOut>),
        call: handler!(CreateHandoffArgs, create_attachment_handoff),
    },
    ToolDef {
        name: "get_attachment_handoff",
        title: "Check a local handoff",
        description: "Revalidate a handoff bundle (manifest, modes, size, SHA-256) and return its \
                      metadata. Never returns bytes or paths and never creates anything.",
        family: Family::Handoff,
        hints: READ_HINTS,
        mutates: Mutates::Nothing,
        graph_permission: "none",
        imap_capability: "none",
        input_schema: input_schema::<GetHandoffArgs>,
        output_schema: Some(output_schema::<HandoffOut>),
        call: handler!(GetHandoffArgs, get_attachment_handoff),
    },
];

async fn create_attachment_handoff(
    app: Arc<App>,
    args: CreateHandoffArgs,
) -> Result<ToolOutput, ToolError> {
    app.resolve_for_change(&args.mailbox)?;
    not_yet(app, args).await
}

async fn get_attachment_handoff(
    app: Arc<App>,
    args: GetHandoffArgs,
) -> Result<ToolOutput, ToolError> {
    not_yet(app, args).await
}
