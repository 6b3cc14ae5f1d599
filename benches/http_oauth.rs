//! `cargo bench --bench http_oauth [-- --smoke]`: what the OAuth resource server costs a call
//! (issue 29). The same demo mailboxes served twice over loopback HTTP by the built binary, once
//! with the static bearer token (the anchor) and once as the resource server with a principal,
//! its issuer the tests' fake authorization server (`tests/it/oauth_issuer.rs`, included by
//! path: discovery and a JWKS on loopback). One client, one kept-alive connection, the same
//! `tools/call search_mailbox` sent `MAILGATE_OAUTH_BENCH_CALLS` (default 400; 60 in a smoke run)
//! times to each after a warm-up (which also fills the JWKS cache), the two servers alternating
//! by round so both see the same machine. Prints p50/p99/max per call for both and the p50
//! difference, the token check's cost, beside its target (under 1 ms at p50 with a warm key
//! cache). Figures are printed, never asserted; the bench fails only on a call that is not
//! answered with a 200 and a result.
#![expect(clippy::print_stdout, reason = "a bench binary prints its report")]
#![expect(
    clippy::disallowed_methods,
    reason = "a bench drives the built binary and writes its scratch config"
)]
#![expect(clippy::unwrap_used, reason = "a bench fails loudly")]

mod common;
#[path = "../tests/it/oauth_issuer.rs"]
#[expect(
    dead_code,
    reason = "the bench signs and serves keys; the tests use the rest"
)]
mod oauth_issuer;

use std::io::BufRead as _;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use common::{demo, exe, mailgate, smoke};
use oauth_issuer::{FakeIssuer, Signer, claims};

const TOKEN: &str = "bench-only-bearer-0123456789abcdef";
const RESOURCE: &str = "https://mail.example.com/mcp";

fn main() {
    let calls: usize = std::env::var("MAILGATE_OAUTH_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if smoke() { 60 } else { 400 });
    let scratch = tempfile::tempdir().expect("scratch");
    let home = scratch.path();
    let config = demo(home);
    let mut json: Value = serde_json::from_slice(&std::fs::read(&config).unwrap()).unwrap();
    json["principals"] = json!([{"label": "ana", "match": {"sub": "a-1"}, "aliases": ["finance"]}]);
    std::fs::write(&config, json.to_string()).unwrap();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let key = Signer::new("k1");
    let issuer = runtime.block_on(FakeIssuer::start(&[&key]));
    let issuer_url = issuer.url();
    let bearer = Server::start(home, &config, &[("OUTLOOK_HTTP_BEARER_TOKEN", TOKEN)]);
    let oauth = Server::start(
        home,
        &config,
        &[
            ("MAILGATE_HTTP_OAUTH_ISSUER", issuer_url.as_str()),
            ("MAILGATE_HTTP_PUBLIC_URL", RESOURCE),
            ("MAILGATE_HTTP_PERSON_REQUESTS_PER_MINUTE", "100000"),
        ],
    );
    let person = key.sign(&claims(&issuer_url, RESOURCE, "a-1"));
    println!(
        "http_oauth: {calls} x search_mailbox on the demo's finance, one kept-alive connection per \
         server, bearer (anchor) and OAuth alternating ({})",
        exe()
    );
    let client = reqwest::Client::builder()
        .no_proxy()
        .http1_only()
        .pool_max_idle_per_host(1)
        .build()
        .unwrap();
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "search_mailbox",
        "arguments": {"mailbox": "finance", "criteria": {"query": "invoice", "maxResults": 5}}}});
    let (mut with_bearer, mut with_token) = (Vec::new(), Vec::new());
    runtime.block_on(async {
        for round in 0..calls + 10 {
            let a = timed(&client, &bearer.url, TOKEN, &call).await;
            let b = timed(&client, &oauth.url, &person, &call).await;
            // The first rounds warm both servers (and fill the JWKS cache): not counted.
            if round >= 10 {
                with_bearer.push(a);
                with_token.push(b);
            }
        }
    });
    let (b50, b99, bmax) = percentiles(&mut with_bearer);
    let (o50, o99, omax) = percentiles(&mut with_token);
    println!("                    p50        p99        max");
    println!(
        "bearer (anchor)  {:>8}   {:>8}   {:>8}",
        ms(b50),
        ms(b99),
        ms(bmax)
    );
    println!(
        "OAuth token      {:>8}   {:>8}   {:>8}",
        ms(o50),
        ms(o99),
        ms(omax)
    );
    let added = o50.as_secs_f64() * 1000.0 - b50.as_secs_f64() * 1000.0;
    println!("token check adds {added:+.3} ms at p50 (target: under 1 ms with a warm key cache)");
    drop(issuer);
}

/// One call; its latency. Panics unless answered 200 with a result.
async fn timed(client: &reqwest::Client, url: &str, token: &str, call: &Value) -> Duration {
    let started = Instant::now();
    let response = client
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .bearer_auth(token)
        .json(call)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    assert!(
        status == 200 && body.get("result").is_some(),
        "{status}: {body}"
    );
    started.elapsed()
}

fn percentiles(samples: &mut [Duration]) -> (Duration, Duration, Duration) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    (at(0.5), at(0.99), at(1.0))
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

/// `serve --http 127.0.0.1:0` with `env`; its `/mcp` URL, read from its announcement.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start(home: &std::path::Path, config: &std::path::Path, env: &[(&str, &str)]) -> Self {
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
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
        let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut lines = stderr.lines();
        let url = loop {
            let line = lines
                .next()
                .expect("the server announces its address")
                .unwrap();
            if let Some(rest) = line.split_once("serving MCP over HTTP at ").map(|(_, r)| r) {
                break rest.split(' ').next().unwrap().to_owned();
            }
        };
        // Keep draining, so the server never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Self { child, url }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
