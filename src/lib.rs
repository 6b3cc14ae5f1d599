//! mailgate: a policy-first MCP gateway that gives AI agents allowlisted access to several
//! mailboxes. The binary (`src/main.rs`) only parses arguments and calls [`run`]; everything else
//! is private to this crate so that `pub` here really means "exported".
#![forbid(unsafe_code)]

pub(crate) mod address;
pub(crate) mod alias;
pub(crate) mod backends;
pub(crate) mod cli;
pub(crate) mod config;
pub(crate) mod console;
pub(crate) mod demo;
pub(crate) mod dir_fd;
pub(crate) mod downloads;
pub(crate) mod error;
pub(crate) mod extract;
pub(crate) mod fold;
pub(crate) mod gates;
pub(crate) mod handoff;
pub(crate) mod handoff_cli;
pub(crate) mod json_tree;
#[cfg(test)]
mod layering;
pub(crate) mod mime;
pub(crate) mod path_guard;
pub(crate) mod policy;
pub(crate) mod report;
pub(crate) mod search;
pub(crate) mod server;
pub(crate) mod startup;
pub(crate) mod telemetry;
pub(crate) mod tools;
pub(crate) mod transport;

#[cfg(fuzzing)]
pub mod fuzz_write;
#[cfg(fuzzing)]
pub mod fuzzing;

pub use cli::run;

/// Not an API: names the send permit type, and nothing else, so that the `compile_fail`
/// doctests in `policy::outbound` can prove that code outside that module can neither build nor
/// clone one. The type has no public constructor, field or method.
#[doc(hidden)]
pub mod __compile_fail {
    pub use crate::policy::outbound::SendPermit;
}

/// Not an API: the entry point of `cargo bench --bench handoff` (benches/handoff.rs), which can
/// only reach public items. Runs the handoff-store measurements in `scratch`. Compiled only with
/// the `bench` feature, which only test and bench builds turn on (Cargo.toml).
#[cfg(feature = "bench")]
#[doc(hidden)]
pub mod __bench {
    pub fn handoff(scratch: &std::path::Path, entries: usize) -> Result<String, String> {
        crate::handoff::bench::run(scratch, entries)
    }
}
