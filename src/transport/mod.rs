//! Transports the MCP server runs on. Only stdio exists: [`stdio::BoundedStdio`] frames
//! newline-delimited JSON-RPC with a per-line size bound and answers, rather than drops, a line
//! over that bound. Callers: `crate::cli` (`mailgate serve`, `mailgate demo --serve`).

pub(crate) mod stdio;
