//! The tool layer: tool definitions grouped in families, input validation, and the one mapping
//! from library errors to the two MCP error channels.
//!
//! Invariant: a handler only ever receives an input that deserialised strictly (unknown fields
//! rejected) *and* passed its garde rules. Everything the model can act on (malformed arguments
//! as `INVALID_ARGUMENT` naming the field, unknown alias, policy refusal, backend failure, limit)
//! is a tool result with `isError: true` and a stable code; only a name outside the catalog is a
//! protocol error. Both stdio and `mailgate call` go through [`App::call`], so the CLI cannot
//! take a path the server does not.

pub(crate) mod args;
pub(crate) mod catalog;
pub(crate) mod cursor;
pub(crate) mod dates;
pub(crate) mod evidence;
pub(crate) mod framing;
mod handoff;
pub(crate) mod output;
mod read;
pub(crate) use read::{list_allowed_mailboxes, list_folders};
mod schema;
mod scope;
pub(crate) use scope::{CallScope, Resolved};
pub(crate) mod send;
mod strict;
#[cfg(test)]
pub(crate) mod testutil;
mod text;
mod write;

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use garde::Validate;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, MetaObject, Tool, ToolAnnotations};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::backends::{BackendError, Registry};
use crate::config::Config;
use crate::gates::{Gate, Gates};
use crate::telemetry::Journal;

/// The four families of catalog.md.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Family {
    Read,
    Handoff,
    Write,
    Send,
}

impl Family {
    /// The gate a family needs; `None` for the always-present read family.
    pub(crate) fn gate(self) -> Option<Gate> {
        match self {
            Family::Read => None,
            Family::Handoff => Some(Gate::Handoffs),
            Family::Write => Some(Gate::Writes),
            Family::Send => Some(Gate::Send),
        }
    }
}

/// What a tool changes, for policy/ and `policy explain`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Mutates {
    Nothing,
    LocalDisk,
    Mailbox,
    OutboundMail,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Hints {
    pub(crate) read_only: bool,
    pub(crate) destructive: bool,
    pub(crate) idempotent: bool,
    pub(crate) open_world: bool,
}

pub(crate) const READ_HINTS: Hints = Hints {
    read_only: true,
    destructive: false,
    idempotent: true,
    open_world: false,
};

type CallFuture = Pin<Box<dyn Future<Output = Result<ToolOutput, CallError>> + Send>>;

/// One tool: its public face and its handler.
pub(crate) struct ToolDef {
    pub(crate) name: &'static str,
    pub(crate) title: &'static str,
    pub(crate) description: &'static str,
    pub(crate) family: Family,
    pub(crate) hints: Hints,
    pub(crate) mutates: Mutates,
    pub(crate) graph_permission: &'static str,
    pub(crate) imap_capability: &'static str,
    pub(crate) input_schema: fn() -> Arc<JsonObject>,
    pub(crate) output_schema: Option<fn() -> Arc<JsonObject>>,
    pub(crate) call: fn(CallScope, JsonObject) -> CallFuture,
}

impl ToolDef {
    /// The tool as `tools/list` publishes it. `with_output_schema`: whether to declare the
    /// output schema (opt-in, `MAILGATE_OUTPUT_SCHEMAS`; always in `policy/catalogs/`). Without
    /// one, MCP still allows `structuredContent`; with one, the result must conform to it.
    pub(crate) fn to_mcp(&self, with_output_schema: bool) -> Tool {
        // No title inside the annotations: the tool's own `title` says it once.
        let annotations = ToolAnnotations::new()
            .read_only(self.hints.read_only)
            .destructive(self.hints.destructive)
            .idempotent(self.hints.idempotent)
            .open_world(self.hints.open_world);
        let mut tool = Tool::new_with_raw(
            self.name,
            Some(Cow::Borrowed(self.description)),
            (self.input_schema)(),
        )
        .with_title(self.title)
        .with_annotations(annotations);
        if let Some(out) = self.output_schema.filter(|_| with_output_schema) {
            tool = tool.with_raw_output_schema(out());
        }
        tool
    }
}

/// Deserialise strictly, validate, then run the handler. Generic glue used by every ToolDef.
pub(crate) async fn dispatch<A, F, Fut>(
    app: CallScope,
    raw: JsonObject,
    f: F,
) -> Result<ToolOutput, CallError>
where
    A: DeserializeOwned + Validate<Context = ()> + schemars::JsonSchema + 'static,
    F: FnOnce(CallScope, A) -> Fut,
    Fut: Future<Output = Result<ToolOutput, ToolError>>,
{
    // Not serde_json: its errors quote the rejected value or unknown name, and this message goes
    // to the model, the client's logs and the CLI's output (issue 8, finding 6). garde's report is
    // value-free by construction: static field paths, our own messages and the schema's bounds.
    // Either message names fields as the schema does (camelCase), so the model can fix the call.
    let args: A = decode(raw).map_err(CallError::InvalidParams)?;
    f(app, args).await.map_err(CallError::Tool)
}

/// Deserialises strictly and validates arguments of type `A`; the error names fields as the
/// schema does and quotes no value (tool arguments, prompt arguments).
pub(crate) fn decode<A>(raw: JsonObject) -> Result<A, String>
where
    A: DeserializeOwned + Validate<Context = ()> + schemars::JsonSchema + 'static,
{
    let declared = || declared_names(&input_schema::<A>());
    let args: A = strict::from_value(Value::Object(raw)).map_err(|e| {
        let declared = declared();
        e.describe(|k| declared.contains(k))
    })?;
    args.validate().map_err(|report| {
        let declared = declared();
        strict::describe_report(&report, |k| declared.contains(k))
    })?;
    Ok(args)
}

/// Every property name an input schema declares, at any depth (its `$defs` included).
fn declared_names(schema: &JsonObject) -> std::collections::HashSet<String> {
    let mut names = std::collections::HashSet::new();
    // The schema object itself first: its own `properties` are the top-level argument names.
    let mut pending: Vec<&JsonObject> = vec![schema];
    while let Some(map) = pending.pop() {
        if let Some(Value::Object(props)) = map.get("properties") {
            names.extend(props.keys().cloned());
        }
        let mut values: Vec<&Value> = map.values().collect();
        while let Some(v) = values.pop() {
            match v {
                Value::Object(inner) => pending.push(inner),
                Value::Array(items) => values.extend(items),
                _ => {}
            }
        }
    }
    names
}

/// Builds a `ToolDef::call` from a typed async handler.
macro_rules! handler {
    ($args:ty, $f:path) => {
        |app, raw| Box::pin($crate::tools::dispatch::<$args, _, _>(app, raw, $f))
    };
}
pub(crate) use handler;

/// JSON Schema of an input type as published (see `schema`: standard keywords only, inlined,
/// no `null`).
pub(crate) fn input_schema<T: schemars::JsonSchema + 'static>() -> Arc<JsonObject> {
    schema::for_type::<T>(schema::Contract::Input)
}

/// JSON Schema of an output type (the serialise contract), for `policy/catalogs/` and clients
/// that opt in.
pub(crate) fn output_schema<T: schemars::JsonSchema + 'static>() -> Arc<JsonObject> {
    schema::for_type::<T>(schema::Contract::Output)
}

/// Stable error codes at the tool boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum ErrorCode {
    UnknownMailbox,
    PolicyDenied,
    NotFound,
    LimitExceeded,
    BackendUnavailable,
    Unsupported,
    InvalidArgument,
    AttachmentTooLarge,
    RawTooLarge,
    AttachmentFetchFailed,
    UnsupportedFormat,
    ExtractionFailed,
    ExtractionTimeout,
    ExtractionBusy,
    Encrypted,
    ZipInvalid,
    ZipTooManyEntries,
    ZipTooLarge,
    ZipEntryNotFound,
    ZipEncrypted,
    ZipPasswordIncorrect,
    ZipUnsupportedEncryption,
    RateLimited,
    AuthFailed,
    AuthRequired,
    AttachmentNotFound,
    AttachmentMetadataInvalid,
    HandoffNotFound,
    HandoffInvalid,
    HandoffIdempotencyMismatch,
    HandoffQuotaExceeded,
    HandoffBusy,
    HandoffStorageFailed,
}

impl ErrorCode {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ErrorCode::UnknownMailbox => "UNKNOWN_MAILBOX",
            ErrorCode::PolicyDenied => "POLICY_DENIED",
            ErrorCode::NotFound => "NOT_FOUND",
            ErrorCode::LimitExceeded => "LIMIT_EXCEEDED",
            ErrorCode::BackendUnavailable => "BACKEND_UNAVAILABLE",
            ErrorCode::Unsupported => "UNSUPPORTED",
            ErrorCode::InvalidArgument => "INVALID_ARGUMENT",
            ErrorCode::AttachmentTooLarge => "ATTACHMENT_TOO_LARGE",
            ErrorCode::RawTooLarge => "RAW_TOO_LARGE",
            ErrorCode::AttachmentFetchFailed => "ATTACHMENT_FETCH_FAILED",
            ErrorCode::UnsupportedFormat => "UNSUPPORTED_FORMAT",
            ErrorCode::ExtractionFailed => "EXTRACTION_FAILED",
            ErrorCode::ExtractionTimeout => "EXTRACTION_TIMEOUT",
            ErrorCode::ExtractionBusy => "EXTRACTION_BUSY",
            ErrorCode::Encrypted => "ENCRYPTED",
            ErrorCode::ZipInvalid => "ZIP_INVALID",
            ErrorCode::ZipTooManyEntries => "ZIP_TOO_MANY_ENTRIES",
            ErrorCode::ZipTooLarge => "ZIP_TOO_LARGE",
            ErrorCode::ZipEntryNotFound => "ZIP_ENTRY_NOT_FOUND",
            ErrorCode::ZipEncrypted => "ZIP_ENCRYPTED",
            ErrorCode::ZipPasswordIncorrect => "ZIP_PASSWORD_INCORRECT",
            ErrorCode::ZipUnsupportedEncryption => "ZIP_UNSUPPORTED_ENCRYPTION",
            ErrorCode::RateLimited => "RATE_LIMITED",
            ErrorCode::AuthFailed => "AUTH_FAILED",
            ErrorCode::AuthRequired => "AUTH_REQUIRED",
            ErrorCode::AttachmentNotFound => "ATTACHMENT_NOT_FOUND",
            ErrorCode::AttachmentMetadataInvalid => "ATTACHMENT_METADATA_INVALID",
            ErrorCode::HandoffNotFound => "HANDOFF_NOT_FOUND",
            ErrorCode::HandoffInvalid => "HANDOFF_INVALID",
            ErrorCode::HandoffIdempotencyMismatch => "HANDOFF_IDEMPOTENCY_MISMATCH",
            ErrorCode::HandoffQuotaExceeded => "HANDOFF_QUOTA_EXCEEDED",
            ErrorCode::HandoffBusy => "HANDOFF_BUSY",
            ErrorCode::HandoffStorageFailed => "HANDOFF_STORAGE_FAILED",
        }
    }
}

/// A refusal or failure the model can read and act on. `message` is server-written text only:
/// never a secret, an address, a host path or a raw upstream error.
#[derive(Debug, Clone)]
pub(crate) struct ToolError {
    pub(crate) code: ErrorCode,
    pub(crate) message: Cow<'static, str>,
    /// A machine-readable refinement of `code` (e.g. `corrupt` for HANDOFF_INVALID), carried in
    /// `_meta["mailgate/reason"]`.
    pub(crate) reason: Option<&'static str>,
    /// When to retry a throttled call, in seconds (`_meta["mailgate/retryAfterSeconds"]`).
    pub(crate) retry_after_secs: Option<u64>,
}

impl ToolError {
    pub(crate) fn new(code: ErrorCode, message: impl Into<Cow<'static, str>>) -> Self {
        Self {
            code,
            message: message.into(),
            reason: None,
            retry_after_secs: None,
        }
    }

    pub(crate) fn with_reason(mut self, reason: &'static str) -> Self {
        self.reason = Some(reason);
        self
    }

    /// The one mapping of backend error classes to tool codes.
    pub(crate) fn from_backend(err: &BackendError) -> Self {
        match err {
            BackendError::NotFound | BackendError::BadId => {
                ToolError::new(ErrorCode::NotFound, "no such item in this mailbox")
            }
            BackendError::Outdated => ToolError::new(
                ErrorCode::NotFound,
                "the id is from before the mail server reset its folder (UIDVALIDITY changed); \
                 list the folder again for current ids",
            )
            .with_reason("uidvalidity_changed"),
            BackendError::Unsupported(kind) => ToolError::new(
                ErrorCode::Unsupported,
                format!("the {kind} backend does not support this operation"),
            ),
            BackendError::ServerLacks(capability) => ToolError::new(
                ErrorCode::Unsupported,
                format!(
                    "the mail server lacks the {capability} capability this operation needs; \
                     mailgate refuses rather than emulate it"
                ),
            )
            .with_reason("server_capability_missing"),
            BackendError::TooLarge => ToolError::new(
                ErrorCode::LimitExceeded,
                "the item exceeds a server-side limit",
            ),
            BackendError::Throttled { retry_after } => {
                let secs = retry_after.map(|d| d.as_secs().max(1));
                let mut error = ToolError::new(
                    ErrorCode::RateLimited,
                    match secs {
                        Some(s) => format!(
                            "requests to this mailbox are rate-limited (by the mail server or \
                             mailgate's per-account limit); retry in {s} s"
                        ),
                        None => "requests to this mailbox are rate-limited (by the mail server \
                                 or mailgate's per-account limit); retry later"
                            .to_owned(),
                    },
                );
                error.retry_after_secs = secs;
                error
            }
            BackendError::Unauthorised => ToolError::new(
                ErrorCode::AuthFailed,
                "the mail server refused mailgate's credentials; the operator must renew them",
            ),
            BackendError::AuthRequired(alias) => ToolError::new(
                ErrorCode::AuthRequired,
                format!(
                    "the operator's sign-in for this mailbox has expired or was revoked; they \
                     must run `mailgate auth login {}`",
                    // A failure told to each item a scan stopped carries its class only.
                    if alias.is_empty() { "ALIAS" } else { alias }
                ),
            ),
            BackendError::Timeout => ToolError::new(
                ErrorCode::BackendUnavailable,
                "the mail server did not answer in time; retry later",
            )
            .with_reason("timeout"),
            BackendError::Unavailable => ToolError::new(
                ErrorCode::BackendUnavailable,
                "the mail server is unavailable; retry later",
            )
            .with_reason("unavailable"),
            BackendError::Malformed => ToolError::new(
                ErrorCode::BackendUnavailable,
                "the mail server sent a response mailgate cannot read",
            )
            .with_reason("malformed_response"),
            BackendError::Io(_) => ToolError::new(
                ErrorCode::BackendUnavailable,
                "the mailbox could not be read",
            ),
        }
    }
}

impl From<BackendError> for ToolError {
    fn from(err: BackendError) -> Self {
        ToolError::from_backend(&err)
    }
}

/// Why a call produced no answer. Only `UnknownTool` is a protocol error; the others are tool
/// results with `isError: true` (see [`CallError::into_tool_error`]).
#[derive(Debug)]
pub(crate) enum CallError {
    /// Arguments that do not deserialise strictly or break a garde rule: the message names the
    /// field (as the schema spells it) and the rule, never the value. Rendered as an
    /// `INVALID_ARGUMENT` tool result, as the MCP specification asks for input validation
    /// failures, so the model sees it and can correct the call (a protocol error is raised as an
    /// exception by SDK clients and never reaches the model).
    InvalidParams(String),
    /// A name not in this catalog: a protocol error, since a tool outside the catalog must not
    /// look callable (see [`CallError::unknown_tool_message`]).
    UnknownTool,
    /// A tool result with `isError: true`.
    Tool(ToolError),
}

impl CallError {
    /// The tool result for this error; `None` for `UnknownTool`, the one protocol error.
    pub(crate) fn into_tool_error(self) -> Option<ToolError> {
        match self {
            CallError::InvalidParams(msg) => Some(ToolError::new(ErrorCode::InvalidArgument, msg)),
            CallError::Tool(err) => Some(err),
            CallError::UnknownTool => None,
        }
    }

    /// The protocol error's text for a tool name outside the catalog. A mailgate tool whose gate
    /// is closed says which variable opens it (its name is our own text) when `gates_apply`, and
    /// that it is not served on this transport otherwise (HTTP, whose catalog no gate widens);
    /// any other name gets a fixed text, since the caller's string is not echoed (the MCP
    /// library logs this error).
    pub(crate) fn unknown_tool_message(name: &str, gates_apply: bool) -> Cow<'static, str> {
        let gated = all_tools().find_map(|t| {
            (t.name == name)
                .then(|| t.family.gate())
                .flatten()
                .map(|gate| (t.name, gate))
        });
        match gated {
            Some((tool, gate)) if gates_apply => Cow::Owned(format!(
                "tool {tool} is not in this catalog: it needs {}=true",
                gate.env_var()
            )),
            Some((tool, _)) => Cow::Owned(format!(
                "tool {tool} is not in this catalog: the HTTP transport serves the read tools \
                 only, whatever the gates (stdio serves the others)"
            )),
            None => Cow::Borrowed("tool not found in this catalog"),
        }
    }
}

/// A successful tool answer before rendering.
pub(crate) struct ToolOutput {
    pub(crate) structured: Value,
    /// One server-written line for the text channel.
    pub(crate) summary: String,
    /// Whether `structured` holds sender-controlled text.
    pub(crate) untrusted: bool,
}

impl ToolOutput {
    pub(crate) fn trusted(summary: impl Into<String>, value: impl serde::Serialize) -> Self {
        Self {
            structured: to_value(value),
            summary: summary.into(),
            untrusted: false,
        }
    }

    pub(crate) fn untrusted(summary: impl Into<String>, value: impl serde::Serialize) -> Self {
        Self {
            structured: to_value(value),
            summary: summary.into(),
            untrusted: true,
        }
    }

    /// Renders both channels; untrusted payloads get a fresh fence. The structured content is
    /// complete; the text block carries the same data compactly (see [`text::payload`]) for
    /// clients that show the model only text, and never the trust bookkeeping fields, which the
    /// fence already says in words.
    pub(crate) fn render(self) -> CallToolResult {
        let mut structured = self.structured;
        let (payload, tables) = text::payload(&structured);
        let summary = if tables {
            format!("{}\n{}", self.summary, text::TABLE_NOTE)
        } else {
            self.summary
        };
        let text = if self.untrusted {
            let fence = framing::Fence::new();
            if let Value::Object(map) = &mut structured {
                map.insert("dataTrust".into(), Value::from(framing::DATA_TRUST));
                map.insert("untrustedDataFence".into(), Value::from(fence.nonce()));
            }
            fence.wrap(&summary, &payload)
        } else {
            format!("{summary}\n{payload}")
        };
        let mut result = CallToolResult::structured(structured);
        result.content = vec![ContentBlock::text(text)];
        result
    }
}

fn to_value(value: impl serde::Serialize) -> Value {
    // Serialising our own output types cannot fail (no maps with non-string keys).
    serde_json::to_value(value).unwrap_or(Value::Null)
}

pub(crate) fn render_error(err: &ToolError) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(format!(
        "{}: {}",
        err.code.as_str(),
        err.message
    ))]);
    let mut meta = MetaObject(JsonObject::new());
    meta.0
        .insert("mailgate/errorCode".into(), Value::from(err.code.as_str()));
    if let Some(reason) = err.reason {
        meta.0.insert("mailgate/reason".into(), Value::from(reason));
    }
    if let Some(secs) = err.retry_after_secs {
        meta.0
            .insert("mailgate/retryAfterSeconds".into(), Value::from(secs));
    }
    result.meta = Some(meta);
    result
}

/// Tool calls that run at once; more wait in arrival order (tokio's semaphore is fair). A
/// client that pipelines hundreds of calls then costs the memory of this many, and each waiting
/// call keeps the deadline it had on arrival ([`call_deadline`]): it is answered, late calls with
/// `SEARCH_INCOMPLETE` and the deadline warning, never dropped.
pub(crate) const MAX_CALLS_IN_FLIGHT: usize = 4;
/// How many of those one remote person may hold at once, so one person's burst cannot starve
/// the others (issue 29, item 4); the operator's calls are bounded by the process-wide slots only.
pub(crate) const PERSON_CALLS_IN_FLIGHT: usize = 2;

tokio::task_local! {
    /// When the running tool call arrived (set by [`App::call`]).
    static CALL_ARRIVED: Instant;
}

/// The deadline of work allowed `budget` from the running call's arrival, so that time spent
/// queued for a call slot counts against it; from now outside a call (tests, the CLI's
/// helpers).
pub(crate) fn call_deadline(budget: std::time::Duration) -> Instant {
    CALL_ARRIVED
        .try_with(|arrived| *arrived)
        .unwrap_or_else(|_| Instant::now())
        + budget
}

/// Everything a handler may use, fixed at startup.
pub(crate) struct App {
    pub(crate) config: Config,
    pub(crate) gates: Gates,
    pub(crate) backends: Registry,
    pub(crate) journal: Option<Journal>,
    pub(crate) tools: Vec<&'static ToolDef>,
    /// Whether `tools/list` declares output schemas (`MAILGATE_OUTPUT_SCHEMAS`).
    pub(crate) output_schemas: bool,
    /// Process-wide bound on running extractions (`maxConcurrentExtractions`).
    pub(crate) extraction_slots: Arc<tokio::sync::Semaphore>,
    /// Runs every extraction, in a worker process.
    pub(crate) extractor: crate::extract::Extractor,
    /// Process-wide bound on tool calls running at once ([`MAX_CALLS_IN_FLIGHT`]).
    pub(crate) call_slots: tokio::sync::Semaphore,
    /// Each remote person's share of the call slots ([`PERSON_CALLS_IN_FLIGHT`]), by label.
    pub(crate) person_slots:
        std::collections::HashMap<crate::config::PrincipalLabel, tokio::sync::Semaphore>,
    /// The outbound policy and transport; `Some` exactly when the send gate is open.
    pub(crate) send: Option<send::SendState>,
    /// The download root (security.md §3), opened at startup only when the write gate is open.
    pub(crate) downloads: Option<Arc<crate::downloads::DownloadRoot>>,
    /// The handoff store (security.md §4), opened and swept at startup only when the handoff
    /// gate is open.
    pub(crate) handoffs: Option<Arc<crate::handoff::HandoffStore>>,
    /// The local indexes the operator synced, read-only (searches with `source`).
    pub(crate) indexes: crate::index::reader::Indexes,
    /// The embeddings endpoint (`MAILGATE_EMBEDDINGS_URL`), for the semantic half of index
    /// searches; `None` keeps them lexical.
    pub(crate) semantic: Option<Arc<crate::embed::Semantic>>,
    /// What this instance shares with the others (the cursor key ring).
    pub(crate) coordination: crate::coordination::Coordination,
}

/// The journal's view of a call's result (telemetry names no tool type, so the mapping is here).
fn call_outcome(result: &Result<ToolOutput, CallError>) -> crate::telemetry::CallOutcome<'_> {
    use crate::telemetry::CallOutcome;
    match result {
        Ok(out) => CallOutcome::Ok {
            structured: &out.structured,
        },
        Err(CallError::Tool(e)) => CallOutcome::ToolError {
            code: e.code.as_str(),
        },
        Err(CallError::InvalidParams(_)) => CallOutcome::InvalidArguments,
        Err(CallError::UnknownTool) => CallOutcome::UnknownTool,
    }
}

impl App {
    pub(crate) fn tool(&self, name: &str) -> Option<&'static ToolDef> {
        self.tools.iter().copied().find(|t| t.name == name)
    }

    /// Runs one tool call end to end for `caller`: lookup, validation, handler (in the
    /// caller's [`CallScope`]), journal.
    pub(crate) async fn call(
        self: &Arc<Self>,
        caller: Arc<crate::caller::Caller>,
        name: &str,
        raw: JsonObject,
    ) -> Result<ToolOutput, CallError> {
        let Some(def) = self.tool(name) else {
            return Err(CallError::UnknownTool);
        };
        let started = Instant::now();
        let shape = crate::telemetry::argument_shape(&(def.input_schema)(), &raw);
        let scope = CallScope::new(Arc::clone(self), caller);
        let mailbox = raw
            .get("mailbox")
            .and_then(Value::as_str)
            .and_then(|m| scope.grant(m));
        // The semaphore is never closed, so acquiring fails only in theory; then the call runs
        // unbounded rather than unanswered.
        // A person waits for their own share first, so their queued calls never hold process
        // slots another person could use.
        let share = scope
            .caller()
            .label()
            .and_then(|label| self.person_slots.get(label));
        let _person_slot = match share {
            Some(share) => share.acquire().await.ok(),
            None => None,
        };
        let _slot = self.call_slots.acquire().await.ok();
        let result = CALL_ARRIVED
            .scope(started, (def.call)(scope.clone(), raw))
            .await
            .and_then(|out| within_answer_limit(def.name, out, &self.config.limits));
        if let Some(journal) = &self.journal {
            journal.record_call(
                def.name,
                shape,
                scope.caller().label().map(|l| l.as_str()),
                mailbox.as_ref().map(|g| g.alias()),
                started.elapsed(),
                call_outcome(&result),
            );
        }
        result
    }
}

/// The backstop over a whole answer ([`output::answer_limit`]): an answer whose structured JSON
/// is larger becomes a `LIMIT_EXCEEDED` tool error instead of megabytes in the client's context.
fn within_answer_limit(
    tool: &str,
    out: ToolOutput,
    limits: &crate::config::Limits,
) -> Result<ToolOutput, CallError> {
    let limit = output::answer_limit(limits);
    let bytes = json_len(&out.structured);
    if bytes <= limit {
        return Ok(out);
    }
    tracing::warn!(
        tool,
        bytes,
        limit,
        "an answer over the output bound was refused"
    );
    Err(CallError::Tool(ToolError::new(
        ErrorCode::LimitExceeded,
        format!(
            "the answer would exceed the server's bound of {limit} bytes; ask for less (fewer \
             mailboxes or results, a smaller page)"
        ),
    )))
}

/// Length of `value` as compact JSON, counted without building the string.
fn json_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` into a sink that never fails cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// The tools of each family, in catalog order.
pub(crate) fn family(family: Family) -> &'static [ToolDef] {
    match family {
        Family::Read => read::TOOLS,
        Family::Handoff => handoff::TOOLS,
        Family::Write => write::TOOLS,
        Family::Send => send::TOOLS,
    }
}

/// Gate-independent list of every tool that exists (for policy export and tests).
pub(crate) fn all_tools() -> impl Iterator<Item = &'static ToolDef> {
    [Family::Read, Family::Handoff, Family::Write, Family::Send]
        .into_iter()
        .flat_map(|f| family(f).iter())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::search::{error_warning, warning};

    /// Issue 10: every backend error class maps once to a tool code (with a retry hint when
    /// throttled) and to a search warning, so a remote failure can never read as an absence.
    #[test]
    fn every_backend_error_class_has_a_code_and_an_evidence_warning() {
        let cases = [
            (
                BackendError::Throttled {
                    retry_after: Some(Duration::from_millis(2500)),
                },
                "RATE_LIMITED",
                Some(warning::RATE_LIMITED),
            ),
            (
                BackendError::Unauthorised,
                "AUTH_FAILED",
                Some(warning::AUTH_FAILED),
            ),
            (
                BackendError::AuthRequired("work".to_owned()),
                "AUTH_REQUIRED",
                Some(warning::AUTH_REQUIRED),
            ),
            (
                BackendError::Timeout,
                "BACKEND_UNAVAILABLE",
                Some(warning::TIMEOUT),
            ),
            (
                BackendError::Unavailable,
                "BACKEND_UNAVAILABLE",
                Some(warning::UNAVAILABLE),
            ),
            (
                BackendError::Malformed,
                "BACKEND_UNAVAILABLE",
                Some(warning::MALFORMED),
            ),
            (
                BackendError::Unsupported("graph"),
                "UNSUPPORTED",
                Some(warning::BACKEND_UNSUPPORTED),
            ),
            (
                BackendError::ServerLacks("MOVE (RFC 6851)"),
                "UNSUPPORTED",
                Some(warning::BACKEND_UNSUPPORTED),
            ),
            (BackendError::NotFound, "NOT_FOUND", None),
            (BackendError::Outdated, "NOT_FOUND", None),
            (BackendError::TooLarge, "LIMIT_EXCEEDED", None),
        ];
        for (error, code, evidence) in cases {
            assert_eq!(
                ToolError::from_backend(&error).code.as_str(),
                code,
                "{error:?}"
            );
            assert_eq!(error_warning(&error), evidence, "{error:?}");
        }
        let throttled = ToolError::from_backend(&BackendError::Throttled {
            retry_after: Some(Duration::from_millis(2500)),
        });
        assert_eq!(throttled.retry_after_secs, Some(2));
        let meta = render_error(&throttled).meta.expect("meta");
        assert_eq!(meta.0["mailgate/retryAfterSeconds"], 2);
        // An id from before a folder reset is not found, and says why (issue 12).
        let outdated = render_error(&ToolError::from_backend(&BackendError::Outdated));
        assert_eq!(
            outdated.meta.expect("meta").0["mailgate/reason"],
            "uidvalidity_changed"
        );
        let lacking = ToolError::from_backend(&BackendError::ServerLacks("MOVE (RFC 6851)"));
        assert!(
            lacking.message.contains("MOVE (RFC 6851)"),
            "{}",
            lacking.message
        );
    }

    /// Issue 29, item 4: a person whose share of the call slots is taken waits, while another
    /// person's call is answered. (Fails with the share removed from `App::call`.)
    #[tokio::test]
    async fn one_persons_burst_never_takes_another_persons_slots() {
        let demo = testutil::demo_app_with_principals(serde_json::json!([
            {"label": "ana", "match": {"sub": "a-1"}, "aliases": ["personal"]},
            {"label": "bo", "match": {"sub": "b-1"}, "aliases": ["personal"]}
        ]));
        let app = Arc::clone(&demo.app);
        let person = |i: usize| Arc::new(crate::caller::Caller::person(&app.config.principals[i]));
        let held = app.person_slots[&app.config.principals[0].label]
            .acquire_many(u32::try_from(PERSON_CALLS_IN_FLIGHT).expect("small"))
            .await
            .expect("open");
        let raw = || {
            serde_json::json!({"mailbox": "personal"})
                .as_object()
                .cloned()
                .expect("object")
        };
        let ana = tokio::spawn({
            let (app, caller) = (Arc::clone(&app), person(0));
            async move { app.call(caller, "list_folders", raw()).await }
        });
        let bo = app.call(person(1), "list_folders", raw()).await;
        assert!(bo.is_ok(), "bo is served while ana's share is taken");
        assert!(!ana.is_finished(), "ana waits for her own share");
        assert_eq!(
            app.call_slots.available_permits(),
            MAX_CALLS_IN_FLIGHT,
            "and holds no process slot while she waits"
        );
        drop(held);
        assert!(
            ana.await.expect("joined").is_ok(),
            "and is served once it frees"
        );
    }

    /// Issue 10, item 4: at most [`MAX_CALLS_IN_FLIGHT`] calls run; the rest wait for a slot
    /// and are all answered, none dropped. (Fails with the slot acquire removed from
    /// `App::call`: the calls finish while every slot is held.)
    #[tokio::test]
    async fn calls_beyond_the_cap_wait_for_a_slot_and_are_all_answered() {
        let demo = testutil::demo_app();
        let app = Arc::clone(&demo.app);
        let held = app
            .call_slots
            .acquire_many(u32::try_from(MAX_CALLS_IN_FLIGHT).expect("small"))
            .await
            .expect("open");
        let args = serde_json::json!({"mailbox": "personal", "criteria": {"query": "invoice"}});
        let mut calls: Vec<_> = (0..10)
            .map(|_| {
                let app = Arc::clone(&app);
                let raw = args.as_object().cloned().expect("object");
                tokio::spawn(async move {
                    app.call(
                        Arc::new(crate::caller::Caller::Operator),
                        "search_mailbox",
                        raw,
                    )
                    .await
                })
            })
            .collect();
        // A negative wait: unbounded, one of these searches answers in milliseconds.
        let first = tokio::time::timeout(
            Duration::from_secs(1),
            futures::future::select_all(calls.iter_mut()),
        )
        .await;
        assert!(first.is_err(), "no call runs while every slot is held");
        drop(held);
        for call in calls {
            let out = call.await.expect("joined").expect("answered");
            assert_eq!(
                out.structured["candidatesScanned"], 42,
                "{}",
                out.structured
            );
        }
    }

    /// A queued call's search deadline counts from its arrival, not from when it got a slot.
    #[tokio::test]
    async fn the_call_deadline_counts_from_arrival() {
        let arrived = Instant::now() - Duration::from_secs(30);
        let budget = Duration::from_secs(20);
        let deadline = CALL_ARRIVED
            .scope(arrived, async { call_deadline(budget) })
            .await;
        assert_eq!(deadline, arrived + budget);
        assert!(call_deadline(budget) > Instant::now());
    }
}
