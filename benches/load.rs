//! `cargo bench --bench load [-- --smoke]`: one busy agent (issue 10, item 4). Serves the demo
//! mailboxes with the built `mailgate serve` over stdio (a private MAILGATE_HOME in a tempdir),
//! does the MCP handshake, then writes `MAILGATE_LOAD_CALLS` (default 200; 20 with `--smoke` or a
//! run without `--bench`, as `cargo test --all-targets` makes) `tools/call search_mailboxes`
//! requests, a mix of queries over all mailboxes, without waiting for answers, and reads them
//! all. Reports calls/s, the server's RSS before the burst, its peak (VmHWM) and its RSS
//! afterwards (at once and after `MAILGATE_LOAD_IDLE_SECS`, default 3, idle), beside the issue's
//! figures. Speed and memory are reported, not asserted; the bench exits non-zero when the server
//! cannot start or when a call is not answered exactly once (within `MAILGATE_LOAD_TIMEOUT_SECS`,
//! default 120, of the previous answer). `MAILGATE_BENCH_EXE=PATH` measures another build.
#![expect(clippy::print_stdout, reason = "a bench binary prints its report")]

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod common;
use common::{demo, exe, json_lines, mailgate, queries};
const DEFAULT_CALLS: usize = 200;
const SMOKE_CALLS: usize = 20;
const DEFAULT_TIMEOUT_SECS: u64 = 120;
const DEFAULT_IDLE_SECS: u64 = 3;

fn main() {
    let Knobs {
        calls,
        timeout,
        idle,
    } = knobs();
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let home = scratch.path();
    let config = demo(home);
    let stderr_path = home.join("serve.stderr");
    let mut server = Server::start(home, &config, &stderr_path);

    server.handshake();
    let rss_before = server.status("VmRSS");
    println!(
        "load: {calls} pipelined search_mailboxes calls on the demo, one stdio session ({})",
        exe()
    );

    // The writer runs on its own thread: a server that answers while we are still writing must
    // not block on a full stdout pipe while we block on its full stdin.
    let mut stdin = server.stdin.take().expect("invariant: stdin is piped");
    let mix = queries();
    let requests: Vec<String> = (0..calls)
        .map(|i| {
            json!({
                "jsonrpc": "2.0",
                "id": 1000 + i,
                "method": "tools/call",
                "params": { "name": "search_mailboxes", "arguments": mix[i % mix.len()] },
            })
            .to_string()
        })
        .collect();
    let burst = Instant::now();
    let writer = std::thread::spawn(move || {
        let written = requests
            .iter()
            .try_for_each(|line| writeln!(stdin, "{line}"))
            .and_then(|()| stdin.flush());
        // Handed back so stdin stays open until every answer is in; a server that died mid-burst
        // shows as a write error here and as missing answers below.
        (stdin, written)
    });

    let mut answers: BTreeMap<u64, usize> = BTreeMap::new();
    let mut latencies = Vec::new();
    let mut protocol_errors = 0;
    let mut tool_errors = 0;
    let mut statuses: BTreeMap<String, usize> = BTreeMap::new();
    let mut last = burst;
    let mut stopped = None;
    while answers.len() < calls {
        let (at, msg) = match server.lines.recv_timeout(timeout) {
            Ok(line) => line,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                stopped = Some(format!(" (no answer for {} s)", timeout.as_secs()));
                break;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                stopped = Some(" (the server closed stdout)".to_owned());
                break;
            }
        };
        let Some(id) = msg["id"]
            .as_u64()
            .filter(|id| (1000..1000 + calls as u64).contains(id))
        else {
            // Notifications (logging, progress) are not answers.
            continue;
        };
        *answers.entry(id).or_default() += 1;
        last = at;
        latencies.push(at - burst);
        if msg.get("error").is_some() {
            protocol_errors += 1;
            *statuses.entry("jsonrpc_error".into()).or_default() += 1;
        } else if msg["result"]["isError"].as_bool() == Some(true) {
            tool_errors += 1;
            *statuses.entry("tool_error".into()).or_default() += 1;
        } else {
            let status = msg["result"]["structuredContent"]["status"]
                .as_str()
                .unwrap_or("?");
            *statuses.entry(status.to_owned()).or_default() += 1;
        }
    }
    let elapsed = last - burst;
    let peak = server.status("VmHWM");
    let rss_after = server.status("VmRSS");
    // The server kept its memory once the burst was over: look again after an idle spell.
    std::thread::sleep(idle);
    let rss_idle = server.status("VmRSS");
    // Late duplicates: anything that came in after the last expected answer (and the idle spell).
    while let Ok((_, msg)) = server.lines.try_recv() {
        if let Some(id) = msg["id"].as_u64()
            && let Some(n) = answers.get_mut(&id)
        {
            *n += 1;
        }
    }
    let (stdin, written) = writer.join().expect("the writer thread");
    drop(stdin);
    if let Err(e) = written {
        println!("writing the requests failed: {e}");
    }
    server.stop();

    latencies.sort();
    let pct = |p: usize| {
        latencies
            .get((latencies.len() * p / 100).min(latencies.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64())
    };
    let answered = answers.len();
    let duplicated = answers.values().filter(|&&n| n > 1).count();
    let missing = calls - answered;
    let rate = answered as f64 / elapsed.as_secs_f64().max(1e-9);
    println!(
        "answers: {answered}/{calls} in {:.2} s ({rate:.1} calls/s); latency p50 {:.2} s, \
         p90 {:.2} s, max {:.2} s",
        elapsed.as_secs_f64(),
        pct(50),
        pct(90),
        pct(100)
    );
    println!(
        "statuses: {}",
        statuses
            .iter()
            .map(|(s, n)| format!("{s} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "errors: {protocol_errors} JSON-RPC, {tool_errors} tool; missing {missing}{}; \
         answered more than once {duplicated}",
        stopped.unwrap_or_default()
    );
    println!(
        "RSS: before the burst {}, peak (VmHWM) {}, after {}{}",
        mb(rss_before),
        mb(peak),
        mb(rss_after),
        if idle.is_zero() {
            String::new()
        } else {
            format!(", after {} s idle {}", idle.as_secs(), mb(rss_idle))
        }
    );
    println!(
        "before (issue 10): ~30-36 calls/s; RSS 11 MB -> 160-197 MB, kept afterwards. \
         target: peak RSS < 48 MB, every call answered."
    );
    println!(
        "peak RSS < 48 MB: {}",
        if peak.is_some_and(|kb| kb < 48 * 1024) {
            "met"
        } else {
            "NOT met"
        }
    );
    if missing > 0 || duplicated > 0 {
        print_tail(&stderr_path);
        panic!("{missing} call(s) without an answer, {duplicated} answered more than once");
    }
}

struct Knobs {
    calls: usize,
    /// How long to wait for the next answer before counting the rest as missing.
    timeout: Duration,
    /// The idle spell after the burst before RSS is read again.
    idle: Duration,
}

#[expect(
    clippy::disallowed_methods,
    reason = "a bench binary reads its own knobs; the library's env rule is for config::env"
)]
fn knobs() -> Knobs {
    let smoke = common::smoke();
    let calls = match std::env::var("MAILGATE_LOAD_CALLS") {
        Ok(v) => v
            .parse::<usize>()
            .ok()
            .filter(|&n| n > 0)
            .unwrap_or_else(|| panic!("MAILGATE_LOAD_CALLS: {v:?} is not a positive count")),
        Err(_) if smoke => SMOKE_CALLS,
        Err(_) => DEFAULT_CALLS,
    };
    let secs = |var: &str, default: u64| match std::env::var(var) {
        Ok(v) => v
            .parse::<u64>()
            .unwrap_or_else(|_| panic!("{var}: {v:?} is not seconds")),
        Err(_) => default,
    };
    Knobs {
        calls,
        timeout: Duration::from_secs(secs("MAILGATE_LOAD_TIMEOUT_SECS", DEFAULT_TIMEOUT_SECS)),
        idle: Duration::from_secs(secs(
            "MAILGATE_LOAD_IDLE_SECS",
            if smoke { 0 } else { DEFAULT_IDLE_SECS },
        )),
    }
}

fn mb(kb: Option<u64>) -> String {
    kb.map_or_else(
        || "? (server gone)".to_owned(),
        |kb| format!("{:.1} MB", kb as f64 / 1024.0),
    )
}

struct Server {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    /// Every stdout line as JSON, stamped when it was read.
    lines: mpsc::Receiver<(Instant, Value)>,
    stderr_path: std::path::PathBuf,
}

impl Server {
    #[expect(
        clippy::disallowed_methods,
        reason = "the bench captures the server's stderr into its own scratch file"
    )]
    fn start(home: &Path, config: &Path, stderr_path: &Path) -> Self {
        let stderr = std::fs::File::create(stderr_path).expect("create the stderr file");
        let mut child = mailgate(home, &["serve".as_ref()])
            .env("OUTLOOK_PLUGIN_CONFIG", config)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {} serve: {e}", exe()));
        let lines = json_lines(child.stdout.take().expect("invariant: stdout is piped"));
        Self {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr_path: stderr_path.to_owned(),
        }
    }

    fn handshake(&mut self) {
        let stdin = self.stdin.as_mut().expect("invariant: stdin is piped");
        let init = common::initialize(0, "mailgate-load-bench", "2025-06-18");
        writeln!(stdin, "{init}").expect("write initialize");
        stdin.flush().expect("flush initialize");
        let answer = loop {
            match self.lines.recv_timeout(Duration::from_secs(30)) {
                Ok((_, msg)) if msg["id"] == 0 => break msg,
                Ok(_) => {}
                Err(_) => {
                    print_tail(&self.stderr_path);
                    panic!("the server did not answer initialize within 30 s");
                }
            }
        };
        assert!(
            answer.get("result").is_some(),
            "initialize was refused: {answer}"
        );
        let stdin = self.stdin.as_mut().expect("invariant: stdin is piped");
        let done = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
        writeln!(stdin, "{done}").expect("write initialized");
        stdin.flush().expect("flush initialized");
    }

    /// A `/proc/PID/status` field in kB; None once the server is gone (the report then says so instead of panicking before it
    /// is printed).
    fn status(&self, field: &str) -> Option<u64> {
        common::proc_status_kb(self.child.id(), field)
    }

    /// Closes stdin (done by the caller) and reaps the server, killing it if it lingers.
    fn stop(mut self) {
        drop(self.stdin.take());
        common::reap(&mut self.child);
    }
}

#[expect(
    clippy::disallowed_methods,
    reason = "the bench reads the server's stderr from its own scratch file"
)]
fn print_tail(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    println!("server stderr (last 20 lines):");
    for line in &lines[lines.len().saturating_sub(20)..] {
        println!("  {line}");
    }
}
