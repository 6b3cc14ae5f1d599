//! The loopback HTTP transport (`serve --http`), black box: rmcp's own Streamable HTTP client
//! against the real binary with every gate open (still the 12 read tools), then the security
//! cases as raw HTTP written byte by byte — a wrong `Host`, a foreign `Origin`, a missing or
//! wrong bearer (each answered before the body it announces is sent), oversized bodies and
//! heads, slow heads and bodies, unknown routes and methods — the startup refusals, and a
//! graceful SIGTERM.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rmcp::ServiceExt as _;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::util::{Client, HttpServer, World, demo_config, gated_world};

const TOKEN: &str = "test-token-0f1e2d3c4b5a69788796a5b4c3d2e1f0";

/// `serve --http 127.0.0.1:0` on a fresh demo with `world`'s environment plus `extra`.
async fn start(world: &World, extra: &[(&str, &str)]) -> HttpServer {
    let config = demo_config(world).await;
    let args = ["serve", "--http", "127.0.0.1:0", "--config", &config];
    HttpServer::start(world, &args, extra).await
}

/// An rmcp Streamable HTTP client with `token` as its bearer.
pub(crate) async fn rmcp_client(
    server: &HttpServer,
    token: &str,
) -> Result<rmcp::service::RunningService<rmcp::RoleClient, ()>, rmcp::service::ClientInitializeError>
{
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(server.url.as_str()).auth_header(token),
    );
    ().serve(transport).await
}

/// One raw HTTP exchange: writes `request` and reads until the server closes.
async fn raw(addr: SocketAddr, request: &[u8]) -> Reply {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    read_reply(&mut stream).await
}

/// Reads what the server sends until it closes the connection (at most 15 s).
async fn read_reply(stream: &mut TcpStream) -> Reply {
    let mut bytes = Vec::new();
    tokio::time::timeout(Duration::from_secs(15), stream.read_to_end(&mut bytes))
        .await
        .expect("the server answers and closes")
        .unwrap_or_default();
    Reply::parse(&bytes)
}

#[derive(Debug)]
struct Reply {
    status: u16,
    head: String,
    body: String,
}

impl Reply {
    fn parse(bytes: &[u8]) -> Self {
        let text = String::from_utf8_lossy(bytes).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        Self {
            status,
            head: head.to_ascii_lowercase(),
            body: body.to_owned(),
        }
    }
}

/// A POST to `/mcp` with the given extra header lines and body; `Connection: close`.
fn post(host: &str, headers: &[&str], body: &str) -> Vec<u8> {
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n\
         Connection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for header in headers {
        request.push_str(header);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    request.push_str(body);
    request.into_bytes()
}

/// The head of a POST to `/mcp` announcing a `length`-byte body, without the body.
fn head_announcing(host: &str, headers: &[&str], length: usize) -> Vec<u8> {
    String::from_utf8(post(host, headers, ""))
        .unwrap()
        .replace("Content-Length: 0", &format!("Content-Length: {length}"))
        .into_bytes()
}

fn bearer() -> String {
    format!("Authorization: Bearer {TOKEN}")
}

const TOOLS_LIST: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#;

fn all_gates_open() -> World {
    gated_world(true, true, true).with("OUTLOOK_HTTP_BEARER_TOKEN", TOKEN)
}

#[tokio::test]
async fn an_rmcp_client_gets_the_twelve_read_tools_with_every_gate_open_and_reads_the_demo() {
    let world = all_gates_open();
    let server = start(&world, &[]).await;
    let stderr = server.stderr();
    assert!(
        stderr.contains("12 read-only tools; bearer token required"),
        "{stderr}"
    );
    let client = Client::over(rmcp_client(&server, TOKEN).await.unwrap(), server.pid());
    let info = client.inner.peer_info().expect("initialized");
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("mailgate")
    );
    let mut read = crate::catalog::READ.to_vec();
    read.sort_unstable();
    assert_eq!(
        client.tool_names().await,
        read,
        "the HTTP catalog is the read catalog"
    );

    let mailboxes = client.ok("list_allowed_mailboxes", json!({})).await;
    assert_eq!(
        mailboxes["mailboxes"],
        json!(["personal", "finance", "support", "archive"])
    );
    let found = client
        .ok(
            "search_mailbox",
            json!({"mailbox": "finance", "criteria": {"query": "invoice"}}),
        )
        .await;
    assert_eq!(found["status"], "FOUND", "{found}");
    let id = client.first_id("finance", json!({})).await;
    let message = client
        .ok(
            "get_message",
            json!({"mailbox": "finance", "messageId": id}),
        )
        .await;
    assert!(message.to_string().contains("untrusted"), "{message}");

    // Writes, handoffs and send are not reachable by name: the gates are open in this
    // environment, and the HTTP catalog ignores them.
    for name in crate::catalog::WRITE
        .iter()
        .chain(&crate::catalog::HANDOFF)
        .chain(&crate::catalog::SEND)
    {
        let refusal = client.protocol_refusal(name, json!({})).await;
        assert!(
            refusal.contains("the HTTP transport serves the read tools only"),
            "{refusal}"
        );
    }
    client.close().await;

    // A client with the wrong token cannot even initialize.
    assert!(rmcp_client(&server, "wrong-token").await.is_err());
    assert!(server.stop().await.0.success());
}

#[tokio::test]
async fn host_origin_and_bearer_refusals_come_before_the_body() {
    let world = World::new()
        .with("OUTLOOK_HTTP_BEARER_TOKEN", TOKEN)
        .with("MAILGATE_HTTP_ALLOWED_ORIGINS", "https://app.example.com");
    let server = start(&world, &[]).await;
    let host = server.addr().to_string();
    let port = server.addr().port();
    let auth = bearer();
    let evil_host = format!("evil.example:{port}");
    let wrong_port = format!("127.0.0.1:{}", port.wrapping_add(1));
    // The `http` crate's authority parser reads this as localhost with the bound port.
    let smuggled = format!("localhost:1,x[::1]:{port}");
    let localhost = format!("localhost:{port}");
    let own_origin = format!("Origin: http://localhost:{port}");
    // Each request announces a 100-byte body and sends none: an answer proves the server
    // decided on the head alone.
    let head_only = |host: &str, headers: &[&str]| head_announcing(host, headers, 100);
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        (
            "evil Host",
            head_only(&evil_host, &[&auth]),
            403,
            "host_not_allowed",
        ),
        (
            "Host on another port",
            head_only(&wrong_port, &[&auth]),
            403,
            "host_not_allowed",
        ),
        (
            "Host the http crate misreads",
            head_only(&smuggled, &[&auth]),
            403,
            "host_not_allowed",
        ),
        (
            "foreign Origin",
            head_only(&host, &[&auth, "Origin: http://evil.example"]),
            403,
            "origin_not_allowed",
        ),
        (
            "Origin null",
            head_only(&host, &[&auth, "Origin: null"]),
            403,
            "origin_not_allowed",
        ),
        ("no bearer", head_only(&host, &[]), 401, "unauthorized"),
        (
            "wrong bearer",
            head_only(&host, &["Authorization: Bearer not-the-token"]),
            401,
            "unauthorized",
        ),
        (
            "another scheme",
            head_only(&host, &[&format!("Authorization: Basic {TOKEN}")]),
            401,
            "unauthorized",
        ),
    ];
    for (what, request, status, error) in cases {
        let reply = raw(server.addr(), &request).await;
        assert_eq!(reply.status, status, "{what}: {reply:?}");
        assert!(reply.body.contains(error), "{what}: {reply:?}");
        if status == 401 {
            assert!(
                reply.head.contains("www-authenticate: bearer"),
                "{what}: {reply:?}"
            );
        }
    }
    // The same checks let the right requests through.
    for (what, host, headers) in [
        ("bearer", host.as_str(), vec![auth.clone()]),
        ("localhost Host", localhost.as_str(), vec![auth.clone()]),
        (
            "own Origin",
            host.as_str(),
            vec![auth.clone(), own_origin.clone()],
        ),
        (
            "listed Origin",
            host.as_str(),
            vec![auth.clone(), "Origin: https://app.example.com".to_owned()],
        ),
        (
            "lower-case scheme",
            host.as_str(),
            vec![format!("Authorization: bearer {TOKEN}")],
        ),
    ] {
        let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
        let reply = raw(server.addr(), &post(host, &headers, TOOLS_LIST)).await;
        assert_eq!(reply.status, 200, "{what}: {reply:?}");
        let answer: Value = serde_json::from_str(&reply.body).unwrap();
        assert_eq!(answer["result"]["tools"].as_array().map(Vec::len), Some(12));
    }
    assert!(server.stop().await.0.success());
}

#[tokio::test]
async fn routes_methods_and_malformed_bodies_get_fixed_answers() {
    let world = World::new().with("OUTLOOK_HTTP_BEARER_TOKEN", TOKEN);
    let server = start(&world, &[]).await;
    let host = server.addr().to_string();
    let get = |path: &str, extra: &str| {
        format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n")
            .into_bytes()
    };
    // Health: a status and nothing else, no token needed, the Host check still applies.
    let health = raw(server.addr(), &get("/health", "")).await;
    assert_eq!(
        (health.status, health.body.as_str()),
        (200, r#"{"ok":true}"#)
    );
    let healthz = raw(server.addr(), &get("/healthz", "")).await;
    assert_eq!(healthz.body, r#"{"ok":true}"#);
    let evil = raw(
        server.addr(),
        b"GET /health HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(evil.status, 403);
    // GET /mcp (an SSE stream in other servers) is not served; nor is anything else.
    let sse = raw(
        server.addr(),
        &get(
            "/mcp",
            &format!("{}\r\nAccept: text/event-stream\r\n", bearer()),
        ),
    )
    .await;
    assert_eq!(sse.status, 405, "{sse:?}");
    assert!(sse.head.contains("allow: post"), "{sse:?}");
    assert_eq!(raw(server.addr(), &get("/", "")).await.status, 404);
    assert_eq!(
        raw(server.addr(), &get("/mcp/../etc", "")).await.status,
        404
    );
    // Bodies that are not one JSON-RPC message: the reference plugin's codes, nothing quoted.
    let auth = bearer();
    for (body, code) in [
        ("{not json", -32700),
        (r#"{"jsonrpc":"2.0","id":1,"method":"tools/list""#, -32700),
        (r#"{"secret":"zqx-marker"}"#, -32600),
    ] {
        let reply = raw(server.addr(), &post(&host, &[&auth], body)).await;
        assert_eq!(reply.status, 400, "{body}: {reply:?}");
        let answer: Value = serde_json::from_str(&reply.body).unwrap();
        assert_eq!(answer["error"]["code"], code, "{body}");
        assert!(!reply.body.contains("zqx-marker"));
    }
    // Every answer is uncacheable and not sniffed.
    assert!(health.head.contains("cache-control: no-store"));
    assert!(health.head.contains("x-content-type-options: nosniff"));
    assert!(server.stop().await.0.success());
}

#[tokio::test]
async fn oversized_bodies_and_heads_are_refused_without_being_read() {
    let world = World::new().with("OUTLOOK_HTTP_BEARER_TOKEN", TOKEN);
    let server = start(&world, &[]).await;
    let host = server.addr().to_string();
    let auth = bearer();
    // Declared too large: refused on the head, none of the 2 MiB ever sent.
    let declared = head_announcing(&host, &[&auth], 2 * 1024 * 1024);
    let reply = raw(server.addr(), &declared).await;
    assert_eq!(reply.status, 413, "{reply:?}");
    let answer: Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(answer["error"]["code"], -32000);
    // Chunked, no length: cut off once past 1 MiB.
    let mut stream = TcpStream::connect(server.addr()).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\n{auth}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\
         Connection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let chunk = format!("10000\r\n{}\r\n", "x".repeat(0x10000));
    for _ in 0..17 {
        // The server may close as soon as it has seen enough.
        if stream.write_all(chunk.as_bytes()).await.is_err() {
            break;
        }
    }
    let reply = read_reply(&mut stream).await;
    assert_eq!(reply.status, 413, "{reply:?}");
    // A 20 KiB header: hyper's 431 before any handler runs.
    let big = format!("X-Padding: {}", "p".repeat(20 * 1024));
    let reply = raw(server.addr(), &post(&host, &[&auth, &big], TOOLS_LIST)).await;
    assert_eq!(reply.status, 431, "{reply:?}");
    // The server is still serving.
    let reply = raw(server.addr(), &post(&host, &[&auth], TOOLS_LIST)).await;
    assert_eq!(reply.status, 200);
    assert!(server.stop().await.0.success());
}

#[tokio::test]
async fn slow_heads_and_bodies_are_cut_off_while_others_are_served() {
    let world = World::new().with("OUTLOOK_HTTP_BEARER_TOKEN", TOKEN);
    let server = start(&world, &[]).await;
    let host = server.addr().to_string();
    let auth = bearer();
    let started = Instant::now();
    // A head that never ends, and a head whose announced body never comes.
    let mut slow_head = TcpStream::connect(server.addr()).await.unwrap();
    slow_head
        .write_all(format!("POST /mcp HTTP/1.1\r\nHost: {host}\r\nX-Slow: 1").as_bytes())
        .await
        .unwrap();
    let mut slow_body = TcpStream::connect(server.addr()).await.unwrap();
    let head = head_announcing(&host, &[&auth], 64);
    slow_body.write_all(&head).await.unwrap();
    slow_body.write_all(br#"{"jsonrpc":"2.0","#).await.unwrap();
    // Meanwhile an ordinary request is answered at once.
    let reply = raw(server.addr(), &post(&host, &[&auth], TOOLS_LIST)).await;
    assert_eq!(reply.status, 200);
    let (head_reply, body_reply) =
        tokio::join!(read_reply(&mut slow_head), read_reply(&mut slow_body));
    // The slow head: the connection is closed (hyper may or may not write a 408 first).
    assert!(
        matches!(head_reply.status, 0 | 408),
        "slow head: {head_reply:?}"
    );
    assert_eq!(body_reply.status, 408, "slow body: {body_reply:?}");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(4) && waited < Duration::from_secs(14),
        "cut after {waited:?} (5 s limits)"
    );
    assert!(server.stop().await.0.success());
}

#[tokio::test]
async fn startup_refuses_non_loopback_addresses_and_missing_tokens() {
    let world = World::new().with("OUTLOOK_HTTP_BEARER_TOKEN", TOKEN);
    let config = demo_config(&world).await;
    let serve = |addr: &'static str| ["serve", "--http", addr, "--config"];
    for addr in ["0.0.0.0:0", "[::]:0", "192.0.2.10:3010"] {
        let mut args = serve(addr).to_vec();
        args.push(&config);
        let out = world.run(&args).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{addr}: {stderr}");
        assert!(
            stderr.contains("is not a loopback address"),
            "{addr}: {stderr}"
        );
    }
    let args = ["serve", "--http", "--config", &config];
    let out = world
        .run_with(&[("OUTLOOK_HTTP_HOST", "0.0.0.0")], &args)
        .await;
    assert!(String::from_utf8_lossy(&out.stderr).contains("0.0.0.0 is not a loopback address"));
    let bare = World::new();
    for (token, expect) in [
        (None, "OUTLOOK_HTTP_BEARER_TOKEN is not set"),
        (Some(""), "OUTLOOK_HTTP_BEARER_TOKEN is not set"),
        (Some("   "), "OUTLOOK_HTTP_BEARER_TOKEN is not set"),
    ] {
        let extra: Vec<(&str, &str)> = token
            .map(|t| vec![("OUTLOOK_HTTP_BEARER_TOKEN", t)])
            .unwrap_or_default();
        let out = bare.run_with(&extra, &args).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{token:?}: {stderr}");
        assert!(stderr.contains(expect), "{token:?}: {stderr}");
    }
    let out = bare
        .run_with(&[("OUTLOOK_HTTP_ALLOW_NO_AUTH", "yes please")], &args)
        .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("must be a boolean"));
}

#[tokio::test]
async fn no_auth_must_be_asked_for_and_is_warned_about() {
    let world = World::new().with("OUTLOOK_HTTP_ALLOW_NO_AUTH", "true");
    let server = start(&world, &[]).await;
    let stderr = server.stderr();
    assert!(stderr.contains("WITHOUT authentication"), "{stderr}");
    assert!(stderr.contains("NO authentication"), "{stderr}");
    let reply = raw(
        server.addr(),
        &post(&server.addr().to_string(), &[], TOOLS_LIST),
    )
    .await;
    assert_eq!(reply.status, 200, "{reply:?}");
    // Host and Origin still apply without a token.
    let port = server.addr().port();
    let reply = raw(
        server.addr(),
        &post(&format!("evil.example:{port}"), &[], TOOLS_LIST),
    )
    .await;
    assert_eq!(reply.status, 403);
    assert!(server.stop().await.0.success());
}

#[tokio::test]
async fn sigterm_closes_idle_connections_and_exits_zero() {
    let world = World::new().with("OUTLOOK_HTTP_BEARER_TOKEN", TOKEN);
    let server = start(&world, &[]).await;
    let addr = server.addr();
    // A kept-alive connection that has been served once and then sits idle.
    let mut idle = TcpStream::connect(addr).await.unwrap();
    let request = String::from_utf8(post(&server.addr().to_string(), &[&bearer()], TOOLS_LIST))
        .unwrap()
        .replace("Connection: close\r\n", "");
    idle.write_all(request.as_bytes()).await.unwrap();
    let mut first = vec![0; 4096];
    let n = idle.read(&mut first).await.unwrap();
    assert!(String::from_utf8_lossy(&first[..n]).starts_with("HTTP/1.1 200"));
    let started = Instant::now();
    let (status, _) = server.stop().await;
    assert!(status.success(), "{status:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "an idle connection does not hold shutdown: {:?}",
        started.elapsed()
    );
    let mut rest = Vec::new();
    let _ = idle.read_to_end(&mut rest).await;
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "the port is closed"
    );
}
