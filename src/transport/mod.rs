//! Transports the MCP server runs on. stdio: [`stdio::BoundedStdio`] frames newline-delimited
//! JSON-RPC with a per-line size bound and answers, rather than drops, a line over that bound;
//! [`serve`] runs a session on it and decides how its end is reported. HTTP: [`http`] serves the
//! read-only catalog over loopback Streamable HTTP behind Host, Origin and bearer checks. Both
//! serve the same `server::MailServer` over the same `tools::App`. Callers: `crate::cli`
//! (`mailgate serve [--http]`, `mailgate demo --serve|--http`).

pub(crate) mod http;
pub(crate) mod serve;
pub(crate) mod stdio;
