//! Fixtures shared by the config tests: builders of `plugin.json` text, the schema-refusal
//! extractor, a fixture file writer and startup's whole resolution as the main crate runs it.
//!
//! Invariant: fictional data only (example.com addresses, `/etc/mailgate` and `/srv` paths that
//! are never touched); files are written only inside a tempdir the calling test owns. Test
//! builds only.
//!
//! Who calls it: the `tests` modules of `config` and its submodules.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use super::env::Env;
use super::{Config, ConfigError, Settings, read_config, resolve_settings};

/// Startup's whole resolution (file, gates, paths), in the order `startup::load_settings`
/// of the main crate runs it (that function is these three calls; it cannot be called from
/// this crate).
pub(super) fn load_settings_and_gates(
    env: &Env,
    config: Option<&Path>,
) -> Result<(Settings, crate::gates::Gates), ConfigError> {
    let (config, config_path) = read_config(env, config)?;
    let gates = crate::gates::Gates::resolve(env, &config)?;
    let settings = resolve_settings(env, config, config_path)?;
    Ok((settings, gates))
}

pub(super) fn load_settings(env: &Env, config: Option<&Path>) -> Result<Settings, ConfigError> {
    load_settings_and_gates(env, config).map(|(settings, _gates)| settings)
}

const BASE: &str = "/etc/mailgate";

pub(super) fn parse(json: &str) -> Result<Config, ConfigError> {
    Config::from_json(json.as_bytes(), Path::new(BASE))
}

pub(super) fn refusal(json: &str) -> (String, String) {
    match parse(json) {
        Err(ConfigError::Schema { path, rule }) => (path, rule),
        Err(other) => panic!("expected a schema error, got {other}"),
        Ok(_) => panic!("expected a schema error, got a config"),
    }
}

pub(super) fn with_mailboxes(mailboxes: &str, extra: &str) -> String {
    format!(r#"{{"mailboxes": [{mailboxes}]{extra}}}"#)
}

pub(super) const FINANCE: &str = r#"{"alias": "finance", "address": "finance@example.com"}"#;
/// A Maildir mailbox: loading settings for it needs no Graph credentials.
pub(super) const LOCAL: &str = r#"{"alias": "finance", "address": "finance@example.com",
    "backend": {"kind": "maildir", "path": "/srv/mail/finance"}}"#;

#[expect(
    clippy::disallowed_methods,
    reason = "tests write fixture config files inside a tempdir"
)]
pub(super) fn write_config(dir: &Path, name: &str, body: &str, mode: u32) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, body).expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    path
}
