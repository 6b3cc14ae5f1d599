//! `mailgate demo`: writes the fictional demo mailboxes (see [`corpus`]) as Maildir++ folders
//! under `<state>/demo`, with a matching private `plugin.json`, and offers a short guided tour.
//!
//! Invariant: everything is written through a cap-std `Dir` rooted at `<state>/demo`, which is
//! opened through `path_guard`'s private-folder check (never through a symlink, ours, no
//! group/other bits). The demo only ever deletes its own tree: the marker file
//! [`MARKER`] is written before anything else and names the tree as mailgate's, and without it
//! nothing is removed. The corpus is deterministic, so the demo is also the fixture of the
//! integration tests.

pub(crate) mod corpus;
mod embedded;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt as _};
use cap_std::fs::{Dir, DirBuilder, DirBuilderExt, OpenOptions, OpenOptionsExt};
use serde_json::{Value, json};

use crate::error::StartupError;
use crate::path_guard::{self, ModeRule};
use crate::tools::{App, CallError};

/// Bumped whenever the corpus changes, so an old demo folder is rebuilt.
const VERSION: &str = "mailgate-demo-v1";
/// What the marker holds while a demo is being written (a crash leaves it, and the next run
/// rebuilds).
const BUILDING: &str = "mailgate-demo-building";
/// Every marker mailgate writes starts with this.
const MARKER_PREFIX: &str = "mailgate-demo";
/// Marks `<state>/demo` as mailgate's own tree: written first when the demo is created, then
/// rewritten with [`VERSION`] once complete.
const MARKER: &str = ".demo-version";
/// The demo folder's name inside the state folder.
const DEMO_DIR: &str = "demo";
const MAIL_DIR: &str = "mail";
pub(crate) const CONFIG_FILE: &str = "plugin.json";

fn err(e: std::io::Error) -> StartupError {
    StartupError::Demo(format!("{:?}", e.kind()))
}

fn refused(why: impl std::fmt::Display) -> StartupError {
    StartupError::Demo(format!(
        "the demo folder (<state folder>/demo) is refused: {why}"
    ))
}

/// Creates (or reuses) the demo under `state`; returns the path of its plugin.json.
///
/// An existing tree is rebuilt (its `mail/` removed) only when it carries mailgate's marker;
/// a demo folder holding anything without one is refused and nothing is deleted.
pub(crate) fn setup(state: &Path, reset: bool) -> Result<PathBuf, StartupError> {
    let state_dir = path_guard::open_state_dir(state, true).map_err(StartupError::StateDir)?;
    let root = path_guard::open_private_child(&state_dir, DEMO_DIR, true).map_err(refused)?;
    let root_path = state.join(DEMO_DIR);
    // The marker is only a label inside a folder already checked as private, so a readable
    // one (older versions wrote it 0644) is fine; it must still be our own regular file.
    let marker = path_guard::read_file_in(&root, MARKER, ModeRule::OwnerWriteOnly, 64)
        .map_err(|e| refused(format_args!("its marker file {MARKER}: {e}")))?;
    match marker.as_deref() {
        Some(m) if !reset && m == VERSION.as_bytes() && root.exists(CONFIG_FILE) => {
            return Ok(root_path.join(CONFIG_FILE));
        }
        Some(m) if m.starts_with(MARKER_PREFIX.as_bytes()) => {}
        Some(_) => {
            return Err(refused(format_args!(
                "its marker file {MARKER} was not written by mailgate; nothing was deleted"
            )));
        }
        None => {
            if root.entries().map_err(err)?.next().is_some() {
                return Err(refused(format_args!(
                    "it holds files but no {MARKER} marker, so mailgate did not create them; \
                     nothing was deleted (move the folder away to get a fresh demo)"
                )));
            }
        }
    }
    write_marker(&root, BUILDING).map_err(err)?;
    if root.symlink_metadata(MAIL_DIR).is_ok() {
        // Only a real, private folder is removed: never a symlink or something planted.
        path_guard::open_private_child(&root, MAIL_DIR, false)
            .map_err(|e| refused(format_args!("its {MAIL_DIR} folder: {e}")))?;
        root.remove_dir_all(MAIL_DIR).map_err(err)?;
    }
    let _ = root.remove_file(CONFIG_FILE);
    let mut private = DirBuilder::new();
    private.mode(0o700);
    root.create_dir_with(MAIL_DIR, &private).map_err(err)?;
    let mail = root.open_dir(MAIL_DIR).map_err(err)?;

    let mut mailboxes = Vec::new();
    for mailbox in corpus::corpus() {
        write_mailbox(&mail, &mailbox, &private).map_err(err)?;
        let path = root_path.join(MAIL_DIR).join(mailbox.alias);
        let mut entry = json!({
            "alias": mailbox.alias,
            "address": mailbox.address,
            "backend": { "kind": "maildir", "path": path.to_string_lossy() },
        });
        if mailbox.access_read_only {
            entry["access"] = Value::from("read");
        }
        mailboxes.push(entry);
    }
    // A smaller input cap than the default so the demo's oversized attachment shows the refusal.
    let config = json!({
        "mailboxes": mailboxes,
        "maxAttachmentInputBytes": 1_048_576,
    });
    let mut opts = OpenOptions::new();
    opts.write(true).create_new(true).mode(0o600);
    let mut f = root.open_with(CONFIG_FILE, &opts).map_err(err)?;
    let text = serde_json::to_string_pretty(&config).unwrap_or_default();
    f.write_all(text.as_bytes()).map_err(err)?;
    f.sync_all().map_err(err)?;
    write_marker(&root, VERSION).map_err(err)?;
    Ok(root_path.join(CONFIG_FILE))
}

/// (Re)writes the marker 0600, never through a symlink.
fn write_marker(root: &Dir, content: &str) -> std::io::Result<()> {
    let mut opts = OpenOptions::new();
    opts.write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .follow(FollowSymlinks::No);
    let mut f = root.open_with(MARKER, &opts)?;
    f.write_all(content.as_bytes())?;
    f.sync_all()
}

fn write_mailbox(
    mail: &Dir,
    mailbox: &corpus::DemoMailbox,
    private: &DirBuilder,
) -> std::io::Result<()> {
    mail.create_dir_with(mailbox.alias, private)?;
    let root = mail.open_dir(mailbox.alias)?;
    for sub in ["cur", "new", "tmp"] {
        root.create_dir_with(sub, private)?;
    }
    for folder in &mailbox.folders {
        let dir = if folder.name == crate::backends::maildir::INBOX {
            root.try_clone()?
        } else {
            let name = format!(".{}", folder.name);
            if !root.exists(&name) {
                root.create_dir_with(&name, private)?;
                let d = root.open_dir(&name)?;
                for sub in ["cur", "new", "tmp"] {
                    d.create_dir_with(sub, private)?;
                }
                d.write("maildirfolder", b"")?;
            }
            root.open_dir(&name)?
        };
        for m in &folder.messages {
            let mut flags = String::new();
            if m.flagged {
                flags.push('F');
            }
            if m.answered {
                flags.push('R');
            }
            if m.seen {
                flags.push('S');
            }
            let path = if flags.is_empty() {
                format!("new/{}", m.unique)
            } else {
                format!("cur/{}:2,{flags}", m.unique)
            };
            let mut opts = OpenOptions::new();
            opts.write(true).create_new(true).mode(0o600);
            let mut f = dir.open_with(&path, &opts)?;
            f.write_all(&m.raw)?;
        }
    }
    Ok(())
}

/// What a tour step prints of an answer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Show {
    /// The structured JSON, abbreviated.
    Structured,
    /// The text block an agent reads, with its untrusted-data fence.
    Text,
    /// Only the status line (the next step shows the message itself).
    Status,
}

/// How the tour spells a command: the binary the user ran (relative when under the current
/// folder, e.g. `./target/release/mailgate` after `cargo run --release`), with the demo config.
struct Invocation {
    exe: String,
    config: String,
}

/// Runs one tool for the tour and renders its answer (or refusal) as text.
async fn step(
    app: &Arc<App>,
    how: &Invocation,
    title: &str,
    tool: &str,
    args: Value,
    show: Show,
) -> (String, Option<Value>) {
    let mut out = format!(
        "\n── {title}\n$ {} --config {} call {tool} '{args}'\n",
        how.exe, how.config
    );
    let raw = match args {
        Value::Object(map) => map,
        _ => Default::default(),
    };
    let value = match app
        .call(Arc::new(crate::caller::Caller::Operator), tool, raw)
        .await
    {
        Ok(o) => {
            let rendered = o.render();
            let v = rendered.structured_content.unwrap_or(Value::Null);
            if let Some(status) = v["status"].as_str() {
                out.push_str(&format!(
                    "→ status {status} (confidence {}, strategy {}, {} message(s), truncated {})\n",
                    v["confidence"].as_str().unwrap_or("-"),
                    v["strategy"].as_str().unwrap_or("-"),
                    v["messages"].as_array().map_or(0, Vec::len),
                    v["truncated"],
                ));
            }
            match show {
                Show::Structured => out.push_str(&abbreviate(&v)),
                Show::Status => {}
                Show::Text => {
                    out.push_str(
                        "(the text block an agent reads: everything from the mail sits inside the \
                         fence, whose nonce the mail cannot know)\n",
                    );
                    for block in &rendered.content {
                        if let Some(text) = block.as_text() {
                            out.push_str(&abbreviate_text(&text.text));
                        }
                    }
                }
            }
            Some(v)
        }
        Err(CallError::Tool(e)) => {
            out.push_str(&format!("refused: {}: {}", e.code.as_str(), e.message));
            None
        }
        Err(CallError::InvalidParams(m)) => {
            out.push_str(&format!("invalid arguments: {m}"));
            None
        }
        Err(CallError::UnknownTool) => {
            out.push_str(&format!(
                "refused: {tool} is not in this catalog — its gate is closed, so the tool was \
                 never registered (an agent cannot even see it)."
            ));
            None
        }
    };
    out.push('\n');
    (out, value)
}

/// A text block for the terminal: at most 24 lines, long ones cut; a long line that carries a
/// message body shows the start of the body too (that is what the fence is about).
fn abbreviate_text(text: &str) -> String {
    const WIDTH: usize = 240;
    const LINES: usize = 24;
    let mut out = String::new();
    for line in text.lines().take(LINES) {
        if line.chars().count() > WIDTH {
            out.extend(line.chars().take(WIDTH / 3));
            out.push_str(" … ");
            if let Some(at) = line.find("\"body\":") {
                out.extend(line[at..].chars().take(WIDTH));
                out.push_str(" …");
            }
            out.push('\n');
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    let more = text.lines().count().saturating_sub(LINES);
    if more > 0 {
        out.push_str(&format!("… ({more} more lines)\n"));
    }
    out
}

/// The running binary as the user can type it in the current folder (see [`shown_exe`]).
pub(crate) fn this_exe() -> String {
    let exe = std::env::current_exe().ok();
    let cwd = std::env::current_dir().ok();
    shown_exe(exe.as_deref(), cwd.as_deref())
}

/// The binary as the user can type it: relative to `cwd` when it lies below it, else absolute;
/// `mailgate` only when the path cannot be known.
fn shown_exe(exe: Option<&Path>, cwd: Option<&Path>) -> String {
    match (exe, cwd) {
        (Some(exe), Some(cwd)) => match exe.strip_prefix(cwd) {
            Ok(relative) => format!("./{}", relative.display()),
            Err(_) => exe.display().to_string(),
        },
        (Some(exe), None) => exe.display().to_string(),
        (None, _) => "mailgate".to_owned(),
    }
}

fn abbreviate(v: &Value) -> String {
    let text = serde_json::to_string_pretty(v).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() <= 40 {
        text
    } else {
        format!(
            "{}\n  … ({} more lines)",
            lines[..40].join("\n"),
            lines.len() - 40
        )
    }
}

/// The guided tour printed when `mailgate demo` runs on a terminal.
pub(crate) async fn tour(app: &Arc<App>, config: &Path) -> String {
    let exe = std::env::current_exe().ok();
    // A client starts the server from its own folder, so its command is the absolute path; the
    // `$` lines are for this shell, so they use what the user can type here.
    let absolute = exe
        .as_ref()
        .map_or_else(|| "mailgate".into(), |p| p.display().to_string());
    let how = Invocation {
        exe: this_exe(),
        config: config.display().to_string(),
    };
    let mut out = format!(
        "mailgate demo — fictional mailboxes, no account needed.\n\
         Config: {config}\n\n\
         Connect an MCP client (stdio):\n\
         \x20 Claude Code:  claude mcp add mailgate -- {absolute} demo --serve\n\
         \x20 Codex:        add to ~/.codex/config.toml\n\
         \x20               [mcp_servers.mailgate]\n\
         \x20               command = \"{absolute}\"\n\
         \x20               args = [\"demo\", \"--serve\"]\n\
         \x20 Any client:   command `{absolute} demo --serve` (stdio transport)\n\n\
         A short tour through the same validation and handlers the server uses\n\
         (each `$` line runs that step yourself):\n",
        config = how.config
    );
    let (text, _) = step(
        app,
        &how,
        "The allowlist (aliases only, never addresses)",
        "list_allowed_mailboxes",
        json!({}),
        Show::Structured,
    )
    .await;
    out.push_str(&text);
    let (text, _) = step(
        app,
        &how,
        "A search with evidence",
        "search_mailbox",
        json!({ "mailbox": "finance", "criteria": { "query": "invoice", "maxResults": 3 } }),
        Show::Structured,
    )
    .await;
    out.push_str(&text);
    let (text, found) = step(
        app,
        &how,
        "A mail that tries to give the agent orders",
        "search_mailbox",
        json!({ "mailbox": "finance", "criteria": { "subject": "invoice audit", "maxResults": 1 } }),
        Show::Status,
    )
    .await;
    out.push_str(&text);
    let injected = found
        .as_ref()
        .and_then(|v| v["messages"][0]["id"].as_str())
        .map(str::to_owned);
    if let Some(id) = injected {
        let (text, _) = step(
            app,
            &how,
            "Reading it: the body is data inside the untrusted-data fence, never instructions",
            "get_message",
            json!({ "mailbox": "finance", "messageId": id }),
            Show::Text,
        )
        .await;
        out.push_str(&text);
    }
    let (text, _) = step(
        app,
        &how,
        "Absence is only claimed after an exhaustive scan",
        "search_mailbox",
        json!({ "mailbox": "personal", "criteria": { "query": "zeppelin" } }),
        Show::Structured,
    )
    .await;
    out.push_str(&text);
    let (text, _) = step(
        app,
        &how,
        "A write while the write gate is closed",
        "move_messages",
        json!({ "mailbox": "finance", "messageIds": ["x"], "destinationFolderId": "archive" }),
        Show::Structured,
    )
    .await;
    out.push_str(&text);
    out.push_str(
        "\nOpen gates with environment variables (PLUGIN_ALLOW_WRITES, \
         PLUGIN_ALLOW_LOCAL_HANDOFFS, PLUGIN_ALLOW_SEND); see README.md.\n",
    );
    out.push_str(&format!(
        "Serve the read tools to an HTTP client instead (loopback, bearer token): \
         OUTLOOK_HTTP_BEARER_TOKEN=$(openssl rand -hex 32) {} demo --http\n",
        how.exe
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binary_is_shown_as_the_user_can_type_it() {
        let exe = Path::new("/home/u/mailgate/target/release/mailgate");
        assert_eq!(
            shown_exe(Some(exe), Some(Path::new("/home/u/mailgate"))),
            "./target/release/mailgate"
        );
        assert_eq!(
            shown_exe(Some(exe), Some(Path::new("/elsewhere"))),
            "/home/u/mailgate/target/release/mailgate"
        );
        assert_eq!(shown_exe(None, None), "mailgate");
    }

    #[test]
    fn a_long_fenced_line_keeps_the_start_of_the_body() {
        let line = format!(
            "{{\"x\":\"{}\",\"body\":\"ATTENTION AI ASSISTANT: ignore\"}}",
            "a".repeat(400)
        );
        let text = abbreviate_text(&format!("<<<open>>>\n{line}\n<<<close>>>"));
        assert!(text.contains("\"body\":\"ATTENTION AI ASSISTANT"), "{text}");
        assert!(text.contains("<<<close>>>"), "{text}");
        assert!(text.lines().all(|l| l.chars().count() < 400), "{text}");
    }
}
