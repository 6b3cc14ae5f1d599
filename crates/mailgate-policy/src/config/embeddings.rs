//! The names of the semantic-recall variables (an OpenAI-compatible embeddings endpoint on the
//! operator's machine, or a remote one reached directly or through [`PROXY_VAR`]). Only the names live here, so that the unknown-variable check knows them
//! and the variable named by [`API_KEY_ENV_VAR`] counts as known whatever it is called; the
//! values are resolved and checked by the server crate's `embed::settings`, which owns the URL
//! rule it shares with the Graph client (`https`, or `http` to a loopback host).

/// The embeddings endpoint: the OpenAI-style base (`…/v1`) or the full `…/v1/embeddings` URL.
pub const URL_VAR: &str = "MAILGATE_EMBEDDINGS_URL";
/// The model name sent with every request.
pub const MODEL_VAR: &str = "MAILGATE_EMBEDDINGS_MODEL";
/// Names the variable that holds the endpoint's API key (optional), as `passwordEnv` does for
/// IMAP: the key itself is never put in a mailgate variable.
pub const API_KEY_ENV_VAR: &str = "MAILGATE_EMBEDDINGS_API_KEY_ENV";
/// The proxy for a remote (https) endpoint, and the only one mailgate's embeddings client ever
/// uses: the ambient `http_proxy`/`HTTPS_PROXY`/`ALL_PROXY` would see every mail passage and the
/// key, so they are never honoured, and a loopback endpoint is never reached through a proxy.
pub const PROXY_VAR: &str = "MAILGATE_EMBEDDINGS_PROXY";
