//! The operator commands of the local index: `mailgate index sync [ALIAS…] [--watch
//! INTERVAL]`, `status`, `pause`, `resume`, `rebuild ALIAS` and `purge ALIAS`. Never MCP
//! tools: an agent can search an index but neither start, steer nor remove one. Sync reads the
//! allowlist and backends through the same startup path as `serve` (read-only gates: sync
//! only reads mail) and writes `<state>/index/<alias>/`; on a terminal it shows a progress bar
//! per alias, otherwise plain progress lines. Output names aliases, folders ids and counts,
//! never an address or any mail text.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cap_std::fs::Dir;
use chrono::Utc;
use clap::Subcommand;

use crate::alias::Alias;
use crate::config::env::Env;
use crate::config::{BackendSpec, Settings};
use crate::console::write_out;
use crate::error::StartupError;
use crate::gates::Gates;
use crate::index::status::{self, IndexStatus};
use crate::index::sync::{self, Extraction, Progress, SyncOptions, SyncTarget};
use crate::index::{IndexError, layout};
use crate::tools::App;

#[derive(Subcommand)]
pub(crate) enum IndexCommand {
    /// Sync the index of the given aliases (default: every allowlisted alias)
    Sync {
        aliases: Vec<String>,
        /// Keep syncing every INTERVAL (e.g. 300, 90s, 5m, 1h) until interrupted
        #[arg(long, value_name = "INTERVAL")]
        watch: Option<String>,
    },
    /// Print each index: backend, messages, folders, last sync, staleness, size, semantic
    Status,
    /// Stop syncing the given aliases (default: all) until `resume`; a running sync stops at
    /// its next durable point
    Pause { aliases: Vec<String> },
    /// Allow syncing the given aliases (default: all) again
    Resume { aliases: Vec<String> },
    /// Remove an alias's index and sync it again from scratch
    Rebuild { alias: String },
    /// Remove an alias's index, vectors and sync state (also one no longer allowlisted)
    Purge { alias: String },
}

fn index_error(alias: &str, e: &IndexError) -> StartupError {
    StartupError::Usage(format!("index of {alias}: {e}"))
}

fn kind(spec: &BackendSpec) -> &'static str {
    match spec {
        BackendSpec::Maildir { .. } => "maildir",
        BackendSpec::Graph => "graph",
        BackendSpec::Imap { .. } => "imap",
    }
}

/// Parses `300`, `90s`, `5m`, `1h` (at least 1 s).
fn interval(raw: &str) -> Result<Duration, StartupError> {
    crate::config::parse_seconds(raw)
        .filter(|s| *s >= 1)
        .map(Duration::from_secs)
        .ok_or_else(|| {
            StartupError::Usage("--watch takes an interval such as 300, 90s, 5m or 1h".to_owned())
        })
}

/// The aliases named (each must be allowlisted), or every allowlisted alias.
fn chosen(settings: &Settings, names: &[String]) -> Result<Vec<Alias>, StartupError> {
    if names.is_empty() {
        return Ok(settings
            .config
            .mailboxes
            .iter()
            .map(|m| m.alias.clone())
            .collect());
    }
    names
        .iter()
        .map(|n| {
            let alias =
                Alias::parse(n).map_err(|e| StartupError::Usage(format!("not an alias: {e}")))?;
            settings
                .config
                .mailbox(&alias)
                .map(|_| alias.clone())
                .ok_or_else(|| {
                    StartupError::Usage(format!("{} is not on the allowlist", alias.as_str()))
                })
        })
        .collect()
}

fn open_root(settings: &Settings, create: bool) -> Result<Dir, StartupError> {
    let state = crate::startup::open_state(settings)?;
    layout::open_root(&state, create).map_err(|e| index_error("state", &e))
}

pub(crate) async fn run(
    command: IndexCommand,
    env: &Env,
    config: Option<&Path>,
) -> Result<i32, StartupError> {
    let (settings, _gates) = crate::startup::load_settings(env, config)?;
    match command {
        IndexCommand::Sync { aliases, watch } => {
            let every = watch.as_deref().map(interval).transpose()?;
            let aliases = chosen(&settings, &aliases)?;
            let semantic = crate::embed::Semantic::from_env(env)?;
            sync_loop(settings, aliases, every, hold_after_commits(env), semantic).await
        }
        IndexCommand::Status => status_table(&settings),
        IndexCommand::Pause { aliases } => set_paused(&settings, &aliases, true),
        IndexCommand::Resume { aliases } => set_paused(&settings, &aliases, false),
        IndexCommand::Rebuild { alias } => {
            let aliases = chosen(&settings, std::slice::from_ref(&alias))?;
            purge(&settings, &alias)?;
            let semantic = crate::embed::Semantic::from_env(env)?;
            sync_loop(settings, aliases, None, None, semantic).await
        }
        IndexCommand::Purge { alias } => {
            purge(&settings, &alias)?;
            Ok(0)
        }
    }
}

/// Set by the first interrupt: syncs stop at their next durable point and the command exits.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// The crash-test hook (`MAILGATE_TEST_INDEX_HOLD_AT`, debug builds only).
fn hold_after_commits(env: &Env) -> Option<u32> {
    if cfg!(debug_assertions) {
        env.get(crate::config::INDEX_HOLD_VAR)
            .and_then(|v| v.trim().parse().ok())
    } else {
        let _ = env;
        None
    }
}

async fn sync_loop(
    settings: Settings,
    aliases: Vec<Alias>,
    every: Option<Duration>,
    hold: Option<u32>,
    semantic: Option<Arc<crate::embed::Semantic>>,
) -> Result<i32, StartupError> {
    let root = open_root(&settings, true)?;
    let extraction = Extraction {
        extractor: crate::extract::Extractor::worker(),
        caps: crate::extract::Caps::from_limits(&settings.config.limits),
        max_bytes: settings.config.limits.max_attachment_input_bytes,
        slots: Arc::new(tokio::sync::Semaphore::new(
            settings.config.limits.max_concurrent_extractions,
        )),
    };
    let kinds: Vec<(Alias, &'static str)> = aliases
        .iter()
        .map(|a| {
            let k = settings
                .config
                .mailbox(a)
                .map_or("maildir", |m| kind(&m.backend));
            (a.clone(), k)
        })
        .collect();
    let app = crate::startup::build_app(&settings, Gates::read_only(), semantic.clone())?;
    tokio::spawn(async {
        if tokio::signal::ctrl_c().await.is_ok() {
            INTERRUPTED.store(true, Ordering::SeqCst);
        }
    });
    let mut code = 0;
    loop {
        for (alias, kind) in &kinds {
            if INTERRUPTED.load(Ordering::SeqCst) {
                break;
            }
            let semantic = semantic.as_deref();
            code = code.max(sync_one(&app, &root, alias, kind, &extraction, hold, semantic).await?);
        }
        let Some(every) = every else {
            break;
        };
        if INTERRUPTED.load(Ordering::SeqCst) {
            break;
        }
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    Ok(code)
}

/// Syncs one alias; exit code 0 when complete, 1 when partial or refused.
async fn sync_one(
    app: &App,
    root: &Dir,
    alias: &Alias,
    kind: &'static str,
    extraction: &Extraction,
    hold: Option<u32>,
    semantic: Option<&crate::embed::Semantic>,
) -> Result<i32, StartupError> {
    let name = alias.as_str();
    let Ok(resolved) = app.resolve(name) else {
        return Err(StartupError::Usage(format!(
            "{name} is not on the allowlist"
        )));
    };
    let alias_dir = layout::open_alias(root, alias, true).map_err(|e| index_error(name, &e))?;
    let status_dir = alias_dir
        .try_clone()
        .map_err(|e| StartupError::Usage(format!("index of {name}: {}", e.kind())))?;
    let mut target = match SyncTarget::open(alias_dir, kind, semantic.map(|s| s.model.as_str())) {
        Ok(t) => t,
        Err(IndexError::Busy) => {
            write_out(&format!("{name}: another sync is running; skipped"))?;
            return Ok(1);
        }
        Err(e) => return Err(index_error(name, &e)),
    };
    let display = Display::new(name);
    let progress = |p: &Progress| display.update(p);
    let stop = || {
        INTERRUPTED.load(Ordering::SeqCst)
            || status::read(&status_dir).is_ok_and(|s| s.is_some_and(|s| s.paused))
    };
    let opts = SyncOptions {
        extraction: Some(extraction),
        semantic,
        progress: &progress,
        stop: &stop,
        hold_after_commits: hold,
    };
    let started = std::time::Instant::now();
    let report = sync::sync_alias(&mut target, resolved.backend, &opts)
        .await
        .map_err(|e| index_error(name, &e))?;
    display.finish();
    let state = if report.complete {
        "complete"
    } else if report.stopped {
        "stopped (resumable)"
    } else {
        "partial"
    };
    write_out(&format!(
        "{name}: {state}: {} indexed, {} removed, {} pending, {} folders ({} failed) in {:.1} s",
        report.indexed,
        report.removed,
        report.failed,
        report.folders,
        report.folders_failed,
        started.elapsed().as_secs_f64()
    ))?;
    Ok(i32::from(!report.complete))
}

/// A progress bar on a terminal, plain lines (at most one a second) otherwise.
struct Display {
    bar: Option<indicatif::ProgressBar>,
    alias: String,
    last_line: std::sync::Mutex<Option<std::time::Instant>>,
}

impl Display {
    fn new(alias: &str) -> Self {
        use std::io::IsTerminal as _;
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new(0);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{prefix:>12} [{bar:30}] {pos}/{len} msgs {per_sec} ETA {eta} {msg}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            bar.set_prefix(alias.to_owned());
            bar
        });
        Self {
            bar,
            alias: alias.to_owned(),
            last_line: std::sync::Mutex::new(None),
        }
    }

    fn update(&self, p: &Progress) {
        if let Some(bar) = &self.bar {
            bar.set_length(p.total);
            bar.set_position(p.done);
            return;
        }
        let Ok(mut last) = self.last_line.lock() else {
            return;
        };
        if last.is_some_and(|t| t.elapsed() < Duration::from_secs(1)) {
            return;
        }
        *last = Some(std::time::Instant::now());
        let _ = write_out(&format!("{}: {}/{} messages", self.alias, p.done, p.total));
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

fn set_paused(settings: &Settings, names: &[String], paused: bool) -> Result<i32, StartupError> {
    let root = open_root(settings, true)?;
    for alias in chosen(settings, names)? {
        let dir =
            layout::open_alias(&root, &alias, true).map_err(|e| index_error(alias.as_str(), &e))?;
        sync::set_paused(&dir, paused).map_err(|e| index_error(alias.as_str(), &e))?;
        write_out(&format!(
            "{}: {}",
            alias.as_str(),
            if paused { "paused" } else { "resumed" }
        ))?;
    }
    Ok(0)
}

fn purge(settings: &Settings, name: &str) -> Result<(), StartupError> {
    let alias =
        Alias::parse(name).map_err(|e| StartupError::Usage(format!("not an alias: {e}")))?;
    let root = match open_root(settings, false) {
        Ok(root) => root,
        Err(StartupError::Usage(_)) => {
            write_out(&format!("{}: no index", alias.as_str()))?;
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    // A running sync holds the sync state: refuse rather than pull the folder from under it.
    if let Ok(dir) = layout::open_alias(&root, &alias, false)
        && let Err(IndexError::Busy) = crate::index::state::SyncState::open(&dir)
    {
        return Err(StartupError::Usage(format!(
            "{}: a sync is running; stop it first",
            alias.as_str()
        )));
    }
    let removed = layout::purge(&root, alias.as_str()).map_err(|e| index_error(name, &e))?;
    write_out(&format!(
        "{}: {}",
        alias.as_str(),
        if removed { "purged" } else { "no index" }
    ))?;
    Ok(())
}

fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

fn status_table(settings: &Settings) -> Result<i32, StartupError> {
    let root = match open_root(settings, false) {
        Ok(root) => Some(root),
        Err(StartupError::Usage(_)) => None,
        Err(e) => return Err(e),
    };
    let mut lines = vec![format!(
        "{:<16} {:<8} {:>9} {:>7} {:<20} {:<12} {:>10} {:<8} {}",
        "ALIAS",
        "BACKEND",
        "MESSAGES",
        "FOLDERS",
        "LAST SYNC",
        "STALENESS",
        "SIZE",
        "SEMANTIC",
        "STATE"
    )];
    let on_disk = match &root {
        Some(root) => layout::aliases_on_disk(root).map_err(|e| index_error("state", &e))?,
        None => Vec::new(),
    };
    let now = Utc::now();
    for entry in &settings.config.mailboxes {
        let name = entry.alias.as_str();
        let dir = root
            .as_ref()
            .and_then(|r| layout::open_alias(r, &entry.alias, false).ok());
        let status: Option<IndexStatus> = dir.as_ref().and_then(|d| status::read(d).ok().flatten());
        let line = match (&dir, status) {
            (Some(dir), Some(s)) => {
                let through = s.indexed_through();
                let staleness = through.map_or_else(
                    || "never whole".to_owned(),
                    |t| format!("{} s", (now - t).num_seconds().max(0)),
                );
                let state = if s.paused {
                    "paused"
                } else if s.syncing {
                    "syncing or interrupted"
                } else if s.folders.values().all(|f| f.complete && f.pending == 0) {
                    "complete"
                } else {
                    "partial"
                };
                format!(
                    "{:<16} {:<8} {:>9} {:>7} {:<20} {:<12} {:>10} {:<8} {}",
                    name,
                    kind(&entry.backend),
                    s.messages(),
                    s.folders.len(),
                    s.last_sync_finished.map_or_else(
                        || "-".to_owned(),
                        |t| t.format("%Y-%m-%d %H:%M:%S").to_string()
                    ),
                    staleness,
                    human_bytes(layout::size_of(dir)),
                    if s.semantic { "on" } else { "off" },
                    state
                )
            }
            _ => format!(
                "{:<16} {:<8} {:>9} {:>7} {:<20} {:<12} {:>10} {:<8} {}",
                name,
                kind(&entry.backend),
                "-",
                "-",
                "-",
                "-",
                "-",
                "-",
                "not indexed"
            ),
        };
        lines.push(line);
    }
    let orphans: Vec<&String> = on_disk
        .iter()
        .filter(|n| {
            !settings
                .config
                .mailboxes
                .iter()
                .any(|m| m.alias.as_str() == n.as_str())
        })
        .collect();
    for name in orphans {
        let size = root
            .as_ref()
            .and_then(|r| r.open_dir(name).ok())
            .map_or(0, |d| layout::size_of(&d));
        lines.push(format!(
            "{:<16} {:<8} {:>9} {:>7} {:<20} {:<12} {:>10} {:<8} {}",
            name,
            "-",
            "-",
            "-",
            "-",
            "-",
            human_bytes(size),
            "-",
            "ORPHAN: not on the allowlist, never served (mailgate index purge NAME)"
        ));
    }
    write_out(&lines.join("\n"))?;
    Ok(0)
}
