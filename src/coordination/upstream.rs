//! The limits of upstream accounts: a provider limits an account (Graph allows 4 concurrent
//! requests per mailbox; an IMAP server a number of connections and commands per login), not a
//! mailgate alias, so two aliases that reach the same account share one set of limits. The
//! backends name the account they reach ([`AccountKey`]) and what they need of it
//! ([`AccountPlan`]) when startup opens them; [`UpstreamLimits`] merges the plans of one account
//! (the strictest wins) and hands every backend of the account the same [`AccountLimits`].
//! With a shared database the command budget and the "at once" slots are the database's
//! ([`SharedLimits`], implemented by the PostgreSQL store and handed in by startup: every
//! instance on it takes from one budget per account); otherwise this process's alone.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use super::rate::TokenBucket;
use futures::future::BoxFuture;

/// An upstream account, as its provider counts it. Never logged or shown: it holds a login.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct AccountKey(String);

impl AccountKey {
    /// An IMAP login: the server (host and port) and the user name, both in any case (two
    /// spellings of one login must not get two budgets; two logins that differ only in case
    /// sharing one is only stricter).
    pub(crate) fn imap(host: &str, port: u16, user: &str) -> Self {
        Self(format!(
            "imap\0{}\0{port}\0{}",
            host.to_ascii_lowercase(),
            user.to_lowercase()
        ))
    }

    /// A Graph mailbox, by its address (any case).
    pub(crate) fn graph(mailbox: &str) -> Self {
        Self(format!("graph\0{}", mailbox.to_ascii_lowercase()))
    }
}

impl std::fmt::Debug for AccountKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AccountKey(..)")
    }
}

/// What one backend needs of its account.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AccountPlan {
    /// Commands per minute (`None`: the provider counts no commands mailgate must keep to).
    pub(crate) per_minute: Option<u32>,
    /// Connections or requests at once.
    pub(crate) at_once: usize,
}

impl AccountPlan {
    /// The plan that keeps both: the smaller of each limit.
    fn strictest(self, other: Self) -> Self {
        let per_minute = match (self.per_minute, other.per_minute) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Self {
            per_minute,
            at_once: self.at_once.min(other.at_once),
        }
    }
}

/// Where instances keep the limits they share (the shared database): a command budget and a
/// number of slots per account, named by the account's key (which the store never keeps as
/// such: it holds a login).
pub(crate) trait SharedLimits: Send + Sync {
    fn budget(&self, account: &str, per_window: u32, window: Duration) -> Box<dyn SharedBudget>;
    fn slots(&self, account: &str, count: usize) -> Box<dyn SharedSlots>;
}

/// One account's command budget across instances.
pub(crate) trait SharedBudget: Send + Sync {
    /// Takes one command now, or says how long until one is there (a store that cannot be
    /// asked refuses).
    fn try_take(&self) -> BoxFuture<'_, Result<(), Duration>>;
}

/// One account's "at once" slots across instances.
pub(crate) trait SharedSlots: Send + Sync {
    /// Waits for a free slot and holds it until the returned guard drops.
    fn enter(&self) -> BoxFuture<'_, Result<Box<dyn Send + Sync>, GateUnavailable>>;
}

/// Where an account's command budget is kept.
enum Budget {
    /// This process alone.
    Local(TokenBucket),
    /// Every instance on the shared database.
    Shared(Box<dyn SharedBudget>),
}

impl std::fmt::Debug for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Budget::Local(bucket) => bucket.fmt(f),
            Budget::Shared(_) => f.write_str("Shared(..)"),
        }
    }
}

/// The limits of one account, shared by every backend that reaches it.
pub(crate) struct AccountLimits {
    /// Commands per minute, when the account counts them.
    commands: Option<Budget>,
    /// Connections or requests at once, in this process.
    at_once: Semaphore,
    /// The same, across every instance on the shared database.
    shared_slots: Option<Box<dyn SharedSlots>>,
}

impl std::fmt::Debug for AccountLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccountLimits")
            .field("commands", &self.commands)
            .field("shared_slots", &self.shared_slots.is_some())
            .finish_non_exhaustive()
    }
}

/// Why an account's gate could not be entered.
#[derive(Debug, thiserror::Error)]
#[error("the account's request gate is unavailable")]
pub(crate) struct GateUnavailable;

/// A request or connection admitted under an account's "at once" limit; leaving drops it.
pub(crate) struct Entered<'a> {
    _local: tokio::sync::SemaphorePermit<'a>,
    _shared: Option<Box<dyn Send + Sync>>,
}

impl AccountLimits {
    /// Limits of this process alone: `at_once`, and no command budget (a gate of mailgate's
    /// own, like the Graph sender's one submission at a time).
    pub(crate) fn in_process(at_once: usize) -> Self {
        Self::new(
            &AccountKey("in-process".to_owned()),
            AccountPlan {
                per_minute: None,
                at_once,
            },
            None,
        )
    }

    fn new(key: &AccountKey, plan: AccountPlan, shared: Option<&dyn SharedLimits>) -> Self {
        let window = Duration::from_secs(60);
        Self {
            commands: plan.per_minute.map(|n| match shared {
                Some(store) => Budget::Shared(store.budget(&key.0, n, window)),
                None => Budget::Local(TokenBucket::new(n, window)),
            }),
            at_once: Semaphore::new(plan.at_once.max(1)),
            shared_slots: shared.map(|store| store.slots(&key.0, plan.at_once)),
        }
    }

    /// Takes one command of the account's budget, or says how long until one is there.
    pub(crate) async fn admit(&self) -> Result<(), Duration> {
        match &self.commands {
            Some(Budget::Local(bucket)) => bucket.try_take(),
            Some(Budget::Shared(bucket)) => bucket.try_take().await,
            None => Ok(()),
        }
    }

    /// Whether the "at once" slots are counted across instances (a shared database). A slot is
    /// held while a connection is in use; one kept open between uses would count against the
    /// provider's connection limit in no instance's slots, so a pool then keeps none.
    pub(crate) fn counted_across_instances(&self) -> bool {
        self.shared_slots.is_some()
    }

    /// Waits for room under the account's "at once" limit (this process's, then every
    /// instance's when they share a database) and takes it until the guard drops. The caller
    /// bounds the wait by its deadline.
    pub(crate) async fn enter(&self) -> Result<Entered<'_>, GateUnavailable> {
        let local = self.at_once.acquire().await.map_err(|_| GateUnavailable)?;
        let shared = match &self.shared_slots {
            Some(slots) => Some(slots.enter().await?),
            None => None,
        };
        Ok(Entered {
            _local: local,
            _shared: shared,
        })
    }
}

/// Every account's limits, keyed by account.
#[derive(Default)]
pub(crate) struct UpstreamLimits {
    accounts: BTreeMap<AccountKey, Arc<AccountLimits>>,
    /// Where instances share the limits, when they do.
    shared: Option<Arc<dyn SharedLimits>>,
}

impl std::fmt::Debug for UpstreamLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamLimits")
            .field("accounts", &self.accounts.len())
            .field("shared", &self.shared.is_some())
            .finish()
    }
}

impl UpstreamLimits {
    /// The limits of the accounts `plans` name, one set per account, each the strictest of the
    /// plans that name it; their command budgets in the shared database when `shared` is given.
    pub(crate) fn plan(
        shared: Option<Arc<dyn SharedLimits>>,
        plans: impl IntoIterator<Item = (AccountKey, AccountPlan)>,
    ) -> Self {
        let mut merged: BTreeMap<AccountKey, AccountPlan> = BTreeMap::new();
        for (key, plan) in plans {
            merged
                .entry(key)
                .and_modify(|p| *p = p.strictest(plan))
                .or_insert(plan);
        }
        Self {
            accounts: merged
                .into_iter()
                .map(|(key, plan)| {
                    let limits = AccountLimits::new(&key, plan, shared.as_deref());
                    (key, Arc::new(limits))
                })
                .collect(),
            shared,
        }
    }

    /// The limits of `key`; an account no plan named gets its own, from `plan` (so a backend
    /// opened outside startup is still limited).
    pub(crate) fn of(&self, key: &AccountKey, plan: AccountPlan) -> Arc<AccountLimits> {
        self.accounts.get(key).map_or_else(
            || Arc::new(AccountLimits::new(key, plan, self.shared.as_deref())),
            Arc::clone,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IMAP: AccountPlan = AccountPlan {
        per_minute: Some(20),
        at_once: 4,
    };

    #[tokio::test]
    async fn aliases_of_one_account_share_the_strictest_limits() {
        let same = AccountKey::imap("Mail.Example.org", 993, "team");
        let limits = UpstreamLimits::plan(
            None,
            [
                (AccountKey::imap("mail.example.org", 993, "team"), IMAP),
                (
                    same.clone(),
                    AccountPlan {
                        per_minute: Some(3),
                        at_once: 8,
                    },
                ),
                (AccountKey::imap("mail.example.org", 993, "other"), IMAP),
            ],
        );
        let a = limits.of(&same, IMAP);
        let b = limits.of(&AccountKey::imap("mail.example.org", 993, "team"), IMAP);
        assert!(Arc::ptr_eq(&a, &b), "one set of limits per account");
        assert_eq!(a.at_once.available_permits(), 4);
        for _ in 0..3 {
            b.admit().await.expect("within the strictest budget");
        }
        assert!(
            a.admit().await.is_err(),
            "the budget is the account's, not an alias's"
        );
        // Another login on the same server is another account.
        let other = limits.of(&AccountKey::imap("mail.example.org", 993, "other"), IMAP);
        assert!(!Arc::ptr_eq(&a, &other));
        other.admit().await.expect("its own budget");
    }

    #[test]
    fn accounts_differ_by_port_user_and_provider() {
        let keys = [
            AccountKey::imap("mail.example.org", 993, "team"),
            AccountKey::imap("mail.example.org", 143, "team"),
            AccountKey::imap("mail.example.org", 993, "team2"),
            AccountKey::imap("imap.example.org", 993, "team"),
            AccountKey::graph("team@example.org"),
        ];
        for (i, a) in keys.iter().enumerate() {
            for b in &keys[i + 1..] {
                assert!(a != b);
            }
        }
        assert!(AccountKey::graph("Team@Example.org") == AccountKey::graph("team@example.org"));
        assert!(
            AccountKey::imap("mail.example.org", 993, "Team")
                == AccountKey::imap("mail.example.org", 993, "team")
        );
        assert_eq!(
            format!("{:?}", keys[0]),
            "AccountKey(..)",
            "never shows the login"
        );
    }

    #[tokio::test]
    async fn an_account_without_a_command_budget_admits_every_command() {
        let graph = AccountPlan {
            per_minute: None,
            at_once: 4,
        };
        let limits = UpstreamLimits::plan(None, [(AccountKey::graph("a@example.org"), graph)]);
        let a = limits.of(&AccountKey::graph("a@example.org"), graph);
        for _ in 0..100 {
            a.admit().await.expect("no command budget");
        }
    }
}
