//! Startup's loading: find and read the config file, then resolve the [`Settings`] (state
//! folders, switches, Graph and IMAP credentials) from the environment snapshot, once.
//!
//! Invariant: [`read_config`] and [`resolve_settings`] are the two halves of startup, with the
//! gates resolved between them (`startup::load_settings`), and each fails closed on the first
//! problem. The file is read only through [`path_guard::read_private_file`] (owner and mode
//! checked, no symlink, bounded size), and a refusal about it names the file as the operator
//! gave it (or the default as resolved), never anything inside it.
//!
//! Who calls it: startup (`cli`, `policy explain/check`, `demo`). Everything else receives the
//! finished [`Settings`].

use std::path::{Path, PathBuf};

#[cfg(debug_assertions)]
use super::state::HANDOFF_CRASH_VAR;
use super::state::{
    CrashPoint, DOWNLOAD_DIR, DOWNLOAD_DIR_VAR, HOME_DIR_VAR, cursor_keys_file, download_var,
    handoff_ttl, index_max_staleness, state_dir,
};
use super::values::{parse_bool, reject_control_chars};
use super::{Config, ConfigError, check_unknown_variables, env, graph, imap};
use crate::alias::Alias;
use crate::path_guard::{self, PrivateFileError};

/// Largest `plugin.json` accepted: it lists mailboxes and limits, never data.
pub(crate) const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// Environment variable naming the config file.
pub(crate) const CONFIG_PATH_VAR: &str = "OUTLOOK_PLUGIN_CONFIG";
/// The reference plugin's log level (error|warn|info|debug); `MAILGATE_LOG` wins when set.
pub const LOG_LEVEL_VAR: &str = "LOG_LEVEL";
/// mailgate's own log level variable (read by `cli` for `telemetry::init_tracing`).
pub const MAILGATE_LOG_VAR: &str = "MAILGATE_LOG";
/// Environment variable switching the run journal on.
pub(crate) const JOURNAL_VAR: &str = "MAILGATE_JOURNAL";
/// Environment variable overriding `searchMemoryPath`.
pub(crate) const SEARCH_MEMORY_VAR: &str = "PLUGIN_SEARCH_MEMORY_PATH";

/// Everything resolved once at startup.
#[derive(Clone, Debug)]
pub struct Settings {
    pub config: Config,
    /// Absolute path of the config file that was read.
    #[cfg_attr(not(test), expect(dead_code, reason = "read by the unit tests only"))]
    pub(crate) config_path: PathBuf,
    /// `None` when no home folder is known: fine until something needs the state folder
    /// ([`Settings::state_dir`] then names the variable to set).
    state_dir: Option<PathBuf>,
    /// `None` exactly when no download variable is set and the state folder is unknown.
    download_dir: Option<PathBuf>,
    pub journal: bool,
    /// Whether `tools/list` declares output schemas ([`env::OUTPUT_SCHEMAS_VAR`]).
    pub output_schemas: bool,
    /// How long a handoff bundle is served ([`HANDOFF_TTL_VAR`](super::HANDOFF_TTL_VAR)).
    pub handoff_ttl: std::time::Duration,
    /// How old a local index may be before it proves no absence ([`INDEX_MAX_STALENESS_VAR`](super::INDEX_MAX_STALENESS_VAR)).
    pub index_max_staleness: std::time::Duration,
    /// The cursor key ring file ([`CURSOR_KEYS_FILE_VAR`](super::CURSOR_KEYS_FILE_VAR)),
    /// `None` for keys of the process alone.
    pub cursor_keys_file: Option<PathBuf>,
    /// Crash tests only; always `None` in release builds.
    pub handoff_crash_at: Option<CrashPoint>,
    /// The Graph app credentials and endpoints; `Some` exactly when a Graph mailbox without
    /// `backend.auth` is listed.
    pub graph: Option<graph::GraphSettings>,
    /// The login of every IMAP mailbox without `backend.auth`, by alias (empty when none is
    /// listed).
    pub imap_logins: std::collections::BTreeMap<Alias, imap::ImapLogin>,
    /// What the delegated sign-ins (`backend.auth`) read from the environment.
    pub delegated_env: DelegatedEnv,
}

/// The grant store's key file variable (the main crate's `delegated::grants` reads it).
const GRANT_KEY_FILE_VAR: &str = "MAILGATE_GRANT_KEY_FILE";

/// The part of the environment a delegated sign-in and its backends read (issue 37), and
/// nothing else: the Graph roots, the grant key file, and the `clientSecretEnv` each
/// `backend.auth` names; empty when no mailbox has `backend.auth`. Kept as an [`env::Env`]
/// because the sign-in code takes one; `Debug` names the variables, never a value (it sits in
/// [`Settings`]).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct DelegatedEnv(env::Env);

impl DelegatedEnv {
    fn capture(env: &env::Env, config: &Config) -> DelegatedEnv {
        let auths: Vec<&super::OAuthSpec> = config
            .mailboxes
            .iter()
            .filter_map(|m| match &m.backend {
                super::BackendSpec::Graph { auth } | super::BackendSpec::Imap { auth, .. } => {
                    auth.as_ref()
                }
                super::BackendSpec::Maildir { .. } => None,
            })
            .collect();
        if auths.is_empty() {
            return DelegatedEnv::default();
        }
        let names = [
            graph::BASE_URL_VAR,
            graph::LOGIN_URL_VAR,
            GRANT_KEY_FILE_VAR,
        ]
        .into_iter()
        .chain(auths.iter().filter_map(|auth| auth.client_secret_env()));
        DelegatedEnv(env::Env::from_pairs(names.filter_map(|name| {
            env.raw(name)
                .map(|value| (name.to_owned(), value.to_owned()))
        })))
    }

    /// The captured variables, as the sign-in code reads them.
    pub fn env(&self) -> &env::Env {
        &self.0
    }
}

impl std::fmt::Debug for DelegatedEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.names()).finish()
    }
}

impl Settings {
    /// The state folder, or the refusal naming `MAILGATE_HOME` when no home folder is known.
    /// Only what is opened (journal, handoff store, outbox, default downloads) asks for it, so
    /// a process whose open gates need no state folder starts without `HOME`.
    pub fn state_dir(&self) -> Result<&Path, ConfigError> {
        self.state_dir.as_deref().ok_or(ConfigError::NoHome {
            what: "state directory",
            instead: HOME_DIR_VAR,
        })
    }

    /// The download folder (`MAILGATE_DOWNLOAD_DIR` or `DOWNLOAD_DIR`, else
    /// `<state folder>/downloads`).
    pub fn download_dir(&self) -> Result<&Path, ConfigError> {
        self.download_dir.as_deref().ok_or(ConfigError::NoHome {
            what: "download folder",
            instead: DOWNLOAD_DIR_VAR,
        })
    }
}

/// Reads and validates the config file and checks the environment's variable names: the first
/// half of what startup needs (`startup::load_settings` resolves the gates, then
/// [`resolve_settings`]), failing closed on the first problem. Returns the config and the
/// absolute path it was read from.
///
/// - Config path: `config_override` > `OUTLOOK_PLUGIN_CONFIG` (blank = absent) >
///   `~/.config/mailgate/plugin.json` > the reference plugin's `~/.config/mcp-outlook/plugin.json`
///   (only when mailgate's default does not exist); read with [`path_guard::read_private_file`].
///   `~` is `HOME`, else the account's home folder ([`env::Env::home`]).
/// - `searchMemoryPath`: `PLUGIN_SEARCH_MEMORY_PATH` (trimmed, non-empty) wins over the file.
/// - Unknown variables with a reserved prefix: [`check_unknown_variables`].
pub fn read_config(
    env: &env::Env,
    config_override: Option<&Path>,
) -> Result<(Config, PathBuf), ConfigError> {
    let (config_path, shown_path, bytes) = read_config_file(env, config_override)?;
    let base_dir = config_path.parent().unwrap_or(Path::new("/"));
    let mut config = Config::from_json(&bytes, base_dir).map_err(|e| ConfigError::InFile {
        path: shown_path,
        source: Box::new(e),
    })?;

    if let Some(path) = env.get(SEARCH_MEMORY_VAR) {
        reject_control_chars(path, SEARCH_MEMORY_VAR)?;
        config.search_memory_path =
            Some(std::path::absolute(path).map_err(|_| ConfigError::CurrentDir)?);
    }

    check_unknown_variables(env, &config)?;
    Ok((config, config_path))
}

/// The second half (after the gates): the state directories and the switches.
///
/// - State dir: `MAILGATE_HOME` (absolute) > `~/.mailgate`; unknown is not an error here.
///   Download dir: `MAILGATE_DOWNLOAD_DIR` or the reference's `DOWNLOAD_DIR` (absolute; both set
///   and different is refused) > `<state dir>/downloads`. Nothing is created here.
/// - Journal: `MAILGATE_JOURNAL`, strict boolean, default off. Output schemas in `tools/list`:
///   `MAILGATE_OUTPUT_SCHEMAS`, strict boolean, default off.
pub fn resolve_settings(
    env: &env::Env,
    config: Config,
    config_path: PathBuf,
) -> Result<Settings, ConfigError> {
    let state_dir = match state_dir(env) {
        Ok(dir) => Some(dir),
        Err(ConfigError::NoHome { .. }) => None,
        Err(other) => return Err(other),
    };
    let download_dir = match download_var(env)? {
        Some(path) => Some(path),
        None => state_dir.as_ref().map(|state| state.join(DOWNLOAD_DIR)),
    };
    let journal = parse_bool(JOURNAL_VAR, env.raw(JOURNAL_VAR))?.unwrap_or(false);
    let output_schemas =
        parse_bool(env::OUTPUT_SCHEMAS_VAR, env.raw(env::OUTPUT_SCHEMAS_VAR))?.unwrap_or(false);
    let handoff_ttl = handoff_ttl(env)?;
    let index_max_staleness = index_max_staleness(env)?;
    let cursor_keys_file = cursor_keys_file(env)?;
    let graph = graph::resolve(env, &config)?;
    let imap_logins = imap::resolve(env, &config)?;
    let delegated_env = DelegatedEnv::capture(env, &config);
    #[cfg(debug_assertions)]
    let handoff_crash_at = env
        .get(HANDOFF_CRASH_VAR)
        .map(|s| CrashPoint::parse(s).ok_or(ConfigError::BadCrashPoint))
        .transpose()?;
    #[cfg(not(debug_assertions))]
    let handoff_crash_at = None;

    Ok(Settings {
        config,
        config_path,
        state_dir,
        download_dir,
        journal,
        output_schemas,
        handoff_ttl,
        index_max_staleness,
        cursor_keys_file,
        handoff_crash_at,
        graph,
        imap_logins,
        delegated_env,
    })
}

/// Finds and reads the config file (see [`read_config`]): its absolute path, the path as the
/// operator gave it (for messages) and its bytes. Every failure names the file it tried, as
/// given (a default is shown as resolved).
fn read_config_file(
    env: &env::Env,
    config_override: Option<&Path>,
) -> Result<(PathBuf, String, Vec<u8>), ConfigError> {
    let given = match (config_override, env.get(CONFIG_PATH_VAR)) {
        (Some(path), _) => Some(path.to_path_buf()),
        (None, Some(path)) => {
            reject_control_chars(path, CONFIG_PATH_VAR)?;
            Some(PathBuf::from(path))
        }
        (None, None) => None,
    };
    let read = |path: &Path| -> Result<(PathBuf, String, Vec<u8>), ConfigError> {
        let absolute = std::path::absolute(path).map_err(|_| ConfigError::CurrentDir)?;
        path_guard::read_private_file(&absolute, MAX_CONFIG_BYTES)
            .map(|bytes| (absolute, shown(path), bytes))
            .map_err(|e| in_file(path, ConfigError::File(e)))
    };
    if let Some(path) = given {
        return read(&path);
    }
    let home = env.home().ok_or(ConfigError::NoHome {
        what: "config file",
        instead: CONFIG_PATH_VAR,
    })?;
    let primary = home.join(".config").join("mailgate").join("plugin.json");
    match read(&primary) {
        Err(ConfigError::InFile { source, .. })
            if matches!(*source, ConfigError::File(PrivateFileError::NotAvailable)) =>
        {
            // A reference user's file is used as it is, but only when mailgate's own default
            // is absent: a mailgate file is never shadowed.
            let fallback = home.join(".config").join("mcp-outlook").join("plugin.json");
            match read(&fallback) {
                Err(ConfigError::InFile { source, .. })
                    if matches!(*source, ConfigError::File(PrivateFileError::NotAvailable)) =>
                {
                    Err(ConfigError::NoConfigFile {
                        primary: shown(&primary),
                        fallback: shown(&fallback),
                    })
                }
                other => other,
            }
        }
        other => other,
    }
}

/// `error` with the config file it came from.
fn in_file(path: &Path, error: ConfigError) -> ConfigError {
    ConfigError::InFile {
        path: shown(path),
        source: Box::new(error),
    }
}

/// A path for a one-line message: as given, with control characters escaped so a name cannot
/// break the line (only `--config` can carry them; the variable refuses them).
fn shown(path: &Path) -> String {
    path.to_string_lossy()
        .chars()
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_debug().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect()
}

#[cfg(test)]
#[expect(
    clippy::disallowed_methods,
    reason = "tests write fixture config files inside a tempdir"
)]
mod tests {
    use super::*;
    use crate::config::BackendSpec;
    use crate::config::env::Env;
    use crate::config::fixtures::{
        LOCAL, load_settings, load_settings_and_gates, with_mailboxes, write_config,
    };

    /// The delegated sign-ins see the variables they read and nothing else, and `Debug` shows
    /// names only.
    #[test]
    fn the_delegated_env_holds_only_what_a_sign_in_reads() {
        let parse =
            |json: &str| Config::from_json(json.as_bytes(), Path::new("/")).expect("config");
        let env = Env::from_pairs([
            (graph::BASE_URL_VAR, "http://127.0.0.1:9/v1.0"),
            (GRANT_KEY_FILE_VAR, "/etc/mailgate/grant.key"),
            ("GOOGLE_SECRET", "s3cret-value"),
            ("MICROSOFT_GRAPH_CLIENT_SECRET", "app-secret"),
        ]);
        let delegated = parse(
            r#"{"mailboxes": [{"alias": "gmail", "address": "robin@example.com",
                "backend": {"kind": "imap",
                "imap": {"host": "imap.gmail.com", "port": 993, "security": "tls"},
                "auth": {"kind": "oauth", "provider": "google",
                         "clientId": "app.apps.googleusercontent.com",
                         "clientSecretEnv": "GOOGLE_SECRET"}}}]}"#,
        );
        let captured = DelegatedEnv::capture(&env, &delegated);
        let names: Vec<&str> = captured.env().names().collect();
        assert_eq!(
            names,
            ["GOOGLE_SECRET", GRANT_KEY_FILE_VAR, graph::BASE_URL_VAR],
            "sorted, and not the app's secret"
        );
        assert_eq!(
            captured
                .env()
                .secret("GOOGLE_SECRET")
                .map(|s| s.expose().to_owned()),
            Some("s3cret-value".to_owned())
        );
        let shown = format!("{captured:?}");
        assert!(
            shown.contains("GOOGLE_SECRET") && !shown.contains("s3cret"),
            "{shown}"
        );
        let app_only = parse(r#"{"mailboxes": [{"alias": "f", "address": "f@example.com"}]}"#);
        assert_eq!(
            DelegatedEnv::capture(&env, &app_only),
            DelegatedEnv::default()
        );
    }

    #[test]
    fn load_settings_resolves_paths_and_defaults() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join(".config/mailgate")).expect("mkdir");
        write_config(
            &home.join(".config/mailgate"),
            "plugin.json",
            &with_mailboxes(
                r#"{"alias": "archive", "address": "archive@example.net",
                    "backend": {"kind": "maildir", "path": "mail"}}"#,
                r#", "allowWrites": true"#,
            ),
            0o600,
        );
        let env = Env::from_pairs([("HOME", home.to_str().expect("utf-8"))]);
        let (settings, gates) = load_settings_and_gates(&env, None).expect("loads");
        assert_eq!(
            settings.config_path,
            home.join(".config/mailgate/plugin.json")
        );
        assert_eq!(settings.state_dir().expect("known"), home.join(".mailgate"));
        assert_eq!(
            settings.download_dir().expect("known"),
            home.join(".mailgate/downloads")
        );
        assert!(!settings.journal);
        assert!(
            gates.writes,
            "file allowWrites applies when the env is silent"
        );
        assert!(!gates.handoffs);
        assert!(gates.send.is_none());
        match &settings.config.mailboxes[0].backend {
            BackendSpec::Maildir { path, .. } => {
                assert_eq!(path, &home.join(".config/mailgate/mail"));
            }
            other => panic!("expected maildir, got {other:?}"),
        }
    }

    #[test]
    fn load_settings_precedence_and_refusals() {
        let dir = tempfile::tempdir().expect("tempdir");
        let good = write_config(dir.path(), "good.json", &with_mailboxes(LOCAL, ""), 0o600);
        let other = write_config(dir.path(), "other.json", &with_mailboxes(LOCAL, ""), 0o600);
        let open = write_config(dir.path(), "open.json", &with_mailboxes(LOCAL, ""), 0o644);
        let state = dir.path().join("state");
        let good_s = good.to_str().expect("utf-8");
        let state_s = state.to_str().expect("utf-8");

        // The override argument beats OUTLOOK_PLUGIN_CONFIG; MAILGATE_HOME beats HOME.
        let env = Env::from_pairs([
            (CONFIG_PATH_VAR, good_s),
            (HOME_DIR_VAR, state_s),
            (DOWNLOAD_DIR_VAR, "/srv/downloads"),
            (JOURNAL_VAR, " Yes "),
            (SEARCH_MEMORY_VAR, "/srv/memory.yaml"),
        ]);
        let settings = load_settings(&env, Some(&other)).expect("loads");
        assert_eq!(settings.config_path, other);
        assert_eq!(settings.state_dir().expect("known"), state);
        assert_eq!(
            settings.download_dir().expect("known"),
            PathBuf::from("/srv/downloads")
        );
        assert!(settings.journal);
        assert_eq!(
            settings.config.search_memory_path,
            Some(PathBuf::from("/srv/memory.yaml"))
        );
        assert_eq!(load_settings(&env, None).expect("loads").config_path, good);

        // Blank OUTLOOK_PLUGIN_CONFIG counts as absent: falls back to HOME, which is missing.
        let env = Env::from_pairs([(CONFIG_PATH_VAR, "  "), (HOME_DIR_VAR, state_s)]);
        assert!(matches!(
            load_settings(&env, None),
            Err(ConfigError::NoHome {
                what: "config file",
                ..
            })
        ));

        let env = Env::from_pairs([(HOME_DIR_VAR, "relative/state")]);
        assert!(matches!(
            load_settings(&env, Some(&good)),
            Err(ConfigError::NotAbsolute { var: HOME_DIR_VAR })
        ));
        let env = Env::from_pairs([(HOME_DIR_VAR, state_s), (DOWNLOAD_DIR_VAR, "downloads")]);
        assert!(matches!(
            load_settings(&env, Some(&good)),
            Err(ConfigError::NotAbsolute {
                var: DOWNLOAD_DIR_VAR
            })
        ));
        let env = Env::from_pairs([(HOME_DIR_VAR, state_s), (JOURNAL_VAR, "sometimes")]);
        assert!(matches!(
            load_settings(&env, Some(&good)),
            Err(ConfigError::NotBoolean { var: JOURNAL_VAR })
        ));
        // No usable home: the settings load (a read-only process needs no state folder) and
        // only asking for the state folder names the variable to set.
        let env = Env::from_pairs([("HOME", "relative-home")]);
        let settings = load_settings(&env, Some(&good)).expect("loads without a home");
        assert!(matches!(
            settings.state_dir(),
            Err(ConfigError::NoHome {
                what: "state directory",
                instead: HOME_DIR_VAR,
            })
        ));
        assert!(matches!(
            settings.download_dir(),
            Err(ConfigError::NoHome {
                instead: DOWNLOAD_DIR_VAR,
                ..
            })
        ));

        let env = Env::from_pairs([(HOME_DIR_VAR, state_s)]);
        // Each refusal names the file it tried, as given (issue 9).
        let refused = |path: &Path| match load_settings(&env, Some(path)) {
            Err(ConfigError::InFile {
                path: shown,
                source,
            }) => {
                assert_eq!(shown, path.to_string_lossy());
                *source
            }
            other => panic!("expected a file error, got {other:?}"),
        };
        let error = load_settings(&env, Some(&open)).expect_err("0644 refused");
        assert!(
            error
                .to_string()
                .starts_with(&format!("{}: ", open.display())),
            "{error}"
        );
        assert!(matches!(
            refused(&open),
            ConfigError::File(PrivateFileError::TooPermissive)
        ));
        assert!(matches!(
            refused(&dir.path().join("missing.json")),
            ConfigError::File(PrivateFileError::NotAvailable)
        ));
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&good, &link).expect("symlink");
        assert!(matches!(
            refused(&link),
            ConfigError::File(PrivateFileError::NotRegularFile)
        ));
        let bad = write_config(dir.path(), "bad.json", "{\"mailboxes\": []}", 0o600);
        assert!(matches!(refused(&bad), ConfigError::Schema { .. }));
        // A relative path is shown as given, not resolved.
        let relative = Path::new("relative-missing.json");
        assert!(matches!(
            refused(relative),
            ConfigError::File(PrivateFileError::NotAvailable)
        ));
    }

    #[test]
    fn the_reference_default_config_is_the_fallback() {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = dir.path();
        let home_s = home.to_str().expect("utf-8");
        let env = Env::from_pairs([("HOME", home_s)]);
        // Neither file: the error names both.
        let error = load_settings(&env, None).expect_err("no file");
        let message = error.to_string();
        assert!(
            message.contains(".config/mailgate/plugin.json"),
            "{message}"
        );
        assert!(
            message.contains(".config/mcp-outlook/plugin.json"),
            "{message}"
        );

        std::fs::create_dir_all(home.join(".config/mcp-outlook")).expect("mkdir");
        let reference = write_config(
            &home.join(".config/mcp-outlook"),
            "plugin.json",
            &with_mailboxes(LOCAL, ""),
            0o600,
        );
        assert_eq!(
            load_settings(&env, None).expect("loads").config_path,
            reference
        );

        // mailgate's own default wins when it exists, even if it is refused.
        std::fs::create_dir_all(home.join(".config/mailgate")).expect("mkdir");
        let ours = write_config(
            &home.join(".config/mailgate"),
            "plugin.json",
            &with_mailboxes(LOCAL, ""),
            0o644,
        );
        match load_settings(&env, None) {
            Err(ConfigError::InFile { path, .. }) => assert_eq!(path, ours.to_string_lossy()),
            other => panic!("expected mailgate's file to be refused, got {other:?}"),
        }
    }
}
