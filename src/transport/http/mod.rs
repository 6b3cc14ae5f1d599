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
pub(crate) mod oauth;
pub(crate) mod settings;
mod tls;

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

pub(crate) use settings::HttpSettings;

use crate::error::{HttpConfigError, StartupError};
use crate::tools::App;
use front::{Front, Limits};
use guard::Guard;
use oauth::ResourceServer;
use settings::Auth;
use tls::Tls;

/// The guard's fuzz oracle, for `crate::fuzzing::http_guard`.
#[cfg(fuzzing)]
pub(crate) fn fuzz_guard(data: &[u8]) {
    guard::fuzz(data);
}

/// Serves `app` over HTTP until SIGINT or SIGTERM.
pub(crate) async fn serve_http(app: Arc<App>, settings: HttpSettings) -> Result<(), StartupError> {
    let oauth = match &settings.auth {
        Auth::ResourceServer(oauth) => {
            if app.config.principals.is_empty() {
                return Err(HttpConfigError::NoPrincipals.into());
            }
            let server = ResourceServer::new(oauth.clone(), app.config.principals.clone())
                .map_err(|e| StartupError::Transport(e.to_string()))?;
            Some(Arc::new(server))
        }
        _ => None,
    };
    let tls = match &settings.tls {
        Some(files) => {
            let tls = Arc::new(
                Tls::load(files.clone()).map_err(|e| StartupError::Transport(e.to_string()))?,
            );
            tls.reload_on_sighup()
                .map_err(|e| StartupError::Transport(format!("SIGHUP handler: {}", e.kind())))?;
            Some(tls)
        }
        None => None,
    };
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
    announce(bound, tls.is_some(), app.tools.len(), &settings.auth)?;
    let limits = Limits::default();
    let cancel = CancellationToken::new();
    let front = front_for(app, oauth, &settings, bound.port(), &limits, &cancel);
    serve(listener, tls, front, limits, cancel, stop).await;
    Ok(())
}

/// The one line that tells the operator (and the tests) where the server is.
fn announce(bound: SocketAddr, tls: bool, tools: usize, auth: &Auth) -> Result<(), StartupError> {
    let auth = match auth {
        Auth::Bearer(_) => "bearer token required",
        Auth::Open => "NO authentication",
        Auth::ResourceServer(_) => "OAuth 2.1 access tokens of the configured issuer",
    };
    let mut stderr = std::io::stderr().lock();
    writeln!(
        stderr,
        "mailgate: serving MCP over HTTP at {scheme}://{bound}/mcp ({tools} read-only tools; {auth})",
        scheme = if tls { "https" } else { "http" }
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

/// The front for a listener bound on `port`, with `cancel` to stop its handlers at shutdown.
fn front_for(
    app: Arc<App>,
    oauth: Option<Arc<ResourceServer>>,
    settings: &HttpSettings,
    port: u16,
    limits: &Limits,
    cancel: &CancellationToken,
) -> Arc<Front> {
    let mut guard = Guard::new(port, &settings.extra_origins, settings.auth.clone());
    if settings.tls.is_some() || settings.behind_proxy {
        guard = guard.reached_by_public_url();
    }
    Arc::new(Front::new(
        app,
        guard,
        oauth,
        limits.clone(),
        cancel.child_token(),
    ))
}

/// The accept loop; returns once `stop` completed and the connections are done, or cancelled
/// (`cancel`) after the grace period.
async fn serve(
    listener: TcpListener,
    tls: Option<Arc<Tls>>,
    front: Arc<Front>,
    limits: Limits,
    cancel: CancellationToken,
    stop: impl Future<Output = ()>,
) {
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
        let Some(tls) = &tls else {
            let connection =
                graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
            tokio::spawn(async move {
                // A connection error (a reset, a head timeout, a malformed request) concerns only
                // that connection; hyper has already answered what it could.
                let _ = connection.await;
                drop(slot);
            });
            continue;
        };
        // The handshake runs in the connection's task, under the head timeout, so a client
        // that stalls it holds one connection slot and never the accept loop.
        let acceptor = tls.acceptor();
        let watcher = graceful.watcher();
        let builder = builder.clone();
        let handshake_timeout = limits.head_timeout;
        tokio::spawn(async move {
            let accepted = tokio::time::timeout(handshake_timeout, acceptor.accept(stream)).await;
            if let Ok(Ok(stream)) = accepted {
                let connection = builder.serve_connection(TokioIo::new(stream), service);
                let _ = watcher.watch(connection).await;
            }
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

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    const TOKEN: &str = "shutdown-token-0123456789abcdef";
    const LIST: &str = r#"{"jsonrpc":"2.0","id":9,"method":"tools/list"}"#;

    /// A server on an ephemeral port with `limits`, stopped by the returned sender.
    async fn start(
        limits: Limits,
    ) -> (
        SocketAddr,
        Arc<Front>,
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<()>,
        crate::tools::testutil::DemoApp,
    ) {
        let demo = crate::tools::testutil::demo_app();
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let settings = HttpSettings {
            addr,
            auth: Auth::Bearer(settings::TokenDigest::of(TOKEN)),
            extra_origins: Vec::new(),
            warnings: Vec::new(),
            tls: None,
            behind_proxy: false,
        };
        let cancel = CancellationToken::new();
        let front = front_for(
            Arc::clone(&demo.app),
            None,
            &settings,
            addr.port(),
            &limits,
            &cancel,
        );
        let (tx, rx) = tokio::sync::oneshot::channel();
        let server = tokio::spawn(serve(
            listener,
            None,
            Arc::clone(&front),
            limits,
            cancel,
            async {
                let _ = rx.await;
            },
        ));
        (addr, front, tx, server, demo)
    }

    /// Sends the head of a tools/list POST and `sent` bytes of its body; waits until the server
    /// holds it in flight.
    async fn in_flight(addr: SocketAddr, front: &Front, sent: usize) -> tokio::net::TcpStream {
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             Content-Length: {}\r\n\r\n{}",
            LIST.len(),
            &LIST[..sent]
        );
        stream.write_all(head.as_bytes()).await.expect("write");
        while front.in_flight() == 0 {
            tokio::task::yield_now().await;
        }
        stream
    }

    #[tokio::test]
    async fn at_shutdown_a_request_in_flight_finishes_and_the_server_stops() {
        let (addr, front, stop, server, _demo) = start(Limits::default()).await;
        let mut stream = in_flight(addr, &front, 10).await;
        stop.send(()).expect("the server listens");
        stream
            .write_all(&LIST.as_bytes()[10..])
            .await
            .expect("the connection is still open");
        let mut reply = Vec::new();
        stream.read_to_end(&mut reply).await.expect("read");
        let reply = String::from_utf8_lossy(&reply);
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        assert!(reply.contains("\"tools\""), "{reply}");
        tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .expect("the server stops once its last request is answered")
            .expect("joined");
    }

    #[tokio::test]
    async fn at_shutdown_a_request_that_does_not_finish_is_cancelled_after_the_grace() {
        let limits = Limits {
            body_timeout: Duration::from_secs(600),
            shutdown_grace: Duration::from_millis(300),
            ..Limits::default()
        };
        let (addr, front, stop, server, _demo) = start(limits).await;
        let _stream = in_flight(addr, &front, 10).await;
        let started = Instant::now();
        stop.send(()).expect("the server listens");
        tokio::time::timeout(Duration::from_secs(10), server)
            .await
            .expect("the grace period bounds the shutdown")
            .expect("joined");
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert!(
            tokio::net::TcpStream::connect(addr).await.is_err(),
            "the listener is closed"
        );
    }
}
