//! The operator commands of the local index: `mailgate index sync [ALIAS…] [--watch
//! INTERVAL]`, `status`, `pause`, `resume`, `rebuild ALIAS` and `purge ALIAS [--force]`. Never
//! MCP tools: an agent can search an index but neither start, steer nor remove one. Sync reads
//! the allowlist and backends through the same startup path as `serve` (read-only gates: sync
//! only reads mail) and writes `<state>/index/<alias>/`; on a terminal it shows a progress bar
//! per alias, otherwise plain progress lines. Output names aliases, folders ids and counts,
//! never an address or any mail text.
//!
//! A sync never claims more than it did. SIGINT and SIGTERM stop every sync at its next durable
//! point (a second signal exits at once: everything on disk is crash-safe) and the command
//! exits 130 or 143, printing `interrupted`, never `complete`. `index sync` refuses an index
//! synced from another mailbox than the alias names now (until `index rebuild`), and starts an
//! index built by another text analysis over, saying so.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
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
use crate::index::reader::{Coverage, Doubt, Scope};
use crate::index::status::{self, IndexStatus};
use crate::index::store::{Opened, Rebuild, WriteStore};
use crate::index::sync::{self, Extraction, HoldPoint, Progress, SyncOptions};
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
    Purge {
        alias: String,
        /// Remove it even when its folder fails the privacy check (too open a mode), as long as
        /// it is a real folder owned by the user mailgate runs as
        #[arg(long)]
        force: bool,
    },
    /// Create or upgrade the shared index's schema in the PostgreSQL database
    /// MAILGATE_INDEX_URL names (never done by a serving process)
    Migrate,
}

fn index_error(alias: &str, e: &IndexError) -> StartupError {
    StartupError::Usage(format!("index of {alias}: {e}"))
}

fn kind(spec: &BackendSpec) -> &'static str {
    match spec {
        BackendSpec::Maildir { .. } => "maildir",
        BackendSpec::Graph { .. } => "graph",
        BackendSpec::Imap { .. } => "imap",
    }
}

/// The identity of the mailbox `alias` names in `settings` (`status::mailbox_identity`).
fn identity(settings: &Settings, alias: &Alias) -> Option<String> {
    let tenant = settings.graph.as_ref().map(|g| g.tenant_id.as_str());
    settings
        .config
        .mailbox(alias)
        .map(|entry| status::mailbox_identity(entry, tenant))
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

/// `<state>/index`; `Ok(None)` when it does not exist and `create` is off. A folder that fails
/// its privacy check is an error naming the rule, never "no index".
fn open_root(settings: &Settings, create: bool) -> Result<Option<Dir>, StartupError> {
    let state = crate::startup::open_state(settings)?;
    match layout::open_root(&state, create) {
        Ok(root) => Ok(Some(root)),
        Err(IndexError::Missing) => Ok(None),
        Err(e) => Err(index_error("state", &e)),
    }
}

fn created_root(settings: &Settings) -> Result<Dir, StartupError> {
    open_root(settings, true)?.ok_or_else(|| index_error("state", &IndexError::Missing))
}

pub(crate) async fn run(
    command: IndexCommand,
    env: &Env,
    config: Option<&Path>,
) -> Result<i32, StartupError> {
    let (settings, _gates) = crate::startup::load_settings(env, config)?;
    if let IndexCommand::Migrate = command {
        return migrate(env).await;
    }
    let shared = crate::index::store::postgres::resolve(env)?;
    match (command, shared) {
        (IndexCommand::Sync { aliases, watch }, shared) => {
            let every = watch.as_deref().map(interval).transpose()?;
            let aliases = chosen(&settings, &aliases)?;
            let semantic = crate::embed::Semantic::from_env(env)?;
            let place = Place::of(&settings, shared)?;
            sync_loop(settings, place, aliases, every, hold_point(env), semantic).await
        }
        (IndexCommand::Status, None) => status_table(&settings),
        (IndexCommand::Status, Some(pg)) => shared_status_table(&settings, &pg).await,
        (IndexCommand::Pause { aliases }, shared) => {
            let place = Place::of(&settings, shared)?;
            set_paused(&settings, &place, &aliases, true).await
        }
        (IndexCommand::Resume { aliases }, shared) => {
            let place = Place::of(&settings, shared)?;
            set_paused(&settings, &place, &aliases, false).await
        }
        (IndexCommand::Rebuild { alias }, shared) => {
            let aliases = chosen(&settings, std::slice::from_ref(&alias))?;
            match &shared {
                None => purge(&settings, &alias, false)?,
                Some(pg) => shared_purge(&settings, pg, &alias).await?,
            };
            let semantic = crate::embed::Semantic::from_env(env)?;
            let place = Place::of(&settings, shared)?;
            sync_loop(settings, place, aliases, None, None, semantic).await
        }
        (IndexCommand::Purge { alias, force }, None) => purge(&settings, &alias, force),
        (IndexCommand::Purge { alias, .. }, Some(pg)) => shared_purge(&settings, &pg, &alias).await,
        (IndexCommand::Migrate, _) => migrate(env).await,
    }
}

/// `index migrate`: brings the shared store's schema to this binary's version.
async fn migrate(env: &Env) -> Result<i32, StartupError> {
    use crate::index::store::postgres;
    let Some(pg) = postgres::resolve(env)? else {
        return Err(StartupError::Usage(
            "MAILGATE_INDEX_URL is not set: the indexes are local, and have no schema to migrate"
                .to_owned(),
        ));
    };
    let store = |e: postgres::PgError| StartupError::IndexStore(e.to_string());
    let (mut client, note) = postgres::connect_to_migrate(&pg).await.map_err(store)?;
    let done = postgres::migrations::migrate(&mut client)
        .await
        .map_err(store)?;
    if done.applied.is_empty() {
        write_out(&format!("schema: version {}, up to date", done.to))?;
    } else {
        write_out(&format!(
            "schema: version {} -> {} (applied: {})",
            done.from,
            done.to,
            done.applied.join(", ")
        ))?;
    }
    if let Some(note) = note {
        write_out(&note)?;
    }
    Ok(0)
}

/// The exit code of the signal that asked the syncs to stop (128 + its number: 130 for
/// SIGINT, 143 for SIGTERM); 0 until one came.
static INTERRUPTED: AtomicI32 = AtomicI32::new(0);

fn interrupted() -> Option<i32> {
    match INTERRUPTED.load(Ordering::SeqCst) {
        0 => None,
        code => Some(code),
    }
}

/// Records SIGINT and SIGTERM: the first stops every sync at its next durable point and wakes
/// a `--watch` waiting for its next round; a second exits at once (the index and its state are
/// crash-safe at every point, as after `kill -9`). The handlers are installed before this
/// returns, so no signal after it takes the default (killing) action.
fn listen_for_signals(wake: Arc<tokio::sync::Notify>) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        tracing::warn!("index sync: signal handlers could not be installed");
        return;
    };
    tokio::spawn(async move {
        loop {
            let code = tokio::select! {
                _ = int.recv() => 130,
                _ = term.recv() => 143,
            };
            if INTERRUPTED
                .compare_exchange(0, code, Ordering::SeqCst, Ordering::SeqCst)
                .is_err()
            {
                std::process::exit(code);
            }
            wake.notify_one();
        }
    });
}

/// The test hook (`MAILGATE_TEST_INDEX_HOLD_AT`, debug builds only): `fetch:N`, `commit:N`,
/// `folder:N` or `N` (see [`HoldPoint`]).
fn hold_point(env: &Env) -> Option<HoldPoint> {
    if cfg!(debug_assertions) {
        env.get(crate::config::INDEX_HOLD_VAR)
            .and_then(HoldPoint::parse)
    } else {
        let _ = env;
        None
    }
}

/// One alias to sync: its name, backend kind and the identity of the mailbox it names.
struct Target {
    alias: Alias,
    kind: &'static str,
    mailbox: String,
}

/// Where the indexes a sync writes live.
enum Place {
    /// `<state>/index`.
    Local(Dir),
    Shared(crate::index::store::postgres::PgSettings),
}

impl Place {
    fn of(
        settings: &Settings,
        shared: Option<crate::index::store::postgres::PgSettings>,
    ) -> Result<Self, StartupError> {
        Ok(match shared {
            Some(pg) => Place::Shared(pg),
            None => Place::Local(created_root(settings)?),
        })
    }
}

async fn sync_loop(
    settings: Settings,
    place: Place,
    aliases: Vec<Alias>,
    every: Option<Duration>,
    hold: Option<HoldPoint>,
    semantic: Option<Arc<crate::embed::Semantic>>,
) -> Result<i32, StartupError> {
    let wake = Arc::new(tokio::sync::Notify::new());
    listen_for_signals(Arc::clone(&wake));
    let extraction = Extraction {
        extractor: crate::extract::Extractor::worker(),
        caps: crate::extract::Caps::from_limits(&settings.config.limits),
        max_bytes: settings.config.limits.max_attachment_input_bytes,
        slots: Arc::new(tokio::sync::Semaphore::new(
            settings.config.limits.max_concurrent_extractions,
        )),
    };
    let targets: Vec<Target> = aliases
        .iter()
        .filter_map(|a| {
            let entry = settings.config.mailbox(a)?;
            Some(Target {
                alias: a.clone(),
                kind: kind(&entry.backend),
                mailbox: identity(&settings, a)?,
            })
        })
        .collect();
    // The syncs read mail through the app (with the shared database's command budgets when
    // there is one: syncs on several instances keep to an account's limits together).
    let shared = match &place {
        Place::Shared(pg) => Some(
            crate::index::store::postgres::instance::SharedDatabase::open(pg.clone())
                .await
                .map_err(|e| StartupError::IndexStore(e.to_string()))?,
        ),
        Place::Local(_) => None,
    };
    let app = crate::startup::build_app(&settings, Gates::read_only(), semantic.clone(), shared)?;
    let mut code = 0;
    loop {
        for target in &targets {
            // Stopped before every alias of the round was synced: the command was interrupted.
            if let Some(signal) = interrupted() {
                return Ok(signal);
            }
            let semantic = semantic.as_deref();
            let done = sync_one(&app, &place, target, &extraction, hold, semantic).await?;
            // A signal that cut a sync short: the command exits by it. One that came too late
            // to stop anything (the sync finished, its line says so) changes nothing here; the
            // next alias, if any, is not started.
            if let Synced::Interrupted(signal) = done {
                return Ok(signal);
            }
            code = code.max(done.code());
        }
        let Some(every) = every else {
            break;
        };
        // Interrupted between rounds: nothing was cut short, the last round's code stands.
        if interrupted().is_some() {
            break;
        }
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = wake.notified() => break,
        }
    }
    Ok(code)
}

/// How one alias's sync ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Synced {
    Complete,
    /// Partial (a folder failed, messages pending), paused, refused or busy.
    Incomplete,
    /// Stopped by a signal (its exit code) before it was complete.
    Interrupted(i32),
}

impl Synced {
    fn code(self) -> i32 {
        match self {
            Synced::Complete => 0,
            Synced::Incomplete => 1,
            Synced::Interrupted(code) => code,
        }
    }
}

fn rebuild_reason(why: Rebuild) -> String {
    match why {
        Rebuild::Analyzer { was: Some(was) } => format!(
            "it was built by text analysis version {was}, and this mailgate reads version {}",
            crate::text::ANALYZER_VERSION
        ),
        Rebuild::Analyzer { was: None } => format!(
            "it was built before text analysis versions were recorded (this mailgate reads \
             version {})",
            crate::text::ANALYZER_VERSION
        ),
        Rebuild::Unbound => "it does not record which mailbox it was synced from".to_owned(),
    }
}

/// Syncs one alias.
async fn sync_one(
    app: &App,
    place: &Place,
    target: &Target,
    extraction: &Extraction,
    hold: Option<HoldPoint>,
    semantic: Option<&crate::embed::Semantic>,
) -> Result<Synced, StartupError> {
    let alias = &target.alias;
    let name = alias.as_str();
    // The operator's command: every allowlisted mailbox is theirs to index.
    let backend = crate::caller::Caller::Operator
        .grant(&app.config, alias)
        .and_then(|granted| app.backends.get(&granted))
        .ok_or_else(|| StartupError::Usage(format!("{name} is not on the allowlist")))?;
    let (opened, status_dir) = match place {
        Place::Local(root) => {
            let alias_dir =
                layout::open_alias(root, alias, true).map_err(|e| index_error(name, &e))?;
            // The pause marker first (issue 36): an alias paused before its first sync has the
            // marker and no `status.json`, and the store reads the pause with the status, so
            // it would create the index, write a status and list the mailbox before `stop`
            // heard the pause. A marker that fails its checks is an error, as in `status::read`.
            if status::is_paused(&alias_dir).map_err(|e| index_error(name, &e))? {
                (Ok(Opened::Paused), None)
            } else {
                let status_dir = alias_dir
                    .try_clone()
                    .map_err(|e| StartupError::Usage(format!("index of {name}: {}", e.kind())))?;
                let opened = WriteStore::open_local(
                    alias_dir,
                    &target.mailbox,
                    semantic.map(|s| s.model.as_str()),
                );
                (opened, Some(status_dir))
            }
        }
        Place::Shared(pg) => (
            WriteStore::open_postgres(pg, &target.mailbox, semantic.map(|s| s.model.as_str()))
                .await,
            None,
        ),
    };
    let mut sync_target = match opened {
        Ok(Opened::Ready(t)) => t,
        Ok(Opened::MailboxChanged) => {
            write_out(&format!(
                "{name}: refused: the index holds another mailbox than the one plugin.json now \
                 names for {name}, and is not served; nothing was synced. Run `mailgate index \
                 rebuild {name}` to start it over from this mailbox"
            ))?;
            return Ok(Synced::Incomplete);
        }
        Ok(Opened::Paused) => {
            write_out(&format!(
                "{name}: stopped: paused (`mailgate index resume {name}` lets it sync again)"
            ))?;
            return Ok(Synced::Incomplete);
        }
        Err(IndexError::Busy) => {
            write_out(&format!("{name}: another sync is running; skipped"))?;
            return Ok(Synced::Incomplete);
        }
        Err(e) => return Err(index_error(name, &e)),
    };
    if let Some(why) = sync_target.rebuilt() {
        write_out(&format!(
            "{name}: rebuilding the index from scratch: {}",
            rebuild_reason(why)
        ))?;
    }
    let display = Display::new(name);
    let progress = |p: &Progress| display.update(p);
    // A pause marker that cannot be read stops the sync too: never sync past a pause.
    let pause_flag = sync_target.pause_flag();
    let paused = || match (&status_dir, &pause_flag) {
        (Some(dir), _) => !matches!(status::is_paused(dir), Ok(false)),
        (None, Some(flag)) => flag.load(Ordering::Relaxed),
        (None, None) => false,
    };
    let stop = || interrupted().is_some() || paused();
    let opts = SyncOptions {
        backend_kind: target.kind,
        mailbox: &target.mailbox,
        extraction: Some(extraction),
        semantic,
        progress: &progress,
        stop: &stop,
        hold,
    };
    let started = std::time::Instant::now();
    let report = sync::sync_alias(&mut sync_target, backend, &opts).await;
    sync_target.close().await;
    let report = report.map_err(|e| index_error(name, &e))?;
    display.finish();
    let signal = interrupted().filter(|_| report.stopped && !report.complete);
    let sign_in = format!(
        "stopped: the sign-in must be renewed (`mailgate auth login {name}`, then sync again)"
    );
    let state = if report.complete {
        "complete"
    } else if report.sign_in_required {
        &sign_in
    } else if signal.is_some() {
        "interrupted (resumable; the next sync goes on)"
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
    Ok(match signal {
        Some(code) => Synced::Interrupted(code),
        None if report.complete => Synced::Complete,
        None => Synced::Incomplete,
    })
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

/// `index pause` and `resume`: the pause marker of each alias's local index, or its flag in the
/// shared store.
async fn set_paused(
    settings: &Settings,
    place: &Place,
    names: &[String],
    paused: bool,
) -> Result<i32, StartupError> {
    for alias in chosen(settings, names)? {
        let set = match place {
            Place::Local(root) => layout::open_alias(root, &alias, true)
                .and_then(|dir| status::set_paused(&dir, paused)),
            Place::Shared(pg) => {
                let mailbox = identity(settings, &alias).unwrap_or_default();
                crate::index::store::postgres::admin::set_paused(pg, &mailbox, paused).await
            }
        };
        set.map_err(|e| index_error(alias.as_str(), &e))?;
        write_out(&format!(
            "{}: {}",
            alias.as_str(),
            if paused { "paused" } else { "resumed" }
        ))?;
    }
    Ok(0)
}

/// The refusal of a purge whose folder fails its check: nothing is removed, and the operator
/// hears which rule failed and how to remove it anyway.
fn purge_refused(name: &str, e: &IndexError) -> StartupError {
    StartupError::Usage(format!(
        "{name}: nothing was removed: {e}. Fix the folder, or run `mailgate index purge {name} \
         --force` to remove the index anyway (a real folder owned by the user mailgate runs as)"
    ))
}

/// Removes an alias's index. A folder that fails its privacy check is refused naming the rule
/// (exit 1), never taken for "no index"; with `force`, a real folder owned by the user mailgate
/// runs as is removed whatever its mode (a symlink, or another user's folder, never).
fn purge(settings: &Settings, name: &str, force: bool) -> Result<i32, StartupError> {
    let alias =
        Alias::parse(name).map_err(|e| StartupError::Usage(format!("not an alias: {e}")))?;
    let name = alias.as_str();
    let no_index = || -> Result<i32, StartupError> {
        write_out(&format!("{name}: no index"))?;
        Ok(0)
    };
    let state = crate::startup::open_state(settings)?;
    let root = match layout::open_root(&state, false) {
        Ok(root) => root,
        Err(IndexError::Missing) => return no_index(),
        Err(IndexError::Folder(_)) if force => {
            match layout::open_owned(&state, layout::ROOT, layout::ROOT_NAME) {
                Ok(root) => root,
                Err(IndexError::Missing) => return no_index(),
                Err(e) => return Err(purge_refused(name, &e)),
            }
        }
        Err(e) => return Err(purge_refused(name, &e)),
    };
    let dir = match layout::open_alias(&root, &alias, false) {
        Ok(dir) => dir,
        Err(IndexError::Missing) => return no_index(),
        Err(IndexError::Folder(_)) if force => {
            match layout::open_owned(&root, name, layout::ALIAS_NAME) {
                Ok(dir) => dir,
                Err(IndexError::Missing) => return no_index(),
                Err(e) => return Err(purge_refused(name, &e)),
            }
        }
        Err(e) => return Err(purge_refused(name, &e)),
    };
    // A running sync holds the sync state: refuse rather than pull the folder from under it.
    if let Err(IndexError::Busy) = crate::index::state::SyncState::open(&dir) {
        return Err(StartupError::Usage(format!(
            "{name}: a sync is running; stop it first"
        )));
    }
    drop(dir);
    let removed = layout::purge(&root, name).map_err(|e| index_error(name, &e))?;
    if removed {
        write_out(&format!("{name}: purged"))?;
        Ok(0)
    } else {
        no_index()
    }
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

/// What the STATE column says of an index, from the one verdict the server uses.
fn state_of(s: &IndexStatus, coverage: &Coverage, name: &str) -> String {
    if s.paused {
        return "paused".to_owned();
    }
    if s.sign_in_required {
        return format!("SIGN-IN REQUIRED: sync stopped (mailgate auth login {name})");
    }
    if coverage.doubts.contains(&Doubt::MailboxChanged) {
        return format!(
            "MAILBOX CHANGED: not served; the alias names another mailbox now \
             (mailgate index rebuild {name})"
        );
    }
    if coverage.doubts.contains(&Doubt::RebuildNeeded) {
        return format!(
            "REBUILD NEEDED: not served; built by another text analysis \
             (mailgate index sync {name} rebuilds it)"
        );
    }
    let base = if s.syncing {
        "syncing or interrupted"
    } else if coverage.doubts.contains(&Doubt::Partial) {
        "partial"
    } else {
        "complete"
    };
    if coverage.doubts.contains(&Doubt::Stale) && !s.syncing {
        format!("{base}, stale")
    } else {
        base.to_owned()
    }
}

fn status_row(cells: [&str; 9]) -> String {
    format!(
        "{:<16} {:<8} {:>9} {:>7} {:<20} {:<12} {:>10} {:<8} {}",
        cells[0], cells[1], cells[2], cells[3], cells[4], cells[5], cells[6], cells[7], cells[8]
    )
}

/// The status line of an alias whose index has no status to show: only its state.
fn unserved_row(name: &str, backend: &str, state: &str) -> String {
    status_row([name, backend, "-", "-", "-", "-", "-", "-", state])
}

fn status_header() -> String {
    status_row([
        "ALIAS",
        "BACKEND",
        "MESSAGES",
        "FOLDERS",
        "LAST SYNC",
        "STALENESS",
        "SIZE",
        "SEMANTIC",
        "STATE",
    ])
}

/// The status line of an alias whose index holds a status.
fn synced_row(
    settings: &Settings,
    alias: &Alias,
    s: &IndexStatus,
    size: &str,
    now: chrono::DateTime<Utc>,
) -> String {
    let name = alias.as_str();
    let backend = settings
        .config
        .mailbox(alias)
        .map_or("-", |entry| kind(&entry.backend));
    let max_staleness =
        chrono::Duration::from_std(settings.index_max_staleness).unwrap_or(chrono::Duration::MAX);
    let mailbox = identity(settings, alias).unwrap_or_default();
    let coverage = Coverage::of(s, &mailbox, Scope::Mailbox, max_staleness, now);
    let served = coverage.serves();
    let staleness = s.indexed_through().map_or_else(
        || "never whole".to_owned(),
        |t| format!("{} s", (now - t).num_seconds().max(0)),
    );
    let last = s.last_sync_finished.map_or_else(
        || "-".to_owned(),
        |t| t.format("%Y-%m-%d %H:%M:%S").to_string(),
    );
    let dash = |v: String| if served { v } else { "-".to_owned() };
    status_row([
        name,
        backend,
        &dash(s.messages().to_string()),
        &dash(s.folders.len().to_string()),
        &dash(last),
        &dash(staleness),
        size,
        if s.semantic { "on" } else { "off" },
        &state_of(s, &coverage, name),
    ])
}

/// The status of every allowlisted alias's index in the shared store (`Ok(None)`: never
/// synced): `index status` and `policy explain` read them.
pub(crate) async fn shared_statuses(
    settings: &Settings,
    pg: &crate::index::store::postgres::PgSettings,
) -> Result<crate::report::SharedStatuses, StartupError> {
    use crate::index::store::postgres;
    let pool = postgres::checked_pool(pg, 1)
        .await
        .map_err(|e| StartupError::IndexStore(e.to_string()))?;
    let mut out = crate::report::SharedStatuses::new();
    for entry in &settings.config.mailboxes {
        let mailbox = identity(settings, &entry.alias).unwrap_or_default();
        let status = match postgres::read::PgRead::new(pool.clone(), mailbox)
            .status()
            .await
        {
            Ok(status) => Ok(Some(status)),
            Err(IndexError::Missing) => Ok(None),
            Err(e) => Err(e.to_string()),
        };
        out.insert(entry.alias.clone(), status);
    }
    Ok(out)
}

/// `index status` of the shared store: every allowlisted alias's index in it (an index of a
/// mailbox no alias names is not reachable by name, so the store lists no orphans).
async fn shared_status_table(
    settings: &Settings,
    pg: &crate::index::store::postgres::PgSettings,
) -> Result<i32, StartupError> {
    let statuses = shared_statuses(settings, pg).await?;
    let now = Utc::now();
    let mut code = 0;
    let mut lines = vec![status_header()];
    for entry in &settings.config.mailboxes {
        let name = entry.alias.as_str();
        let backend = kind(&entry.backend);
        let line = match statuses.get(&entry.alias) {
            Some(Ok(Some(s))) => synced_row(settings, &entry.alias, s, "-", now),
            Some(Err(e)) => {
                code = 1;
                unserved_row(name, backend, &format!("UNREADABLE: {e}"))
            }
            Some(Ok(None)) | None => unserved_row(name, backend, "not indexed"),
        };
        lines.push(line);
    }
    lines.push(format!(
        "store: {}",
        crate::index::store::StoreKind::Postgres.describe()
    ));
    write_out(&lines.join("\n"))?;
    Ok(code)
}

/// Removes an allowlisted alias's index from the shared store (never from under a running
/// sync).
async fn shared_purge(
    settings: &Settings,
    pg: &crate::index::store::postgres::PgSettings,
    name: &str,
) -> Result<i32, StartupError> {
    use crate::index::store::postgres::admin::{self, Purged};
    let alias = chosen(settings, &[name.to_owned()])?
        .pop()
        .ok_or_else(|| StartupError::Usage(format!("{name} is not on the allowlist")))?;
    let mailbox = identity(settings, &alias).unwrap_or_default();
    match admin::purge(pg, &mailbox).await {
        Ok(Purged::Removed) => write_out(&format!("{name}: purged"))?,
        Ok(Purged::Nothing) => write_out(&format!("{name}: no index"))?,
        Err(IndexError::Busy) => {
            return Err(StartupError::Usage(format!(
                "{name}: a sync is running; stop it first"
            )));
        }
        Err(e) => return Err(index_error(name, &e)),
    }
    Ok(0)
}

fn status_table(settings: &Settings) -> Result<i32, StartupError> {
    let root = open_root(settings, false)?;
    let mut code = 0;
    let mut lines = vec![status_header()];
    let on_disk = match &root {
        Some(root) => layout::aliases_on_disk(root).map_err(|e| index_error("state", &e))?,
        None => Vec::new(),
    };
    let now = Utc::now();
    for entry in &settings.config.mailboxes {
        let name = entry.alias.as_str();
        let backend = kind(&entry.backend);
        let read = root.as_ref().map(|r| {
            let dir = layout::open_alias(r, &entry.alias, false)?;
            let status = status::read(&dir)?;
            Ok::<_, IndexError>((dir, status))
        });
        let line = match read {
            Some(Ok((dir, Some(s)))) => synced_row(
                settings,
                &entry.alias,
                &s,
                &human_bytes(layout::size_of(&dir)),
                now,
            ),
            // Paused before its first sync: only the marker is there (the shared store shows
            // such a mailbox paused too).
            Some(Ok((dir, None))) => match status::is_paused(&dir) {
                Ok(true) => unserved_row(name, backend, "paused"),
                Ok(false) => unserved_row(name, backend, "not indexed"),
                Err(e) => {
                    code = 1;
                    unserved_row(name, backend, &format!("REFUSED, never served: {e}"))
                }
            },
            Some(Err(e)) if !matches!(e, IndexError::Missing) => {
                code = 1;
                unserved_row(name, backend, &format!("REFUSED, never served: {e}"))
            }
            _ => unserved_row(name, backend, "not indexed"),
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
        lines.push(status_row([
            name,
            "-",
            "-",
            "-",
            "-",
            "-",
            &human_bytes(size),
            "-",
            "ORPHAN: not on the allowlist, never served (mailgate index purge NAME)",
        ]));
    }
    // Where the indexes live: every alias's is in the same store.
    lines.push(format!(
        "store: {}",
        crate::index::store::StoreKind::Local.describe()
    ));
    write_out(&lines.join("\n"))?;
    Ok(code)
}
