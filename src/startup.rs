//! Startup: turns the resolved settings into the one immutable [`App`] a process serves.
//!
//! Invariant: every backend is opened and pinned to its alias here, before anything is served;
//! a mailbox that cannot be opened aborts startup rather than failing later. Everything this
//! process keeps in the state folder (journal, downloads, handoffs; the outbox through
//! `tools::send`) is opened through [`open_state`] and `path_guard`'s private-folder checks, so
//! a state folder or entry another user could have planted is refused here, naming the rule.
//!
//! A mailbox with `backend.auth` (issue 37) gets its alias's delegated token source here, over
//! the one grant store of the process (`<state folder>/grants`, key from
//! `MAILGATE_GRANT_KEY_FILE` when set), and, for Graph, a client of its own. Nothing of that
//! touches the network, and an alias that has not signed in yet does not stop startup: its
//! calls answer `AUTH_REQUIRED`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::alias::Alias;
use crate::backends::bearer::DelegatedBearer;
use crate::backends::graph::client::GraphClient;
use crate::backends::{Backend, Grants, OpenError, Registry};
use crate::config::env::Env;
use crate::config::{Access, BackendSpec, ConfigError, DOWNLOAD_DIR, Settings};
use crate::downloads::DownloadRoot;
use crate::error::StartupError;
use crate::gates::Gates;
use crate::handoff::{HandoffStore, StoreLimits};
use crate::path_guard;
use crate::telemetry::Journal;
use crate::tools::App;
use crate::tools::catalog;

const SEARCH_MEMORY_MAX_BYTES: u64 = 1024 * 1024;
/// The handoff root's name inside the state folder (fixed: no caller or config names it).
pub(crate) const HANDOFF_DIR: &str = "handoffs";

/// Resolves everything a command needs, failing closed on the first problem: the config file
/// and variable names ([`crate::config::read_config`]), the gates ([`Gates::resolve`],
/// environment-authoritative), then the state paths and switches
/// ([`crate::config::resolve_settings`]). The gates are resolved here, not in `config`, because
/// gates depend on config types and config must not call gates (issue 10, clean layering); the
/// order of the three steps is the order in which their refusals are reported.
pub(crate) fn load_settings(
    env: &Env,
    config_override: Option<&Path>,
) -> Result<(Settings, Gates), ConfigError> {
    let (config, config_path) = crate::config::read_config(env, config_override)?;
    let gates = Gates::resolve(env, &config)?;
    let settings = crate::config::resolve_settings(env, config, config_path)?;
    Ok((settings, gates))
}

/// Builds the app for `gates` (the HTTP transport passes read-only gates whatever the settings).
pub(crate) fn build_app(
    settings: &Settings,
    gates: Gates,
    semantic: Option<Arc<crate::embed::Semantic>>,
    shared: Option<crate::index::store::postgres::instance::SharedDatabase>,
) -> Result<Arc<App>, StartupError> {
    // One Graph client (connection pool, app token) for every Graph mailbox without
    // backend.auth; its settings exist exactly when one is listed, and a bad credential or URL
    // stops startup here.
    let graph = settings
        .graph
        .as_ref()
        .map(crate::backends::graph::client)
        .transpose()
        .map_err(StartupError::Graph)?;
    // The delegated aliases' token sources, and a Graph client of its own for each delegated
    // Graph mailbox (same roots as the app's).
    let (shared_index, shared_keys) = match shared {
        Some(db) => (Some(db.settings), Some(db.cursor_keys)),
        None => (None, None),
    };
    let delegated = open_delegated(settings, &gates, shared_index.as_ref())?;
    let delegated_graph = delegated_graph_clients(settings, &delegated)?;
    // Every upstream account's limits, planned before any backend opens, so the aliases of one
    // account share one set.
    let budgets = shared_index
        .as_ref()
        .map(|pg| crate::index::store::postgres::pool(pg, SHARED_BUDGET_CONNECTIONS))
        .transpose()
        .map_err(|e| StartupError::IndexStore(e.to_string()))?
        .map(|pool| {
            let limits = crate::index::store::postgres::buckets::DatabaseLimits(Arc::new(pool));
            Arc::new(limits) as Arc<dyn crate::coordination::upstream::SharedLimits>
        });
    let upstream = crate::coordination::upstream::UpstreamLimits::plan(
        budgets,
        settings
            .config
            .mailboxes
            .iter()
            .filter_map(Backend::account_of),
    );
    let mut entries = Vec::with_capacity(settings.config.mailboxes.len());
    for mailbox in &settings.config.mailboxes {
        let login = settings.imap_logins.get(&mailbox.alias);
        let graph = delegated_graph.get(&mailbox.alias).or(graph.as_ref());
        let tokens = delegated.get(&mailbox.alias);
        let backend =
            Backend::open(mailbox, graph, login, tokens, &upstream).map_err(|e| match e {
                OpenError::Maildir(e) => StartupError::MaildirUnavailable {
                    alias: mailbox.alias.to_string(),
                    kind: e.kind(),
                },
                OpenError::Imap(why) => StartupError::Imap {
                    alias: mailbox.alias.to_string(),
                    why,
                },
            })?;
        let grants = Grants {
            write: gates.writes && mailbox.access != Access::Read,
            file_sent: gates
                .send
                .as_ref()
                .is_some_and(|send| send.from_alias == mailbox.alias),
        };
        entries.push((mailbox.alias.clone(), backend, grants));
    }
    // Not used for expansion yet, but a configured file must pass the same checks as
    // plugin.json, so a bad deployment fails now rather than when expansion lands.
    if let Some(path) = &settings.config.search_memory_path {
        path_guard::read_private_file(path, SEARCH_MEMORY_MAX_BYTES)
            .map_err(StartupError::SearchMemory)?;
    }
    let journal = if settings.journal {
        Some(Journal::open(&open_state(settings)?).map_err(StartupError::Journal)?)
    } else {
        None
    };
    // The download root exists only for a process that may write (security.md §3).
    let downloads = if gates.is_open(crate::gates::Gate::Writes) {
        Some(Arc::new(open_download_root(settings)?))
    } else {
        None
    };
    // The handoff store exists only for a process with the handoff gate open; opening it sweeps
    // bundles left uncommitted by a crash and bundles past their TTL.
    let handoffs = if gates.is_open(crate::gates::Gate::Handoffs) {
        Some(Arc::new(open_handoff_store(settings)?))
    } else {
        None
    };
    // The outbound policy and transport exist only for a process that may send.
    let send = gates
        .send
        .as_ref()
        .map(|send| {
            let alias = &send.from_alias;
            crate::tools::send::SendState::open(
                settings,
                send,
                delegated_graph.get(alias).or(graph.as_ref()),
                delegated.get(alias),
                || open_state(settings),
            )
        })
        .transpose()?;
    let indexes = open_indexes(settings, shared_index.as_ref())?;
    let coordination =
        crate::coordination::Coordination::open(settings.cursor_keys_file.as_deref(), shared_keys)
            .map_err(StartupError::CursorKeys)?;
    let tools = catalog::build(&gates);
    Ok(Arc::new(App {
        config: settings.config.clone(),
        extraction_slots: Arc::new(tokio::sync::Semaphore::new(
            settings.config.limits.max_concurrent_extractions.max(1),
        )),
        extractor: crate::extract::Extractor::worker(),
        call_slots: tokio::sync::Semaphore::new(crate::tools::MAX_CALLS_IN_FLIGHT),
        person_slots: settings
            .config
            .principals
            .iter()
            .map(|p| {
                let share = tokio::sync::Semaphore::new(crate::tools::PERSON_CALLS_IN_FLIGHT);
                (p.label.clone(), share)
            })
            .collect(),
        gates,
        backends: Registry::new(entries),
        journal,
        send,
        tools,
        output_schemas: settings.output_schemas,
        downloads,
        handoffs,
        indexes,
        semantic,
        coordination,
    }))
}

/// The token source of every mailbox with `backend.auth`, by alias: its sign-in as the config
/// and the gates decide it (scopes follow the catalog), over one grant store opened for the
/// process: the shared database's grant rows when the index store is shared (`shared`), else
/// the state folder's `grants/` (created 0700 when missing; `MAILGATE_GRANT_KEY_FILE`'s key,
/// checked now, when set). No request is made: a refresh happens at the first call that needs a
/// token, and an alias without a grant answers `AUTH_REQUIRED` then.
fn open_delegated(
    settings: &Settings,
    gates: &Gates,
    shared: Option<&crate::index::store::postgres::PgSettings>,
) -> Result<BTreeMap<Alias, DelegatedBearer>, StartupError> {
    use crate::delegated::account::DelegatedAccount;
    use crate::delegated::source::DelegatedTokens;
    let env = settings.delegated_env.env();
    let mut store: Option<GrantPlaces> = None;
    let mut bearers = BTreeMap::new();
    for entry in &settings.config.mailboxes {
        let account = DelegatedAccount::of(entry, gates, env)
            .map_err(|e| StartupError::Usage(e.to_string()))?;
        let Some(account) = account else {
            continue;
        };
        let places = match &store {
            Some(places) => places,
            None => store.insert(GrantPlaces::open(env, settings, shared, true)?.ok_or_else(
                || StartupError::Usage("the grant store could not be opened".to_owned()),
            )?),
        };
        let account = Arc::new(account);
        let tokens = DelegatedTokens::new(
            places.place(settings, entry),
            account.binding.clone(),
            account.scopes.clone(),
            account.refresher(),
        );
        bearers.insert(
            entry.alias.clone(),
            DelegatedBearer::new(account.alias(), Arc::new(tokens)),
        );
    }
    Ok(bearers)
}

/// Where the delegated grants of this process are kept: one grant store for every alias, the
/// state folder's or the shared database's.
pub(crate) enum GrantPlaces {
    Folder(Arc<crate::delegated::grants::GrantStore>),
    Shared(Arc<crate::delegated::shared::SharedGrants>),
}

impl GrantPlaces {
    /// The shared database's grant rows when `shared` names one (its key must be
    /// `MAILGATE_GRANT_KEY_FILE`'s: every instance seals and opens the same rows), else
    /// `<state>/grants`. `create`: make the state folder and `grants/` when missing (login and
    /// the server); otherwise `None` when there is no folder store yet.
    pub(crate) fn open(
        env: &Env,
        settings: &Settings,
        shared: Option<&crate::index::store::postgres::PgSettings>,
        create: bool,
    ) -> Result<Option<GrantPlaces>, StartupError> {
        use crate::delegated::grants::GrantStore;
        use crate::delegated::grants::{GRANT_KEY_FILE_VAR, GRANTS_DIR, GrantError, GrantKey};
        let key_file = env.get(GRANT_KEY_FILE_VAR).map(Path::new);
        if let Some(pg) = shared {
            let Some(key_file) = key_file else {
                return Err(StartupError::Usage(format!(
                    "the index store is shared (MAILGATE_INDEX_URL), so the delegated grants \
                     live in its database, sealed with one key every instance holds: set \
                     {GRANT_KEY_FILE_VAR} to that key's file"
                )));
            };
            let key = GrantKey::read_external(key_file)
                .map_err(|e| StartupError::Usage(format!("the shared grant store: {e}")))?;
            let rows = crate::index::store::postgres::grant_rows::PgGrantRows::new(pg.clone());
            return Ok(Some(GrantPlaces::Shared(Arc::new(
                crate::delegated::shared::SharedGrants::new(Arc::new(rows), key),
            ))));
        }
        let state = match path_guard::open_state_dir(settings.state_dir()?, create) {
            Ok(dir) => dir,
            Err(path_guard::PrivateDirError::Missing) if !create => return Ok(None),
            Err(e) => return Err(StartupError::StateDir(e)),
        };
        match GrantStore::open(&state, key_file, create) {
            Ok(store) => Ok(Some(GrantPlaces::Folder(Arc::new(store)))),
            Err(GrantError::Dir(path_guard::PrivateDirError::Missing)) if !create => Ok(None),
            Err(e) => Err(StartupError::Usage(format!(
                "the grant store ({GRANTS_DIR}): {e}"
            ))),
        }
    }

    /// Where `entry`'s grant is: the folder's file of its alias, or the row of its mailbox
    /// identity (the index's key, so the row is under the same row-level security).
    pub(crate) fn place(
        &self,
        settings: &Settings,
        entry: &crate::config::MailboxEntry,
    ) -> crate::delegated::source::GrantPlace {
        use crate::delegated::source::GrantPlace;
        match self {
            GrantPlaces::Folder(store) => GrantPlace::Folder(Arc::clone(store)),
            GrantPlaces::Shared(grants) => {
                let tenant = settings.graph.as_ref().map(|g| g.tenant_id.as_str());
                GrantPlace::Shared {
                    grants: Arc::clone(grants),
                    mailbox: crate::index::status::mailbox_identity(entry, tenant),
                }
            }
        }
    }
}

/// A Graph client for each Graph mailbox with `backend.auth`, by alias, carrying its alias's
/// tokens to the roots `MAILGATE_GRAPH_BASE_URL` / `MAILGATE_GRAPH_LOGIN_URL` name (else the
/// public cloud's), as the app's client does.
fn delegated_graph_clients(
    settings: &Settings,
    delegated: &BTreeMap<Alias, DelegatedBearer>,
) -> Result<BTreeMap<Alias, Arc<GraphClient>>, StartupError> {
    use crate::config::graph::{BASE_URL_VAR, DEFAULT_BASE_URL, DEFAULT_LOGIN_URL, LOGIN_URL_VAR};
    let env = settings.delegated_env.env();
    let base = env.get(BASE_URL_VAR).unwrap_or(DEFAULT_BASE_URL);
    let login = env.get(LOGIN_URL_VAR).unwrap_or(DEFAULT_LOGIN_URL);
    let mut clients = BTreeMap::new();
    for entry in &settings.config.mailboxes {
        let BackendSpec::Graph { auth: Some(_) } = &entry.backend else {
            continue;
        };
        let Some(bearer) = delegated.get(&entry.alias) else {
            continue;
        };
        let client = crate::backends::graph::delegated_client(base, login, bearer.clone())
            .map_err(StartupError::Graph)?;
        clients.insert(entry.alias.clone(), client);
    }
    Ok(clients)
}

/// The indexes the server reads. With a shared store, every alias's index in it (a pool of
/// connections, opened as answers need them: an index synced later is served without a
/// restart). Otherwise the local indexes the operator has synced, opened read-only: only when
/// the state folder already exists (the server never creates it for an index), and never fatal
/// (an alias whose index cannot be opened searches live, with a warning in the log).
fn open_indexes(
    settings: &Settings,
    shared: Option<&crate::index::store::postgres::PgSettings>,
) -> Result<crate::index::reader::Indexes, StartupError> {
    use crate::index::reader::Indexes;
    if let Some(shared) = shared {
        let pool = crate::index::store::postgres::pool(shared, SHARED_INDEX_CONNECTIONS)
            .map_err(|e| StartupError::IndexStore(e.to_string()))?;
        return Ok(Indexes::shared(&pool, settings));
    }
    Ok(open_local_indexes(settings))
}

/// Connections the server keeps to the shared index store at most (answers beyond wait).
const SHARED_INDEX_CONNECTIONS: usize = 8;
/// Connections for the shared command budgets (one short statement per upstream command).
const SHARED_BUDGET_CONNECTIONS: usize = 4;

fn open_local_indexes(settings: &Settings) -> crate::index::reader::Indexes {
    use crate::index::reader::Indexes;
    let staleness = settings.index_max_staleness;
    let Ok(state_path) = settings.state_dir() else {
        return Indexes::none(staleness);
    };
    match path_guard::open_state_dir(state_path, false) {
        Ok(state) => Indexes::open(&state, settings),
        Err(path_guard::PrivateDirError::Missing) => Indexes::none(staleness),
        Err(e) => {
            tracing::warn!(error = %e, "the state folder is refused; no local index is served");
            Indexes::none(staleness)
        }
    }
}

/// Opens the state folder (created 0700 when missing) after `path_guard`'s private-folder
/// check: a real directory owned by this user with no group or other bits.
/// Without a known home folder this is the startup error naming `MAILGATE_HOME`; it is only
/// reached when something open needs the folder.
pub(crate) fn open_state(settings: &Settings) -> Result<cap_std::fs::Dir, StartupError> {
    path_guard::open_state_dir(settings.state_dir()?, true).map_err(StartupError::StateDir)
}

/// The download root: `<state>/downloads` is a state entry and gets the private-folder check;
/// a folder the operator named elsewhere (`MAILGATE_DOWNLOAD_DIR`) must be ours and not writable
/// by others, but may be readable by them (the files in it are 0600 anyway).
fn open_download_root(settings: &Settings) -> Result<DownloadRoot, StartupError> {
    let download_dir = settings.download_dir()?;
    let in_state = settings
        .state_dir()
        .is_ok_and(|state| download_dir == state.join(DOWNLOAD_DIR));
    let dir = if in_state {
        path_guard::open_private_child(&open_state(settings)?, DOWNLOAD_DIR, true)
    } else {
        path_guard::open_checked_dir(download_dir, path_guard::ModeRule::OwnerWriteOnly, true)
    };
    Ok(DownloadRoot::new(dir.map_err(StartupError::DownloadDir)?))
}

/// Opens `<state>/handoffs` (created 0700), checks it and sweeps it.
pub(crate) fn open_handoff_store(settings: &Settings) -> Result<HandoffStore, StartupError> {
    let root = path_guard::open_private_child(&open_state(settings)?, HANDOFF_DIR, true)
        .map_err(|e| StartupError::HandoffStore(e.to_string()))?;
    let store = HandoffStore::new(
        root,
        StoreLimits::new(&settings.config.limits, settings.handoff_ttl),
        settings.handoff_crash_at,
    )
    .map_err(|e| StartupError::HandoffStore(e.to_string()))?;
    let report = store
        .sweep()
        .map_err(|e| StartupError::HandoffStore(e.to_string()))?;
    if report.left_in_place > 0 {
        tracing::warn!(
            entries = report.left_in_place,
            "the handoff root holds entries mailgate will not serve; run `mailgate handoff verify`"
        );
    }
    Ok(store)
}
