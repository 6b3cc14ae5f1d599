//! The write family (gate `PLUGIN_ALLOW_WRITES`, else `allowWrites`). Names, schemas and
//! annotations are final; the mailbox mutations arrive with the write issue, until then the
//! handlers validate, apply alias narrowing and answer `UNSUPPORTED`. There is no delete tool.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;

use super::args::{CreateDraftArgs, DownloadArgs, MarkArgs, MoveCopyArgs};
use super::{
    App, Family, Hints, Mutates, ToolDef, ToolError, ToolOutput, handler, input_schema, not_yet,
    output_schema,
};

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ItemResultOut {
    pub(crate) id: String,
    pub(crate) success: bool,
    /// The message's id after a move or copy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) new_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error_code: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[expect(dead_code, reason = "built by the handlers of the write-family issue")]
pub(crate) enum BatchStatus {
    Complete,
    Partial,
    Failed,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BatchChangeOut {
    pub(crate) mailbox: String,
    pub(crate) results: Vec<ItemResultOut>,
    pub(crate) status: BatchStatus,
    pub(crate) successful_items: usize,
    pub(crate) failed_items: usize,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DownloadedFileOut {
    pub(crate) attachment_id: String,
    /// saved | failed
    pub(crate) status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) filename: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) relative_path: Option<String>,
    pub(crate) size_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) sha256: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error_code: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DownloadOut {
    pub(crate) mailbox: String,
    pub(crate) total_files: usize,
    pub(crate) successful_downloads: usize,
    pub(crate) failed_downloads: usize,
    pub(crate) downloaded_bytes: u64,
    pub(crate) byte_limit: u64,
    pub(crate) files: Vec<DownloadedFileOut>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DraftOut {
    pub(crate) mailbox: String,
    pub(crate) draft_id: String,
    pub(crate) attachments_count: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) web_link: Option<String>,
}

const MUTATING: Hints = Hints {
    read_only: false,
    destructive: true,
    idempotent: false,
    open_world: false,
};
const ADDITIVE: Hints = Hints {
    read_only: false,
    destructive: false,
    idempotent: false,
    open_world: false,
};

pub(super) static TOOLS: &[ToolDef] = &[
    ToolDef {
        name: "move_messages",
        title: "Move messages",
        description: "Move messages to another folder of the same mailbox. Per-message results; \
                      partial success is reported. Never deletes.",
        family: Family::Write,
        hints: MUTATING,
        mutates: Mutates::Mailbox,
        graph_permission: "Mail.ReadWrite",
        imap_capability: "MOVE (RFC 6851); refused without it, never emulated by delete",
        input_schema: input_schema::<MoveCopyArgs>,
        output_schema: Some(output_schema::<BatchChangeOut>),
        call: handler!(MoveCopyArgs, move_messages),
    },
    ToolDef {
        name: "copy_messages",
        title: "Copy messages",
        description: "Copy messages to another folder of the same mailbox. Per-message results \
                      with the new ids.",
        family: Family::Write,
        hints: ADDITIVE,
        mutates: Mutates::Mailbox,
        graph_permission: "Mail.ReadWrite",
        imap_capability: "COPY (UIDPLUS for new ids)",
        input_schema: input_schema::<MoveCopyArgs>,
        output_schema: Some(output_schema::<BatchChangeOut>),
        call: handler!(MoveCopyArgs, copy_messages),
    },
    ToolDef {
        name: "mark_messages",
        title: "Mark messages read or unread",
        description: "Set or clear the read flag of messages. Per-message results.",
        family: Family::Write,
        hints: MUTATING,
        mutates: Mutates::Mailbox,
        graph_permission: "Mail.ReadWrite",
        imap_capability: "STORE +/-FLAGS \\Seen",
        input_schema: input_schema::<MarkArgs>,
        output_schema: Some(output_schema::<BatchChangeOut>),
        call: handler!(MarkArgs, mark_messages),
    },
    ToolDef {
        name: "download_attachments",
        title: "Download attachments",
        description: "Save attachments of one message into the operator's download folder on \
                      this machine, within maxBatchSize and maxDownloadBatchBytes. Returns safe \
                      file names, sizes and SHA-256, never absolute paths.",
        family: Family::Write,
        hints: ADDITIVE,
        mutates: Mutates::LocalDisk,
        graph_permission: "Mail.Read",
        imap_capability: "IMAP4rev1 read (FETCH BODY.PEEK)",
        input_schema: input_schema::<DownloadArgs>,
        output_schema: Some(output_schema::<DownloadOut>),
        call: handler!(DownloadArgs, download_attachments),
    },
    ToolDef {
        name: "create_draft",
        title: "Create a draft",
        description: "Create a draft in the mailbox's Drafts folder. Never sends. Attachments \
                      only by reference (an attachment of a message in the same mailbox, or a \
                      handoff id), never a local path. replyTo threads the draft.",
        family: Family::Write,
        hints: ADDITIVE,
        mutates: Mutates::Mailbox,
        graph_permission: "Mail.ReadWrite",
        imap_capability: "APPEND to Drafts with \\Draft",
        input_schema: input_schema::<CreateDraftArgs>,
        output_schema: Some(output_schema::<DraftOut>),
        call: handler!(CreateDraftArgs, create_draft),
    },
];

async fn move_messages(app: Arc<App>, args: MoveCopyArgs) -> Result<ToolOutput, ToolError> {
    app.resolve_for_change(&args.mailbox)?;
    not_yet(app, args).await
}

async fn copy_messages(app: Arc<App>, args: MoveCopyArgs) -> Result<ToolOutput, ToolError> {
    app.resolve_for_change(&args.mailbox)?;
    not_yet(app, args).await
}

async fn mark_messages(app: Arc<App>, args: MarkArgs) -> Result<ToolOutput, ToolError> {
    app.resolve_for_change(&args.mailbox)?;
    not_yet(app, args).await
}

async fn download_attachments(app: Arc<App>, args: DownloadArgs) -> Result<ToolOutput, ToolError> {
    app.resolve_for_change(&args.mailbox)?;
    not_yet(app, args).await
}

async fn create_draft(app: Arc<App>, args: CreateDraftArgs) -> Result<ToolOutput, ToolError> {
    app.resolve_for_change(&args.mailbox)?;
    not_yet(app, args).await
}
