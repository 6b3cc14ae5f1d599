//! `cargo bench --bench tokens`: what a model pays to learn this server, in bytes of compact
//! JSON. The eight `tools/list` answers (the published catalogs of `policy/catalogs/` without
//! output schemas — `tests/it/token_budget.rs` proves that is exactly what is served) beside the
//! reference plugin's 13,041 bytes and the 20,000-byte budget; then, from the built binary
//! serving the demo over stdio, `resources/list`, `resources/templates/list`, `prompts/list` and
//! two resource reads (issue 22). Figures are printed, not asserted (the token-budget test
//! asserts the budgets); the bench fails only when the server cannot answer.
#![expect(clippy::print_stdout, reason = "a bench binary prints its report")]

use std::io::Write as _;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

mod common;
use common::{demo, json_lines, mailgate};

/// The reference plugin's 12-tool `tools/list`, compact JSON.
const REFERENCE_TOOLS_LIST: usize = 13_041;
/// The budget of every other catalog.
const CATALOG_BUDGET: usize = 20_000;

fn compact_len(v: &Value) -> usize {
    serde_json::to_string(v).map_or(0, |s| s.len())
}

#[expect(
    clippy::disallowed_methods,
    reason = "a bench reads the repository's golden files and writes its scratch folder"
)]
fn main() {
    println!("{:<42} {:>8} {:>8}  budget", "listing", "bytes", "tools");
    let policy = Path::new(env!("CARGO_MANIFEST_DIR")).join("policy/catalogs");
    let mut names: Vec<String> = std::fs::read_dir(&policy)
        .expect("policy/catalogs")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort_by_key(|n| (n.len(), n.clone()));
    for name in names {
        let text = std::fs::read_to_string(policy.join(&name)).expect("a catalog");
        let mut catalog: Value = serde_json::from_str(&text).expect("catalog JSON");
        let tools = catalog["tools"].as_array_mut().expect("tools");
        for t in tools.iter_mut() {
            t.as_object_mut().expect("a tool").remove("outputSchema");
        }
        let count = tools.len();
        let budget = if count == 12 {
            REFERENCE_TOOLS_LIST
        } else {
            CATALOG_BUDGET
        };
        println!(
            "{:<42} {:>8} {:>8}  {budget} ({})",
            format!("tools/list {}", name.trim_end_matches(".json")),
            compact_len(&catalog),
            count,
            if count == 12 {
                "the reference's"
            } else {
                "budget"
            }
        );
    }

    let scratch = tempfile::tempdir().expect("a scratch directory");
    let home = scratch.path();
    let config = demo(home);
    let mut child = mailgate(home, &["serve".as_ref()])
        .env("OUTLOOK_PLUGIN_CONFIG", &config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("mailgate serve starts");
    let lines = json_lines(child.stdout.take().expect("piped"));
    let mut stdin = child.stdin.take().expect("piped");
    let init = common::initialize(0, "mailgate-tokens-bench", "2025-06-18");
    ask(&mut stdin, &lines, &init);
    let initialized = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    writeln!(stdin, "{initialized}").expect("write");
    let surface = [
        (
            "resources/list (demo, 4 aliases)",
            "resources/list",
            json!({}),
        ),
        (
            "resources/templates/list",
            "resources/templates/list",
            json!({}),
        ),
        ("prompts/list", "prompts/list", json!({})),
        (
            "resources/read mailgate://policy",
            "resources/read",
            json!({ "uri": "mailgate://policy" }),
        ),
        (
            "resources/read mailgate://finance/contacts",
            "resources/read",
            json!({ "uri": "mailgate://finance/contacts" }),
        ),
    ];
    for (i, (label, method, params)) in surface.into_iter().enumerate() {
        let request = json!({ "jsonrpc": "2.0", "id": i + 1, "method": method, "params": params });
        let result = ask(&mut stdin, &lines, &request);
        println!("{label:<42} {:>8}", compact_len(&result));
    }
    drop(stdin);
    common::reap(&mut child);
}

/// Sends `request` and waits for the answer with its id; its `result`.
fn ask(
    stdin: &mut std::process::ChildStdin,
    lines: &std::sync::mpsc::Receiver<(std::time::Instant, Value)>,
    request: &Value,
) -> Value {
    writeln!(stdin, "{request}").expect("write");
    stdin.flush().expect("flush");
    loop {
        let (_, msg) = lines
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("no answer to {} within 30 s", request["method"]));
        if msg["id"] == request["id"] {
            return msg
                .get("result")
                .cloned()
                .unwrap_or_else(|| panic!("{} refused: {msg}", request["method"]));
        }
    }
}
