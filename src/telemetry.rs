//! Logs and the run journal: metadata only (spec/security.md §6).
//!
//! Invariant: what is written here is built from an allowlist — tool names, argument *names*
//! (only those the tool's schema declares; anything else becomes `unknown_N`) with their JSON
//! *types*, durations, outcome classes, stable error codes and aliases on the allowlist. No
//! argument value, message content, address, attachment name, password or upstream error is ever
//! passed to this module, so none can be written. Logs go to stderr: stdout is the MCP channel.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Mutex;
use std::time::Duration;

use cap_std::fs::Dir;
use rmcp::model::JsonObject;
use serde::Serialize;
use serde_json::Value;

use crate::alias::Alias;

/// Installs the stderr subscriber. `level` is `MAILGATE_LOG` (error|warn|info|debug|trace,
/// default warn) and applies to mailgate's own events only; an unknown level falls back to the
/// default rather than widening anything. `RUST_LOG` is not read.
///
/// Every other target (rmcp, lettre, html5ever, …) is held at `error`, whatever the level:
/// their warnings and debug events carry what they handle, which is the caller's text — rmcp
/// warns `response error` with the JSON-RPC id and error message, and logs whole request lines
/// at debug; lettre warns with upstream SMTP replies. Their `error` events are I/O failures.
/// (Issue 8, finding 6: mistyped argument values reached stderr at the default level.)
pub(crate) fn init_tracing(level: Option<&str>) {
    // A second init (tests) keeps the first subscriber.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(log_filter(level))
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}

/// Replaces the default panic hook, which prints the panic message to stderr: a message may
/// quote what was being handled (std's own string-slicing panics quote the string, so a panic
/// contained by `catch_unwind` around a mail parser would print mail text; one in a handler
/// could print an argument). Only where it happened is logged. Called once, by `cli::run`.
pub(crate) fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let location = info
            .location()
            .map_or_else(|| "unknown".to_owned(), panic_location);
        tracing::error!(
            location = location.as_str(),
            "a panic occurred; its message is withheld (it may quote mail or arguments)"
        );
    }));
}

/// `file:line` with the file cut to its last two components (no build-host paths).
fn panic_location(location: &std::panic::Location<'_>) -> String {
    let file = location.file();
    let short = file
        .rsplitn(3, '/')
        .take(2)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("/");
    format!("{short}:{}", location.line())
}

/// The level to install: `MAILGATE_LOG` when set, else the reference plugin's `LOG_LEVEL`
/// (error|warn|info|debug, and mailgate's trace; case-insensitive). The second value is true
/// when `LOG_LEVEL` was consulted and is not one of those: the caller warns and the default
/// applies. (The reference refuses to start on such a value; a log level narrows or widens no
/// policy, and `LOG_LEVEL` is a common name other programs set, so mailgate only warns.)
pub(crate) fn log_level<'a>(
    mailgate_log: Option<&'a str>,
    log_level: Option<&'a str>,
) -> (Option<&'a str>, bool) {
    match (mailgate_log, log_level) {
        (Some(level), _) => (Some(level), false),
        (None, Some(level)) => {
            let known = matches!(
                level.to_ascii_lowercase().as_str(),
                "error" | "warn" | "info" | "debug" | "trace"
            );
            (known.then_some(level), !known)
        }
        (None, None) => (None, false),
    }
}

/// The filter directive for `MAILGATE_LOG`: dependencies at `error`, mailgate at the level.
fn log_directive(level: Option<&str>) -> String {
    let level = match level.map(str::to_ascii_lowercase).as_deref() {
        Some(l @ ("error" | "warn" | "info" | "debug" | "trace")) => l.to_owned(),
        _ => "warn".to_owned(),
    };
    format!("error,mailgate={level}")
}

fn log_filter(level: Option<&str>) -> tracing_subscriber::EnvFilter {
    tracing_subscriber::EnvFilter::try_new(log_directive(level))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error"))
}

/// JSON type label of a value.
fn type_label(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Argument names and types; names the tool's input `schema` does not declare are replaced.
/// Takes the schema rather than the tool definition so that this module depends on no tool type
/// (tools call telemetry, never the other way round; issue 10, clean layering).
pub(crate) fn argument_shape(
    schema: &JsonObject,
    raw: &JsonObject,
) -> BTreeMap<String, &'static str> {
    let declared = schema.get("properties").and_then(Value::as_object);
    let mut unknown = 0;
    raw.iter()
        .map(|(name, value)| {
            let key = if declared.is_some_and(|d| d.contains_key(name)) {
                name.clone()
            } else {
                unknown += 1;
                format!("unknown_{unknown}")
            };
            (key, type_label(value))
        })
        .collect()
}

/// How a tool call ended, as the journal records it: built by `tools` from its own result type,
/// so this module names no tool type. `structured` is read only for its `status` enum.
#[derive(Clone, Copy, Debug)]
pub(crate) enum CallOutcome<'a> {
    Ok { structured: &'a Value },
    ToolError { code: &'static str },
    InvalidArguments,
    UnknownTool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CallEvent<'a> {
    version: u8,
    event: &'static str,
    timestamp: String,
    tool: &'a str,
    argument_shape: BTreeMap<String, &'static str>,
    /// The remote caller's principal label (plugin.json `principals[].label`); absent for the
    /// operator. Never a token or a claim value.
    #[serde(skip_serializing_if = "Option::is_none")]
    principal: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mailbox: Option<&'a str>,
    duration_ms: u128,
    outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    error_code: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    search_status: Option<String>,
}

/// The append-only run journal (`<state>/journal.jsonl`, mode 0600), off unless
/// `MAILGATE_JOURNAL` is true.
pub(crate) struct Journal {
    file: Mutex<std::fs::File>,
}

impl Journal {
    pub(crate) const FILE: &'static str = "journal.jsonl";

    /// Opens (creating 0600) the journal in the checked state folder. A journal that is a
    /// symlink, another user's file, open to group or others, or hard-linked elsewhere is
    /// refused, so a planted file never receives the call history.
    pub(crate) fn open(state: &Dir) -> Result<Self, crate::path_guard::PrivateFileError> {
        let file = crate::path_guard::append_private_file(state, Self::FILE)?;
        Ok(Self {
            file: Mutex::new(file),
        })
    }

    pub(crate) fn record_call(
        &self,
        tool: &str,
        argument_shape: BTreeMap<String, &'static str>,
        principal: Option<&str>,
        mailbox: Option<&Alias>,
        elapsed: Duration,
        result: CallOutcome<'_>,
    ) {
        let (outcome, error_code, search_status) = match result {
            CallOutcome::Ok { structured } => (
                "ok",
                None,
                // Only the status enum is copied, never content.
                structured
                    .get("status")
                    .and_then(Value::as_str)
                    .and_then(|s| {
                        matches!(
                            s,
                            "FOUND"
                                | "NOT_FOUND"
                                | "SEARCH_INCOMPLETE"
                                | "SEARCH_FAILED"
                                | "SEARCH_UNTRUSTED"
                        )
                        .then(|| s.to_owned())
                    }),
            ),
            CallOutcome::ToolError { code } => ("tool_error", Some(code), None),
            CallOutcome::InvalidArguments => ("invalid_arguments", None, None),
            CallOutcome::UnknownTool => ("unknown_tool", None, None),
        };
        let event = CallEvent {
            version: 1,
            event: "tool_call",
            timestamp: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            tool,
            argument_shape,
            principal,
            mailbox: mailbox.map(Alias::as_str),
            duration_ms: elapsed.as_millis(),
            outcome,
            error_code,
            search_status,
        };
        tracing::info!(
            tool,
            outcome,
            error_code,
            duration_ms = event.duration_ms as u64,
            "tool call"
        );
        let Ok(mut line) = serde_json::to_vec(&event) else {
            return;
        };
        line.push(b'\n');
        if let Ok(mut f) = self.file.lock()
            && let Err(err) = f.write_all(&line)
        {
            tracing::warn!(error_kind = ?err.kind(), "journal write failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::log_directive;

    #[test]
    fn dependencies_stay_at_error_at_every_level() {
        for level in [
            None,
            Some("error"),
            Some("warn"),
            Some("INFO"),
            Some("debug"),
            Some("trace"),
            Some("rmcp=trace"),
            Some("trace,rmcp=trace"),
            Some(""),
        ] {
            let directive = log_directive(level);
            let (deps, ours) = directive.split_once(',').expect("two directives");
            assert_eq!(deps, "error", "{level:?}");
            assert!(
                ours.starts_with("mailgate=") && !ours.contains(','),
                "{level:?}"
            );
        }
        assert_eq!(log_directive(Some("DEBUG")), "error,mailgate=debug");
        // LOG_LEVEL (the reference's variable) applies only when MAILGATE_LOG is unset.
        assert_eq!(
            super::log_level(None, Some("error")),
            (Some("error"), false)
        );
        assert_eq!(
            super::log_level(Some("info"), Some("error")),
            (Some("info"), false)
        );
        assert_eq!(super::log_level(None, Some("verbose")), (None, true));
        assert_eq!(super::log_level(None, None), (None, false));
        assert_eq!(log_directive(Some("rmcp=trace")), "error,mailgate=warn");
    }

    #[test]
    fn panic_locations_are_short() {
        let here = super::panic_location(std::panic::Location::caller());
        assert!(here.starts_with("src/telemetry.rs:"), "{here}");
        assert!(!here.contains("/work/"), "{here}");
    }
}
