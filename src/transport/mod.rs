//! Transports the MCP server runs on. Only stdio exists: [`stdio::BoundedStdio`] frames
//! newline-delimited JSON-RPC with a per-line size bound and answers, rather than drops, a line
//! over that bound; [`serve`] runs a session on it and decides how its end is reported. The HTTP
//! transport will join them here. Callers: `crate::cli` (`mailgate serve`, `mailgate demo
//! --serve`).

pub(crate) mod serve;
pub(crate) mod stdio;
