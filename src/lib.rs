//! mailgate: a policy-first MCP gateway that gives AI agents allowlisted access to several
//! mailboxes. The binary (`src/main.rs`) only parses arguments and calls [`run`]; everything else
//! is private to this crate so that `pub` here really means "exported".
#![forbid(unsafe_code)]

pub(crate) mod alias;
pub(crate) mod backends;
pub(crate) mod cli;
pub(crate) mod config;
pub(crate) mod demo;
pub(crate) mod error;
pub(crate) mod extract;
pub(crate) mod gates;
pub(crate) mod mime;
pub(crate) mod path_guard;
pub(crate) mod policy;
pub(crate) mod report;
pub(crate) mod search;
pub(crate) mod server;
pub(crate) mod startup;
pub(crate) mod telemetry;
pub(crate) mod tools;

#[cfg(fuzzing)]
pub mod fuzzing;

pub use cli::run;
