//! `cargo bench --bench http_load [-- --smoke]`: the loopback Streamable HTTP transport
//! (`mailgate serve --http 127.0.0.1:0`, src/transport/http) under load, beside the stdio
//! transport measured in the same run on the same demo mailboxes (a private MAILGATE_HOME in a
//! tempdir, one plugin.json for both servers). In one run:
//!
//! 1. Idle RSS of both servers, side by side: `mailgate serve` after initialize + tools/list over
//!    stdio, `mailgate serve --http` after the same two requests over HTTP (the same work, so the
//!    difference is the transport's own).
//! 2. HTTP load: `MAILGATE_HTTP_LOAD_CLIENTS` (default 8; 4 in a smoke run) clients, each a
//!    reqwest client of its own with one kept-alive connection (`pool_max_idle_per_host(1)`),
//!    sending `tools/call search_mailboxes` with the load bench's query mix
//!    (`common::queries`) in a closed loop for `MAILGATE_HTTP_LOAD_SECS` (default 10; 2) seconds.
//!    Every request is one stateless POST /mcp with the headers a real client sends. Reports
//!    requests/s (answers over the time to the last answer; requests sent before the deadline are
//!    waited for), latency p50/p99/max per request (send to parsed answer), the answers' statuses,
//!    and HTTP errors (a transport error or any status but 200), JSON-RPC errors and `isError`
//!    results.
//! 3. The stdio anchor: the same mix and the same concurrency on `mailgate serve` over stdio, as
//!    N requests kept in flight on the one session (pipelined, one more written as each answer
//!    comes) for the same time; requests/s and p50/p99/max beside HTTP's.
//! 4. The HTTP server's open descriptors (`/proc/PID/fd`), connections (socket descriptors that
//!    were not there before the first client connected), VmRSS, VmHWM and threads: before the
//!    load (after a warm-up pass of the mix and once the warm-up connection is gone), right after
//!    it (clients still connected) and once the clients closed their connections.
//! 5. SIGTERM to the HTTP server, which must exit 0 within 15 s.
//!
//! Speed and memory are reported beside the stdio anchor, never asserted (it runs in CI on two
//! cores). The bench exits non-zero only on correctness failures: a request that failed at the
//! HTTP level, a JSON-RPC error, an `isError` result (none is expected on the demo; statuses such
//! as SEARCH_INCOMPLETE are answers and are only tallied), a stdio request answered never or
//! twice, a descriptor count that does not return to the pre-load count within 3 s of the
//! clients closing (under hyper's 5 s idle limit, so the check sees the server react to the
//! close, not its idle timer), RSS once the clients are gone more than 64 MB above the pre-load
//! figure (a gross leak: see [`RSS_LEAK_KB`]), or a server that does not exit 0 after SIGTERM.
//! More than 32 clients exceed the transport's request slots: the 503s that follow count as
//! HTTP errors. `MAILGATE_BENCH_EXE=PATH` measures another build; a smoke run is `--smoke`,
//! `MAILGATE_BENCH_SMOKE=1` or a run without `--bench` (as `cargo test --all-targets` makes).
#![expect(clippy::print_stdout, reason = "a bench binary prints its report")]
#![expect(
    clippy::disallowed_methods,
    reason = "a bench binary reads its knobs, reads /proc, sets up its scratch directory and \
              starts processes; the library's rules are for the library"
)]

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{Child, ChildStdin, ExitStatus, Stdio};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use common::{demo, exe, json_lines, mailgate, queries};

const DEFAULT_CLIENTS: u64 = 8;
const SMOKE_CLIENTS: u64 = 4;
const DEFAULT_SECS: u64 = 10;
const SMOKE_SECS: u64 = 2;
/// The bearer token both ends are given (fictional; the server lives for this run only).
const TOKEN: &str = "http-load-bench-0123456789abcdef0123456789abcdef";
const PROTOCOL: &str = "2025-11-25";
/// The client name both transports announce in `initialize`.
const CLIENT: &str = "mailgate-http-load-bench";
/// How long the servers get to start and to answer the handshake.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one answer may take before the request counts as lost (the HTTP transport's own
/// request timeout is 60 s).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(90);
/// How long the HTTP server gets to close the connections its clients closed. Below hyper's 5 s
/// idle limit (`Limits::head_timeout`), so a server that ignored the clients' close and only
/// dropped idle connections on its timer would fail.
const FD_DEADLINE: Duration = Duration::from_secs(3);
/// How long the HTTP server gets to exit after SIGTERM (its grace for requests in flight is
/// 10 s, and none are in flight).
const SIGTERM_DEADLINE: Duration = Duration::from_secs(15);
/// RSS growth (before the load to after the clients closed) that fails the run: a gross leak
/// only. The release server idles at about 13 MB and holds about 26 MB once the warm-up started
/// its scan threads; the 10 s load then added about 3 MB on two cores (allocator retention:
/// glibc keeps freed pages in per-thread arenas, and a machine with more cores has more threads
/// and arenas). At about 300 requests/s on two cores the default run makes some 3,000 requests,
/// so 64 MB is about 22 KB kept per request, two or three answers' worth (they average 8.5 KB):
/// a leaked per-request state of that size fails, allocator noise does not. A leak of just the
/// answer bodies would stay under it in 10 s; the growth is printed for that, and a longer run
/// (`MAILGATE_HTTP_LOAD_SECS=60`) makes such a leak show.
const RSS_LEAK_KB: u64 = 64 * 1024;

fn main() {
    let Knobs { clients, duration } = knobs();
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let home = scratch.path();
    let config = demo(home);
    let mix = queries();
    let mut failures: Vec<String> = Vec::new();
    println!(
        "http_load: {clients} clients x {} s of search_mailboxes on the demo, HTTP then stdio ({})",
        duration.as_secs(),
        exe()
    );

    // Both servers idle, after the same handshake.
    let mut stdio = StdioServer::start(home, &config);
    let stdio_tools = stdio.handshake();
    let stdio_idle = stdio.snapshot(&BTreeSet::new());
    let mut http = HttpServer::start(home, &config);
    // Every socket the server holds before any client connected (the listener): what is not in
    // this set later is a connection.
    let listening = socket_links(http.pid());
    // One worker thread runs the clients and their connections, and keeps running between the
    // phases: a connection closes when its task sees its client dropped, so a current-thread
    // runtime, idle outside `block_on`, would leave them open.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let url = format!("http://127.0.0.1:{}/mcp", http.port);
    let setup = client();
    let http_tools = runtime
        .block_on(http_handshake(&setup, &url))
        .unwrap_or_else(|e| {
            http.print_tail();
            panic!("the HTTP handshake failed: {e}")
        });
    let http_idle = http.snapshot(&listening);
    println!(
        "idle RSS after initialize + tools/list: stdio {} ({stdio_tools} tools), HTTP {} \
         ({http_tools} tools){}",
        mb(stdio_idle.rss),
        mb(http_idle.rss),
        delta_mb(stdio_idle.rss, http_idle.rss)
            .map_or_else(String::new, |d| format!(", HTTP {d:+.1} MB"))
    );

    // Warm-up: one pass of the mix (the page cache, lazily built state), then the warm-up
    // connection is closed and the server must let it go before the baseline is taken.
    let warm = runtime.block_on(warm_up(&setup, &url, &mix));
    warm.failures("HTTP warm-up", &mut failures);
    drop(setup);
    let (before, closed, _) = http.wait_for(&listening, |s| s.conns == Some(0));
    if !closed {
        failures.push(format!(
            "the HTTP server still held {} connection(s) {} s after the warm-up client closed",
            show(before.conns),
            FD_DEADLINE.as_secs()
        ));
    }

    // The HTTP load.
    let client_cpu = cpu_time("self");
    let load = runtime.block_on(http_load(&url, clients, duration, &mix));
    let after_load = http.snapshot(&listening);
    let http_client_cpu = (client_cpu, cpu_time("self"));
    drop(load.clients);
    let (after_close, settled, took) = http.wait_for(&listening, |s| {
        s.conns == Some(0) && s.fds.is_some_and(|n| Some(n) <= before.fds)
    });
    load.tally.failures("HTTP", &mut failures);
    if !settled {
        failures.push(format!(
            "descriptor leak: the HTTP server held {} descriptor(s) ({} connection(s)) {} s after \
             the clients closed, against {} before the load",
            show(after_close.fds),
            show(after_close.conns),
            FD_DEADLINE.as_secs(),
            show(before.fds)
        ));
    }
    let growth = delta_kb(before.rss, after_close.rss);
    if growth.is_some_and(|kb| kb > RSS_LEAK_KB as i64) {
        failures.push(format!(
            "RSS grew by {:.1} MB over the load (more than {} MB: a gross leak)",
            growth.unwrap_or(0) as f64 / 1024.0,
            RSS_LEAK_KB / 1024
        ));
    }

    // SIGTERM, while idle.
    let shutdown = http.terminate();
    match &shutdown {
        Ok((status, _)) if status.success() => {}
        Ok((status, _)) => failures.push(format!("after SIGTERM the HTTP server exited {status}")),
        Err(e) => failures.push(e.clone()),
    }

    // The stdio anchor, with the HTTP server gone.
    let warm = stdio.pipelined(1, ANSWER_TIMEOUT, &mix, mix.len());
    warm.failures("stdio warm-up", &mut failures);
    let stdio_before = stdio.snapshot(&BTreeSet::new());
    let client_cpu = cpu_time("self");
    let anchor = stdio.pipelined(clients, duration, &mix, usize::MAX);
    let stdio_after = stdio.snapshot(&BTreeSet::new());
    let stdio_client_cpu = (client_cpu, cpu_time("self"));
    anchor.failures("stdio", &mut failures);
    let stdio_exit = stdio.stop();

    // The report.
    println!();
    load.tally.print(
        &format!("HTTP ({clients} clients, one keep-alive connection each)"),
        load.elapsed,
    );
    anchor.tally.print(
        &format!("stdio ({clients} requests in flight on one session)"),
        anchor.elapsed,
    );
    println!(
        "\nHTTP server         {:>5} {:>6} {:>10} {:>10} {:>8}",
        "fds", "conns", "VmRSS", "VmHWM", "threads"
    );
    for (label, s) in [
        ("idle (handshake)", &http_idle),
        ("before the load", &before),
        ("after the load", &after_load),
        ("clients closed", &after_close),
    ] {
        println!(
            "  {label:<17} {:>5} {:>6} {:>10} {:>10} {:>8}",
            show(s.fds),
            show(s.conns),
            mb(s.rss),
            mb(s.hwm),
            show(s.threads)
        );
    }
    println!(
        "  descriptors back to the pre-load count: {} ({}); RSS growth {} (fails above +{} MB)",
        if settled { "yes" } else { "NO" },
        if settled {
            format!("in {:.0} ms", took.as_secs_f64() * 1e3)
        } else {
            format!("not within {} s", FD_DEADLINE.as_secs())
        },
        growth.map_or_else(
            || "?".to_owned(),
            |kb| format!("{:+.1} MB", kb as f64 / 1024.0)
        ),
        RSS_LEAK_KB / 1024
    );
    println!(
        "  SIGTERM: {}",
        match &shutdown {
            Ok((status, took)) => format!("{status} after {:.0} ms", took.as_secs_f64() * 1e3),
            Err(e) => e.clone(),
        }
    );
    println!(
        "stdio server: VmRSS before the anchor {}, after {}, peak (VmHWM) {}; {}",
        mb(stdio_before.rss),
        mb(stdio_after.rss),
        mb(stdio_after.hwm),
        stdio_exit
    );

    let (h, s) = (&load.tally, &anchor.tally);
    println!("\n{:<28} {:>16} {:>16}", "", "stdio (anchor)", "HTTP");
    let row = |label: &str, stdio: String, http: String| {
        println!("{label:<28} {stdio:>16} {http:>16}");
    };
    row("idle RSS", mb(stdio_idle.rss), mb(http_idle.rss));
    row(
        "peak RSS (VmHWM)",
        mb(stdio_after.hwm),
        mb(after_load.hwm.max(after_close.hwm)),
    );
    row(
        "answers",
        s.latencies.len().to_string(),
        h.latencies.len().to_string(),
    );
    row(
        "requests/s",
        format!("{:.1}", s.rate(anchor.elapsed)),
        format!("{:.1}", h.rate(load.elapsed)),
    );
    for (label, p) in [
        ("p50 latency", 50),
        ("p99 latency", 99),
        ("max latency", 100),
    ] {
        row(label, ms(s.percentile(p)), ms(h.percentile(p)));
    }
    row(
        "server CPU per answer",
        cpu_per_answer(stdio_before.cpu, stdio_after.cpu, s.latencies.len()),
        cpu_per_answer(before.cpu, after_load.cpu, h.latencies.len()),
    );
    row(
        "bench (client) CPU per answer",
        cpu_per_answer(stdio_client_cpu.0, stdio_client_cpu.1, s.latencies.len()),
        cpu_per_answer(http_client_cpu.0, http_client_cpu.1, h.latencies.len()),
    );
    row(
        "server threads after load",
        show(stdio_after.threads),
        show(after_load.threads),
    );
    row(
        "errors HTTP/JSON-RPC/tool",
        format!("-/{}/{}", s.rpc_errors, s.tool_errors),
        format!(
            "{}/{}/{}",
            h.http_error_count(),
            h.rpc_errors,
            h.tool_errors
        ),
    );

    if failures.is_empty() {
        println!("\nhttp_load: every check passed");
    } else {
        println!("\nhttp_load: {} check(s) FAILED:", failures.len());
        for failure in &failures {
            println!("  - {failure}");
        }
        http.print_tail();
    }
    // `exit` runs no destructors: the scratch directory goes first.
    let failed = !failures.is_empty();
    drop(http);
    drop(scratch);
    if failed {
        std::process::exit(1);
    }
}

struct Knobs {
    clients: usize,
    duration: Duration,
}

fn knobs() -> Knobs {
    let smoke = common::smoke();
    let positive = |var: &str, default: u64| match std::env::var(var) {
        Ok(v) => v
            .parse::<u64>()
            .ok()
            .filter(|&n| n > 0)
            .unwrap_or_else(|| panic!("{var}: {v:?} is not a positive number")),
        Err(_) => default,
    };
    let clients = positive(
        "MAILGATE_HTTP_LOAD_CLIENTS",
        if smoke {
            SMOKE_CLIENTS
        } else {
            DEFAULT_CLIENTS
        },
    );
    let secs = positive(
        "MAILGATE_HTTP_LOAD_SECS",
        if smoke { SMOKE_SECS } else { DEFAULT_SECS },
    );
    Knobs {
        clients: usize::try_from(clients).expect("a client count fits usize"),
        duration: Duration::from_secs(secs),
    }
}

// ---------------------------------------------------------------------------------------------
// Answers

/// What one side's requests came to.
#[derive(Default)]
struct Tally {
    /// One per answered request (HTTP 200 / a stdio answer), send to parsed answer.
    latencies: Vec<Duration>,
    /// Requests that failed at the HTTP level, by kind (`HTTP 503`, `transport: timeout`, ...).
    http_errors: BTreeMap<String, usize>,
    rpc_errors: usize,
    tool_errors: usize,
    /// `structuredContent.status` of the answers, and `jsonrpc_error` / `tool_error`.
    statuses: BTreeMap<String, usize>,
    /// The first JSON-RPC or tool error, as received (for the failure message).
    first_error: Option<String>,
    /// Answer bodies received (HTTP only).
    bytes: u64,
}

impl Tally {
    /// One answer to the request `id`; `bytes` is its HTTP body (0 on stdio).
    fn answer(&mut self, latency: Duration, msg: &Value, id: u64, bytes: usize) {
        self.latencies.push(latency);
        self.bytes += bytes as u64;
        let status = if msg.get("error").is_some() || msg["id"].as_u64() != Some(id) {
            self.rpc_errors += 1;
            self.first_error.get_or_insert_with(|| clip(msg));
            "jsonrpc_error"
        } else if msg["result"]["isError"].as_bool() == Some(true) {
            self.tool_errors += 1;
            self.first_error.get_or_insert_with(|| clip(msg));
            "tool_error"
        } else {
            msg["result"]["structuredContent"]["status"]
                .as_str()
                .unwrap_or("?")
        };
        *self.statuses.entry(status.to_owned()).or_default() += 1;
    }

    fn http_error(&mut self, kind: String) {
        *self.http_errors.entry(kind).or_default() += 1;
    }

    fn merge(&mut self, other: Self) {
        self.latencies.extend(other.latencies);
        for (k, n) in other.http_errors {
            *self.http_errors.entry(k).or_default() += n;
        }
        for (k, n) in other.statuses {
            *self.statuses.entry(k).or_default() += n;
        }
        self.rpc_errors += other.rpc_errors;
        self.tool_errors += other.tool_errors;
        self.bytes += other.bytes;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }

    fn http_error_count(&self) -> usize {
        self.http_errors.values().sum()
    }

    fn rate(&self, elapsed: Duration) -> f64 {
        self.latencies.len() as f64 / elapsed.as_secs_f64().max(1e-9)
    }

    /// Nearest rank; `percentile(100)` is the maximum.
    fn percentile(&self, p: usize) -> Option<Duration> {
        let mut sorted = self.latencies.clone();
        sorted.sort_unstable();
        let rank = (sorted.len() * p).div_ceil(100).max(1);
        sorted.get(rank - 1).copied()
    }

    fn failures(&self, side: &str, failures: &mut Vec<String>) {
        let http = self.http_error_count();
        if http > 0 {
            failures.push(format!(
                "{side}: {http} request(s) failed at the HTTP level ({})",
                list(&self.http_errors)
            ));
        }
        if self.rpc_errors > 0 || self.tool_errors > 0 {
            failures.push(format!(
                "{side}: {} JSON-RPC error(s), {} tool error(s); first: {}",
                self.rpc_errors,
                self.tool_errors,
                self.first_error.as_deref().unwrap_or("?")
            ));
        }
    }

    fn print(&self, label: &str, elapsed: Duration) {
        println!(
            "{label}: {} answers in {:.2} s ({:.1} req/s); latency p50 {}, p99 {}, max {}",
            self.latencies.len(),
            elapsed.as_secs_f64(),
            self.rate(elapsed),
            ms(self.percentile(50)),
            ms(self.percentile(99)),
            ms(self.percentile(100))
        );
        println!(
            "  statuses: {}{}",
            list(&self.statuses),
            match self.latencies.len() {
                n if n > 0 && self.bytes > 0 => format!(
                    "; answers averaged {:.1} KB",
                    self.bytes as f64 / n as f64 / 1024.0
                ),
                _ => String::new(),
            }
        );
        println!(
            "  errors: HTTP {}{}, JSON-RPC {}, tool {}",
            self.http_error_count(),
            if self.http_errors.is_empty() {
                String::new()
            } else {
                format!(" ({})", list(&self.http_errors))
            },
            self.rpc_errors,
            self.tool_errors
        );
    }
}

fn list(counts: &BTreeMap<String, usize>) -> String {
    if counts.is_empty() {
        return "none".to_owned();
    }
    counts
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn clip(msg: &Value) -> String {
    let text = msg.to_string();
    match text.char_indices().nth(300) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text,
    }
}

fn call(id: u64, arguments: &Value) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": { "name": "search_mailboxes", "arguments": arguments },
    })
}

// ---------------------------------------------------------------------------------------------
// HTTP clients

/// One simulated client: its own connection pool, which keeps at most one idle connection.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .http1_only()
        .pool_max_idle_per_host(1)
        .timeout(ANSWER_TIMEOUT)
        .build()
        .expect("a reqwest client")
}

/// One JSON-RPC message as one POST; the parsed answer and its size in bytes (`None`: a
/// notification's 202), or what failed at the HTTP level.
async fn post(
    client: &reqwest::Client,
    url: &str,
    message: &Value,
) -> Result<Option<(Value, usize)>, String> {
    let transport = |e: reqwest::Error| {
        let kind = if e.is_timeout() {
            "timeout"
        } else if e.is_connect() {
            "connect"
        } else {
            "other"
        };
        format!("transport: {kind}")
    };
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {TOKEN}"))
        .header("mcp-protocol-version", PROTOCOL)
        .body(message.to_string())
        .send()
        .await
        .map_err(transport)?;
    let status = response.status().as_u16();
    let body = response.bytes().await.map_err(transport)?;
    match status {
        200 => serde_json::from_slice::<Value>(&body)
            .map(|answer| Some((answer, body.len())))
            .map_err(|_| "HTTP 200, body not JSON".to_owned()),
        202 if message.get("id").is_none() => Ok(None),
        code => Err(format!("HTTP {code}")),
    }
}

/// initialize, notifications/initialized and tools/list, as a real client starts; the number of
/// tools listed.
async fn http_handshake(client: &reqwest::Client, url: &str) -> Result<usize, String> {
    let answer = post(client, url, &common::initialize(0, CLIENT, PROTOCOL))
        .await?
        .map(|(answer, _)| answer)
        .unwrap_or_default();
    if answer.get("result").is_none() {
        return Err(format!("initialize: {}", clip(&answer)));
    }
    let done = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    post(client, url, &done).await?;
    let list = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" });
    let answer = post(client, url, &list)
        .await?
        .map(|(answer, _)| answer)
        .unwrap_or_default();
    answer["result"]["tools"]
        .as_array()
        .map(Vec::len)
        .ok_or_else(|| format!("tools/list: {}", clip(&answer)))
}

async fn warm_up(client: &reqwest::Client, url: &str, mix: &[Value]) -> Tally {
    let mut tally = Tally::default();
    for (i, arguments) in mix.iter().enumerate() {
        let id = 100 + i as u64;
        let sent = Instant::now();
        match post(client, url, &call(id, arguments)).await {
            Ok(Some((msg, bytes))) => tally.answer(sent.elapsed(), &msg, id, bytes),
            Ok(None) => tally.http_error("HTTP 202 for a request".to_owned()),
            Err(kind) => tally.http_error(kind),
        }
    }
    tally
}

struct HttpLoad {
    tally: Tally,
    /// From the start to the last answer.
    elapsed: Duration,
    /// Handed back so that their connections stay open until the caller has looked at the
    /// server (dropping them closes the connections).
    clients: Vec<reqwest::Client>,
}

/// `clients` closed loops for `duration`, all tasks on the runtime's one worker thread (the stdio
/// anchor's client side is the main thread writing and one thread reading).
async fn http_load(url: &str, clients: usize, duration: Duration, mix: &[Value]) -> HttpLoad {
    let start = Instant::now();
    let deadline = start + duration;
    let url: Arc<str> = url.into();
    let mix: Arc<[Value]> = mix.into();
    let loops = (0..clients).map(|who| {
        let (url, mix) = (Arc::clone(&url), Arc::clone(&mix));
        tokio::spawn(async move {
            let client = client();
            let mut tally = Tally::default();
            let mut last = start;
            let mut n = 0u64;
            while Instant::now() < deadline {
                let id = 1_000_000 * (who as u64 + 1) + n;
                let arguments = &mix[(who + n as usize) % mix.len()];
                n += 1;
                let sent = Instant::now();
                match post(&client, &url, &call(id, arguments)).await {
                    Ok(Some((msg, bytes))) => {
                        last = Instant::now();
                        tally.answer(last - sent, &msg, id, bytes);
                    }
                    Ok(None) => tally.http_error("HTTP 202 for a request".to_owned()),
                    Err(kind) => {
                        tally.http_error(kind);
                        // The run has failed already; do not spin against a refusing server.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
            (client, tally, last)
        })
    });
    let mut load = HttpLoad {
        tally: Tally::default(),
        elapsed: Duration::ZERO,
        clients: Vec::new(),
    };
    for joined in futures::future::join_all(loops).await {
        let (client, tally, last) = joined.expect("a client task");
        load.tally.merge(tally);
        load.elapsed = load.elapsed.max(last - start);
        load.clients.push(client);
    }
    load
}

// ---------------------------------------------------------------------------------------------
// Servers

/// The child's stderr, line by line, on a channel (read on a thread so that the pipe never
/// fills and blocks the server).
fn stderr_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let stderr = child.stderr.take().expect("invariant: stderr is piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The last lines a server wrote to stderr (`kept` holds what was read earlier).
fn print_tail(name: &str, kept: &mut Vec<String>, rx: &mpsc::Receiver<String>) {
    kept.extend(rx.try_iter());
    println!("{name} stderr (last 20 lines):");
    for line in &kept[kept.len().saturating_sub(20)..] {
        println!("  {line}");
    }
}

/// What `/proc` says about a server at one moment; `None` where it could not be read.
#[derive(Clone, Copy)]
struct Snapshot {
    fds: Option<usize>,
    /// Socket descriptors that were not open before the first client connected.
    conns: Option<usize>,
    rss: Option<u64>,
    hwm: Option<u64>,
    threads: Option<u64>,
    /// User + system CPU time of all its threads so far.
    cpu: Option<Duration>,
}

/// The targets of `/proc/PID/fd`'s links (`socket:[123]`, `pipe:[45]`, a path, ...).
fn fd_links(pid: u32) -> Option<Vec<String>> {
    let entries = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    Some(
        entries
            .filter_map(Result::ok)
            // A descriptor closed between the listing and the readlink is not counted.
            .filter_map(|e| std::fs::read_link(e.path()).ok())
            .map(|target| target.to_string_lossy().into_owned())
            .collect(),
    )
}

fn socket_links(pid: u32) -> BTreeSet<String> {
    fd_links(pid)
        .unwrap_or_default()
        .into_iter()
        .filter(|t| t.starts_with("socket:"))
        .collect()
}

fn snapshot(pid: u32, listening: &BTreeSet<String>) -> Snapshot {
    let links = fd_links(pid);
    Snapshot {
        fds: links.as_ref().map(Vec::len),
        conns: links.as_ref().map(|links| {
            links
                .iter()
                .filter(|t| t.starts_with("socket:") && !listening.contains(*t))
                .count()
        }),
        rss: common::proc_status_kb(pid, "VmRSS"),
        hwm: common::proc_status_kb(pid, "VmHWM"),
        // A plain number: the field parser only strips a `kB` that is not there.
        threads: common::proc_status_kb(pid, "Threads"),
        cpu: cpu_time(&pid.to_string()),
    }
}

/// utime + stime of `/proc/{pid}/stat` (`self` for this process), in the kernel's USER_HZ
/// ticks, which are 1/100 s on every Linux architecture that matters here.
fn cpu_time(pid: &str) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces), from field 3 (state) on.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<u64>().ok();
    Some(Duration::from_millis((ticks(11)? + ticks(12)?) * 10))
}

/// CPU time per answer between two readings, in ms.
fn cpu_per_answer(before: Option<Duration>, after: Option<Duration>, answers: usize) -> String {
    match (before, after) {
        (Some(b), Some(a)) if answers > 0 => format!(
            "{:.2} ms",
            a.saturating_sub(b).as_secs_f64() * 1e3 / answers as f64
        ),
        _ => "?".to_owned(),
    }
}

struct HttpServer {
    child: Child,
    port: u16,
    stderr: mpsc::Receiver<String>,
    /// stderr lines read so far.
    kept: Vec<String>,
}

impl HttpServer {
    /// Starts `serve --http 127.0.0.1:0` and waits for the line that names its port.
    fn start(home: &Path, config: &Path) -> Self {
        let mut child = mailgate(
            home,
            &[
                "--config".as_ref(),
                config.as_os_str(),
                "serve".as_ref(),
                "--http".as_ref(),
                "127.0.0.1:0".as_ref(),
            ],
        )
        .env("OUTLOOK_HTTP_BEARER_TOKEN", TOKEN)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {} serve --http: {e}", exe()));
        let stderr = stderr_lines(&mut child);
        let mut kept = Vec::new();
        let deadline = Instant::now() + START_TIMEOUT;
        let port = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match stderr.recv_timeout(left) {
                Ok(line) => {
                    let port = line
                        .split_once("serving MCP over HTTP at http://")
                        .and_then(|(_, rest)| rest.split_once("/mcp"))
                        .and_then(|(addr, _)| addr.rsplit_once(':'))
                        .and_then(|(_, port)| port.parse::<u16>().ok());
                    kept.push(line);
                    if let Some(port) = port {
                        break port;
                    }
                }
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    print_tail("serve --http", &mut kept, &stderr);
                    panic!("serve --http did not announce its address ({e:?})");
                }
            }
        };
        Self {
            child,
            port,
            stderr,
            kept,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn snapshot(&self, listening: &BTreeSet<String>) -> Snapshot {
        snapshot(self.pid(), listening)
    }

    /// Polls `/proc` until `done` holds or [`FD_DEADLINE`] passes: the last snapshot, whether
    /// `done` held, and how long it took.
    fn wait_for(
        &self,
        listening: &BTreeSet<String>,
        done: impl Fn(&Snapshot) -> bool,
    ) -> (Snapshot, bool, Duration) {
        let start = Instant::now();
        loop {
            let s = self.snapshot(listening);
            if done(&s) {
                return (s, true, start.elapsed());
            }
            if start.elapsed() >= FD_DEADLINE {
                return (s, false, start.elapsed());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGTERM, then up to [`SIGTERM_DEADLINE`] for the exit; a server still running then is
    /// killed.
    fn terminate(&mut self) -> Result<(ExitStatus, Duration), String> {
        use nix::sys::signal::{Signal, kill};
        use nix::unistd::Pid;
        let pid = i32::try_from(self.pid()).expect("a pid fits i32");
        let start = Instant::now();
        kill(Pid::from_raw(pid), Signal::SIGTERM).map_err(|e| format!("SIGTERM: {e}"))?;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Ok((status, start.elapsed())),
                Ok(None) if start.elapsed() < SIGTERM_DEADLINE => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Ok(None) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return Err(format!(
                        "the HTTP server was still running {} s after SIGTERM (killed)",
                        SIGTERM_DEADLINE.as_secs()
                    ));
                }
                Err(e) => return Err(format!("waiting for the HTTP server: {e}")),
            }
        }
    }

    fn print_tail(&mut self) {
        print_tail("serve --http", &mut self.kept, &self.stderr);
    }
}

impl Drop for HttpServer {
    /// A panic must not leave a server behind.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

struct StdioServer {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Every stdout line as JSON, stamped when it was read.
    lines: mpsc::Receiver<(Instant, Value)>,
    stderr: mpsc::Receiver<String>,
    kept: Vec<String>,
    /// The id of the next call written (ids are never reused within the session).
    next_id: u64,
}

/// What a pipelined run came to.
struct Pipelined {
    tally: Tally,
    elapsed: Duration,
    missing: usize,
    duplicated: usize,
    stopped: Option<String>,
}

impl Pipelined {
    fn failures(&self, side: &str, failures: &mut Vec<String>) {
        self.tally.failures(side, failures);
        if self.missing > 0 || self.duplicated > 0 {
            failures.push(format!(
                "{side}: {} request(s) without an answer{}, {} answered more than once",
                self.missing,
                self.stopped.as_deref().unwrap_or_default(),
                self.duplicated
            ));
        }
    }
}

impl StdioServer {
    fn start(home: &Path, config: &Path) -> Self {
        let mut child = mailgate(
            home,
            &["--config".as_ref(), config.as_os_str(), "serve".as_ref()],
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {} serve: {e}", exe()));
        let lines = json_lines(child.stdout.take().expect("invariant: stdout is piped"));
        let stderr = stderr_lines(&mut child);
        Self {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
            kept: Vec::new(),
            next_id: 1000,
        }
    }

    fn send(&mut self, msg: &Value) -> std::io::Result<()> {
        let stdin = self.stdin.as_mut().expect("invariant: stdin is piped");
        writeln!(stdin, "{msg}")?;
        stdin.flush()
    }

    /// The answer with `id`, skipping notifications.
    fn answer(&mut self, id: u64, what: &str) -> Value {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok((_, msg)) if msg["id"].as_u64() == Some(id) => return msg,
                Ok(_) => {}
                Err(e) => {
                    print_tail("serve", &mut self.kept, &self.stderr);
                    panic!("the stdio server did not answer {what} ({e:?})");
                }
            }
        }
    }

    /// initialize, notifications/initialized and tools/list; the number of tools listed.
    fn handshake(&mut self) -> usize {
        self.send(&common::initialize(0, CLIENT, PROTOCOL))
            .expect("write initialize");
        let answer = self.answer(0, "initialize");
        assert!(
            answer.get("result").is_some(),
            "initialize was refused: {answer}"
        );
        let done = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
        self.send(&done).expect("write initialized");
        let list = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" });
        self.send(&list).expect("write tools/list");
        let answer = self.answer(1, "tools/list");
        answer["result"]["tools"]
            .as_array()
            .map(Vec::len)
            .unwrap_or_else(|| panic!("tools/list: {}", clip(&answer)))
    }

    fn snapshot(&self, listening: &BTreeSet<String>) -> Snapshot {
        snapshot(self.child.id(), listening)
    }

    /// Keeps `inflight` requests in flight, writing one more as each answer comes, until
    /// `duration` has passed or `limit` requests were written; then waits for the rest. Answers
    /// are stamped by the reader thread as it parses them, as the HTTP clients stamp theirs.
    fn pipelined(
        &mut self,
        inflight: usize,
        duration: Duration,
        mix: &[Value],
        limit: usize,
    ) -> Pipelined {
        let start = Instant::now();
        let deadline = start + duration;
        let mut pending: HashMap<u64, Instant> = HashMap::new();
        let mut written = 0usize;
        let mut run = Pipelined {
            tally: Tally::default(),
            elapsed: Duration::ZERO,
            missing: 0,
            duplicated: 0,
            stopped: None,
        };
        while written < inflight.min(limit) && run.stopped.is_none() {
            if let Err(e) = self.write_call(&mix[written % mix.len()], &mut pending) {
                run.stopped = Some(format!(" (writing failed: {e})"));
            }
            written += 1;
        }
        let mut answered: BTreeSet<u64> = BTreeSet::new();
        while !pending.is_empty() && run.stopped.is_none() {
            let (at, msg) = match self.lines.recv_timeout(ANSWER_TIMEOUT) {
                Ok(line) => line,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    run.stopped = Some(format!(" (no answer for {} s)", ANSWER_TIMEOUT.as_secs()));
                    break;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    run.stopped = Some(" (the server closed stdout)".to_owned());
                    break;
                }
            };
            let Some(id) = msg["id"].as_u64() else {
                // Notifications (logging, progress) are not answers.
                continue;
            };
            let Some(sent) = pending.remove(&id) else {
                if answered.contains(&id) {
                    run.duplicated += 1;
                }
                continue;
            };
            answered.insert(id);
            run.tally.answer(at - sent, &msg, id, 0);
            run.elapsed = at - start;
            if at < deadline && written < limit {
                if let Err(e) = self.write_call(&mix[written % mix.len()], &mut pending) {
                    run.stopped = Some(format!(" (writing failed: {e})"));
                }
                written += 1;
            }
        }
        // Late duplicates of this run's answers, already read.
        while let Ok((_, msg)) = self.lines.try_recv() {
            if msg["id"].as_u64().is_some_and(|id| answered.contains(&id)) {
                run.duplicated += 1;
            }
        }
        run.missing = pending.len();
        run
    }

    /// Writes one `search_mailboxes` call with the next id, stamped in `pending`.
    fn write_call(
        &mut self,
        arguments: &Value,
        pending: &mut HashMap<u64, Instant>,
    ) -> std::io::Result<()> {
        let id = self.next_id;
        self.next_id += 1;
        pending.insert(id, Instant::now());
        self.send(&call(id, arguments))
    }

    /// Closes stdin and reaps the server (killing it if it lingers): how it ended.
    fn stop(mut self) -> String {
        drop(self.stdin.take());
        common::reap(&mut self.child);
        match self.child.try_wait() {
            Ok(Some(status)) => format!("on stdin EOF it ended with {status}"),
            _ => "its end could not be read".to_owned(),
        }
    }
}

impl Drop for StdioServer {
    /// A panic must not leave a server behind.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Formatting

fn mb(kb: Option<u64>) -> String {
    kb.map_or_else(
        || "?".to_owned(),
        |kb| format!("{:.1} MB", kb as f64 / 1024.0),
    )
}

fn ms(d: Option<Duration>) -> String {
    d.map_or_else(
        || "-".to_owned(),
        |d| format!("{:.1} ms", d.as_secs_f64() * 1e3),
    )
}

fn show<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "?".to_owned(), |v| v.to_string())
}

fn delta_kb(before: Option<u64>, after: Option<u64>) -> Option<i64> {
    Some(i64::try_from(after?).ok()? - i64::try_from(before?).ok()?)
}

fn delta_mb(before: Option<u64>, after: Option<u64>) -> Option<f64> {
    delta_kb(before, after).map(|kb| kb as f64 / 1024.0)
}
