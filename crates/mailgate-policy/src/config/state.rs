//! Where mailgate keeps its state and how long what it keeps there stays valid: the state
//! folder, the download folder, the lifetime of a handoff bundle (with the debug builds' crash
//! points of a handoff create) and how stale a local index may be before it proves no absence.
//!
//! Invariant: every value comes from the environment snapshot with a fixed default and
//! published bounds; a folder variable must be absolute, and the two names of the download
//! folder must not disagree. Nothing is created here: whoever opens a folder creates it through
//! `path_guard`. [`state_dir`] refuses with the variable to set when no home folder is known;
//! `Settings` defers that refusal until something needs the folder.
//!
//! Who calls it: [`resolve_settings`](super::resolve_settings) at startup, and the commands that
//! need one value without a `plugin.json` (`mailgate handoff`: [`state_dir`], [`handoff_ttl`]).

use std::path::PathBuf;

use super::values::{absolute_var, parse_seconds};
use super::{ConfigError, env};

/// Environment variable naming the state directory (absolute).
pub(crate) const HOME_DIR_VAR: &str = "MAILGATE_HOME";
/// Environment variable naming the download directory (absolute).
pub(crate) const DOWNLOAD_DIR_VAR: &str = "MAILGATE_DOWNLOAD_DIR";
/// The reference plugin's name for the same folder; both set and different is refused.
pub(crate) const REFERENCE_DOWNLOAD_DIR_VAR: &str = "DOWNLOAD_DIR";
/// The download folder's name inside the state folder, when `MAILGATE_DOWNLOAD_DIR` is unset.
pub const DOWNLOAD_DIR: &str = "downloads";
/// Lifetime of a handoff bundle in hours (security.md §4).
pub(crate) const HANDOFF_TTL_VAR: &str = "MAILGATE_HANDOFF_TTL_HOURS";
/// How old a local index may be before its absence claims are downgraded (`index_stale`).
pub const INDEX_MAX_STALENESS_VAR: &str = "MAILGATE_INDEX_MAX_STALENESS";
/// Interruption tests of the index sync (debug builds only): hold at a point (`fetch:N`,
/// `commit:N` or `folder:N`; a bare `N` is `commit:N`) until signalled, paused or killed.
pub const INDEX_HOLD_VAR: &str = "MAILGATE_TEST_INDEX_HOLD_AT";
/// The cursor key ring file: instances reading the same one accept each other's cursors
/// (docs/operator.md).
pub const CURSOR_KEYS_FILE_VAR: &str = "MAILGATE_CURSOR_KEYS_FILE";
const DEFAULT_INDEX_MAX_STALENESS_SECS: u64 = 15 * 60;
const MAX_INDEX_MAX_STALENESS_SECS: u64 = 30 * 24 * 3600;
pub(crate) const DEFAULT_HANDOFF_TTL_HOURS: u64 = 7 * 24;
pub(crate) const MAX_HANDOFF_TTL_HOURS: u64 = 366 * 24;
/// Debug builds only: abort at a named step of a handoff create (crash tests).
#[cfg(debug_assertions)]
pub(crate) const HANDOFF_CRASH_VAR: &str = "MAILGATE_TEST_HANDOFF_CRASH_AT";

/// A step of a create, for crash tests: a debug build started with
/// `MAILGATE_TEST_HANDOFF_CRASH_AT=<step>` aborts the process there (`handoff::store`). Release builds
/// never read the variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashPoint {
    /// The payload temp file is written and fsynced, not yet renamed.
    AfterPayloadTemp,
    /// `payload.bin` is in place; no manifest yet.
    AfterPayloadRename,
    /// Half of the manifest temp file is written.
    DuringManifest,
    /// The manifest temp file is complete; the commit rename has not happened.
    BeforeCommit,
    /// Not a crash: staged and about to take the store lock, the create waits for a shared lock
    /// on the file `handoff::RELEASE` in the handoff root. A concurrency test holds it exclusively
    /// until every process is parked here, then lets them all race for the store lock at once.
    HoldBeforeLock,
}

// Only debug builds read the crash variable (see `resolve_settings`).
#[cfg(debug_assertions)]
impl CrashPoint {
    pub const ALL: [CrashPoint; 4] = [
        CrashPoint::AfterPayloadTemp,
        CrashPoint::AfterPayloadRename,
        CrashPoint::DuringManifest,
        CrashPoint::BeforeCommit,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CrashPoint::AfterPayloadTemp => "after_payload_temp",
            CrashPoint::AfterPayloadRename => "after_payload_rename",
            CrashPoint::DuringManifest => "during_manifest",
            CrashPoint::BeforeCommit => "before_commit",
            CrashPoint::HoldBeforeLock => "hold_before_lock",
        }
    }

    pub fn parse(s: &str) -> Option<CrashPoint> {
        if s == "hold_before_lock" {
            return Some(CrashPoint::HoldBeforeLock);
        }
        CrashPoint::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// The download folder from the environment: `MAILGATE_DOWNLOAD_DIR` and the reference's
/// `DOWNLOAD_DIR` mean the same; both set to different paths is refused rather than guessed.
pub(super) fn download_var(env: &env::Env) -> Result<Option<PathBuf>, ConfigError> {
    let ours = env
        .get(DOWNLOAD_DIR_VAR)
        .map(|path| absolute_var(path, DOWNLOAD_DIR_VAR))
        .transpose()?;
    let theirs = env
        .get(REFERENCE_DOWNLOAD_DIR_VAR)
        .map(|path| absolute_var(path, REFERENCE_DOWNLOAD_DIR_VAR))
        .transpose()?;
    match (ours, theirs) {
        (Some(a), Some(b)) if a != b => Err(ConfigError::DownloadDirConflict),
        (Some(a), _) => Ok(Some(a)),
        (None, b) => Ok(b),
    }
}

/// [`HANDOFF_TTL_VAR`]: whole hours, 1 to [`MAX_HANDOFF_TTL_HOURS`], default seven days. Also
/// read by `mailgate handoff`, which needs no plugin.json.
pub fn handoff_ttl(env: &env::Env) -> Result<std::time::Duration, ConfigError> {
    let hours = match env.get(HANDOFF_TTL_VAR) {
        None => DEFAULT_HANDOFF_TTL_HOURS,
        Some(raw) => raw
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|h| (1..=MAX_HANDOFF_TTL_HOURS).contains(h))
            .ok_or(ConfigError::BadHandoffTtl)?,
    };
    Ok(std::time::Duration::from_secs(hours * 3600))
}

/// [`CURSOR_KEYS_FILE_VAR`]: an absolute path (blank is unset); the file is read at startup.
pub(super) fn cursor_keys_file(env: &env::Env) -> Result<Option<PathBuf>, ConfigError> {
    env.get(CURSOR_KEYS_FILE_VAR)
        .map(|path| absolute_var(path, CURSOR_KEYS_FILE_VAR))
        .transpose()
}

/// [`INDEX_MAX_STALENESS_VAR`]: seconds, or a number with `s`, `m` or `h`; 1 s to 30 days,
/// default 15 minutes.
pub fn index_max_staleness(env: &env::Env) -> Result<std::time::Duration, ConfigError> {
    let Some(raw) = env.get(INDEX_MAX_STALENESS_VAR) else {
        return Ok(std::time::Duration::from_secs(
            DEFAULT_INDEX_MAX_STALENESS_SECS,
        ));
    };
    parse_seconds(raw)
        .filter(|s| (1..=MAX_INDEX_MAX_STALENESS_SECS).contains(s))
        .map(std::time::Duration::from_secs)
        .ok_or(ConfigError::BadIndexStaleness)
}

/// The state directory: `MAILGATE_HOME` (must be absolute) > `~/.mailgate` (`HOME` when set
/// and absolute, else the account's home folder, as the reference plugin resolves `~`).
/// Nothing is created here.
pub fn state_dir(env: &env::Env) -> Result<PathBuf, ConfigError> {
    match env.get(HOME_DIR_VAR) {
        Some(path) => absolute_var(path, HOME_DIR_VAR),
        None => env
            .home()
            .map(|home| home.join(".mailgate"))
            .ok_or(ConfigError::NoHome {
                what: "state directory",
                instead: HOME_DIR_VAR,
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::env::Env;
    use crate::config::fixtures::{LOCAL, load_settings, with_mailboxes, write_config};
    use std::path::Path;

    #[test]
    fn index_staleness_takes_seconds_or_a_unit_and_refuses_the_rest() {
        let of = |v: &str| index_max_staleness(&Env::from_pairs([(INDEX_MAX_STALENESS_VAR, v)]));
        let secs = |n: u64| Ok::<_, ConfigError>(std::time::Duration::from_secs(n));
        let unset: [(&str, &str); 0] = [];
        assert_eq!(
            index_max_staleness(&Env::from_pairs(unset)).ok(),
            secs(900).ok()
        );
        for (raw, want) in [
            ("900", 900),
            ("90s", 90),
            ("15m", 900),
            ("2h", 7200),
            (" 1 ", 1),
        ] {
            assert_eq!(of(raw).ok(), secs(want).ok(), "{raw}");
        }
        for bad in [
            "0",
            "-5",
            "15 m",
            "1d",
            "m",
            "99999999999999999999",
            "31000000",
            "+5",
        ] {
            assert!(
                matches!(of(bad), Err(ConfigError::BadIndexStaleness)),
                "{bad} must be refused"
            );
        }
    }

    #[test]
    fn download_dir_accepts_the_reference_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        let good = write_config(dir.path(), "good.json", &with_mailboxes(LOCAL, ""), 0o600);
        let with = |pairs: &[(&str, &str)]| {
            load_settings(&Env::from_pairs(pairs.iter().copied()), Some(&good))
        };
        let settings = with(&[(REFERENCE_DOWNLOAD_DIR_VAR, "/srv/dl")]).expect("loads");
        assert_eq!(settings.download_dir().expect("set"), Path::new("/srv/dl"));
        assert!(settings.state_dir().is_err(), "no home in this env");
        let settings = with(&[
            (REFERENCE_DOWNLOAD_DIR_VAR, "/srv/dl"),
            (DOWNLOAD_DIR_VAR, "/srv/dl"),
        ])
        .expect("same path twice is fine");
        assert_eq!(settings.download_dir().expect("set"), Path::new("/srv/dl"));
        assert!(matches!(
            with(&[
                (REFERENCE_DOWNLOAD_DIR_VAR, "/srv/a"),
                (DOWNLOAD_DIR_VAR, "/srv/b")
            ]),
            Err(ConfigError::DownloadDirConflict)
        ));
        assert!(matches!(
            with(&[(REFERENCE_DOWNLOAD_DIR_VAR, "relative")]),
            Err(ConfigError::NotAbsolute {
                var: REFERENCE_DOWNLOAD_DIR_VAR
            })
        ));
    }
}
