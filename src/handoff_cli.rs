//! `mailgate handoff list|verify|path|remove|prune`: the operator's tools for the local handoff
//! store (security.md §4). `path` is how a local program learns where a bundle lives; the MCP
//! tools never return a path.
//!
//! Invariants:
//! - Needs no plugin.json and ignores the handoff gate: the root is `<state folder>/handoffs`
//!   (`config::state_dir`), bundles expire after `MAILGATE_HANDOFF_TTL_HOURS`, and the quotas are
//!   the plugin.json defaults (no command here creates a bundle, so they decide nothing).
//! - Never creates anything: the root is opened without `create`, and a missing root (or state
//!   folder) is an empty store. Only `remove` and `prune` change it (and take the store lock,
//!   which creates `.lock` inside an existing root). The store key (`.key`) is only read: with
//!   none, every bundle reads as corrupt (only the server creates it).
//! - Output names entries, states, sizes, digests, timestamps, aliases, sanitised file names and
//!   the store's fixed reasons; never payload bytes. Entry names are escaped, so a planted name
//!   cannot forge a line or drive the terminal.
//! - Exit codes follow the CLI: 0 ok, 1 failure (not found, expired, corrupt, store refused),
//!   2 usage (a malformed id is refused by the argument parser).

use std::fmt::{Display, Write as _};
use std::io::Write as _;
use std::path::PathBuf;

use chrono::Utc;
use clap::Subcommand;

use crate::config::env::Env;
use crate::config::{self, Limits};
use crate::console::write_out;
use crate::error::StartupError;
use crate::handoff::store::{Entry, SweepReport};
use crate::handoff::{HandoffError, HandoffId, HandoffStore, Manifest, StoreLimits};
use crate::path_guard::{self, PrivateDirError};
use crate::startup::HANDOFF_DIR;

#[derive(Subcommand)]
pub(crate) enum HandoffCommand {
    /// List every entry of the store (each bundle revalidated as the server would serve it)
    ///
    /// One line per entry, tab-separated, no header: name, state (ready, expired, uncommitted,
    /// corrupt, foreign), size, sha256, createdAt, source alias, file name; `-` when unknown.
    /// `ready` means the server would serve it: manifest MAC, file set, size and SHA-256 checked.
    List,
    /// Fully revalidate every bundle; exit 1 when one is corrupt or foreign
    ///
    /// Checks modes, owner, links, the exact file set, the manifest and its MAC under the store
    /// key, the size and the SHA-256. One line per entry: name, then ok, expired, uncommitted,
    /// foreign, or corrupt followed by the reason.
    Verify,
    /// Verify one bundle and print the absolute path of its directory (for a local program)
    Path {
        /// Handoff id: oh_ followed by 43 characters from A-Z a-z 0-9 _ -
        #[arg(value_parser = HandoffId::parse)]
        id: HandoffId,
    },
    /// Remove one bundle (manifest first); files mailgate did not write are left in place
    Remove {
        /// Handoff id: oh_ followed by 43 characters from A-Z a-z 0-9 _ -
        #[arg(value_parser = HandoffId::parse)]
        id: HandoffId,
    },
    /// Remove expired bundles and abandoned uncommitted ones; corrupt and foreign entries stay
    Prune,
}

/// The opened store and where it lives; `store` is `None` when the root does not exist.
struct Opened {
    state: PathBuf,
    store: Option<HandoffStore>,
}

/// Runs one `mailgate handoff` command and returns the exit code.
pub(crate) fn run(command: HandoffCommand, env: &Env) -> Result<i32, StartupError> {
    let opened = open(env)?;
    match command {
        HandoffCommand::List => list(opened.store.as_ref()),
        HandoffCommand::Verify => verify(opened.store.as_ref()),
        HandoffCommand::Path { id } => path(&opened, &id),
        HandoffCommand::Remove { id } => remove(opened.store.as_ref(), &id),
        HandoffCommand::Prune => prune(opened.store.as_ref()),
    }
}

/// Opens `<state>/handoffs` without creating anything (a missing one is an empty store).
fn open(env: &Env) -> Result<Opened, StartupError> {
    let state = config::state_dir(env)?;
    let ttl = config::handoff_ttl(env)?;
    // Two steps, so a refusal says whether the state folder or the store is at fault.
    let state_dir = match path_guard::open_state_dir(&state, false) {
        Ok(dir) => dir,
        Err(PrivateDirError::Missing) => return Ok(Opened { state, store: None }),
        Err(e) => return Err(StartupError::StateDir(e)),
    };
    let root = match path_guard::open_private_child(&state_dir, HANDOFF_DIR, false) {
        Ok(root) => root,
        Err(PrivateDirError::Missing) => return Ok(Opened { state, store: None }),
        Err(e) => return Err(StartupError::HandoffStore(e.to_string())),
    };
    // Never creates the key either: without one every bundle reads as corrupt.
    let store = HandoffStore::open_existing(root, StoreLimits::new(&Limits::default(), ttl))
        .map_err(|e| StartupError::HandoffStore(e.to_string()))?;
    Ok(Opened {
        state,
        store: Some(store),
    })
}

fn list(store: Option<&HandoffStore>) -> Result<i32, StartupError> {
    let Some(store) = store else {
        return Ok(0);
    };
    let entries = match store.scan() {
        Ok(entries) => entries,
        Err(e) => return Ok(complain(&e)),
    };
    let now = Utc::now();
    let mut out = String::new();
    for (name, entry) in entries {
        let (state, manifest) = match &entry {
            Entry::Committed(m) if store.is_expired(m, now) => ("expired", Some(m)),
            // `ready` is a promise that the server would serve the bundle, so it gets the
            // server's full check (payload size and SHA-256 too), not only the manifest's MAC.
            Entry::Committed(m) => match store.get(&m.id) {
                Ok(_) => ("ready", Some(m)),
                Err(HandoffError::Expired) => ("expired", Some(m)),
                // Removed since the scan: no longer an entry.
                Err(HandoffError::NotFound) => continue,
                Err(_) => ("corrupt", None),
            },
            Entry::Uncommitted => ("uncommitted", None),
            Entry::Corrupt(_) => ("corrupt", None),
            Entry::Foreign => ("foreign", None),
        };
        let _ = write!(out, "{}\t{state}\t", escape(&name));
        match manifest {
            Some(m) => {
                let _ = writeln!(
                    out,
                    "{}\t{}\t{}\t{}\t{}",
                    m.size,
                    m.sha256,
                    crate::handoff::manifest::timestamp(&m.created_at),
                    m.source_alias,
                    escape(m.filename.as_str()),
                );
            }
            None => out.push_str("-\t-\t-\t-\t-\n"),
        }
    }
    print(&out)?;
    Ok(0)
}

fn verify(store: Option<&HandoffStore>) -> Result<i32, StartupError> {
    let Some(store) = store else {
        return Ok(0);
    };
    let entries = match store.scan() {
        Ok(entries) => entries,
        Err(e) => return Ok(complain(&e)),
    };
    let mut out = String::new();
    let mut broken = false;
    for (name, entry) in entries {
        let verdict = match entry {
            Entry::Foreign => Some("foreign".to_owned()),
            Entry::Uncommitted => Some("uncommitted".to_owned()),
            Entry::Corrupt(why) => Some(format!("corrupt: {why}")),
            Entry::Committed(m) => match store.get(&m.id) {
                Ok(_) => Some("ok".to_owned()),
                Err(HandoffError::Expired) => Some("expired".to_owned()),
                // Removed (or its manifest taken away) since the scan: no longer an entry.
                Err(HandoffError::NotFound) => None,
                Err(HandoffError::Corrupt(why)) => Some(format!("corrupt: {why}")),
                Err(other) => Some(format!("corrupt: {other}")),
            },
        };
        let Some(verdict) = verdict else { continue };
        broken |= verdict == "foreign" || verdict.starts_with("corrupt");
        let _ = writeln!(out, "{}\t{verdict}", escape(&name));
    }
    print(&out)?;
    Ok(if broken { 1 } else { 0 })
}

fn path(opened: &Opened, id: &HandoffId) -> Result<i32, StartupError> {
    let Some(store) = &opened.store else {
        return Ok(complain(&HandoffError::NotFound));
    };
    let manifest: Manifest = match store.get(id) {
        Ok(m) => m,
        Err(e) => return Ok(complain(&e)),
    };
    let dir = opened.state.join(HANDOFF_DIR).join(manifest.id.as_str());
    // A local program must get the exact path: a lossy rendering would name another file.
    let Some(dir) = dir.to_str() else {
        return Ok(complain(&"the state folder path is not valid UTF-8"));
    };
    write_out(dir)?;
    Ok(0)
}

fn remove(store: Option<&HandoffStore>, id: &HandoffId) -> Result<i32, StartupError> {
    let Some(store) = store else {
        return Ok(complain(&HandoffError::NotFound));
    };
    match store.remove(id) {
        Ok(()) => {
            write_out(&format!("{id}\tremoved"))?;
            Ok(0)
        }
        Err(e) => Ok(complain(&e)),
    }
}

fn prune(store: Option<&HandoffStore>) -> Result<i32, StartupError> {
    let report = match store.map(HandoffStore::sweep).transpose() {
        Ok(report) => report.unwrap_or_default(),
        Err(e) => return Ok(complain(&e)),
    };
    let SweepReport {
        expired_removed,
        uncommitted_removed,
        in_progress,
        left_in_place,
    } = report;
    write_out(&format!(
        "pruned: {expired_removed} expired, {uncommitted_removed} uncommitted removed; \
         {in_progress} in progress, {left_in_place} left in place"
    ))?;
    Ok(0)
}

/// Writes `text` (possibly empty: nothing at all is written then).
fn print(text: &str) -> Result<(), StartupError> {
    if text.is_empty() {
        Ok(())
    } else {
        write_out(text)
    }
}

/// One diagnostic line on stderr; returns the failure exit code.
fn complain(msg: &dyn Display) -> i32 {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "mailgate: {msg}");
    1
}

/// Control characters (tab, newline, escape sequences) shown escaped, the rest as is.
fn escape(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_owned();
    }
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn entry_names_cannot_forge_fields_or_lines() {
        assert_eq!(escape("oh_plain"), "oh_plain");
        assert_eq!(escape("a\tb\nc\u{1b}[31m"), "a\\tb\\nc\\u{1b}[31m");
    }
}
