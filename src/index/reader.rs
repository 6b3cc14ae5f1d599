//! The index reader, the server's side of the indexes: each alias's index store opened at
//! startup when the operator has synced it (the server never creates one), and how far an answer
//! from it can be trusted: [`Coverage`], from the status the last sync left. This is the one
//! place that decides when the index may be served and when it proves absence;
//! `search::indexed` (searches and listings), `tools::evidence::from_index` (investigations), the
//! resources' index view and `index status` all ask it and none decides on its own.
//!
//! The rule: an index is served only when it holds the mailbox the alias names now
//! ([`Doubt::MailboxChanged`]) and was built by this text analysis ([`Doubt::RebuildNeeded`]);
//! a served answer proves absence only when, in addition, every folder of its scope ended its
//! last sync round with nothing pending ([`Doubt::Partial`]) within the staleness bound
//! ([`Doubt::Stale`]).

use std::collections::BTreeMap;

use cap_std::fs::Dir;
use chrono::{DateTime, Duration, Utc};

use super::IndexError;
use super::status::{self, IndexStatus};
use super::store::{ReadStore, local::LocalRead};
use crate::alias::Alias;
use crate::caller::GrantedAlias;
use crate::config::Settings;

/// One alias's index as the server reads it: its store, and the mailbox the alias names now.
pub(crate) struct IndexReader {
    /// The identity of the mailbox the alias names in the config in force
    /// ([`status::mailbox_identity`]): an index that recorded another is never served.
    mailbox: String,
    store: ReadStore,
}

impl IndexReader {
    /// Opens the index of `alias` under `<state>/index`, `Ok(None)` when the operator never
    /// synced it (or purged it). `mailbox` is the identity of the mailbox the alias names now.
    pub(crate) fn open(
        state: &Dir,
        alias: &Alias,
        mailbox: String,
    ) -> Result<Option<Self>, IndexError> {
        Ok(LocalRead::open(state, alias)?.map(|local| Self {
            mailbox,
            store: ReadStore::Local(local),
        }))
    }

    /// The status as the last sync left it (the store reopens first what a sync replaced).
    pub(crate) async fn status(&self) -> Result<IndexStatus, IndexError> {
        self.store.status().await
    }

    /// The store to read. Reads of one built by another text analysis fail with
    /// [`IndexError::Outdated`]; [`IndexReader::coverage`] withholds it before anyone reads.
    pub(crate) fn store(&self) -> &ReadStore {
        &self.store
    }

    /// What an answer over `scope` may claim, as `status` (read when the answer began) says.
    pub(crate) fn coverage(
        &self,
        status: &IndexStatus,
        scope: Scope<'_>,
        max_staleness: Duration,
        now: DateTime<Utc>,
    ) -> Coverage {
        let mut coverage = Coverage::of(status, &self.mailbox, scope, max_staleness, now);
        if self.store.outdated() && coverage.serves() {
            // The status says this analysis, the schema says another: the schema decides.
            coverage = Coverage {
                indexed_through: None,
                doubts: vec![Doubt::RebuildNeeded],
            };
        }
        coverage
    }
}

/// Why an index answer cannot prove absence, or cannot be served at all: each with the
/// warning code the answer carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Doubt {
    /// The index was synced from another mailbox than the one the alias names now (the alias
    /// was re-pointed in `plugin.json`): nothing of it is served until `index rebuild`.
    MailboxChanged,
    /// The index was built by another text analysis than this binary's (or before versions
    /// were recorded): its tokens are not the ones a query makes, so nothing of it is served
    /// until `index sync` rebuilds it.
    RebuildNeeded,
    /// Its scope was last wholly synced longer ago than `MAILGATE_INDEX_MAX_STALENESS`.
    Stale,
    /// A folder of the scope is mid-round, has pending messages, or was never wholly synced.
    Partial,
}

/// The warning codes of [`Doubt`], as answers carry them.
pub(crate) mod code {
    pub(crate) const INDEX_MAILBOX_CHANGED: &str = "index_mailbox_changed";
    pub(crate) const INDEX_REBUILD_NEEDED: &str = "index_rebuild_needed";
    pub(crate) const INDEX_STALE: &str = "index_stale";
    pub(crate) const INDEX_PARTIAL: &str = "index_partial";
}

impl Doubt {
    pub(crate) fn code(self) -> &'static str {
        match self {
            Doubt::MailboxChanged => code::INDEX_MAILBOX_CHANGED,
            Doubt::RebuildNeeded => code::INDEX_REBUILD_NEEDED,
            Doubt::Stale => code::INDEX_STALE,
            Doubt::Partial => code::INDEX_PARTIAL,
        }
    }

    /// Whether nothing of the index may be served (hits, listings, candidates), not only its
    /// absence left unproven.
    pub(crate) fn withholds(self) -> bool {
        matches!(self, Doubt::MailboxChanged | Doubt::RebuildNeeded)
    }

    /// What `index status` and the resources say about it, in a few words.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Doubt::MailboxChanged => "built from another mailbox than the alias names now",
            Doubt::RebuildNeeded => "built by another version of the text analysis",
            Doubt::Stale => "older than MAILGATE_INDEX_MAX_STALENESS",
            Doubt::Partial => "a folder is mid-sync, has messages pending or was never synced",
        }
    }
}

/// What an answer is about: one folder (an id of the index), or the whole mailbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope<'a> {
    /// A folder id as the index knows it; `None`: the folder asked for is not in the index.
    Folder(Option<&'a str>),
    Mailbox,
}

/// How far an index answer can be trusted: the one verdict every caller uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Coverage {
    /// When the scope was last wholly synced (`None` when never, or when nothing is served).
    pub(crate) indexed_through: Option<DateTime<Utc>>,
    /// Why absence is not proved; empty when it is. When any [`Doubt::withholds`], only those.
    pub(crate) doubts: Vec<Doubt>,
}

impl Coverage {
    /// The verdict for `scope` in `status`, for an alias that names the mailbox `mailbox` now
    /// ([`status::mailbox_identity`]), against `max_staleness` at `now`.
    pub(crate) fn of(
        status: &IndexStatus,
        mailbox: &str,
        scope: Scope<'_>,
        max_staleness: Duration,
        now: DateTime<Utc>,
    ) -> Self {
        // An index that never recorded its mailbox predates the binding, and its analyzer
        // version too: it is rebuilt, and a rebuild records both.
        let mut withheld = Vec::new();
        if status.mailbox.as_deref().is_some_and(|m| m != mailbox) {
            withheld.push(Doubt::MailboxChanged);
        } else if status.mailbox.is_none() || status.analyzer != Some(crate::text::ANALYZER_VERSION)
        {
            withheld.push(Doubt::RebuildNeeded);
        }
        if !withheld.is_empty() {
            return Coverage {
                indexed_through: None,
                doubts: withheld,
            };
        }
        let (through, partial) = match scope {
            Scope::Folder(Some(id)) => match status.folder(id) {
                Some(f) => (f.through, !f.complete || f.pending > 0),
                None => (None, true),
            },
            Scope::Folder(None) => (None, true),
            Scope::Mailbox => (
                status.indexed_through(),
                status
                    .folders
                    .values()
                    .any(|f| !f.complete || f.pending > 0),
            ),
        };
        let mut doubts = Vec::new();
        if through.is_none_or(|t| now - t > max_staleness) {
            doubts.push(Doubt::Stale);
        }
        if partial || through.is_none() {
            doubts.push(Doubt::Partial);
        }
        Coverage {
            indexed_through: through,
            doubts,
        }
    }

    /// Whether the index's answer proves absence in its scope.
    pub(crate) fn proves_absence(&self) -> bool {
        self.doubts.is_empty()
    }

    /// Whether anything of the index may be served at all.
    pub(crate) fn serves(&self) -> bool {
        !self.doubts.iter().any(|d| d.withholds())
    }

    /// The warning codes of the doubts, in order.
    pub(crate) fn codes(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.doubts.iter().map(|d| d.code())
    }
}

/// Every allowlisted alias's index that exists, opened at startup, and the staleness bound.
pub(crate) struct Indexes {
    readers: BTreeMap<Alias, IndexReader>,
    pub(crate) max_staleness: std::time::Duration,
}

impl Indexes {
    /// No index at all (no state folder, or nothing synced).
    pub(crate) fn none(max_staleness: std::time::Duration) -> Self {
        Self {
            readers: BTreeMap::new(),
            max_staleness,
        }
    }

    /// Opens the index of each allowlisted alias that exists under the state folder, bound to
    /// the mailbox the alias names in `settings`. An index that cannot be opened is left out
    /// with a warning (the alias then searches live): it must not stop the server.
    pub(crate) fn open(state: &Dir, settings: &Settings) -> Self {
        let max_staleness = settings.index_max_staleness;
        let tenant = settings.graph.as_ref().map(|g| g.tenant_id.as_str());
        let mut readers = BTreeMap::new();
        for entry in &settings.config.mailboxes {
            let alias = &entry.alias;
            let mailbox = status::mailbox_identity(entry, tenant);
            match IndexReader::open(state, alias, mailbox) {
                Ok(Some(reader)) => {
                    readers.insert(alias.clone(), reader);
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(alias = alias.as_str(), error = %e, "a local index could not be opened; the mailbox searches live");
                }
            }
        }
        Self {
            readers,
            max_staleness,
        }
    }

    /// Every allowlisted alias's index in the shared store, bound to the mailbox the alias
    /// names in `settings` (its rows are that mailbox's; none yet reads as never synced).
    pub(crate) fn shared(pool: &crate::index::store::postgres::Pool, settings: &Settings) -> Self {
        let tenant = settings.graph.as_ref().map(|g| g.tenant_id.as_str());
        let readers = settings
            .config
            .mailboxes
            .iter()
            .map(|entry| {
                let mailbox = status::mailbox_identity(entry, tenant);
                let store = ReadStore::Postgres(crate::index::store::postgres::read::PgRead::new(
                    pool.clone(),
                    mailbox.clone(),
                ));
                (entry.alias.clone(), IndexReader { mailbox, store })
            })
            .collect();
        Self {
            readers,
            max_staleness: settings.index_max_staleness,
        }
    }

    /// The index of a mailbox the caller was granted (the same key as the backend registry's),
    /// when its store holds one: a mailbox never synced into the shared store has none, as one
    /// never synced locally has none.
    pub(crate) async fn get(&self, alias: &GrantedAlias) -> Option<&IndexReader> {
        let reader = self.readers.get(alias.alias())?;
        reader.store.present().await.then_some(reader)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::status::FolderStatus;

    const MAILBOX: &str = "sha256:this-mailbox";

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-02T12:00:00Z")
            .expect("date")
            .with_timezone(&Utc)
    }

    fn folder(complete: bool, minutes_ago: i64, pending: u64) -> FolderStatus {
        FolderStatus {
            complete,
            through: Some(now() - Duration::minutes(minutes_ago)),
            messages: 5,
            pending,
        }
    }

    /// A status this binary built for this mailbox, with the inbox and the archive.
    fn status(inbox: FolderStatus, archive: FolderStatus) -> IndexStatus {
        let mut s = IndexStatus {
            mailbox: Some(MAILBOX.to_owned()),
            analyzer: Some(crate::text::ANALYZER_VERSION),
            ..IndexStatus::default()
        };
        s.folders.insert("INBOX".to_owned(), inbox);
        s.folders.insert("Archive".to_owned(), archive);
        s
    }

    fn doubts(s: &IndexStatus, scope: Scope<'_>) -> Vec<&'static str> {
        Coverage::of(s, MAILBOX, scope, Duration::minutes(15), now())
            .codes()
            .collect()
    }

    #[test]
    fn a_complete_fresh_folder_of_this_mailbox_and_analysis_proves_absence() {
        let s = status(folder(true, 1, 0), folder(false, 1, 0));
        let c = Coverage::of(
            &s,
            MAILBOX,
            Scope::Folder(Some("INBOX")),
            Duration::minutes(15),
            now(),
        );
        assert!(c.proves_absence() && c.serves());
        assert_eq!(c.indexed_through, Some(now() - Duration::minutes(1)));
        // The whole mailbox is only as whole as its least synced folder.
        assert_eq!(doubts(&s, Scope::Mailbox), ["index_partial"]);
    }

    #[test]
    fn stale_partial_pending_and_unknown_folders_prove_nothing() {
        let s = status(folder(true, 60, 0), folder(true, 1, 2));
        assert_eq!(doubts(&s, Scope::Folder(Some("INBOX"))), ["index_stale"]);
        assert_eq!(
            doubts(&s, Scope::Folder(Some("Archive"))),
            ["index_partial"]
        );
        assert_eq!(
            doubts(&s, Scope::Folder(Some("Sent"))),
            ["index_stale", "index_partial"]
        );
        assert_eq!(
            doubts(&s, Scope::Folder(None)),
            ["index_stale", "index_partial"]
        );
        let mid_round = status(folder(false, 1, 0), folder(true, 1, 0));
        assert_eq!(
            doubts(&mid_round, Scope::Folder(Some("INBOX"))),
            ["index_partial"]
        );
    }

    #[test]
    fn another_mailbox_or_analysis_is_never_served_whatever_the_folders_say() {
        let fresh = status(folder(true, 1, 0), folder(true, 1, 0));
        let mut other = fresh.clone();
        other.mailbox = Some("sha256:another-mailbox".to_owned());
        let c = Coverage::of(
            &other,
            MAILBOX,
            Scope::Mailbox,
            Duration::minutes(15),
            now(),
        );
        assert!(!c.serves() && !c.proves_absence());
        assert_eq!(c.indexed_through, None);
        assert_eq!(doubts(&other, Scope::Mailbox), ["index_mailbox_changed"]);
        for analyzer in [None, Some(crate::text::ANALYZER_VERSION - 1)] {
            let mut old = fresh.clone();
            old.analyzer = analyzer;
            assert_eq!(doubts(&old, Scope::Mailbox), ["index_rebuild_needed"]);
        }
        // An index from before the binding: rebuilt, not taken for another mailbox.
        let mut unbound = fresh.clone();
        unbound.mailbox = None;
        assert_eq!(doubts(&unbound, Scope::Mailbox), ["index_rebuild_needed"]);
        // Both: the mailbox decides (only a rebuild fixes it).
        other.analyzer = None;
        assert_eq!(doubts(&other, Scope::Mailbox), ["index_mailbox_changed"]);
        assert!(Doubt::MailboxChanged.withholds() && Doubt::RebuildNeeded.withholds());
        assert!(!Doubt::Stale.withholds() && !Doubt::Partial.withholds());
    }
}
