//! Semantic recall: an OpenAI-compatible embeddings client ([`client`], [`wire`]), the passages
//! a message is cut into ([`chunk`]), a quantised vector store per mailbox alias ([`vectors`])
//! and reciprocal rank fusion of the lexical and vector rankings ([`fusion`]). Everything here is
//! optional: without `MAILGATE_EMBEDDINGS_URL` and `MAILGATE_EMBEDDINGS_MODEL` ([`settings`])
//! nothing is built, and with them an endpoint that is down or slow only costs the vector half
//! of a search (the index answers lexically and warns `semantic_unavailable`).

pub(crate) mod chunk;
pub(crate) mod client;
pub(crate) mod fusion;
pub(crate) mod settings;
pub(crate) mod vectors;
pub(crate) mod wire;

/// Semantic recall as the server and the sync hold it: the endpoint's client and the model
/// whose vectors the stores keep (a store written for another model is embedded again).
pub(crate) struct Semantic {
    pub(crate) embedder: client::Embedder,
    pub(crate) model: String,
}

impl Semantic {
    /// The endpoint of `MAILGATE_EMBEDDINGS_URL`/`_MODEL`, `None` when neither is set.
    pub(crate) fn from_env(
        env: &crate::config::env::Env,
    ) -> Result<Option<std::sync::Arc<Self>>, crate::error::StartupError> {
        let refused =
            |e: &dyn std::fmt::Display| crate::error::StartupError::Embeddings(e.to_string());
        let Some(settings) = settings::EmbeddingSettings::resolve(env).map_err(|e| refused(&e))?
        else {
            return Ok(None);
        };
        let model = settings.model.clone();
        let embedder = client::Embedder::new(settings).map_err(|e| refused(&e))?;
        Ok(Some(std::sync::Arc::new(Semantic { embedder, model })))
    }
}
