//! The issuer's signing keys (issue 29, item 2): its metadata (RFC 8414, else OpenID Connect
//! discovery) names the JWKS, which is fetched, cached for [`MAX_AGE`], and fetched again when a
//! token names a key the cache does not hold (a key rotation), at most once per [`MIN_REFRESH`]
//! for unknown keys and once per [`RETRY_AFTER_FAILURE`] after a failed fetch, so a stream of
//! tokens with made-up `kid`s cannot turn the server into a client hammering the issuer.
//!
//! A fetch never holds a request that does not need it (issue 36, item 5): the keys are a
//! snapshot every lookup reads without waiting, and a fetch runs on a task of its own, one at a
//! time. A lookup of a cached key answers from the snapshot at once, even while a fetch is in
//! flight, and even past [`MAX_AGE`] (it starts the refetch and answers from the keys it has:
//! stale while revalidating, as it already answered when the issuer was down). Only a lookup of
//! a key the snapshot lacks waits, for the one fetch in flight (joined, never queued behind
//! another: every such lookup shares it), and at most [`WAIT`]; the fetch itself ends within
//! [`FETCH_DEADLINE`]. So one anonymous client's made-up `kid` costs nobody else a wait, and
//! the client who sent it at most [`WAIT`].
//!
//! Invariants: every fetch goes to an https URL, or http on loopback (the rule the Graph and
//! embeddings clients follow), without redirects or an ambient proxy, within a time and size
//! bound; the metadata's `issuer` must equal the configured one (RFC 8414 §3.3). A fetch that
//! fails leaves the keys that were cached; with none cached, the lookup answers
//! [`Lookup::Unavailable`] and the request is refused, never served: an issuer that cannot be
//! reached fails closed. No token, and nothing from one but its `kid`, reaches this module.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::Jwk;
use serde::Deserialize;
use tokio::sync::watch;
use url::Url;

// The URL rule the Graph and embeddings clients follow: https, or http to a loopback host; no
// credentials, query or fragment.
use crate::backends::graph::endpoints::parse_root;

/// The least time between two fetches for a key the cache does not hold.
pub(crate) const MIN_REFRESH: Duration = Duration::from_secs(30);
/// The least time between a failed fetch and the next one.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(5);
/// How long a fetched key set is used before it is fetched again (behind the answer) on the
/// next request.
const MAX_AGE: Duration = Duration::from_secs(3600);
/// The largest metadata document or key set read.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;
/// One request to the issuer, connection included.
const TIMEOUT: Duration = Duration::from_secs(10);
/// One whole fetch: discovery (up to two documents, the first time) and the key set.
const FETCH_DEADLINE: Duration = Duration::from_secs(20);
/// The longest a lookup of a key the cache lacks waits for the fetch in flight; past it, the
/// lookup answers from the keys as they are (the fetch goes on for the next lookups).
const WAIT: Duration = TIMEOUT;

/// What the cache says of a key id.
pub(crate) enum Lookup {
    Found(Box<Jwk>),
    /// The issuer answered and holds no such key.
    Unknown,
    /// No key set could be had from the issuer.
    Unavailable,
}

/// Why the issuer's keys could not be had (for the log: no URL, no body).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum KeysError {
    #[error("the authorization server could not be reached")]
    Unreachable,
    #[error("the authorization server's metadata is missing or malformed")]
    Metadata,
    #[error("the authorization server's metadata names another issuer")]
    IssuerMismatch,
    #[error("the authorization server's jwks_uri is not https (or http on loopback)")]
    JwksUri,
    #[error("the authorization server's key set is malformed")]
    KeySet,
}

/// Where the metadata may be: RFC 8414's well-known URL (inserted before the issuer's path),
/// then OpenID Connect's (appended to it).
fn metadata_urls(issuer: &Url) -> Vec<Url> {
    let path = issuer.path().trim_end_matches('/');
    let mut rfc8414 = issuer.clone();
    rfc8414.set_path(&format!("/.well-known/oauth-authorization-server{path}"));
    let mut oidc = issuer.clone();
    oidc.set_path(&format!("{path}/.well-known/openid-configuration"));
    vec![rfc8414, oidc]
}

#[derive(Deserialize)]
struct Metadata {
    issuer: String,
    jwks_uri: String,
}

#[derive(Deserialize)]
struct RawKeySet {
    keys: Vec<serde_json::Value>,
}

/// The keys as last fetched: what every lookup reads, replaced whole by a fetch.
#[derive(Default)]
struct KeySet {
    keys: Vec<Jwk>,
    /// When they were fetched (`None`: never).
    fetched: Option<Instant>,
}

/// The fetch bookkeeping. Its lock is held only to read or change these fields, never across
/// an await, so it never makes a request wait for the issuer.
#[derive(Default)]
struct Refresh {
    jwks_uri: Option<Url>,
    /// When a fetch for an unknown key last started.
    refreshed_for_unknown: Option<Instant>,
    /// When a fetch last failed.
    failed: Option<Instant>,
    /// The fetch under way: its end (the sender dropped) wakes every receiver.
    in_flight: Option<watch::Receiver<()>>,
}

/// What the lookups and the fetch task share.
struct Shared {
    client: reqwest::Client,
    /// As configured (compared as a string), and parsed (where the metadata is).
    issuer: String,
    issuer_url: Url,
    keys: RwLock<Arc<KeySet>>,
    refresh: Mutex<Refresh>,
    /// The tests' clock runs ahead by this many milliseconds.
    #[cfg(test)]
    skew: std::sync::atomic::AtomicU64,
}

/// The cached key set of one issuer.
pub(crate) struct KeyCache {
    shared: Arc<Shared>,
    /// [`WAIT`] (shorter in a test of the bound).
    wait: Duration,
}

/// The data behind a lock whose holder panicked is still whole here: every critical section
/// only assigns fields.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl KeyCache {
    pub(crate) fn new(issuer: &str) -> Result<Self, KeysError> {
        let issuer_url = parse_root(issuer).map_err(|_| KeysError::Metadata)?;
        let client = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(TIMEOUT)
            .connect_timeout(TIMEOUT)
            .build()
            .map_err(|_| KeysError::Unreachable)?;
        Ok(Self {
            shared: Arc::new(Shared {
                client,
                issuer: issuer.to_owned(),
                issuer_url,
                keys: RwLock::new(Arc::new(KeySet::default())),
                refresh: Mutex::new(Refresh::default()),
                #[cfg(test)]
                skew: std::sync::atomic::AtomicU64::new(0),
            }),
            wait: WAIT,
        })
    }

    /// The key a token names (`kid`; without one, the only key the set holds). A cached key is
    /// answered at once (a set past [`MAX_AGE`] is fetched again behind the answer); a missing
    /// one waits, at most [`WAIT`], for the fetch in flight or one it starts (rate-limited).
    pub(crate) async fn lookup(&self, kid: Option<&str>) -> Lookup {
        let set = self.shared.snapshot();
        let stale = set.fetched.is_none_or(|at| self.shared.since(at) > MAX_AGE);
        if let Some(key) = find(&set.keys, kid) {
            if stale {
                // Nobody waits for it: the answer is the key the cache holds.
                drop(Shared::fetch_or_join(&self.shared, kid, false));
            }
            return Lookup::Found(Box::new(key.clone()));
        }
        // Past here the set is stale (or empty), or fresh and without the key.
        if let Some(mut done) = Shared::fetch_or_join(&self.shared, kid, !stale) {
            // Nothing is ever sent: `changed` ends with the fetch (its sender dropped), or the
            // time-out, the bound, ends it first.
            let _ = tokio::time::timeout(self.wait, done.changed()).await;
        }
        let set = self.shared.snapshot();
        match find(&set.keys, kid) {
            Some(key) => Lookup::Found(Box::new(key.clone())),
            None if set.fetched.is_none() => Lookup::Unavailable,
            None => Lookup::Unknown,
        }
    }

    /// Runs the cache's clock ahead by `by` (instead of waiting out an age or a window).
    #[cfg(test)]
    pub(crate) fn advance(&self, by: Duration) {
        self.shared.skew.fetch_add(
            u64::try_from(by.as_millis()).expect("invariant: a test's span fits"),
            std::sync::atomic::Ordering::Relaxed,
        );
    }
}

impl Shared {
    fn snapshot(&self) -> Arc<KeySet> {
        Arc::clone(&self.keys.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn now(&self) -> Instant {
        Instant::now() + self.skew()
    }

    #[cfg(test)]
    fn skew(&self) -> Duration {
        Duration::from_millis(self.skew.load(std::sync::atomic::Ordering::Relaxed))
    }

    #[cfg(not(test))]
    fn skew(&self) -> Duration {
        Duration::ZERO
    }

    fn since(&self, at: Instant) -> Duration {
        self.now().saturating_duration_since(at)
    }

    /// The end of the fetch in flight, or of one started now; `None` when none may start (a
    /// failure too recent; for an unknown key, a fetch for one too recent) or the key arrived
    /// meanwhile. Starting is decided under the bookkeeping's lock, so there is never more than
    /// one fetch.
    fn fetch_or_join(
        shared: &Arc<Self>,
        kid: Option<&str>,
        for_unknown: bool,
    ) -> Option<watch::Receiver<()>> {
        let mut refresh = lock(&shared.refresh);
        // Joined while its task lives (a task that died without clearing it, which only a panic
        // could do, has dropped its sender: then a new fetch may start).
        if let Some(done) = &refresh.in_flight
            && done.has_changed().is_ok()
        {
            return Some(done.clone());
        }
        // A fetch that ended between the caller's look and this lock may have brought the key.
        let set = shared.snapshot();
        let fresh = set.fetched.is_some_and(|at| shared.since(at) <= MAX_AGE);
        if fresh && (!for_unknown || find(&set.keys, kid).is_some()) {
            return None;
        }
        let backing_off = refresh
            .failed
            .is_some_and(|at| shared.since(at) < RETRY_AFTER_FAILURE);
        let rate_limited = for_unknown
            && refresh
                .refreshed_for_unknown
                .is_some_and(|at| shared.since(at) < MIN_REFRESH);
        if backing_off || rate_limited {
            return None;
        }
        if for_unknown {
            refresh.refreshed_for_unknown = Some(shared.now());
        }
        let (end, done) = watch::channel(());
        refresh.in_flight = Some(done.clone());
        let jwks_uri = refresh.jwks_uri.clone();
        drop(refresh);
        // A task of its own: a request that gives up waiting (or its client going away) does
        // not cancel the fetch the others wait for.
        tokio::spawn(Arc::clone(shared).fetch(jwks_uri, end));
        Some(done)
    }

    /// One fetch: the new set replaces the snapshot, or the failure is recorded (the cached
    /// keys stay); then `end` is dropped, waking every lookup that waits.
    async fn fetch(self: Arc<Self>, jwks_uri: Option<Url>, end: watch::Sender<()>) {
        let fetched = tokio::time::timeout(FETCH_DEADLINE, self.fetch_keys(jwks_uri))
            .await
            .unwrap_or(Err(KeysError::Unreachable));
        let mut refresh = lock(&self.refresh);
        match fetched {
            Ok(keys) => {
                *self.keys.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(KeySet {
                    keys,
                    fetched: Some(self.now()),
                });
                refresh.failed = None;
            }
            Err(e) => {
                refresh.failed = Some(self.now());
                tracing::warn!(error = %e, "the OAuth key set could not be fetched");
            }
        }
        refresh.in_flight = None;
        drop(refresh);
        drop(end);
    }

    async fn fetch_keys(&self, jwks_uri: Option<Url>) -> Result<Vec<Jwk>, KeysError> {
        let jwks_uri = match jwks_uri {
            Some(uri) => uri,
            None => {
                let uri = self.discover().await?;
                lock(&self.refresh).jwks_uri = Some(uri.clone());
                uri
            }
        };
        let body = self.get(&jwks_uri).await?;
        let raw: RawKeySet = serde_json::from_slice(&body).map_err(|_| KeysError::KeySet)?;
        // Keys of kinds this server does not use (encryption keys, unknown types) are skipped,
        // not fatal: the issuer's set is shared with other relying parties.
        Ok(raw
            .keys
            .into_iter()
            .filter_map(|k| serde_json::from_value::<Jwk>(k).ok())
            .collect())
    }

    async fn discover(&self) -> Result<Url, KeysError> {
        let mut last = KeysError::Metadata;
        for url in metadata_urls(&self.issuer_url) {
            let body = match self.get(&url).await {
                Ok(body) => body,
                Err(e) => {
                    last = e;
                    continue;
                }
            };
            let metadata: Metadata =
                serde_json::from_slice(&body).map_err(|_| KeysError::Metadata)?;
            if metadata.issuer != self.issuer {
                return Err(KeysError::IssuerMismatch);
            }
            return parse_root(&metadata.jwks_uri).map_err(|_| KeysError::JwksUri);
        }
        Err(last)
    }

    /// A bounded GET of a JSON document.
    async fn get(&self, url: &Url) -> Result<Vec<u8>, KeysError> {
        let mut response = self
            .client
            .get(url.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|_| KeysError::Unreachable)?;
        if !response.status().is_success() {
            return Err(KeysError::Metadata);
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|_| KeysError::Unreachable)? {
            if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                return Err(KeysError::Metadata);
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

fn find<'k>(keys: &'k [Jwk], kid: Option<&str>) -> Option<&'k Jwk> {
    match kid {
        Some(kid) => keys
            .iter()
            .find(|k| k.common.key_id.as_deref() == Some(kid)),
        None if keys.len() == 1 => keys.first(),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::token::issuer_fixture::{FakeIssuer, Signer};
    use super::*;

    /// The cache of `issuer`'s keys, shareable with spawned lookups.
    fn cache_of(issuer: &FakeIssuer) -> Arc<KeyCache> {
        Arc::new(KeyCache::new(&issuer.url()).expect("cache"))
    }

    /// What a lookup answered: the key's id, or which refusal.
    fn said(lookup: Lookup) -> String {
        match lookup {
            Lookup::Found(jwk) => jwk.common.key_id.clone().unwrap_or_default(),
            Lookup::Unknown => "unknown".to_owned(),
            Lookup::Unavailable => "unavailable".to_owned(),
        }
    }

    async fn lookup(cache: &KeyCache, kid: &str) -> String {
        said(cache.lookup(Some(kid)).await)
    }

    /// A lookup of `kid` on its own task (as another request would run it).
    fn spawn_lookup(cache: &Arc<KeyCache>, kid: &str) -> tokio::task::JoinHandle<String> {
        let (cache, kid) = (Arc::clone(cache), kid.to_owned());
        tokio::spawn(async move { lookup(&cache, &kid).await })
    }

    /// `work`, which must end within a few seconds: an upper bound, never a wait.
    async fn promptly<T>(what: &str, work: impl Future<Output = T>) -> T {
        tokio::time::timeout(Duration::from_secs(5), work)
            .await
            .unwrap_or_else(|_| panic!("{what} did not end within 5 s"))
    }

    // See: issue 36, item 5 (a)
    #[tokio::test]
    async fn a_cached_key_is_answered_while_a_refetch_for_an_unknown_kid_is_held() {
        let key = Signer::new("k1");
        let issuer = FakeIssuer::start_slow(&[&key]).await;
        let jwks = issuer.slow();
        let cache = cache_of(&issuer);
        assert_eq!(lookup(&cache, "k1").await, "k1");
        jwks.hold();
        let forged = spawn_lookup(&cache, "made-up");
        promptly("the refetch", jwks.arrived(2)).await;
        assert_eq!(promptly("a cached key", lookup(&cache, "k1")).await, "k1");
        assert!(!forged.is_finished());
        jwks.release();
        assert_eq!(
            promptly("the unknown kid", forged).await.expect("task"),
            "unknown"
        );

        // Past the refresh window an unknown kid fetches again, and again holds no one.
        cache.advance(MIN_REFRESH + Duration::from_secs(1));
        jwks.hold();
        let forged = spawn_lookup(&cache, "made-up-again");
        promptly("the second refetch", jwks.arrived(3)).await;
        assert_eq!(promptly("a cached key", lookup(&cache, "k1")).await, "k1");
        assert!(!forged.is_finished());
        jwks.release();
        assert_eq!(
            promptly("the unknown kid", forged).await.expect("task"),
            "unknown"
        );
        assert_eq!(jwks.fetches(), 3);
    }

    // See: issue 36, item 5 (a)
    /// Past [`MAX_AGE`] a cached key is still answered at once (stale while revalidating), and
    /// the set is fetched behind the answer: a key the issuer dropped is refused after that.
    #[tokio::test]
    async fn a_set_past_its_age_answers_from_the_cache_while_it_is_fetched_again() {
        let (k1, k2) = (Signer::new("k1"), Signer::new("k2"));
        let issuer = FakeIssuer::start_slow(&[&k1]).await;
        let jwks = issuer.slow();
        let cache = cache_of(&issuer);
        assert_eq!(lookup(&cache, "k1").await, "k1");
        cache.advance(MAX_AGE + Duration::from_secs(1));
        jwks.hold();
        jwks.serve(&[&k2]);
        assert_eq!(
            promptly("a stale cached key", lookup(&cache, "k1")).await,
            "k1"
        );
        promptly("the revalidation", jwks.arrived(2)).await;
        jwks.release();
        // k2 waits for the fetch in flight (or finds it done), and k1 is gone with it.
        assert_eq!(
            promptly("the rotated key", lookup(&cache, "k2")).await,
            "k2"
        );
        assert_eq!(jwks.fetches(), 2, "k2 came with the revalidation");
        // The dropped key is refused; it asked the issuer once more (the refresh window counts
        // the fetches for unknown keys, so a rotation just after a revalidation is still seen),
        // and the next unknown key asks nothing within the window.
        assert_eq!(
            promptly("the dropped key", lookup(&cache, "k1")).await,
            "unknown"
        );
        assert_eq!(jwks.fetches(), 3);
        assert_eq!(
            promptly("another unknown key", lookup(&cache, "k3")).await,
            "unknown"
        );
        assert_eq!(jwks.fetches(), 3);
    }

    /// A lookup of a missing key waits for the fetch at most its bound, then answers from the
    /// cache as it is (nothing cached: unavailable, a 503); the fetch goes on and serves the
    /// next lookup without a second request.
    #[tokio::test]
    async fn a_missing_key_waits_for_the_fetch_at_most_its_bound() {
        let key = Signer::new("k1");
        let issuer = FakeIssuer::start_slow(&[&key]).await;
        let jwks = issuer.slow();
        jwks.hold();
        let mut cache = KeyCache::new(&issuer.url()).expect("cache");
        cache.wait = Duration::from_millis(100);
        assert_eq!(
            promptly("a lookup past its bound", lookup(&cache, "k1")).await,
            "unavailable"
        );
        promptly("the fetch", jwks.arrived(1)).await;
        jwks.release();
        cache.wait = WAIT;
        assert_eq!(
            promptly("the next lookup", lookup(&cache, "k1")).await,
            "k1"
        );
        assert_eq!(
            jwks.fetches(),
            1,
            "the fetch outlived the lookup that started it"
        );
    }

    /// Every request of a cold start waits for the one fetch, none queues behind another.
    #[tokio::test]
    async fn lookups_of_a_cold_cache_share_one_fetch() {
        let key = Signer::new("k1");
        let issuer = FakeIssuer::start_slow(&[&key]).await;
        let jwks = issuer.slow();
        jwks.hold();
        let cache = cache_of(&issuer);
        let waiting: Vec<_> = (0..8).map(|_| spawn_lookup(&cache, "k1")).collect();
        promptly("the fetch", jwks.arrived(1)).await;
        jwks.release();
        for lookup in waiting {
            assert_eq!(
                promptly("a waiting lookup", lookup).await.expect("task"),
                "k1"
            );
        }
        assert_eq!(jwks.fetches(), 1);
    }

    /// The request that started a fetch going away (its client hung up) does not cancel the
    /// fetch: a rotated key it brings is there for the next request, within the refresh window.
    #[tokio::test]
    async fn a_fetch_outlives_the_request_that_started_it() {
        let (k1, k2) = (Signer::new("k1"), Signer::new("k2"));
        let issuer = FakeIssuer::start_slow(&[&k1]).await;
        let jwks = issuer.slow();
        let cache = cache_of(&issuer);
        assert_eq!(lookup(&cache, "k1").await, "k1");
        jwks.hold();
        let first = spawn_lookup(&cache, "k2");
        promptly("the refetch", jwks.arrived(2)).await;
        first.abort();
        jwks.serve(&[&k1, &k2]);
        jwks.release();
        assert_eq!(
            promptly("the rotated key", lookup(&cache, "k2")).await,
            "k2"
        );
        assert_eq!(jwks.fetches(), 2);
    }

    #[test]
    fn metadata_is_looked_for_where_both_rfcs_put_it() {
        let at = |issuer: &str| -> Vec<String> {
            metadata_urls(&Url::parse(issuer).expect("url"))
                .into_iter()
                .map(String::from)
                .collect()
        };
        assert_eq!(
            at("https://login.example.com/tenant/v2.0"),
            [
                "https://login.example.com/.well-known/oauth-authorization-server/tenant/v2.0",
                "https://login.example.com/tenant/v2.0/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            at("https://auth.example.org/"),
            [
                "https://auth.example.org/.well-known/oauth-authorization-server",
                "https://auth.example.org/.well-known/openid-configuration"
            ]
        );
    }

    #[test]
    fn only_https_or_loopback_http_urls_are_fetched() {
        for ok in [
            "https://login.example.com/t",
            "http://127.0.0.1:9000/",
            "http://localhost:9000/jwks",
            "http://[::1]:9/",
        ] {
            assert!(parse_root(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://login.example.com/",
            "https://user:pw@login.example.com/",
            "https://login.example.com/?x=1",
            "ftp://login.example.com/",
        ] {
            assert!(parse_root(bad).is_err(), "{bad}");
        }
    }
}
