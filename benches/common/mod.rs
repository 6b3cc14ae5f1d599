//! What the black-box benches share: which `mailgate` binary they drive, and the query mix the
//! load benches send.
// Several bench binaries include this module and each uses part of it: what one leaves unused
// another uses, so `dead_code` can only be allowed here, never expected.
#![expect(
    clippy::allow_attributes,
    reason = "dead_code differs per bench binary that includes this module"
)]

pub(crate) mod mail;

/// The binary Cargo built with the bench.
const BUILT: &str = env!("CARGO_BIN_EXE_mailgate");

/// The binary under test: `MAILGATE_BENCH_EXE` when set (to measure another build, e.g. the
/// code before a change, with the same bench), else the one Cargo built.
#[expect(
    clippy::disallowed_methods,
    reason = "a bench binary reads its own knobs; the library's env rule is for config::env"
)]
pub(crate) fn exe() -> &'static str {
    static EXE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    EXE.get_or_init(|| std::env::var("MAILGATE_BENCH_EXE").unwrap_or_else(|_| BUILT.to_owned()))
}

/// Whether this is a smoke run: `--smoke`, `MAILGATE_BENCH_SMOKE=1`, or a run without `--bench`
/// (`cargo test --all-targets` runs bench binaries too; there a smoke run proves the bench works
/// without paying minutes for it).
#[expect(
    clippy::disallowed_methods,
    reason = "a bench binary reads its own knobs; the library's env rule is for config::env"
)]
#[allow(
    dead_code,
    reason = "the tokens bench is as quick either way and has no smoke mode"
)]
pub(crate) fn smoke() -> bool {
    let args: Vec<String> = std::env::args().skip(1).collect();
    args.iter().any(|a| a == "--smoke")
        || !args.iter().any(|a| a == "--bench")
        || std::env::var("MAILGATE_BENCH_SMOKE").is_ok_and(|v| v == "1")
}

/// A field of `/proc/PID/status` in kB (`VmRSS`, `VmHWM`), when readable.
#[allow(
    dead_code,
    reason = "the memory benches (load, graph_search) use it; maildir_search includes this module too"
)]
#[expect(
    clippy::disallowed_methods,
    reason = "a bench binary reads /proc; the library's file rule is for the library"
)]
pub(crate) fn proc_status_kb(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Waits up to 10 s for `child` (a server whose stdin the caller closed) to exit, then kills it;
/// either way it is reaped.
#[allow(
    dead_code,
    reason = "the stdio-server benches (load, extract) use it; the others include this module too"
)]
pub(crate) fn reap(child: &mut std::process::Child) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => return,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return;
            }
        }
    }
}

/// What a busy agent asks (the load benches, stdio and HTTP, send this mix in turn): free text
/// over all mailboxes, narrowed lists, structured filters, and a word no demo message has (the
/// most expensive: nothing stops the scan early). Arguments of `search_mailboxes` on the demo.
#[allow(
    dead_code,
    reason = "the load benches (load, http_load) use it; the others include this module too"
)]
pub(crate) fn queries() -> Vec<serde_json::Value> {
    use serde_json::json;
    vec![
        json!({ "criteria": { "query": "invoice" } }),
        json!({ "criteria": { "query": "meeting agenda" } }),
        json!({ "mailboxes": ["finance"], "criteria": { "query": "payment" } }),
        json!({ "criteria": { "sender": "example.org" } }),
        json!({ "criteria": { "subject": "report" } }),
        json!({ "criteria": { "query": "password reset" } }),
        json!({ "criteria": { "query": "zorblaxquintreffel" } }),
        json!({ "mailboxes": ["personal", "support"], "criteria": { "query": "ticket" } }),
        json!({ "criteria": { "query": "contract", "dateFrom": "2026-10-01" } }),
        json!({ "criteria": { "hasAttachments": true } }),
    ]
}

/// The binary under test with a private environment (as tests/it/util.rs gives it): `home` as
/// HOME and working directory, `home/state` as MAILGATE_HOME.
#[allow(dead_code, reason = "the stdio and HTTP load benches use it")]
#[expect(
    clippy::disallowed_methods,
    reason = "a bench drives the built binary as a subprocess"
)]
pub(crate) fn mailgate(home: &std::path::Path, args: &[&std::ffi::OsStr]) -> std::process::Command {
    let mut cmd = std::process::Command::new(exe());
    cmd.args(args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home)
        .env("MAILGATE_HOME", home.join("state"))
        .current_dir(home);
    cmd
}

/// Writes the demo mailboxes into `home` (`demo --serve` on a closed stdin sets up and ends at
/// once, as the tests' shared demo does) and returns its plugin.json.
#[allow(dead_code, reason = "the stdio and HTTP load benches use it")]
#[expect(
    clippy::disallowed_methods,
    reason = "a bench sets up its own scratch directory; the cap-std rule is for the library"
)]
pub(crate) fn demo(home: &std::path::Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(home, std::fs::Permissions::from_mode(0o700))
        .expect("chmod the scratch directory");
    let out = mailgate(home, &["demo".as_ref(), "--serve".as_ref()])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", exe()));
    let config = home.join("state/demo/plugin.json");
    assert!(
        config.exists(),
        "the demo was not written: exit {:?}, stderr {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    config
}

/// A stdio server's stdout as JSON-RPC messages with their arrival time, on a channel fed by a
/// thread (so the server never blocks on a full pipe). A line that is not JSON panics the reader:
/// stdout carries only frames.
#[allow(dead_code, reason = "the stdio and HTTP load benches use it")]
pub(crate) fn json_lines(
    stdout: std::process::ChildStdout,
) -> std::sync::mpsc::Receiver<(std::time::Instant, serde_json::Value)> {
    use std::io::BufRead as _;
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("the server wrote a line that is not JSON ({e})"));
            if tx.send((std::time::Instant::now(), value)).is_err() {
                break;
            }
        }
    });
    lines
}

/// A JSON-RPC `initialize` request from the bench client `client` asking for `protocol`.
#[allow(dead_code, reason = "the stdio-server benches use it")]
pub(crate) fn initialize(id: u64, client: &str, protocol: &str) -> serde_json::Value {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "initialize",
        "params": {
            "protocolVersion": protocol,
            "capabilities": {},
            "clientInfo": { "name": client, "version": "0" },
        },
    })
}
