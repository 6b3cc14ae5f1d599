//! The crate's shared test fixture: the demo corpus set up in a temp dir and served by a real
//! [`App`], as startup builds it, plus a demo message's backend id by its corpus key.
//!
//! Invariant: test-only (`#[cfg(test)]` in `tools/mod.rs`); nothing here ships. The temp dir
//! lives as long as the returned [`DemoApp`].
//!
//! Who may call it: unit tests anywhere in the crate (the tools', the HTTP transport's).

use std::sync::Arc;

use crate::caller::Caller;
use crate::tools::{App, CallScope};

/// The demo app and the temp dir that holds its state folder and mailboxes.
pub(crate) struct DemoApp {
    pub(crate) app: Arc<App>,
    _dir: tempfile::TempDir,
}

impl DemoApp {
    /// The app as the operator's calls see it (stdio and the CLI).
    pub(crate) fn operator(&self) -> CallScope {
        operator(&self.app)
    }
}

/// `app` as the operator's calls see it.
pub(crate) fn operator(app: &Arc<App>) -> CallScope {
    CallScope::new(Arc::clone(app), Arc::new(Caller::Operator))
}

/// Sets the demo up in a fresh temp dir and builds the app over it.
pub(crate) fn demo_app() -> DemoApp {
    demo_app_with(None)
}

/// As [`demo_app`], with `principals` (the JSON of plugin.json's key) added to the demo's config.
pub(crate) fn demo_app_with_principals(principals: serde_json::Value) -> DemoApp {
    demo_app_with(Some(principals))
}

#[expect(
    clippy::disallowed_methods,
    reason = "the test rewrites the demo config it just set up, inside its tempdir"
)]
fn demo_app_with(principals: Option<serde_json::Value>) -> DemoApp {
    let dir = tempfile::tempdir().expect("tempdir");
    // The state folder must be private (a tempdir itself may be 0755).
    let config = crate::demo::setup(&dir.path().join("state"), false).expect("demo setup");
    if let Some(principals) = principals {
        let mut json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&config).expect("read")).expect("json");
        json["principals"] = principals;
        std::fs::write(&config, json.to_string()).expect("write");
    }
    let home = dir.path().to_string_lossy().into_owned();
    let env = crate::config::env::Env::from_pairs([
        ("HOME", home.clone()),
        ("MAILGATE_HOME", format!("{home}/state")),
    ]);
    let (settings, gates) = crate::startup::load_settings(&env, Some(&config)).expect("settings");
    let app = crate::startup::build_app(&settings, gates, None, None).expect("app");
    DemoApp { app, _dir: dir }
}

/// The Maildir id of the demo message with `key`.
pub(crate) fn message_id(key: &str) -> String {
    let corpus = crate::demo::corpus::corpus();
    let (_, folder, message) =
        crate::demo::corpus::find_by_key(&corpus, key).expect("demo key exists");
    crate::backends::maildir::encode_id(folder.name, &message.unique)
}
