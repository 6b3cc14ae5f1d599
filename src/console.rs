//! Command output on stdout for the operator commands (`mailgate tools`, `call`, `policy …`,
//! `demo`, `handoff …`). Its own module so that `cli` and `handoff_cli` share it without
//! importing each other (issue 10, clean layering). Invariant: every line written here ends
//! with a newline and is flushed; a write failure is a [`StartupError::Output`] naming only the
//! I/O error kind. Not for MCP serving: in `serve`, stdout carries only JSON-RPC frames
//! (`crate::transport`).

use std::io::Write;

use crate::error::StartupError;

/// Writes `text` (plus a newline when it has none) to stdout and flushes it.
pub(crate) fn write_out(text: &str) -> Result<(), StartupError> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| {
            if text.ends_with('\n') {
                Ok(())
            } else {
                out.write_all(b"\n")
            }
        })
        .and_then(|()| out.flush())
        .map_err(|e| StartupError::Output(e.kind()))
}
