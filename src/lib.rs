//! mailgate: a policy-first MCP gateway that gives AI agents allowlisted access to several
//! mailboxes. The binary (`src/main.rs`) only parses arguments and calls [`run`]; everything else
//! is private to this crate so that `pub` here really means "exported".
#![forbid(unsafe_code)]

// The policy core lives in crates/mailgate-policy (its fuzz targets build without the network
// stack); re-exported here so that the rest of the crate keeps saying `crate::config::…`.
pub(crate) use mailgate_policy::{
    address, alias, caller, config, dir_fd, gates, json_tree, outbound, path_guard,
};

pub(crate) mod auth_cli;
pub(crate) mod backends;
pub(crate) mod cli;
pub(crate) mod console;
pub(crate) mod coordination;
pub(crate) mod delegated;
pub(crate) mod demo;
/// The matchers' differential oracle: the property test's and the fuzz target's only.
#[cfg(any(test, fuzzing))]
pub(crate) mod differential;
pub(crate) mod downloads;
pub(crate) mod embed;
pub(crate) mod error;
pub(crate) mod extract;
pub(crate) mod handoff;
pub(crate) mod handoff_cli;
pub(crate) mod index;
pub(crate) mod index_cli;
pub(crate) mod mime;
/// The one-reading oracle of issue 36: the property tests' and the fuzz target's only.
#[cfg(any(test, fuzzing))]
pub(crate) mod one_reading;
pub(crate) mod prompts;
pub(crate) mod report;
pub(crate) mod resources;
pub(crate) mod search;
pub(crate) mod server;
pub(crate) mod service_url;
pub(crate) mod startup;
pub(crate) mod telemetry;
pub(crate) mod text;
pub(crate) mod tools;
pub(crate) mod transport;

#[cfg(fuzzing)]
pub mod fuzzing;

pub use cli::run;
