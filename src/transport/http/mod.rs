//! The loopback Streamable HTTP transport (`mailgate serve --http`): binds a loopback address,
//! accepts connections itself and serves each with hyper's HTTP/1 server, so that the request
//! head size, the head and idle timeouts, the number of connections and the shutdown are set
//! here rather than left at a framework's defaults. Every request goes through [`front::Front`]
//! (checks, limits, then rmcp); the app it serves is built with read-only gates by the caller
//! (`crate::cli`), so the catalog is the 12 read tools whatever the environment says.
//!
//! Shutdown: on SIGINT or SIGTERM the listener closes, idle connections close, and requests in
//! flight get [`front::Limits::shutdown_grace`] to finish before their handlers are cancelled.

mod front;
mod guard;
mod settings;

use std::convert::Infallible;
use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

pub(crate) use front::Limits;
pub(crate) use settings::{HttpConfigError, HttpSettings};

use crate::error::StartupError;
use crate::tools::App;
use front::Front;
use guard::Guard;
use settings::Auth;

/// Serves `app` over HTTP until SIGINT or SIGTERM.
pub(crate) async fn serve_http(app: Arc<App>, settings: HttpSettings) -> Result<(), StartupError> {
    let stop = shutdown_signal()?;
    let listener = TcpListener::bind(settings.addr).await.map_err(|e| {
        StartupError::Transport(format!("cannot listen on {}: {}", settings.addr, e.kind()))
    })?;
    let bound = listener
        .local_addr()
        .map_err(|e| StartupError::Transport(e.kind().to_string()))?;
    for warning in &settings.warnings {
        tracing::warn!("{warning}");
    }
    announce(bound, app.tools.len(), &settings.auth)?;
    serve(listener, app, &settings, Limits::default(), stop).await;
    Ok(())
}

/// The one line that tells the operator (and the tests) where the server is.
fn announce(bound: SocketAddr, tools: usize, auth: &Auth) -> Result<(), StartupError> {
    let auth = match auth {
        Auth::Bearer(_) => "bearer token required",
        Auth::Open => "NO authentication",
    };
    let mut stderr = std::io::stderr().lock();
    writeln!(
        stderr,
        "mailgate: serving MCP over HTTP at http://{bound}/mcp ({tools} read-only tools; {auth})"
    )
    .map_err(|e| StartupError::Output(e.kind()))
}

/// Completes on the first SIGINT or SIGTERM. The handlers are installed before the socket is
/// bound, so a signal sent once the address is announced is never missed.
fn shutdown_signal() -> Result<impl Future<Output = ()>, StartupError> {
    use tokio::signal::unix::{SignalKind, signal};
    let install = |kind| {
        signal(kind).map_err(|e| StartupError::Transport(format!("signal handler: {}", e.kind())))
    };
    let mut terminate = install(SignalKind::terminate())?;
    let mut interrupt = install(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
    })
}

/// The accept loop; returns once `stop` completed and the connections are done or cancelled.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Arc<App>,
    settings: &HttpSettings,
    limits: Limits,
    stop: impl Future<Output = ()>,
) {
    let port = listener.local_addr().map_or(0, |a| a.port());
    let cancel = CancellationToken::new();
    let guard = Guard::new(port, &settings.extra_origins, settings.auth.clone());
    let front = Arc::new(Front::new(
        app,
        guard,
        port,
        limits.clone(),
        cancel.child_token(),
    ));
    let connections = Arc::new(Semaphore::new(limits.connections));
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.head_timeout)
        .max_header_size(limits.head_bytes)
        .max_headers(limits.headers)
        .keep_alive(true);
    tokio::pin!(stop);
    loop {
        let slot = tokio::select! {
            () = &mut stop => break,
            slot = Arc::clone(&connections).acquire_owned() => slot,
        };
        // The semaphore is never closed.
        let Ok(slot) = slot else { break };
        let stream = tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of descriptors or a connection reset before accept: not fatal; a
                    // short pause keeps a persistent error from spinning the loop.
                    tracing::warn!(kind = %e.kind(), "accepting an HTTP connection failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let front = Arc::clone(&front);
        let service = hyper::service::service_fn(move |request| {
            let front = Arc::clone(&front);
            async move { Ok::<_, Infallible>(front.handle(request).await) }
        });
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            // A connection error (a reset, a head timeout, a malformed request) concerns only
            // that connection; hyper has already answered what it could.
            let _ = connection.await;
            drop(slot);
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(limits.shutdown_grace) => {
            tracing::warn!("requests still in flight at shutdown were cancelled");
        }
    }
    cancel.cancel();
}
