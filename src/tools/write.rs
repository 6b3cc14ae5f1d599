//! The write family (gate `PLUGIN_ALLOW_WRITES`, else `allowWrites`): move, copy, mark,
//! download and draft. There is no delete tool, and no handler here can delete anything.
//!
//! Invariants: every handler first applies per-alias narrowing (`CallScope::resolve_for_change`; the
//! mailbox writes go through the `Writer` handle `CallScope::resolve_writer` returns, the only way to
//! reach them), then its runtime caps (`maxBatchSize`, `maxDownloadBatchBytes`), and only then touches the mailbox
//! or the disk, so a refusal changes nothing.
//! - move/copy resolve the destination among *existing* folders; an unknown destination is a
//!   tool error `NOT_FOUND` for the whole call (nothing moved). Per-message failures are
//!   reported item by item (`errorCode` `NOT_FOUND`, …) with status complete|partial|failed.
//! - download_attachments writes only through the startup-opened download root under
//!   `SafeFileName`s, with every budget (the call's and the folder's total) checked before the
//!   first byte (downloads.rs).
//! - create_draft builds the message with `mime::compose` (header values with CR/LF/NUL are a
//!   tool error `INVALID_ARGUMENT`); attachments only by reference to a message of the same
//!   mailbox, all fetched before anything is written (one failure: no draft). Drafts never
//!   leave the mailbox, so the sender and recipient rules do not apply to them.
//!
//! Who calls it: the catalog, through `ToolDef::call`.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;

use super::args::{CreateDraftArgs, DownloadArgs, MarkArgs, MoveCopyArgs};
use super::{
    App, ErrorCode, Family, Hints, Mutates, ToolDef, ToolError, ToolOutput, handler, input_schema,
    output_schema,
};
use crate::address::EmailAddress;
use crate::alias::Alias;
use crate::backends::BackendError;
use crate::backends::model::FolderSelector;
use crate::downloads::{self, PlanError, SafeFileName};
use crate::handoff::HandoffId;
use crate::mime::compose::{self, ComposeError, HeaderField, Outgoing, OutgoingAttachment};
use crate::tools::CallScope;

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
    /// Move and copy: whether this mailbox's ids are immutable (a moved message keeps its id,
    /// so an id held from an earlier answer still names it; `newId` equals `id` after a move).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) id_is_immutable: Option<bool>,
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
        description: "Move messages to another folder of the same mailbox (at most \
                      maxBatchSize). Per-message results; partial success is reported. Never \
                      deletes.",
        family: Family::Write,
        hints: MUTATING,
        mutates: Mutates::Mailbox,
        graph_permission: "Mail.ReadWrite",
        imap_capability: "MOVE (RFC 6851) and UIDPLUS (RFC 4315); refused without them, never emulated by delete",
        input_schema: input_schema::<MoveCopyArgs>,
        output_schema: Some(output_schema::<BatchChangeOut>),
        call: handler!(MoveCopyArgs, move_messages),
    },
    ToolDef {
        name: "copy_messages",
        title: "Copy messages",
        description: "Copy messages to another folder of the same mailbox (at most \
                      maxBatchSize). Per-message results with the new ids.",
        family: Family::Write,
        hints: ADDITIVE,
        mutates: Mutates::Mailbox,
        graph_permission: "Mail.ReadWrite",
        imap_capability: "COPY (UIDPLUS for the new ids; refused without it)",
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
        description: "Save one message's attachments into the operator's download folder on \
                      this machine (maxBatchSize, maxDownloadBatchBytes). Returns safe file \
                      names, sizes and SHA-256, never paths.",
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
        description: "Create a draft in Drafts; never sends. Attachments only by reference (a \
                      message's attachment in this mailbox, or a handoff id), never a path. \
                      replyTo threads it.",
        family: Family::Write,
        hints: ADDITIVE,
        mutates: Mutates::Mailbox,
        graph_permission: "Mail.ReadWrite",
        imap_capability: "APPEND to Drafts with \\Seen \\Draft (Drafts created when missing)",
        input_schema: input_schema::<CreateDraftArgs>,
        output_schema: Some(output_schema::<DraftOut>),
        call: handler!(CreateDraftArgs, create_draft),
    },
];

async fn move_messages(app: CallScope, args: MoveCopyArgs) -> Result<ToolOutput, ToolError> {
    let (resolved, writer) = app.resolve_writer(&args.mailbox)?;
    check_batch_size(&app, args.message_ids.len())?;
    let destination = FolderSelector::parse(Some(&args.destination_folder_id));
    let results = writer
        .move_messages(&args.message_ids, &destination)
        .await
        .map_err(|e| destination_error(&e))?;
    let results = results.into_iter().map(|r| r.map(Some)).collect();
    Ok(batch_output(
        "Move",
        &resolved.alias,
        &args.message_ids,
        results,
        Some(writer.ids_survive_move()),
    ))
}

async fn copy_messages(app: CallScope, args: MoveCopyArgs) -> Result<ToolOutput, ToolError> {
    let (resolved, writer) = app.resolve_writer(&args.mailbox)?;
    check_batch_size(&app, args.message_ids.len())?;
    let destination = FolderSelector::parse(Some(&args.destination_folder_id));
    let results = writer
        .copy_messages(&args.message_ids, &destination)
        .await
        .map_err(|e| destination_error(&e))?;
    let results = results.into_iter().map(|r| r.map(Some)).collect();
    Ok(batch_output(
        "Copy",
        &resolved.alias,
        &args.message_ids,
        results,
        Some(writer.ids_survive_move()),
    ))
}

async fn mark_messages(app: CallScope, args: MarkArgs) -> Result<ToolOutput, ToolError> {
    let (resolved, writer) = app.resolve_writer(&args.mailbox)?;
    check_batch_size(&app, args.message_ids.len())?;
    let results = writer.mark_messages(&args.message_ids, args.read).await?;
    let results = results.into_iter().map(|r| r.map(|()| None)).collect();
    let verb = if args.read {
        "Mark as read"
    } else {
        "Mark as unread"
    };
    Ok(batch_output(
        verb,
        &resolved.alias,
        &args.message_ids,
        results,
        None,
    ))
}

/// `maxBatchSize` is a runtime cap below the schema's 100: more ids are refused before
/// anything changes.
fn check_batch_size(app: &App, count: usize) -> Result<(), ToolError> {
    if count > app.config.limits.max_batch_size {
        return Err(ToolError::new(
            ErrorCode::LimitExceeded,
            format!(
                "{count} ids exceed maxBatchSize ({}); nothing was changed",
                app.config.limits.max_batch_size
            ),
        ));
    }
    Ok(())
}

/// Move and copy resolve the destination among existing folders first; an unknown one fails the
/// whole call (a tool error `NOT_FOUND`) before any message is touched.
fn destination_error(err: &BackendError) -> ToolError {
    match err {
        BackendError::NotFound | BackendError::BadId => ToolError::new(
            ErrorCode::NotFound,
            "the destination folder does not exist in this mailbox (move and copy never create \
             folders); nothing was changed",
        ),
        other => ToolError::from_backend(other),
    }
}

/// The per-message projection shared by move, copy and mark.
fn batch_output(
    verb: &str,
    alias: &Alias,
    ids: &[String],
    results: Vec<Result<Option<String>, BackendError>>,
    id_is_immutable: Option<bool>,
) -> ToolOutput {
    let results: Vec<ItemResultOut> = ids
        .iter()
        .zip(results)
        .map(|(id, r)| match r {
            Ok(new_id) => ItemResultOut {
                id: id.clone(),
                success: true,
                new_id,
                error_code: None,
            },
            Err(e) => ItemResultOut {
                id: id.clone(),
                success: false,
                new_id: None,
                error_code: Some(ToolError::from_backend(&e).code.as_str().to_owned()),
            },
        })
        .collect();
    let ok = results.iter().filter(|r| r.success).count();
    let failed = results.len() - ok;
    let status = match (ok, failed) {
        (_, 0) => BatchStatus::Complete,
        (0, _) => BatchStatus::Failed,
        _ => BatchStatus::Partial,
    };
    let summary = format!("{verb}: {ok} succeeded, {failed} failed.");
    // Only ids and codes: nothing sender-controlled.
    ToolOutput::trusted(
        summary,
        BatchChangeOut {
            mailbox: alias.to_string(),
            results,
            status,
            successful_items: ok,
            failed_items: failed,
            id_is_immutable,
        },
    )
}

async fn download_attachments(app: CallScope, args: DownloadArgs) -> Result<ToolOutput, ToolError> {
    let resolved = app.resolve_for_change(&args.mailbox)?;
    let Some(root) = app.downloads.clone() else {
        return Err(ToolError::new(
            ErrorCode::BackendUnavailable,
            "the download folder is not available in this process",
        ));
    };
    let limits = &app.config.limits;
    let budget = limits.max_download_batch_bytes;
    let folder_limit = limits.max_download_folder_bytes;
    let listing = resolved.backend.list_attachments(&args.message_id).await?;
    // Held until the last save: concurrent calls (and other processes) measure and fill the
    // folder one at a time, so together they cannot pass the folder bound either.
    let lease = {
        let root = Arc::clone(&root);
        tokio::task::spawn_blocking(move || root.lease()).await
    };
    let Ok(Ok(lease)) = lease else {
        return Err(ToolError::new(
            ErrorCode::BackendUnavailable,
            "the download folder could not be measured; nothing was written",
        ));
    };
    let room = folder_limit.saturating_sub(lease.used());
    let selected = downloads::plan(
        &listing,
        args.attachment_ids.as_deref(),
        limits.max_batch_size,
        budget,
        room,
    )
    .map_err(|e| match e {
        PlanError::TooMany => ToolError::new(
            ErrorCode::LimitExceeded,
            format!(
                "more attachments than maxBatchSize ({}); nothing was written (download them \
                 in batches by attachmentIds; list_attachments pages the ids)",
                limits.max_batch_size
            ),
        ),
        PlanError::OverBudget => ToolError::new(
            ErrorCode::LimitExceeded,
            format!(
                "the attachments' declared sizes exceed maxDownloadBatchBytes ({budget}); \
                 nothing was written"
            ),
        ),
        PlanError::FolderFull => ToolError::new(
            ErrorCode::LimitExceeded,
            format!(
                "the download folder holds {} bytes and the attachments' declared sizes would \
                 take it past maxDownloadFolderBytes ({folder_limit}); nothing was written",
                lease.used()
            ),
        ),
        PlanError::UnknownId => ToolError::new(
            ErrorCode::NotFound,
            "an attachment id is not in this message; nothing was written",
        ),
        PlanError::Duplicate => ToolError::new(
            ErrorCode::InvalidArgument,
            "attachmentIds must be unique; nothing was written",
        ),
    })?;

    // The real decoded sizes are held to both bounds as well, not only the declared ones.
    let allowance = budget.min(room);
    let mut used = 0u64;
    let mut files = Vec::with_capacity(selected.len());
    for meta in &selected {
        let remaining = allowance.saturating_sub(used);
        let failed = |code: &str| DownloadedFileOut {
            attachment_id: meta.id.clone(),
            status: "failed".to_owned(),
            filename: None,
            relative_path: None,
            size_bytes: meta.size,
            sha256: None,
            error_code: Some(code.to_owned()),
        };
        // The backend checks the declared and the real decoded size against what is left of the
        // budget before returning any bytes; the length is checked again here, before writing.
        let bytes = match resolved
            .backend
            .attachment(&args.message_id, &meta.id, remaining)
            .await
        {
            Ok((_, bytes)) if bytes.len() as u64 <= remaining => bytes,
            Ok(_) | Err(BackendError::TooLarge) => {
                files.push(failed("BYTE_BUDGET_EXCEEDED"));
                continue;
            }
            Err(_) => {
                files.push(failed("DOWNLOAD_FAILED"));
                continue;
            }
        };
        let name = SafeFileName::from_untrusted(meta.name.as_deref().unwrap_or(""));
        let root = Arc::clone(&root);
        match tokio::task::spawn_blocking(move || root.save(&name, &bytes)).await {
            Ok(Ok(saved)) => {
                used += saved.size;
                files.push(DownloadedFileOut {
                    attachment_id: meta.id.clone(),
                    status: "saved".to_owned(),
                    filename: Some(saved.name.as_str().to_owned()),
                    // Files are saved directly in the root: the relative path is the name.
                    relative_path: Some(saved.name.as_str().to_owned()),
                    size_bytes: saved.size,
                    sha256: Some(saved.sha256),
                    error_code: None,
                });
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "an attachment download could not be saved");
                files.push(failed("FILE_WRITE_FAILED"));
            }
            Err(_) => files.push(failed("FILE_WRITE_FAILED")),
        }
    }
    drop(lease);
    let saved = files.iter().filter(|f| f.status == "saved").count();
    let summary = format!(
        "Saved {saved} of {} attachment(s) ({used} bytes) into the download folder.",
        files.len()
    );
    // File names derive from sender-controlled attachment names.
    Ok(ToolOutput::untrusted(
        summary,
        DownloadOut {
            mailbox: resolved.alias.to_string(),
            total_files: files.len(),
            successful_downloads: saved,
            failed_downloads: files.len() - saved,
            downloaded_bytes: used,
            byte_limit: budget,
            files,
        },
    ))
}

/// Where one draft attachment comes from (never a local path).
enum DraftSource<'a> {
    Message(&'a str, &'a str),
    Handoff(HandoffId),
}

/// At most this many Message-IDs are carried in a reply draft's `References`.
const MAX_REFERENCES: usize = 20;

async fn create_draft(app: CallScope, args: CreateDraftArgs) -> Result<ToolOutput, ToolError> {
    let (resolved, writer) = app.resolve_writer(&args.mailbox)?;
    // The composer's refusal names the field; every value it refuses is the caller's own
    // (the subject and the addresses), since the values taken from mail (attachment names,
    // content types, thread ids) are sanitised or dropped below before they reach it.
    let injection = |error: ComposeError| {
        ToolError::new(
            ErrorCode::InvalidArgument,
            format!("{error}; nothing was written"),
        )
    };
    compose::check_header_value(HeaderField::Subject, &args.subject).map_err(injection)?;
    let parse_all = |list: &[String]| -> Result<Vec<EmailAddress>, ToolError> {
        list.iter()
            .map(|a| {
                compose::check_header_value(HeaderField::Recipient, a).map_err(injection)?;
                EmailAddress::parse(a).map_err(|_| {
                    ToolError::new(
                        ErrorCode::InvalidArgument,
                        "a recipient is not a valid address",
                    )
                })
            })
            .collect()
    };
    let to = parse_all(&args.to)?;
    let cc = parse_all(args.cc.as_deref().unwrap_or_default())?;
    let bcc = parse_all(args.bcc.as_deref().unwrap_or_default())?;

    // Every reference is checked for its form before any is fetched.
    let refs = args.attachments.as_deref().unwrap_or_default();
    let mut wanted = Vec::with_capacity(refs.len());
    for r in refs {
        match (&r.message_id, &r.attachment_id, &r.handoff_id) {
            (Some(m), Some(a), None) => wanted.push(DraftSource::Message(m, a)),
            (None, None, Some(h)) => {
                let id = HandoffId::parse(h).map_err(|_| {
                    ToolError::new(ErrorCode::HandoffInvalid, "malformed handoff id")
                })?;
                wanted.push(DraftSource::Handoff(id));
            }
            _ => {
                return Err(ToolError::new(
                    ErrorCode::InvalidArgument,
                    "each attachment is either {messageId, attachmentId} or {handoffId}, not both \
                     and not neither",
                ));
            }
        }
    }
    // All or nothing: one failed fetch refuses the draft.
    let mut attachments = Vec::with_capacity(wanted.len());
    for source in wanted {
        attachments.push(match source {
            DraftSource::Message(message_id, attachment_id) => {
                let (meta, bytes) = super::read::fetch_attachment(
                    &app,
                    resolved.backend,
                    message_id,
                    attachment_id,
                )
                .await?;
                OutgoingAttachment {
                    filename: SafeFileName::from_untrusted(meta.name.as_deref().unwrap_or(""))
                        .as_str()
                        .to_owned(),
                    content_type: safe_content_type(&meta.content_type),
                    bytes,
                }
            }
            DraftSource::Handoff(id) => {
                let store = super::handoff::store(&app)?;
                let (manifest, bytes) =
                    super::handoff::blocking(&store, move |s| s.read_payload(&id)).await?;
                // A handoff carries one mailbox's attachment; it may not travel into another
                // mailbox's draft.
                if manifest.source_alias != resolved.alias {
                    return Err(ToolError::new(
                        ErrorCode::PolicyDenied,
                        "a handoff can only be attached to a draft in the mailbox it came from",
                    ));
                }
                OutgoingAttachment {
                    filename: manifest.filename.as_str().to_owned(),
                    content_type: safe_content_type(&manifest.content_type),
                    bytes,
                }
            }
        });
    }

    let mut subject = args.subject.clone();
    let (mut in_reply_to, mut references) = (None, Vec::new());
    if let Some(reply_to) = &args.reply_to {
        let parent = resolved
            .backend
            .get_message(reply_to)
            .await
            .map_err(|e| match e {
                BackendError::NotFound | BackendError::BadId => ToolError::new(
                    ErrorCode::NotFound,
                    "the replyTo message is not in this mailbox",
                ),
                other => ToolError::from_backend(&other),
            })?;
        // Recipients still come only from the caller: the parent only threads the draft.
        if let Some(id) = parent.internet_message_id.as_deref().and_then(message_id) {
            let mut chain: Vec<String> = parent
                .references
                .iter()
                .filter_map(|r| message_id(r))
                .collect();
            chain.retain(|r| r != &id);
            chain.push(id.clone());
            let skip = chain.len().saturating_sub(MAX_REFERENCES);
            // lettre keeps one References header per message, so the chain goes in as one value.
            references.push(chain[skip..].join(" "));
            in_reply_to = Some(id);
        }
        if !subject.trim_start().to_lowercase().starts_with("re:") {
            subject = format!("Re: {subject}");
        }
    }

    let outgoing = Outgoing {
        from: resolved.entry.address.clone(),
        to,
        cc,
        bcc,
        subject,
        body: args.body.clone(),
        in_reply_to,
        references,
        attachments,
    };
    let count = outgoing.attachments.len();
    let raw = compose::render(&outgoing, true).map_err(|e| match e {
        e @ ComposeError::HeaderInjection { .. } => injection(e),
        _ => ToolError::new(
            ErrorCode::InvalidArgument,
            "the draft could not be built from these values; nothing was written",
        ),
    })?;
    let draft_id = writer.create_draft(&raw).await?;
    let summary = format!(
        "Draft created in the Drafts folder of mailbox {} with {count} attachment(s). It was \
         not sent.",
        resolved.alias
    );
    Ok(ToolOutput::trusted(
        summary,
        DraftOut {
            mailbox: resolved.alias.to_string(),
            draft_id,
            attachments_count: count,
            web_link: None,
        },
    ))
}

/// A Message-ID as `<id>`, or `None` when the (sender-controlled) value is not one: empty, with
/// whitespace, control characters or extra angle brackets, or longer than 250 characters.
fn message_id(raw: &str) -> Option<String> {
    let trimmed = raw.trim();
    let inner = trimmed.strip_prefix('<').unwrap_or(trimmed);
    let inner = inner.strip_suffix('>').unwrap_or(inner);
    let ok = !inner.is_empty()
        && inner.chars().count() <= 250
        && !inner
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '<' || c == '>');
    ok.then(|| format!("<{inner}>"))
}

/// The attachment's content type when lettre accepts it, else `application/octet-stream`.
fn safe_content_type(content_type: &str) -> String {
    if compose::check_header_value(HeaderField::AttachmentContentType, content_type).is_ok()
        && lettre::message::header::ContentType::parse(content_type).is_ok()
    {
        content_type.to_owned()
    } else {
        "application/octet-stream".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_ids_are_normalised_or_dropped() {
        assert_eq!(
            message_id("orchard-1@demo.example.com").as_deref(),
            Some("<orchard-1@demo.example.com>")
        );
        assert_eq!(
            message_id(" <a@example.com> ").as_deref(),
            Some("<a@example.com>")
        );
        for bad in [
            "",
            "<>",
            "a b@example.com",
            "a\r\nBcc: x@evil.example.net",
            "<<a>",
        ] {
            assert_eq!(message_id(bad), None, "{bad:?}");
        }
        assert_eq!(message_id(&"x".repeat(251)), None);
    }

    #[test]
    fn content_types_fall_back_to_octet_stream() {
        assert_eq!(safe_content_type("application/pdf"), "application/pdf");
        assert_eq!(
            safe_content_type("text/plain\r\nX-Evil: 1"),
            "application/octet-stream"
        );
        assert_eq!(safe_content_type("not a type"), "application/octet-stream");
    }
}
