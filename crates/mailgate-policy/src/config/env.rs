//! The process environment, captured once: the only place the crate reads environment
//! variables.
//!
//! Invariant: an [`Env`] is an immutable snapshot. [`Env::capture`] takes the process environment
//! and adds the `KEY=VALUE` pairs of `./.env` (current directory only) for keys that are not
//! already present, so a `.env` can never override an explicit variable, not even one that is
//! set but empty (an explicit `PLUGIN_ALLOW_SEND=false` always wins). The process environment
//! itself is never modified, and `DOTENV_*` variables (path, override, debug) have no effect:
//! the path is fixed here and dotenvy is only used as a parser.
//!
//! Who may call it: startup (`startup::load_settings`, the CLI). Everything else receives the values it
//! needs through `Settings`, never an `Env`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::ConfigError;
use crate::path_guard;

/// Strict boolean, default off: declare each tool's `outputSchema` in `tools/list` (for clients
/// that validate structured results; it roughly triples the catalog's size).
pub(crate) const OUTPUT_SCHEMAS_VAR: &str = "MAILGATE_OUTPUT_SCHEMAS";

/// The `.env` file read by [`Env::capture`], relative to the current directory.
const DOTENV_FILE: &str = ".env";
/// Upper bound for `.env`: it holds a few variables, never data.
const DOTENV_MAX_BYTES: u64 = 1024 * 1024;

/// Why `./.env` was refused. Messages never contain a value or a line of the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DotEnvError {
    #[error("{0}")]
    File(path_guard::PrivateFileError),
    #[error(
        "entry {entry} could not be parsed (KEY=VALUE lines only; mailgate refuses the file \
         rather than skip a line)"
    )]
    Parse { entry: usize },
    #[error("it could not be read")]
    Read,
}

/// An immutable snapshot of the environment (process variables plus `./.env`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Env {
    vars: BTreeMap<String, String>,
    /// The account's home folder from the password database, captured with the variables: the
    /// fallback when `HOME` is unset, as Node's `os.homedir()` does for the reference plugin.
    account_home: Option<PathBuf>,
}

impl Env {
    /// Captures the process environment plus `./.env` (see the module doc). A missing `.env` is
    /// fine; one that is a symlink, owned by another user (even when running as root), writable
    /// by group or others, too large or unparsable aborts with [`ConfigError::DotEnv`].
    ///
    /// # Ambient Authority
    /// Reads the whole process environment, and `./.env` through `path_guard`.
    pub fn capture() -> Result<Env, ConfigError> {
        let dotenv =
            path_guard::read_optional_trusted_file(Path::new(DOTENV_FILE), DOTENV_MAX_BYTES)
                .map_err(|error| ConfigError::DotEnv(DotEnvError::File(error)))?;
        let process = process_vars();
        let mut env = match dotenv {
            Some(bytes) => Env::merge_dotenv(process, &bytes)?,
            None => Env {
                vars: process,
                account_home: None,
            },
        };
        env.account_home = account_home();
        Ok(env)
    }

    /// Builds an environment from explicit pairs (tests, `policy explain` fixtures).
    pub fn from_pairs<I, K, V>(pairs: I) -> Env
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        Env {
            vars: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            account_home: None,
        }
    }

    /// The home folder: `HOME` when it is set and absolute, else the account's home folder from
    /// the password database (captured by [`Env::capture`]; never for [`Env::from_pairs`]).
    pub(crate) fn home(&self) -> Option<PathBuf> {
        match self.get("HOME") {
            Some(home) => Some(PathBuf::from(home)).filter(|home| home.is_absolute()),
            None => self.account_home.clone(),
        }
    }

    /// Every variable name in the snapshot (for the unknown-variable check).
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.vars.keys().map(String::as_str)
    }

    /// Adds the pairs parsed from `.env` contents to `existing`, never replacing a present key.
    /// Split out of [`Env::capture`] so the no-override rule is testable without touching the
    /// process environment.
    pub(crate) fn merge_dotenv(
        existing: BTreeMap<String, String>,
        dotenv: &[u8],
    ) -> Result<Env, ConfigError> {
        let mut vars = existing;
        // Note: dotenvy expands `$VAR` references from the process environment first; it only
        // reads, and the expanded value is still subject to the no-override rule below.
        for (index, item) in dotenvy::from_read_iter(dotenv).enumerate() {
            let (key, value) = item.map_err(|error| {
                ConfigError::DotEnv(match error {
                    dotenvy::Error::LineParse(..) => DotEnvError::Parse { entry: index + 1 },
                    _ => DotEnvError::Read,
                })
            })?;
            vars.entry(key).or_insert(value);
        }
        Ok(Env {
            vars,
            account_home: None,
        })
    }

    /// The trimmed value; `None` when the variable is absent or blank.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(|value| value.trim())
            .filter(|value| !value.is_empty())
    }

    /// The raw value, even when blank (for "set but empty" rules).
    pub(crate) fn raw(&self, name: &str) -> Option<&str> {
        self.vars.get(name).map(String::as_str)
    }

    /// A credential named by the config (`passwordEnv`, `oauth2TokenEnv`): the exact value, not
    /// trimmed (a password may end in a space), `None` when absent or empty. The value is wrapped
    /// so that it cannot be printed by accident.
    pub fn secret(&self, name: &str) -> Option<Secret> {
        self.vars
            .get(name)
            .filter(|value| !value.is_empty())
            .map(|value| Secret(value.clone()))
    }
}

/// A credential read from the environment. `Debug` never shows the value and there is no
/// `Display`, so a secret cannot reach a log line or an error message through formatting; the
/// one reader is [`Secret::expose`], called where the credential is handed to the SMTP client.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// The credential itself, for the transport that authenticates with it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// The process environment as UTF-8 pairs. A variable whose name is not UTF-8 cannot be one of
/// ours and is skipped; a non-UTF-8 value is kept lossily, so it still counts as present (a
/// `.env` cannot fill it in) and fails any strict parse instead of vanishing.
///
/// # Ambient Authority
/// Reads the process environment.
#[expect(
    clippy::disallowed_methods,
    reason = "config::env is the one module allowed to read the environment"
)]
fn process_vars() -> BTreeMap<String, String> {
    std::env::vars_os()
        .filter_map(|(key, value)| {
            let key = key.into_string().ok()?;
            Some((key, value.to_string_lossy().into_owned()))
        })
        .collect()
}

/// The account's home folder from the password database, when `HOME` is unset (std consults
/// `HOME` first, which [`Env::home`] has already done with the snapshot's value). Only an
/// absolute path counts.
///
/// # Ambient Authority
/// Reads the process environment and the password database.
fn account_home() -> Option<PathBuf> {
    std::env::home_dir().filter(|home| home.is_absolute())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn existing(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn dotenv_never_overrides_an_existing_variable() {
        let dotenv = b"PLUGIN_ALLOW_SEND=true\nDOTENV_OVERRIDE=1\nDOTENV_CONFIG_OVERRIDE=true\n\
                       PLUGIN_ALLOW_WRITES=true\nEMPTY_BEFORE=filled\nNEW_ONE=\"quoted value\"\n";
        let env = Env::merge_dotenv(
            existing(&[
                ("PLUGIN_ALLOW_SEND", "false"),
                ("DOTENV_OVERRIDE", "true"),
                ("EMPTY_BEFORE", ""),
            ]),
            dotenv,
        )
        .expect("parses");
        assert_eq!(env.get("PLUGIN_ALLOW_SEND"), Some("false"));
        assert_eq!(
            env.raw("EMPTY_BEFORE"),
            Some(""),
            "set-but-empty still counts as present"
        );
        assert_eq!(
            env.get("PLUGIN_ALLOW_WRITES"),
            Some("true"),
            "absent keys are filled"
        );
        assert_eq!(env.get("NEW_ONE"), Some("quoted value"));
    }

    #[test]
    fn dotenv_path_variables_are_ignored() {
        // DOTENV_PATH in the environment or the file does not make us read anything else: the
        // merge only ever sees the bytes it is given.
        let env = Env::merge_dotenv(existing(&[("DOTENV_PATH", "/elsewhere/.env")]), b"A=1\n")
            .expect("parses");
        assert_eq!(env.get("A"), Some("1"));
        assert_eq!(env.vars.len(), 2);
    }

    #[test]
    fn unparsable_dotenv_aborts_without_echoing_the_line() {
        let error = Env::merge_dotenv(BTreeMap::new(), b"GOOD=1\nSECRET VALUE hunter2\n")
            .expect_err("bad line");
        assert!(
            matches!(error, ConfigError::DotEnv(DotEnvError::Parse { entry: 2 })),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(message.contains(".env"), "{message}");
        assert!(!message.contains("hunter2"), "{message}");
    }

    #[test]
    fn get_trims_and_treats_blank_as_absent_raw_does_not() {
        let env = Env::from_pairs([("A", "  on "), ("B", "   "), ("C", "")]);
        assert_eq!(env.get("A"), Some("on"));
        assert_eq!(env.get("B"), None);
        assert_eq!(env.get("C"), None);
        assert_eq!(env.get("D"), None);
        assert_eq!(env.raw("A"), Some("  on "));
        assert_eq!(env.raw("B"), Some("   "));
        assert_eq!(env.raw("D"), None);
    }

    #[test]
    fn secrets_are_exact_and_never_formatted() {
        let env = Env::from_pairs([("PW", " hunter2 "), ("EMPTY", "")]);
        let secret = env.secret("PW").expect("set");
        assert_eq!(secret.expose(), " hunter2 ", "not trimmed");
        assert!(!format!("{secret:?}").contains("hunter2"));
        assert_eq!(env.secret("EMPTY"), None);
        assert_eq!(env.secret("ABSENT"), None);
    }

    #[test]
    fn capture_sees_the_process_environment() {
        // PATH is set in every test runner; this checks the capture without mutating anything.
        let env = Env::capture().expect("capture");
        assert_eq!(
            env.raw("PATH").is_some(),
            process_vars().contains_key("PATH")
        );
    }
}
