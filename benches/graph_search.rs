//! `cargo bench --bench graph_search [-- --smoke]`: `search_mailboxes` over eight Microsoft Graph
//! mailboxes with 50 ms injected per Graph request (issue 11). Serves the fake Graph of the test
//! suite (`tests/it/fake_graph`) in this process and drives the built `mailgate serve` over stdio
//! with an rmcp client, then reports, each beside its anchor measured in the same run:
//!
//! - the fan-out's wall time against the slowest single mailbox's search alone (the request
//!   chain the fan-out cannot beat; target ≤ 1.1×) and against the 50 ms latency floor;
//! - Graph requests per mailbox search (the search, its canary, and any fallback pages);
//! - the server's peak memory per in-flight mailbox search, from VmHWM under a burst of calls;
//! - Graph bytes fetched per useful result (≈ tokens at 4 bytes each), beside the bytes of the
//!   answer the model reads.
//!
//! Knobs: `MAILGATE_GRAPH_BENCH_MESSAGES` (messages per mailbox, default 300; 40 in a smoke
//! run), `MAILGATE_GRAPH_BENCH_ROUNDS` (default 5; 1 in a smoke run). `MAILGATE_BENCH_EXE=PATH`
//! measures another build. Figures are reported, not asserted.
#![expect(clippy::print_stdout, reason = "a bench binary prints its report")]
#![expect(
    clippy::disallowed_methods,
    reason = "a bench binary reads its own knobs and /proc; the library's rules are for the library"
)]

#[path = "../tests/it/fake_graph/mod.rs"]
mod fake_graph;

mod common;

use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt, service::RunningService};
use serde_json::{Value, json};

use fake_graph::{FakeGraph, Message};

const MAILBOXES: usize = 8;
const LATENCY: Duration = Duration::from_millis(50);
/// Concurrent `search_mailboxes` calls of the memory burst (the server runs four at a time).
const BURST: usize = 8;
/// The word the seeded messages share (a few per mailbox).
const WORD: &str = "budget";

fn knob(name: &str, default: usize, smoke_default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if common::smoke() {
            smoke_default
        } else {
            default
        })
}

fn address(i: usize) -> String {
    format!("team{i}@example.com")
}

type Client = RunningService<RoleClient, ()>;

async fn call(client: &Client, tool: &str, args: Value) -> (Value, usize) {
    let Value::Object(map) = args else {
        unreachable!("arguments are an object")
    };
    let result = client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(map))
        .await
        .expect("the call is answered");
    assert_ne!(
        result.is_error,
        Some(true),
        "{tool} failed: {:?}",
        result.content
    );
    let structured = result.structured_content.expect("structured content");
    let bytes = serde_json::to_vec(&structured)
        .map(|b| b.len())
        .unwrap_or(0);
    (structured, bytes)
}

/// Calls `tool` with `args` `rounds` times: the median wall time, and every answer with its
/// size in bytes.
async fn timed(
    client: &Client,
    rounds: usize,
    tool: &str,
    args: &Value,
) -> (Duration, Vec<(Value, usize)>) {
    let mut times = Vec::with_capacity(rounds);
    let mut answers = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let started = Instant::now();
        answers.push(call(client, tool, args.clone()).await);
        times.push(started.elapsed());
    }
    times.sort();
    (times[times.len() / 2], answers)
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

#[tokio::main]
async fn main() {
    let per_mailbox = knob("MAILGATE_GRAPH_BENCH_MESSAGES", 300, 40);
    let rounds = knob("MAILGATE_GRAPH_BENCH_ROUNDS", 5, 1).max(1);

    let fake = FakeGraph::start().await;
    for i in 0..MAILBOXES {
        let addr = address(i);
        fake.add_mailbox(&addr);
        fake.seed_synthetic(&addr, "inbox", per_mailbox);
        for k in 0..3 {
            fake.add_message(
                &addr,
                "inbox",
                Message::new(&format!("Quarterly {WORD} review {k}"))
                    .from("Dana Example", "dana@example.org")
                    .text("The figures for the next quarter are attached."),
            );
        }
    }

    let scratch = tempfile::tempdir().expect("a scratch directory");
    let entries: Vec<String> = (0..MAILBOXES)
        .map(|i| format!(r#"{{"alias": "team{i}", "address": "{}"}}"#, address(i)))
        .collect();
    let config = scratch.path().join("plugin.json");
    std::fs::write(
        &config,
        format!(
            r#"{{"mailboxes": [{}], "maxConcurrentMailboxes": {MAILBOXES}}}"#,
            entries.join(", ")
        ),
    )
    .expect("config");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).expect("mode");

    let mut cmd = tokio::process::Command::new(common::exe());
    cmd.arg("--config")
        .arg(&config)
        .arg("serve")
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", scratch.path())
        .env("MAILGATE_HOME", scratch.path().join("state"))
        .envs(fake.env())
        .current_dir(scratch.path());
    let (transport, _stderr) = TokioChildProcess::builder(cmd.configure(|c| {
        c.kill_on_drop(true);
    }))
    .stderr(std::process::Stdio::null())
    .spawn()
    .expect("mailgate starts");
    let pid = transport.id().expect("a pid");
    let client: Client = ().serve(transport).await.expect("MCP handshake");

    // Warm up: the app token, connections.
    call(
        &client,
        "search_mailbox",
        json!({"mailbox": "team0", "criteria": {"query": WORD}}),
    )
    .await;
    fake.latency(LATENCY);

    // The slowest single mailbox's chain, each alone.
    let mut slowest = Duration::ZERO;
    for i in 0..MAILBOXES {
        let args = json!({"mailbox": format!("team{i}"), "criteria": {"query": WORD}});
        slowest = slowest.max(timed(&client, rounds, "search_mailbox", &args).await.0);
    }
    let requests_before = fake.requests().len();
    let bytes_before = fake.served_bytes();
    let (fan_out, answers) = timed(
        &client,
        rounds,
        "search_mailboxes",
        &json!({"criteria": {"query": WORD}}),
    )
    .await;
    let results: usize = answers
        .iter()
        .flat_map(|(out, _)| out["results"].as_array().into_iter().flatten())
        .map(|m| m["messages"].as_array().map_or(0, Vec::len))
        .sum();
    let answer_bytes: usize = answers.iter().map(|(_, bytes)| bytes).sum();
    let requests = fake.requests().len() - requests_before;
    let fetched = fake.served_bytes() - bytes_before;
    let searches = rounds * MAILBOXES;

    // A word no message holds: Graph finds nothing, so the local fallback scan lists the
    // window and fetches each candidate's body before it may say NOT_FOUND.
    let absent = json!({"mailbox": "team0", "criteria": {"query": "zorblaxquint"}});
    let absent_single = timed(&client, rounds, "search_mailbox", &absent).await.0;
    let before_absent = fake.requests().len();
    let absent_all = json!({"criteria": {"query": "zorblaxquint"}});
    let absent_fan_out = timed(&client, rounds, "search_mailboxes", &absent_all)
        .await
        .0;
    let absent_requests = fake.requests().len() - before_absent;

    // Memory: a burst of the heaviest fan-out (the fallback reads bodies); the server runs four
    // calls at once (MAX_CALLS_IN_FLIGHT). RSS is sampled during the burst, since VmHWM would
    // also hold the earlier runs' peak.
    let rss_before = common::proc_status_kb(pid, "VmRSS");
    let sampling = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let sampler = {
        let sampling = std::sync::Arc::clone(&sampling);
        tokio::spawn(async move {
            let mut peak = 0;
            while sampling.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(common::proc_status_kb(pid, "VmRSS").unwrap_or(0));
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            peak
        })
    };
    let burst = (0..BURST).map(|_| {
        call(
            &client,
            "search_mailboxes",
            json!({"criteria": {"query": "zorblaxquint"}}),
        )
    });
    futures::future::join_all(burst).await;
    sampling.store(false, std::sync::atomic::Ordering::Relaxed);
    let peak = sampler.await.ok();
    let in_flight = 4 * MAILBOXES;

    println!(
        "graph_search: {MAILBOXES} Graph mailboxes × {} messages, {} ms per Graph request, \
         median of {rounds}",
        per_mailbox + 3,
        LATENCY.as_millis()
    );
    println!(
        "  search_mailboxes (all {MAILBOXES}): {}   slowest single mailbox alone: {}   \
         ratio {:.2}× (target ≤ 1.10×)   latency floor: {} (search + canary in parallel)",
        ms(fan_out),
        ms(slowest),
        fan_out.as_secs_f64() / slowest.as_secs_f64().max(f64::EPSILON),
        ms(LATENCY)
    );
    println!(
        "  Graph requests per mailbox search: {:.1}",
        requests as f64 / searches as f64
    );
    println!(
        "  a word no message holds (fallback scan, bodies read in $batch requests): \
         search_mailboxes {}   one mailbox alone {}   ratio {:.2}×   {:.0} Graph requests per \
         mailbox search (batch steps counted singly)",
        ms(absent_fan_out),
        ms(absent_single),
        absent_fan_out.as_secs_f64() / absent_single.as_secs_f64().max(f64::EPSILON),
        absent_requests as f64 / searches as f64
    );
    match (rss_before, peak) {
        (Some(before), Some(peak)) => println!(
            "  memory: RSS before the burst {:.1} MB, peak during it {:.1} MB; ≈ {:.0} KB per \
             in-flight mailbox search ({BURST} fallback-scan calls, {in_flight} mailbox searches \
             at once)",
            before as f64 / 1024.0,
            peak as f64 / 1024.0,
            peak.saturating_sub(before) as f64 / in_flight as f64
        ),
        _ => println!("  memory: /proc/{pid}/status unreadable"),
    }
    if results > 0 {
        println!(
            "  fetched from Graph per useful result: {:.0} bytes (≈ {:.0} tokens); the answer \
             the model reads: {:.0} bytes (≈ {:.0} tokens) per result",
            fetched as f64 / results as f64,
            fetched as f64 / results as f64 / 4.0,
            answer_bytes as f64 / results as f64,
            answer_bytes as f64 / results as f64 / 4.0
        );
    }
    let _ = client.cancel().await;
}
