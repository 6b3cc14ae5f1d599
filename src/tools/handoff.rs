//! The local-handoff family (gate `PLUGIN_ALLOW_LOCAL_HANDOFFS`): the tool face of
//! [`crate::handoff`]. Handlers resolve the alias (narrowed aliases are refused), fetch the
//! attachment under `maxHandoffAttachmentBytes` and hand the bytes to the store on the blocking
//! pool; results carry the id, size, digest and status only (never bytes, paths or the request
//! fingerprint), and store failures map once, here, to the reference's codes.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;

use super::args::{CreateHandoffArgs, GetHandoffArgs};
use super::{
    App, ErrorCode, Family, Hints, Mutates, READ_HINTS, ToolDef, ToolError, ToolOutput, handler,
    input_schema, output_schema,
};
use crate::backends::BackendError;
use crate::downloads::SafeFileName;
use crate::handoff::{HandoffError, HandoffId, HandoffRequest, HandoffStore, Manifest};
use crate::tools::CallScope;

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
                      machine, its bytes never in the conversation. Returns an opaque handoff \
                      id, size and SHA-256; the same idempotencyKey and request return the \
                      same handoff.",
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
        description: "Revalidate a handoff bundle (manifest, modes, size, SHA-256) and return \
                      its metadata. Never returns bytes or paths; creates nothing.",
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

impl HandoffOut {
    fn new(manifest: Manifest, replayed: bool) -> HandoffOut {
        HandoffOut {
            handoff_id: manifest.id.to_string(),
            filename: manifest.filename.as_str().to_owned(),
            content_type: manifest.content_type,
            size: manifest.size,
            sha256: manifest.sha256,
            created_at: crate::handoff::manifest::timestamp(&manifest.created_at),
            status: "ready".to_owned(),
            replayed,
        }
    }

    fn render(self, what: &str) -> ToolOutput {
        let summary = format!(
            "{what} handoff {} ({} bytes, sha256 {}). The bytes stay on this machine; a local \
             program reads them with `mailgate handoff path {}`.",
            self.handoff_id, self.size, self.sha256, self.handoff_id
        );
        // The file name and content type come from the sender.
        ToolOutput::untrusted(summary, self)
    }
}

/// The store, which exists whenever this family is in the catalog.
pub(super) fn store(app: &App) -> Result<Arc<HandoffStore>, ToolError> {
    app.handoffs.clone().ok_or_else(|| {
        ToolError::new(
            ErrorCode::PolicyDenied,
            "local handoffs are disabled (PLUGIN_ALLOW_LOCAL_HANDOFFS is not true)",
        )
    })
}

/// Runs a store operation on the blocking pool.
pub(super) async fn blocking<T: Send + 'static>(
    store: &Arc<HandoffStore>,
    f: impl FnOnce(&HandoffStore) -> Result<T, HandoffError> + Send + 'static,
) -> Result<T, ToolError> {
    let store = Arc::clone(store);
    tokio::task::spawn_blocking(move || f(&store))
        .await
        .map_err(|_| ToolError::new(ErrorCode::HandoffStorageFailed, "the handoff store failed"))?
        .map_err(|e| map_error(&e))
}

/// The one mapping from store errors to tool errors.
fn map_error(err: &HandoffError) -> ToolError {
    match err {
        HandoffError::NotFound => ToolError::new(ErrorCode::HandoffNotFound, "no such handoff"),
        HandoffError::Expired => ToolError::new(
            ErrorCode::HandoffNotFound,
            "the handoff expired (MAILGATE_HANDOFF_TTL_HOURS) and is no longer served",
        ),
        HandoffError::Corrupt(why) => {
            tracing::warn!(reason = why, "a corrupt handoff bundle was refused");
            ToolError::new(
                ErrorCode::HandoffInvalid,
                "the handoff bundle failed revalidation (reason: corrupt); it is not served",
            )
            .with_reason("corrupt")
        }
        HandoffError::IdempotencyMismatch => ToolError::new(
            ErrorCode::HandoffIdempotencyMismatch,
            "this idempotencyKey was already used for a different mailbox, message or \
             attachment; use a new key",
        ),
        HandoffError::QuotaExceeded(quota) => ToolError::new(
            ErrorCode::HandoffQuotaExceeded,
            format!(
                "the handoff store limit {} would be exceeded; nothing was written (an operator \
                 can free space with `mailgate handoff remove` or `prune`)",
                quota.key()
            ),
        ),
        HandoffError::Busy => {
            ToolError::new(ErrorCode::HandoffBusy, "the handoff store is busy; retry")
        }
        HandoffError::Storage(kind) => {
            tracing::warn!(?kind, "the handoff store failed");
            ToolError::new(
                ErrorCode::HandoffStorageFailed,
                "the handoff store could not be written; nothing was committed",
            )
        }
    }
}

async fn create_attachment_handoff(
    app: CallScope,
    args: CreateHandoffArgs,
) -> Result<ToolOutput, ToolError> {
    let resolved = app.resolve_for_change(&args.mailbox)?;
    let store = store(&app)?;
    let request = HandoffRequest::new(
        resolved.alias.clone(),
        &args.message_id,
        &args.attachment_id,
        &args.idempotency_key,
    );
    // A replay answers from the store alone: no backend call, and the stored bytes win even if
    // the message changed since.
    let lookup = request.clone();
    if let Some(manifest) = blocking(&store, move |s| s.find_by_key(&lookup)).await? {
        return Ok(HandoffOut::new(manifest, true).render("Existing"));
    }

    let max = store.limits().max_attachment_bytes;
    let listing = resolved
        .backend
        .list_attachments(&args.message_id)
        .await
        .map_err(|e| fetch_error(&e))?;
    let mut matching = listing.iter().filter(|a| a.id == args.attachment_id);
    let meta = matching.next().ok_or_else(|| {
        ToolError::new(
            ErrorCode::AttachmentNotFound,
            "no such attachment in this message; nothing was written",
        )
    })?;
    if matching.next().is_some() {
        return Err(metadata_invalid());
    }
    if meta.size > max {
        return Err(too_large(max));
    }
    let (downloaded, bytes) = resolved
        .backend
        .attachment(&args.message_id, &args.attachment_id, max)
        .await
        .map_err(|e| match e {
            BackendError::TooLarge => too_large(max),
            other => fetch_error(&other),
        })?;
    if bytes.len() as u64 > max {
        return Err(too_large(max));
    }
    // security.md §4: the decoded size must equal the declared size: the listing's, or when the
    // listing could only estimate it, the exact size the download declares.
    let declared = if meta.size_is_estimate {
        downloaded.size
    } else {
        meta.size
    };
    if bytes.len() as u64 != declared {
        return Err(metadata_invalid());
    }
    let filename = SafeFileName::from_untrusted(meta.name.as_deref().unwrap_or(""));
    let content_type = meta.content_type.clone();
    let created = blocking(&store, move |s| {
        s.create(&request, filename, &content_type, &bytes)
    })
    .await?;
    let what = if created.replayed {
        "Existing"
    } else {
        "Created"
    };
    Ok(HandoffOut::new(created.manifest, created.replayed).render(what))
}

async fn get_attachment_handoff(
    app: CallScope,
    args: GetHandoffArgs,
) -> Result<ToolOutput, ToolError> {
    let store = store(&app)?;
    // The schema already holds the pattern; parsing again keeps the type honest.
    let id = HandoffId::parse(&args.handoff_id)
        .map_err(|_| ToolError::new(ErrorCode::HandoffInvalid, "malformed handoff id"))?;
    let manifest = blocking(&store, move |s| s.get(&id)).await?;
    Ok(HandoffOut::new(manifest, false).render("Verified"))
}

fn too_large(max: u64) -> ToolError {
    ToolError::new(
        ErrorCode::AttachmentTooLarge,
        format!("the attachment exceeds maxHandoffAttachmentBytes ({max}); nothing was written"),
    )
}

fn metadata_invalid() -> ToolError {
    ToolError::new(
        ErrorCode::AttachmentMetadataInvalid,
        "the attachment's listing is inconsistent (duplicate id, or decoded size differs from \
         the declared size); nothing was written",
    )
}

fn fetch_error(err: &BackendError) -> ToolError {
    match err {
        BackendError::NotFound | BackendError::BadId => {
            ToolError::new(ErrorCode::NotFound, "no such message in this mailbox")
        }
        BackendError::TooLarge | BackendError::Io(_) => ToolError::new(
            ErrorCode::AttachmentFetchFailed,
            "the attachment could not be read",
        ),
        other => ToolError::from_backend(other),
    }
}
