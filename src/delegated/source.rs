//! An alias's delegated access tokens (issue 37, item 3): refreshed ahead of expiry, once for
//! all callers of this process and of every other instance sharing the state folder, with a
//! rotated refresh token saved before the access token it came with is used.
//!
//! How a token is found ([`DelegatedTokens::get`]):
//! 1. The in-memory token while it is fresh (no lock but the cache's, no I/O).
//! 2. Otherwise one refresh flight at a time per alias (the cache's `tokio` mutex, so concurrent
//!    calls wait for it), which takes the alias's lock in the grant store (`grants/<alias>.lock`,
//!    an `flock`, so another instance's flight waits too), then loads the grant file again: the
//!    other instance may have refreshed meanwhile, and its access token, kept in the sealed
//!    grant, is used as it is while fresh.
//! 3. Otherwise the token endpoint ([`Refresher`]). A success is saved to the grant file (the new
//!    access token, `refreshedAt`, and the new refresh token when the endpoint rotated it)
//!    atomically, while the alias's lock is still held, and only then returned.
//!
//! Fresh means before the refresh point: [`REFRESH_MARGIN`] (300 s) before expiry, or halfway
//! through the lifetime when that is shorter than [`SHORT_LIFETIME`] (10 min: test providers
//! issue 60-second tokens, which a 300 s margin would never cache). The margin is what lets a
//! transient failure pass unnoticed: while the current access token has not expired, a refresh
//! that cannot reach the endpoint serves it (and the next call tries again).
//!
//! Invariants:
//! - A rotated refresh token is written to the grant file (temp, fsync, rename, folder fsync)
//!   before its access token is returned; if that write fails the call fails and the previous
//!   file is intact, so a crash or a full disk never loses the only refresh token that was
//!   saved. A refresh is a spawned task: a caller that gives up (its call deadline) cannot
//!   cancel it between the endpoint's answer and the save.
//! - The refresh token is in memory only during a flight (loaded under the lock, dropped, and
//!   wiped, when the flight ends); only the access token is cached.
//! - `invalidate` forgets a rejected token only while it is still the cached one, and the next
//!   flight does not take that token from the grant file again: a burst of 401s is one refresh.
//! - A revoked or expired grant (`invalid_grant`) is marked in its file (`refusedAt`, the file is
//!   kept for `mailgate auth status`) and never sent again; every later call, in any instance,
//!   is [`TokenError::AuthRequired`] without a request, until a sign-in replaces the file.
//! - Nothing here formats a token or the account's address: errors name the alias and a class,
//!   logs carry the alias and the outcome.
//!
//! Who may call it: the delegated backends (Graph bearer, IMAP/SMTP SASL; issue 37, item 7), one
//! `DelegatedTokens` per alias, built at startup. Where the grant is kept is a [`GrantPlace`]:
//! the folder's file, or a shared database's row (`delegated::shared`: the row's lock plays the
//! `flock`'s part, and the flow above is the same).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, TimeDelta, Utc};
use futures::future::BoxFuture;

pub(crate) use super::grants::AccessToken;
use super::grants::{
    AliasLock, CachedAccess, Grant, GrantBinding, GrantError, GrantStore, RefreshToken,
};
use super::shared::{SharedGrants, SharedLock};
use super::wire::{self, ErrorCode, TokenOutcome};

/// Refresh this long before the token's stated expiry (clock skew, a slow request, and room for a
/// transient failure to pass while the token still works).
pub(crate) const REFRESH_MARGIN: TimeDelta = TimeDelta::seconds(300);
/// A token whose lifetime is shorter than this is refreshed halfway through instead.
pub(crate) const SHORT_LIFETIME: TimeDelta = TimeDelta::minutes(10);

/// The refresh request at the token endpoint (`grant_type=refresh_token`), implemented by the
/// token client (`delegated::client`). Transport failures are a [`RefreshFault`]; an endpoint
/// that answers with an error object is `Ok(TokenOutcome::Refused(..))`.
pub(crate) trait Refresher: Send + Sync {
    fn refresh<'a>(
        &'a self,
        token: &'a RefreshToken,
        scopes: &'a [String],
    ) -> BoxFuture<'a, Result<TokenOutcome, RefreshFault>>;
}

/// Why a refresh request got no answer to act on. The grant is kept in every case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RefreshFault {
    /// No connection, TLS failure, HTTP 5xx or 429.
    #[error("the token endpoint could not be reached")]
    Unavailable,
    #[error("the token endpoint did not answer in time")]
    Timeout,
    /// An answer `wire` refused (not JSON, too large, a status it does not expect...).
    #[error("the token endpoint's answer could not be read")]
    Malformed,
}

/// Why a sign-in is needed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AuthRequiredWhy {
    /// No grant file.
    NoGrant,
    /// The endpoint refused the refresh token (`invalid_grant`, `access_denied`), now or before
    /// (the file is marked).
    Refused,
    /// The endpoint refused the scopes the configuration now asks for (`invalid_scope`: a gate
    /// opened since the sign-in needs more).
    ScopeRefused,
    /// The file was sealed for another alias, provider, client id, tenant or issuer.
    OtherBinding,
    /// The file was sealed with another grant key, or the store has no key.
    OtherKey,
}

impl fmt::Display for AuthRequiredWhy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AuthRequiredWhy::NoGrant => "it has no grant",
            AuthRequiredWhy::Refused => {
                "the provider refused its grant: revoked, expired, or consent withdrawn"
            }
            AuthRequiredWhy::ScopeRefused => {
                "the provider refused the scopes its configuration now needs"
            }
            AuthRequiredWhy::OtherBinding => {
                "its grant file was sealed for another alias, provider, client id, tenant or \
                 issuer"
            }
            AuthRequiredWhy::OtherKey => {
                "its grant file was sealed with another grant key, or the key is gone"
            }
        })
    }
}

/// Why no token. Never a token, an address or the endpoint's text.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TokenError {
    /// The caller answers `AUTH_REQUIRED`, naming the command.
    #[error("alias {alias} must be signed in again ({why}): run `mailgate auth login {alias}`")]
    AuthRequired { alias: String, why: AuthRequiredWhy },
    /// The endpoint refused the app registration or the request (`invalid_client`,
    /// `unauthorized_client`, ...): a configuration problem a sign-in does not fix. The code is
    /// one of the RFC's (an unknown one is not repeated).
    #[error(
        "the token endpoint refused the refresh ({code}): check the alias's backend.auth \
         (clientId, tenant or issuer, clientSecretEnv); the grant is kept"
    )]
    ClientRefused { code: &'static str },
    #[error("the token endpoint could not be reached; the grant is kept, try again later")]
    Unavailable,
    #[error("the token endpoint did not answer in time; the grant is kept, try again later")]
    Timeout,
    #[error("the token endpoint's answer could not be read; the grant is kept, try again later")]
    Malformed,
    /// The grant file, its folder or the key could not be read or written (refused as not
    /// private, damaged, I/O).
    #[error(transparent)]
    Store(GrantError),
}

impl From<RefreshFault> for TokenError {
    fn from(fault: RefreshFault) -> TokenError {
        match fault {
            RefreshFault::Unavailable => TokenError::Unavailable,
            RefreshFault::Timeout => TokenError::Timeout,
            RefreshFault::Malformed => TokenError::Malformed,
        }
    }
}

/// The time source (injectable, so tests move time instead of sleeping).
pub(crate) type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// One alias's token source.
pub(crate) struct DelegatedTokens {
    flight: Arc<Flight>,
    state: tokio::sync::Mutex<State>,
}

impl fmt::Debug for DelegatedTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DelegatedTokens")
            .field("alias", &self.flight.binding.alias)
            .finish_non_exhaustive()
    }
}

/// Where an alias's grant is kept: the state folder's grant store, or a shared database's
/// row of the alias's mailbox (identity as the index names it, the row-level security key).
#[derive(Clone, Debug)]
pub(crate) enum GrantPlace {
    Folder(Arc<GrantStore>),
    Shared {
        grants: Arc<SharedGrants>,
        mailbox: String,
    },
}

impl GrantPlace {
    /// The grant of `binding.alias` (`mailgate auth status` and `logout`).
    pub(crate) async fn load(&self, binding: &GrantBinding) -> Result<Option<Grant>, GrantError> {
        match self {
            GrantPlace::Folder(store) => {
                let (store, binding) = (Arc::clone(store), binding.clone());
                blocking(move || store.load(&binding)).await
            }
            GrantPlace::Shared { grants, mailbox } => grants.load(mailbox, binding).await,
        }
    }

    /// A sign-in's save, under the alias's lock (waiting for a refresh in flight).
    pub(crate) async fn save(&self, grant: Grant) -> Result<(), GrantError> {
        match self {
            GrantPlace::Folder(store) => {
                let store = Arc::clone(store);
                blocking(move || store.save(&grant)).await
            }
            GrantPlace::Shared { grants, mailbox } => grants.save(mailbox, &grant).await,
        }
    }

    /// Removes the grant of `alias` (logout); `false` when there was none.
    pub(crate) async fn delete(&self, alias: &str) -> Result<bool, GrantError> {
        match self {
            GrantPlace::Folder(store) => {
                let (store, alias) = (Arc::clone(store), alias.to_owned());
                blocking(move || store.delete(&alias)).await
            }
            GrantPlace::Shared { grants, mailbox } => grants.delete(mailbox, alias).await,
        }
    }
}

/// A grant folder step on the blocking pool (its I/O and `flock` block).
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, GrantError> + Send + 'static,
) -> Result<T, GrantError> {
    match tokio::task::spawn_blocking(f).await {
        Ok(result) => result,
        Err(join) if join.is_panic() => std::panic::resume_unwind(join.into_panic()),
        Err(_) => Err(GrantError::Io {
            op: "finish a grant store step (the runtime is shutting down)",
            kind: std::io::ErrorKind::Interrupted,
        }),
    }
}

impl From<Arc<GrantStore>> for GrantPlace {
    fn from(store: Arc<GrantStore>) -> GrantPlace {
        GrantPlace::Folder(store)
    }
}

/// The lock a flight holds on its alias's grant, from the load to the save.
enum Held {
    Folder(AliasLock),
    Shared(SharedLock),
}

/// What a refresh flight needs; shared with the spawned flight task.
struct Flight {
    place: GrantPlace,
    binding: GrantBinding,
    scopes: Vec<String>,
    refresher: Arc<dyn Refresher>,
    clock: Clock,
    /// Requests sent to the token endpoint (metadata for logs and tests).
    refreshes: AtomicU64,
}

#[derive(Default)]
struct State {
    cached: Option<Fresh>,
    /// The last token a caller found rejected: not taken from the grant file again.
    rejected: Option<AccessToken>,
}

struct Fresh {
    token: AccessToken,
    refresh_at: DateTime<Utc>,
}

impl DelegatedTokens {
    /// The token source of `binding.alias`, asking for `scopes` (the catalog's, as at sign-in).
    pub(crate) fn new(
        place: impl Into<GrantPlace>,
        binding: GrantBinding,
        scopes: Vec<String>,
        refresher: Arc<dyn Refresher>,
    ) -> DelegatedTokens {
        DelegatedTokens::with_clock(place, binding, scopes, refresher, Arc::new(Utc::now))
    }

    pub(crate) fn with_clock(
        place: impl Into<GrantPlace>,
        binding: GrantBinding,
        scopes: Vec<String>,
        refresher: Arc<dyn Refresher>,
        clock: Clock,
    ) -> DelegatedTokens {
        DelegatedTokens {
            flight: Arc::new(Flight {
                place: place.into(),
                binding,
                scopes,
                refresher,
                clock,
                refreshes: AtomicU64::new(0),
            }),
            state: tokio::sync::Mutex::new(State::default()),
        }
    }

    /// A token valid for a while yet (see the module doc for where it comes from).
    pub(crate) async fn get(&self) -> Result<AccessToken, TokenError> {
        let mut state = self.state.lock().await;
        if let Some(fresh) = &state.cached
            && (self.flight.clock)() < fresh.refresh_at
        {
            return Ok(fresh.token.clone());
        }
        let flight = Arc::clone(&self.flight);
        let rejected = state.rejected.clone();
        // Spawned, not awaited in place: if this caller is dropped mid-refresh, the flight still
        // saves what the endpoint answered (a rotated refresh token above all). The next caller
        // waits for it on the alias's lock and finds its token in the grant file.
        let outcome = match tokio::spawn(async move { flight.run(rejected).await }).await {
            Ok(outcome) => outcome,
            Err(join) if join.is_panic() => std::panic::resume_unwind(join.into_panic()),
            // The runtime is shutting down.
            Err(_) => Err(TokenError::Unavailable),
        };
        match outcome {
            Ok(fresh) => {
                let token = fresh.token.clone();
                state.cached = Some(fresh);
                state.rejected = None;
                Ok(token)
            }
            Err(error) => {
                state.cached = None;
                Err(error)
            }
        }
    }

    /// Forgets `stale` if it is still the cached token (a request found it rejected), so the
    /// next [`get`](Self::get) refreshes; a newer cached token is kept.
    pub(crate) async fn invalidate(&self, stale: &AccessToken) {
        let mut state = self.state.lock().await;
        if state.cached.as_ref().is_some_and(|c| &c.token != stale) {
            return;
        }
        state.cached = None;
        state.rejected = Some(stale.clone());
    }

    #[cfg(test)]
    #[cfg(test)]
    /// Requests sent to the token endpoint by this source so far.
    pub(crate) fn refreshes(&self) -> u64 {
        self.flight.refreshes.load(Ordering::Relaxed)
    }
}

impl Flight {
    /// One refresh flight, under the alias's lock from the load to the save.
    async fn run(&self, rejected: Option<AccessToken>) -> Result<Fresh, TokenError> {
        let alias = self.binding.alias.as_str();
        let (lock, grant) = self.lock_load().await?;
        let Some(grant) = grant else {
            tracing::info!(alias, outcome = "no_grant", "delegated alias has no grant");
            return Err(self.auth_required(AuthRequiredWhy::NoGrant));
        };
        if grant.refused_at.is_some() {
            tracing::debug!(
                alias,
                outcome = "refused_before",
                "delegated grant is marked refused"
            );
            return Err(self.auth_required(AuthRequiredWhy::Refused));
        }
        // The token another flight (maybe another instance's) saved, unless a caller of ours
        // just found it rejected.
        let on_file = grant
            .access
            .as_ref()
            .filter(|a| rejected.as_ref() != Some(&a.token))
            .map(|a| (a.token.clone(), a.expires_at, refresh_due(a)));
        let now = (self.clock)();
        if let Some((token, _, refresh_at)) = &on_file
            && now < *refresh_at
        {
            tracing::debug!(
                alias,
                outcome = "reused",
                "delegated access token from the grant file"
            );
            return Ok(Fresh {
                token: token.clone(),
                refresh_at: *refresh_at,
            });
        }
        let started = whole_seconds(now);
        self.refreshes.fetch_add(1, Ordering::Relaxed);
        let outcome = self
            .refresher
            .refresh(&grant.refresh_token, &self.scopes)
            .await;
        match outcome {
            Ok(TokenOutcome::Granted(answer)) => {
                self.save_refresh(lock, grant, answer, started).await
            }
            Ok(TokenOutcome::Refused(refusal)) => self.refused(lock, grant, &refusal.code).await,
            Err(fault) => {
                let now = (self.clock)();
                if let Some((token, expires_at, _)) = on_file
                    && now < expires_at
                {
                    tracing::warn!(
                        alias,
                        outcome = fault_class(fault),
                        "delegated token refresh failed; the current access token is still valid"
                    );
                    // Due already: the next call tries again.
                    return Ok(Fresh {
                        token,
                        refresh_at: now,
                    });
                }
                tracing::warn!(
                    alias,
                    outcome = fault_class(fault),
                    "delegated token refresh failed; the grant is kept"
                );
                Err(fault.into())
            }
        }
    }

    /// Saves what a successful refresh brought, then hands out its access token.
    async fn save_refresh(
        &self,
        lock: Held,
        mut grant: Grant,
        answer: wire::Grant,
        started: DateTime<Utc>,
    ) -> Result<Fresh, TokenError> {
        let alias = self.binding.alias.as_str();
        let rotated = answer.refresh_token.is_some();
        if let Some(next) = answer.refresh_token {
            // The old token is dropped (and wiped) here; the file still holds it until the
            // rename below.
            grant.refresh_token = next;
        }
        if let Some(scopes) = answer.scope {
            grant.scopes = scopes;
        }
        let token = AccessToken::new(answer.access_token.expose().to_owned());
        let access = CachedAccess {
            token: token.clone(),
            obtained_at: started,
            expires_at: started + lifetime(answer.expires_in_secs),
        };
        let refresh_at = refresh_due(&access);
        grant.refreshed_at = started;
        grant.access = Some(access);
        let saved = self.save_held(lock, grant).await;
        match saved {
            Ok(()) => tracing::info!(
                alias,
                outcome = "refreshed",
                rotated,
                lifetime_assumed = answer.lifetime_assumed,
                "delegated access token refreshed"
            ),
            // The refresh token on file is still the valid one: only the shared copy of the
            // access token is missing, and another instance will refresh for itself.
            Err(error) if !rotated => tracing::warn!(
                alias,
                outcome = "refreshed_unsaved",
                %error,
                "delegated access token refreshed but not kept in the grant file"
            ),
            Err(error) => {
                tracing::error!(
                    alias,
                    outcome = "rotation_unsaved",
                    %error,
                    "the rotated refresh token could not be saved; the previous grant file is \
                     kept and the new access token is not used"
                );
                return Err(error);
            }
        }
        Ok(Fresh { token, refresh_at })
    }

    /// The endpoint answered with an error object.
    async fn refused(
        &self,
        lock: Held,
        mut grant: Grant,
        code: &ErrorCode,
    ) -> Result<Fresh, TokenError> {
        let alias = self.binding.alias.as_str();
        let name = code_name(code);
        match code {
            ErrorCode::InvalidGrant => {
                tracing::warn!(
                    alias,
                    outcome = "grant_refused",
                    code = name,
                    "the provider refused the delegated grant; a sign-in is required"
                );
                grant.refused_at = Some(whole_seconds((self.clock)()));
                grant.access = None;
                let marked = self.save_held(lock, grant).await;
                if let Err(error) = marked {
                    // The next call asks the endpoint again and gets the same answer.
                    tracing::warn!(alias, %error, "the refusal could not be recorded in the grant file");
                }
                Err(self.auth_required(AuthRequiredWhy::Refused))
            }
            ErrorCode::AccessDenied | ErrorCode::InvalidScope => {
                tracing::warn!(
                    alias,
                    outcome = "refused",
                    code = name,
                    "the provider refused the delegated refresh; a sign-in is required"
                );
                Err(self.auth_required(if *code == ErrorCode::InvalidScope {
                    AuthRequiredWhy::ScopeRefused
                } else {
                    AuthRequiredWhy::Refused
                }))
            }
            _ => {
                tracing::warn!(
                    alias,
                    outcome = "client_refused",
                    code = name,
                    "the token endpoint refused the delegated refresh request"
                );
                Err(TokenError::ClientRefused { code: name })
            }
        }
    }

    fn auth_required(&self, why: AuthRequiredWhy) -> TokenError {
        TokenError::AuthRequired {
            alias: self.binding.alias.clone(),
            why,
        }
    }

    /// Takes the alias's lock where its grant is kept, then loads the grant.
    async fn lock_load(&self) -> Result<(Held, Option<Grant>), TokenError> {
        match &self.place {
            GrantPlace::Folder(store) => {
                self.with_store(store, |store, binding| {
                    let lock = store.lock_alias(&binding.alias)?;
                    let grant = store.load(binding)?;
                    Ok((Held::Folder(lock), grant))
                })
                .await
            }
            GrantPlace::Shared { grants, mailbox } => grants
                .lock_load(mailbox, &self.binding)
                .await
                .map(|(lock, grant)| (Held::Shared(lock), grant))
                .map_err(|error| self.store_error(error)),
        }
    }

    /// Saves `grant` under the lock taken by [`lock_load`](Self::lock_load), releasing it.
    async fn save_held(&self, lock: Held, grant: Grant) -> Result<(), TokenError> {
        match (&self.place, lock) {
            (GrantPlace::Folder(store), Held::Folder(lock)) => {
                self.with_store(store, move |store, _| store.save_locked(&lock, &grant))
                    .await
            }
            (GrantPlace::Shared { grants, .. }, Held::Shared(lock)) => grants
                .save_locked(lock, &grant)
                .await
                .map_err(|error| self.store_error(error)),
            // A lock is only ever taken from this flight's own place.
            _ => Err(self.store_error(GrantError::InvalidAlias)),
        }
    }

    /// Runs a grant store step on the blocking pool (its I/O and `flock` block).
    async fn with_store<T, F>(&self, store: &Arc<GrantStore>, f: F) -> Result<T, TokenError>
    where
        T: Send + 'static,
        F: FnOnce(&GrantStore, &GrantBinding) -> Result<T, GrantError> + Send + 'static,
    {
        let store = Arc::clone(store);
        let binding = self.binding.clone();
        match tokio::task::spawn_blocking(move || f(&store, &binding)).await {
            Ok(result) => result.map_err(|error| self.store_error(error)),
            Err(join) if join.is_panic() => std::panic::resume_unwind(join.into_panic()),
            Err(_) => Err(TokenError::Unavailable),
        }
    }

    /// A grant that cannot be this alias's (another binding, another key) needs a sign-in; a
    /// file or folder that is refused or damaged is the operator's to look at, not to paper over
    /// with a new sign-in.
    fn store_error(&self, error: GrantError) -> TokenError {
        match error {
            GrantError::NotThisAliasGrant { .. } => {
                self.auth_required(AuthRequiredWhy::OtherBinding)
            }
            GrantError::WrongKey { .. } | GrantError::KeyMissing { .. } => {
                self.auth_required(AuthRequiredWhy::OtherKey)
            }
            other => TokenError::Store(other),
        }
    }
}

/// When a token stops being fresh (see the module doc).
fn refresh_due(access: &CachedAccess) -> DateTime<Utc> {
    let lifetime = access.expires_at - access.obtained_at;
    if lifetime < SHORT_LIFETIME {
        access.obtained_at + lifetime / 2
    } else {
        access.expires_at - REFRESH_MARGIN
    }
}

/// `expires_in` as a duration (`wire` bounds it to `1..=MAX_TOKEN_LIFETIME_SECS`).
fn lifetime(secs: u64) -> TimeDelta {
    let secs = secs.min(wire::MAX_TOKEN_LIFETIME_SECS);
    TimeDelta::seconds(i64::try_from(secs).unwrap_or(0))
}

/// The grant file keeps whole seconds; so does the cache, so both agree on the refresh point.
fn whole_seconds(t: DateTime<Utc>) -> DateTime<Utc> {
    DateTime::from_timestamp(t.timestamp(), 0).unwrap_or(t)
}

fn fault_class(fault: RefreshFault) -> &'static str {
    match fault {
        RefreshFault::Unavailable => "unavailable",
        RefreshFault::Timeout => "timeout",
        RefreshFault::Malformed => "malformed",
    }
}

/// The RFC's name of a code; an unknown code is the server's text and is not repeated.
fn code_name(code: &ErrorCode) -> &'static str {
    match code {
        ErrorCode::AuthorizationPending => "authorization_pending",
        ErrorCode::SlowDown => "slow_down",
        ErrorCode::ExpiredToken => "expired_token",
        ErrorCode::AccessDenied => "access_denied",
        ErrorCode::InvalidGrant => "invalid_grant",
        ErrorCode::InvalidClient => "invalid_client",
        ErrorCode::InvalidScope => "invalid_scope",
        ErrorCode::UnauthorizedClient => "unauthorized_client",
        ErrorCode::UnsupportedGrantType => "unsupported_grant_type",
        ErrorCode::InvalidRequest => "invalid_request",
        ErrorCode::Other(_) => "an unrecognised error code",
    }
}

#[cfg(test)]
#[expect(
    clippy::disallowed_methods,
    reason = "tests plant and inspect grant files on the real filesystem inside a tempdir"
)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;
    use std::path::PathBuf;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicI64, AtomicUsize};
    use std::time::Duration;

    use cap_std::fs::Dir;
    use futures::future::join_all;

    use super::*;
    use crate::path_guard;

    /// Appears in every token and in the endpoint's error text: no output may contain it.
    const MARKER: &str = "MARKER-token-5e1d";
    const T0: i64 = 1_796_000_000;

    #[derive(Clone, Copy, Debug)]
    enum Answer {
        /// A new access token and a new refresh token.
        Rotate,
        /// A new access token; the refresh token stays valid.
        Keep,
        /// An error object with this code.
        Refuse(&'static str),
        Fault(RefreshFault),
    }

    /// A token endpoint: the `n`th request answers `at-n` (and `rt-(n+1)` when rotating).
    struct Provider {
        answer: Mutex<Answer>,
        lifetime_secs: AtomicU64,
        calls: AtomicUsize,
        seen: Mutex<Vec<String>>,
    }

    impl Provider {
        fn set(&self, answer: Answer) {
            *self.answer.lock().expect("answer") = answer;
        }

        fn calls(&self) -> usize {
            self.calls.load(Ordering::SeqCst)
        }

        /// The refresh tokens presented, in order.
        fn seen(&self) -> Vec<String> {
            self.seen.lock().expect("seen").clone()
        }
    }

    impl Refresher for Provider {
        fn refresh<'a>(
            &'a self,
            token: &'a RefreshToken,
            scopes: &'a [String],
        ) -> BoxFuture<'a, Result<TokenOutcome, RefreshFault>> {
            Box::pin(async move {
                assert_eq!(scopes, fixture_scopes());
                let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
                self.seen
                    .lock()
                    .expect("seen")
                    .push(token.expose().to_owned());
                // Long enough for every concurrent caller to queue up behind this request.
                tokio::time::sleep(Duration::from_millis(30)).await;
                let answer = *self.answer.lock().expect("answer");
                let expires_in = self.lifetime_secs.load(Ordering::SeqCst);
                let access = format!("{MARKER}-at-{n}");
                let (status, body) = match answer {
                    Answer::Rotate => (
                        200,
                        serde_json::json!({
                            "access_token": access, "token_type": "Bearer",
                            "expires_in": expires_in, "refresh_token": rt(n + 1),
                        }),
                    ),
                    Answer::Keep => (
                        200,
                        serde_json::json!({
                            "access_token": access, "token_type": "Bearer",
                            "expires_in": expires_in,
                        }),
                    ),
                    Answer::Refuse(code) => (
                        400,
                        serde_json::json!({
                            "error": code, "error_description": format!("{MARKER} refused"),
                        }),
                    ),
                    Answer::Fault(fault) => return Err(fault),
                };
                let body = serde_json::to_vec(&body).expect("json");
                Ok(
                    wire::parse_token_response(status, Some("application/json"), &body)
                        .expect("a well-formed answer"),
                )
            })
        }
    }

    fn rt(n: usize) -> String {
        format!("{MARKER}-rt-{n}")
    }

    fn at(n: usize) -> String {
        format!("{MARKER}-at-{n}")
    }

    fn binding() -> GrantBinding {
        GrantBinding {
            alias: "personal".to_owned(),
            provider: "microsoft".to_owned(),
            client_id: "00000000-0000-0000-0000-00000000c1d0".to_owned(),
            authority: "consumers".to_owned(),
        }
    }

    fn fixture_scopes() -> Vec<String> {
        vec![
            "offline_access".to_owned(),
            "https://graph.microsoft.com/Mail.Read".to_owned(),
        ]
    }

    fn time(secs_after_t0: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(T0 + secs_after_t0, 0).expect("time")
    }

    /// What a sign-in saved a day before the tests' time zero.
    fn signed_in() -> Grant {
        Grant {
            binding: binding(),
            refresh_token: RefreshToken::new(rt(1)),
            account: "robin.example@example.com".to_owned(),
            scopes: fixture_scopes(),
            obtained_at: time(-86_400),
            refreshed_at: time(-86_400),
            access: None,
            refused_at: None,
        }
    }

    struct Fixture {
        tmp: tempfile::TempDir,
        state: Dir,
        store: Arc<GrantStore>,
        now: Arc<AtomicI64>,
        provider: Arc<Provider>,
    }

    impl Fixture {
        /// A state folder whose grants folder holds [`signed_in`].
        fn new() -> Fixture {
            let fx = Fixture::empty();
            fx.store.save(&signed_in()).expect("save");
            fx
        }

        fn empty() -> Fixture {
            let tmp = tempfile::tempdir().expect("tempdir");
            std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o700))
                .expect("chmod");
            let state = path_guard::open_state_dir(&tmp.path().join("state"), true).expect("state");
            let store = Arc::new(GrantStore::open(&state, None, true).expect("store"));
            Fixture {
                tmp,
                state,
                store,
                now: Arc::new(AtomicI64::new(T0)),
                provider: Arc::new(Provider {
                    answer: Mutex::new(Answer::Rotate),
                    lifetime_secs: AtomicU64::new(3600),
                    calls: AtomicUsize::new(0),
                    seen: Mutex::new(Vec::new()),
                }),
            }
        }

        /// Moves the clock to `secs` after time zero.
        fn at(&self, secs: i64) {
            self.now.store(T0 + secs, Ordering::SeqCst);
        }

        fn tokens(&self) -> DelegatedTokens {
            self.tokens_for(Arc::clone(&self.store), binding())
        }

        /// Another instance: its own store handle (its own descriptors, so its own `flock`s)
        /// on the same folder, its own cache, the same provider and clock.
        fn second_instance(&self) -> DelegatedTokens {
            let store = GrantStore::open(&self.state, None, false).expect("store");
            self.tokens_for(Arc::new(store), binding())
        }

        fn tokens_for(&self, store: Arc<GrantStore>, binding: GrantBinding) -> DelegatedTokens {
            let now = Arc::clone(&self.now);
            let clock: Clock = Arc::new(move || {
                DateTime::from_timestamp(now.load(Ordering::SeqCst), 0).expect("time")
            });
            let refresher: Arc<dyn Refresher> = Arc::clone(&self.provider) as _;
            DelegatedTokens::with_clock(store, binding, fixture_scopes(), refresher, clock)
        }

        /// The grant file as it is now, read by a fresh handle.
        fn on_file(&self) -> Grant {
            GrantStore::open(&self.state, None, false)
                .expect("store")
                .load(&binding())
                .expect("load")
                .expect("a grant file")
        }

        fn grants(&self) -> PathBuf {
            self.tmp.path().join("state").join("grants")
        }
    }

    fn auth_required(why: AuthRequiredWhy) -> TokenError {
        TokenError::AuthRequired {
            alias: "personal".to_owned(),
            why,
        }
    }

    #[tokio::test]
    async fn a_fresh_token_is_reused_and_refreshed_300_seconds_ahead_of_expiry() {
        let fx = Fixture::new();
        let tokens = fx.tokens();
        let first = tokens.get().await.expect("token");
        assert_eq!(first.expose(), at(1));
        assert_eq!(tokens.get().await.expect("cached"), first);
        fx.at(3600 - 301);
        assert_eq!(tokens.get().await.expect("still fresh"), first);
        assert_eq!(fx.provider.calls(), 1);
        fx.at(3600 - 300);
        assert_eq!(tokens.get().await.expect("refreshed").expose(), at(2));
        assert_eq!(fx.provider.calls(), 2);
        assert_eq!(tokens.refreshes(), 2);
    }

    #[tokio::test]
    async fn a_short_lived_token_is_refreshed_halfway_through() {
        let fx = Fixture::new();
        fx.provider.lifetime_secs.store(60, Ordering::SeqCst);
        let tokens = fx.tokens();
        let first = tokens.get().await.expect("token");
        fx.at(29);
        assert_eq!(tokens.get().await.expect("fresh"), first);
        fx.at(30);
        assert_eq!(tokens.get().await.expect("refreshed").expose(), at(2));
        assert_eq!(fx.provider.calls(), 2);
    }

    #[tokio::test]
    async fn twenty_concurrent_calls_wait_on_one_refresh() {
        let fx = Fixture::new();
        let tokens = fx.tokens();
        let all = join_all((0..20).map(|_| tokens.get())).await;
        assert!(
            all.iter()
                .all(|t| t.as_ref().map(AccessToken::expose) == Ok(at(1).as_str())),
            "{all:?}"
        );
        assert_eq!(fx.provider.calls(), 1, "single flight");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_instances_sharing_the_grant_folder_refresh_once() {
        let fx = Fixture::new();
        let (a, b) = (fx.tokens(), fx.second_instance());
        let (xs, ys) = tokio::join!(
            join_all((0..10).map(|_| a.get())),
            join_all((0..10).map(|_| b.get()))
        );
        for token in xs.iter().chain(&ys) {
            assert_eq!(token.as_ref().map(AccessToken::expose), Ok(at(1).as_str()));
        }
        assert_eq!(fx.provider.calls(), 1, "one refresh across both instances");
        assert_eq!(a.refreshes() + b.refreshes(), 1);
        // B finds the token rejected and refreshes once; A, told the same later, takes B's new
        // token from the grant file instead of refreshing again.
        let stale = AccessToken::new(at(1));
        b.invalidate(&stale).await;
        assert_eq!(b.get().await.expect("refreshed").expose(), at(2));
        a.invalidate(&stale).await;
        assert_eq!(a.get().await.expect("from the file").expose(), at(2));
        assert_eq!(fx.provider.calls(), 2);
        assert_eq!(fx.provider.seen(), [rt(1), rt(2)]);
    }

    /// The same over a shared database's grant row (in memory here, with the database's row
    /// lock and fence; `index::store::postgres::grant_rows` runs it on PostgreSQL).
    #[tokio::test]
    async fn two_instances_sharing_a_grant_row_refresh_once() {
        use crate::delegated::grants::GrantKey;
        use crate::delegated::shared::SharedGrants;
        use crate::delegated::shared::testing::{MemoryRows, SharedMemoryRows};
        let fx = Fixture::empty();
        let rows = Arc::new(MemoryRows::default());
        let instance = || {
            let grants = SharedGrants::new(
                Arc::new(SharedMemoryRows(Arc::clone(&rows))),
                GrantKey::for_test(7),
            );
            GrantPlace::Shared {
                grants: Arc::new(grants),
                mailbox: "sha256:personal".to_owned(),
            }
        };
        let (place_a, place_b) = (instance(), instance());
        place_a.save(signed_in()).await.expect("login");
        let tokens = |place: &GrantPlace| {
            let now = Arc::clone(&fx.now);
            let clock: Clock = Arc::new(move || {
                DateTime::from_timestamp(now.load(Ordering::SeqCst), 0).expect("time")
            });
            let refresher: Arc<dyn Refresher> = Arc::clone(&fx.provider) as _;
            DelegatedTokens::with_clock(
                place.clone(),
                binding(),
                fixture_scopes(),
                refresher,
                clock,
            )
        };
        let (a, b) = (tokens(&place_a), tokens(&place_b));
        let (xs, ys) = tokio::join!(
            join_all((0..10).map(|_| a.get())),
            join_all((0..10).map(|_| b.get()))
        );
        for token in xs.iter().chain(&ys) {
            assert_eq!(token.as_ref().map(AccessToken::expose), Ok(at(1).as_str()));
        }
        assert_eq!(fx.provider.calls(), 1, "one refresh across both instances");
        // The rotated refresh token is in the row, sealed: another instance opens it.
        let row = place_b
            .load(&binding())
            .await
            .expect("load")
            .expect("a row");
        assert_eq!(row.refresh_token.expose(), rt(2));
        // A row another key sealed is refused as another key's, never used.
        let foreign = GrantPlace::Shared {
            grants: Arc::new(SharedGrants::new(
                Arc::new(SharedMemoryRows(Arc::clone(&rows))),
                GrantKey::for_test(8),
            )),
            mailbox: "sha256:personal".to_owned(),
        };
        assert!(matches!(
            tokens(&foreign).get().await,
            Err(TokenError::AuthRequired {
                why: AuthRequiredWhy::OtherKey,
                ..
            })
        ));
        // A row replaced behind a flight's back (between its load and its save) fails the save:
        // the flight's rotated token is not written over the other writer's.
        let held = tokio::spawn({
            let rows = Arc::clone(&rows);
            async move {
                let grants = SharedGrants::new(
                    Arc::new(SharedMemoryRows(Arc::clone(&rows))),
                    GrantKey::for_test(7),
                );
                let (lock, grant) = grants
                    .lock_load("sha256:personal", &binding())
                    .await
                    .expect("lock");
                rows.overwrite("sha256:personal", b"another writer's row".to_vec());
                grants.save_locked(lock, &grant.expect("a grant")).await
            }
        });
        assert!(matches!(
            held.await.expect("join"),
            Err(GrantError::Shared { .. })
        ));
    }

    #[tokio::test]
    async fn a_burst_of_rejections_causes_one_refresh() {
        let fx = Fixture::new();
        let tokens = fx.tokens();
        let stale = tokens.get().await.expect("token");
        for _ in 0..3 {
            tokens.invalidate(&stale).await;
        }
        let fresh = tokens.get().await.expect("refreshed");
        assert_eq!(fresh.expose(), at(2));
        // A late 401 for the old token leaves the new one alone.
        tokens.invalidate(&stale).await;
        assert_eq!(tokens.get().await.expect("cached"), fresh);
        assert_eq!(fx.provider.calls(), 2);
    }

    #[tokio::test]
    async fn a_rotated_refresh_token_is_saved_before_its_access_token_is_used() {
        let fx = Fixture::new();
        let tokens = fx.tokens();
        let first = tokens.get().await.expect("token");
        let file = fx.on_file();
        assert_eq!(
            file.refresh_token.expose(),
            rt(2),
            "saved by the time get returned"
        );
        assert_eq!(file.refreshed_at, time(0));
        let access = file
            .access
            .expect("the access token is kept for other instances");
        assert_eq!(access.token, first);
        assert_eq!(
            (access.obtained_at, access.expires_at),
            (time(0), time(3600))
        );
        fx.at(3600);
        assert_eq!(tokens.get().await.expect("refreshed").expose(), at(2));
        assert_eq!(
            fx.provider.seen(),
            [rt(1), rt(2)],
            "the old token is never sent again"
        );
        assert_eq!(fx.on_file().refresh_token.expose(), rt(3));
        // Without a rotation the refresh token on file stays.
        fx.provider.set(Answer::Keep);
        fx.at(7200);
        assert_eq!(tokens.get().await.expect("refreshed").expose(), at(3));
        let file = fx.on_file();
        assert_eq!(file.refresh_token.expose(), rt(3));
        assert_eq!(file.refreshed_at, time(7200));
        assert_eq!(fx.provider.seen(), [rt(1), rt(2), rt(3)]);
    }

    #[tokio::test]
    async fn a_rotation_that_cannot_be_saved_keeps_the_previous_grant_and_fails_the_call() {
        let fx = Fixture::new();
        let tokens = fx.tokens();
        // The save's first step fails (a folder where its temp file goes), after the endpoint
        // has answered: what a crash or a full disk at that point leaves.
        let blocker = fx.grants().join("personal.grant.tmp");
        std::fs::create_dir(&blocker).expect("mkdir");
        let err = tokens.get().await.expect_err("the call fails");
        assert!(
            matches!(err, TokenError::Store(GrantError::GrantIo { .. })),
            "{err:?}"
        );
        assert_eq!(
            fx.on_file(),
            signed_in(),
            "the previous grant, whole and readable"
        );
        std::fs::remove_dir(&blocker).expect("rmdir");
        // The rotated token is lost with the failed save; the next refresh uses the one on file.
        assert_eq!(tokens.get().await.expect("token").expose(), at(2));
        assert_eq!(fx.provider.seen(), [rt(1), rt(1)]);
        assert_eq!(fx.on_file().refresh_token.expose(), rt(3));
    }

    #[tokio::test]
    async fn a_refresh_without_rotation_serves_its_token_even_when_it_cannot_be_saved() {
        let fx = Fixture::new();
        fx.provider.set(Answer::Keep);
        std::fs::create_dir(fx.grants().join("personal.grant.tmp")).expect("mkdir");
        assert_eq!(fx.tokens().get().await.expect("token").expose(), at(1));
        assert_eq!(
            fx.on_file(),
            signed_in(),
            "the valid refresh token is still on file"
        );
    }

    #[tokio::test]
    async fn a_caller_that_gives_up_mid_refresh_does_not_lose_the_rotation() {
        let fx = Fixture::new();
        let tokens = fx.tokens();
        let gave_up = tokio::time::timeout(Duration::from_millis(5), tokens.get()).await;
        assert!(gave_up.is_err(), "the caller's deadline passed mid-refresh");
        // The flight goes on: it holds the alias's lock from its load to its save.
        for _ in 0..1000 {
            if fx.provider.calls() == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let store = Arc::clone(&fx.store);
        let lock = tokio::task::spawn_blocking(move || store.lock_alias("personal"))
            .await
            .expect("join")
            .expect("lock");
        drop(lock);
        assert_eq!(fx.on_file().refresh_token.expose(), rt(2));
        assert_eq!(tokens.get().await.expect("from the file").expose(), at(1));
        assert_eq!(fx.provider.calls(), 1);
    }

    #[tokio::test]
    async fn invalid_grant_is_auth_required_and_marks_the_grant_for_every_instance() {
        let fx = Fixture::new();
        fx.provider.set(Answer::Refuse("invalid_grant"));
        let tokens = fx.tokens();
        let err = tokens.get().await.expect_err("refused");
        assert_eq!(err, auth_required(AuthRequiredWhy::Refused));
        let text = err.to_string();
        assert!(text.contains("`mailgate auth login personal`"), "{text}");
        assert!(!text.contains(MARKER), "{text}");
        let file = fx.on_file();
        assert_eq!(file.refused_at, Some(time(0)), "kept, and marked");
        assert_eq!(file.refresh_token.expose(), rt(1));
        // Never sent again, by this instance or another.
        fx.at(60);
        assert_eq!(
            tokens.get().await,
            Err(auth_required(AuthRequiredWhy::Refused))
        );
        assert_eq!(
            fx.second_instance().get().await,
            Err(auth_required(AuthRequiredWhy::Refused))
        );
        assert_eq!(fx.provider.calls(), 1);
        // A new sign-in replaces the file; the next call uses it.
        fx.store.save(&signed_in()).expect("login");
        fx.provider.set(Answer::Rotate);
        assert_eq!(tokens.get().await.expect("token").expose(), at(2));
    }

    #[tokio::test]
    async fn other_refusals_are_not_marked() {
        let fx = Fixture::new();
        let tokens = fx.tokens();
        let cases = [
            (
                "invalid_scope",
                auth_required(AuthRequiredWhy::ScopeRefused),
            ),
            ("access_denied", auth_required(AuthRequiredWhy::Refused)),
            (
                "invalid_client",
                TokenError::ClientRefused {
                    code: "invalid_client",
                },
            ),
            (
                "vendor_specific_code",
                TokenError::ClientRefused {
                    code: "an unrecognised error code",
                },
            ),
        ];
        for (code, expected) in cases {
            fx.provider.set(Answer::Refuse(code));
            assert_eq!(tokens.get().await, Err(expected), "{code}");
            assert_eq!(fx.on_file(), signed_in(), "{code}");
        }
        assert_eq!(fx.provider.calls(), 4);
    }

    #[tokio::test]
    async fn no_grant_or_another_bindings_grant_is_auth_required() {
        let fx = Fixture::empty();
        assert_eq!(
            fx.tokens().get().await,
            Err(auth_required(AuthRequiredWhy::NoGrant))
        );
        fx.store.save(&signed_in()).expect("save");
        let mut other = binding();
        other.client_id.push('x');
        let tokens = fx.tokens_for(Arc::clone(&fx.store), other);
        assert_eq!(
            tokens.get().await,
            Err(auth_required(AuthRequiredWhy::OtherBinding))
        );
        assert_eq!(fx.provider.calls(), 0);
        // A damaged file is the operator's to look at, not a sign-in.
        let path = fx.grants().join("personal.grant");
        std::fs::write(&path, b"mailgate-grant v1 garbage\n").expect("write");
        assert!(matches!(
            fx.tokens().get().await,
            Err(TokenError::Store(GrantError::Corrupt { .. }))
        ));
    }

    #[tokio::test]
    async fn a_transient_fault_keeps_the_grant_and_a_still_valid_token_serves() {
        let fx = Fixture::new();
        let tokens = fx.tokens();
        let faults = [
            (RefreshFault::Unavailable, TokenError::Unavailable),
            (RefreshFault::Timeout, TokenError::Timeout),
            (RefreshFault::Malformed, TokenError::Malformed),
        ];
        for (fault, expected) in faults {
            fx.provider.set(Answer::Fault(fault));
            assert_eq!(tokens.get().await, Err(expected));
        }
        assert_eq!(fx.on_file(), signed_in(), "the grant is unchanged");
        // Within the margin a failed refresh serves the current token, and the next call tries
        // again; past its expiry the failure is the call's.
        fx.provider.set(Answer::Rotate);
        let token = tokens.get().await.expect("token");
        fx.at(3400);
        fx.provider.set(Answer::Fault(RefreshFault::Unavailable));
        assert_eq!(tokens.get().await.expect("still valid"), token);
        assert_eq!(tokens.get().await.expect("still valid"), token);
        assert_eq!(fx.provider.calls(), 6);
        fx.at(3600);
        assert_eq!(tokens.get().await, Err(TokenError::Unavailable));
        assert_eq!(fx.on_file().refresh_token.expose(), rt(5));
    }

    #[tokio::test]
    async fn no_output_shows_a_token() {
        let fx = Fixture::new();
        let tokens = fx.tokens();
        let token = tokens.get().await.expect("token");
        assert_eq!(format!("{token:?}"), "AccessToken(<redacted>)");
        let debug = format!("{tokens:?}");
        assert!(
            debug.contains("personal") && !debug.contains(MARKER),
            "{debug}"
        );
        let errors = [
            auth_required(AuthRequiredWhy::OtherKey),
            TokenError::ClientRefused {
                code: "invalid_client",
            },
            TokenError::Unavailable,
            TokenError::Timeout,
            TokenError::Malformed,
        ];
        for error in errors {
            let (text, debug) = (error.to_string(), format!("{error:?}"));
            assert!(!text.contains(MARKER) && !debug.contains(MARKER), "{text}");
            assert!(!text.contains("robin"), "{text}");
        }
    }
}
