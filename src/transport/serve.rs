//! Serving MCP over stdio: runs the handshake and the session on [`super::stdio::stdio`] and
//! turns how it ended into an outcome or a [`StartupError`] in our own words.
//!
//! Invariants: stdin ending before any `initialize` (a client that connected and left, or
//! `</dev/null`) is [`Session::LeftBeforeInitialize`], not an error, so the process exits 0 as the
//! reference plugin does; a failed handshake is reported without rmcp's text, which quotes the
//! client's message; a panicking session is reported by kind only. HTTP is `super::http`'s.
//! Callers: `crate::cli` (`mailgate serve`, `mailgate demo --serve`).

use std::sync::Arc;

use rmcp::ServiceExt;

use crate::error::StartupError;
use crate::server::MailServer;
use crate::tools::App;

/// How a stdio session ended without an error.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Session {
    /// The client initialized and the session ran to its end.
    Served,
    /// stdin ended before any `initialize`: a client that connected and left (or no client at
    /// all, e.g. `</dev/null`). Not an error, so exit 0, as the reference plugin does.
    LeftBeforeInitialize,
}

/// Serves `app` on stdin/stdout until the client leaves.
pub(crate) async fn serve_stdio(app: Arc<App>) -> Result<Session, StartupError> {
    tracing::info!(tools = app.tools.len(), "serving MCP over stdio");
    let service = match MailServer::new(app).serve(super::stdio::stdio()).await {
        Ok(service) => service,
        Err(e) if left_before_initialize(&e) => return Ok(Session::LeftBeforeInitialize),
        Err(e) => return Err(StartupError::Transport(handshake_failure(&e).to_owned())),
    };
    // A panic's message may quote what was being handled; only the kind is printed.
    service.waiting().await.map_err(|e| {
        StartupError::Transport(
            if e.is_panic() {
                "the MCP service panicked"
            } else {
                "the MCP service was cancelled"
            }
            .to_owned(),
        )
    })?;
    Ok(Session::Served)
}

/// stdin ended before the client sent anything (rmcp reports the end of input during the
/// handshake as one of these two).
fn left_before_initialize(err: &rmcp::service::ServerInitializeError) -> bool {
    use rmcp::service::ServerInitializeError as E;
    matches!(
        err,
        E::ExpectedInitializeRequest(None) | E::ConnectionClosed(_)
    )
}

/// What went wrong in the MCP handshake, in our words: rmcp's own text quotes the message the
/// client sent instead of `initialize` (arguments and all), and this line goes to stderr.
fn handshake_failure(err: &rmcp::service::ServerInitializeError) -> &'static str {
    use rmcp::service::ServerInitializeError as E;
    match err {
        E::ExpectedInitializeRequest(None) | E::ConnectionClosed(_) => {
            "the client closed the connection before the MCP handshake completed"
        }
        E::ExpectedInitializeRequest(Some(_)) => {
            "the client's first message was not an initialize request"
        }
        E::TransportError { .. } => "stdio failed during the MCP handshake",
        _ => "the MCP handshake failed",
    }
}
