//! MCP clients nobody on this project wrote, run against the real binary: the official
//! TypeScript SDK (`tests/clients/sdk-client.mjs`) through the eight gate settings and the four
//! send-gate refusals with the reference plugin's minimal environment, and MCP Inspector's CLI
//! (`tests/clients/inspector-cli.mjs`) calling every read tool with every argument on the demo,
//! and the official Python SDK (`tests/clients/python_sdk_client.py`). The same three over the
//! loopback Streamable HTTP transport (`serve --http 127.0.0.1:0` on the demo, every gate open in
//! its environment): the TypeScript SDK (`tests/clients/sdk-http-client.mjs`) and the Python SDK
//! (`tests/clients/python_sdk_http_client.py`) with a bearer token, the Inspector's CLI
//! (`inspector-cli.mjs --http`) without one (it cannot send a header). Issue 36: both SDKs read
//! and search every broken-MIME shape of `tests/fixtures/mime-shapes` and get its one answer
//! (`python_sdk_shapes_client.py`, `sdk-shapes-client.mjs`). `scripts/test.sh` installs
//! the node clients from `tests/clients/package-lock.json` into `tests/clients/node_modules` and
//! the Python SDK into the project venv `.venv`; when they are absent the tests say so and pass.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Instant;

use crate::util::{EXE, HttpServer, World, demo_config};

/// `tests/clients/`, where the scripts and their node_modules live.
fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

/// Whether `npm ci` ran; otherwise prints why the test did nothing.
#[expect(clippy::print_stderr, reason = "a skipped test says why")]
fn installed(test: &str) -> bool {
    let present = clients_dir()
        .join("node_modules/@modelcontextprotocol/sdk")
        .is_dir();
    if !present {
        eprintln!(
            "skipping {test}: tests/clients/node_modules is absent; scripts/test.sh installs it \
             (or run `npm ci` in tests/clients)"
        );
    }
    present
}

/// The test's own PATH (where `npm ci` found node), handed on as the reference smoke test does.
pub(crate) fn path() -> String {
    std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".to_owned())
}

/// Runs `node SCRIPT ARGS` in `cwd` with exactly `env`; prints its wall time.
#[expect(
    clippy::print_stderr,
    reason = "the measured time is part of the test's report"
)]
async fn node(script: &str, args: &[&str], cwd: &Path, env: &[(&str, String)]) -> Output {
    let started = Instant::now();
    let out = tokio::process::Command::new("node")
        .arg(clients_dir().join(script))
        .args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .expect("node runs (scripts/test.sh installs the clients with npm)");
    eprintln!("{script}: {:.1} s", started.elapsed().as_secs_f64());
    out
}

fn report(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The script sets every variable mailgate sees itself (the reference smoke test's minimal set,
/// with no HOME); node gets only PATH, so the SDK's inherited defaults add no HOME either.
#[tokio::test]
async fn typescript_sdk_client_sees_the_eight_catalogs_and_no_schema_warning() {
    if !installed("typescript_sdk_client_sees_the_eight_catalogs_and_no_schema_warning") {
        return;
    }
    let cwd = tempfile::tempdir().unwrap();
    let out = node("sdk-client.mjs", &[EXE], cwd.path(), &[("PATH", path())]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", report(&out));
    assert!(
        stdout.contains("sdk client: all checks passed"),
        "{}",
        report(&out)
    );
    // Zero lines: ajv's `unknown format "uint32" ignored in schema` warnings land here.
    assert!(
        out.stderr.is_empty(),
        "the client printed warnings:\n{}",
        report(&out)
    );
}

#[tokio::test]
async fn mcp_inspector_cli_calls_every_read_tool_with_every_argument() {
    if !installed("mcp_inspector_cli_calls_every_read_tool_with_every_argument") {
        return;
    }
    let world = World::new();
    let config = demo_config(&world).await;
    let env = [
        ("PATH", path()),
        ("HOME", world.path().display().to_string()),
        ("MAILGATE_HOME", world.state().display().to_string()),
        ("OUTLOOK_PLUGIN_CONFIG", config),
    ];
    let out = node("inspector-cli.mjs", &[EXE], world.path(), &env).await;
    assert!(out.status.success(), "{}", report(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("calls passed"),
        "{}",
        report(&out)
    );
}

/// The project venv's interpreter when the Python SDK is installed in it; otherwise prints why
/// the test does nothing.
#[expect(clippy::print_stderr, reason = "a skipped test says why")]
pub(crate) async fn python_with_mcp(test: &str) -> Option<PathBuf> {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python3");
    let probe = tokio::process::Command::new(&python)
        .args(["-c", "import mcp"])
        .output()
        .await;
    if probe.is_ok_and(|o| o.status.success()) {
        Some(python)
    } else {
        eprintln!(
            "skipping {test}: the Python MCP SDK is not in .venv; scripts/test.sh installs it"
        );
        None
    }
}

/// Runs `python_sdk_client.py` with exactly `env` (plus PATH) in `cwd`; asserts it passed.
async fn run_python_client(python: &Path, cwd: &Path, env: Vec<(String, String)>) {
    let out = python_script(python, "python_sdk_client.py", EXE, cwd, env).await;
    assert!(out.status.success(), "{}", report(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("python sdk client: all checks passed"),
        "{}",
        report(&out)
    );
}

/// Runs `python SCRIPT ARG` with exactly `env` (plus PATH) in `cwd`; prints its wall time.
async fn python_script(
    python: &Path,
    script: &str,
    arg: &str,
    cwd: &Path,
    env: Vec<(String, String)>,
) -> Output {
    let started = Instant::now();
    let out = tokio::process::Command::new(python)
        .arg(clients_dir().join(script))
        .arg(arg)
        .env_clear()
        .env("PATH", path())
        .envs(env)
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    #[expect(
        clippy::print_stderr,
        reason = "the measured time is part of the test's report"
    )]
    {
        eprintln!("{script}: {:.1} s", started.elapsed().as_secs_f64());
    }
    out
}

/// The reference user's gate and sender variables, every gate open.
fn open_gates() -> Vec<(String, String)> {
    [
        ("PLUGIN_ALLOW_WRITES", "true"),
        ("PLUGIN_ALLOW_LOCAL_HANDOFFS", "true"),
        ("PLUGIN_ALLOW_SEND", "true"),
        ("OUTLOOK_SEND_FROM", "finance@example.com"),
        ("OUTLOOK_ALLOWED_SENDERS", "finance@example.com"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .to_vec()
}

#[tokio::test]
async fn python_sdk_client_lists_and_calls_tools() {
    let Some(python) = python_with_mcp("python_sdk_client_lists_and_calls_tools").await else {
        return;
    };
    let world = World::new();
    let config = demo_config(&world).await;
    let mut env = vec![
        ("HOME".to_owned(), world.path().display().to_string()),
        (
            "MAILGATE_HOME".to_owned(),
            world.state().display().to_string(),
        ),
        ("OUTLOOK_PLUGIN_CONFIG".to_owned(), config),
    ];
    env.extend(open_gates());
    run_python_client(&python, world.path(), env).await;
}

/// A reference user's Graph setup, unchanged: plugin.json entries without `backend`, the three
/// `MICROSOFT_GRAPH_*` credentials and the gate variables — pointed at the fake Graph (the two
/// `MAILGATE_GRAPH_*` URLs are the only addition) — driven by the official Python SDK.
#[tokio::test]
async fn python_sdk_client_works_against_graph_mailboxes() {
    let Some(python) = python_with_mcp("python_sdk_client_works_against_graph_mailboxes").await
    else {
        return;
    };
    let fake = crate::fake_graph::FakeGraph::start().await;
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/demo/messages");
    fake.seed_from_eml_dir(&demo, &[("finance", "finance@example.com")]);
    let world = World::new();
    let config = world.path().join("plugin.json");
    crate::util::write_mode(
        &config,
        br#"{"mailboxes":[{"alias":"finance","address":"finance@example.com"}]}"#,
        0o600,
    );
    let mut env = vec![
        ("HOME".to_owned(), world.path().display().to_string()),
        (
            "OUTLOOK_PLUGIN_CONFIG".to_owned(),
            config.display().to_string(),
        ),
    ];
    env.extend(fake.env());
    env.extend(open_gates());
    run_python_client(&python, world.path(), env).await;
    assert!(
        fake.requests().iter().any(|r| r.path.contains("/messages")),
        "the client's calls reached Graph"
    );
    fake.assert_no_secret_in_urls(&[crate::fake_graph::CLIENT_SECRET]);
}

/// `mailgate serve --http 127.0.0.1:0` on a fresh demo, with every gate open (and `extra`) in its
/// environment; checks that it announces the read-only catalog anyway.
async fn http_demo(world: &World, extra: &[(&str, &str)]) -> HttpServer {
    let config = demo_config(world).await;
    let gates = open_gates();
    let mut env: Vec<(&str, &str)> = gates
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    env.extend_from_slice(extra);
    let server = HttpServer::start(
        world,
        &["serve", "--http", "127.0.0.1:0", "--config", &config],
        &env,
    )
    .await;
    assert!(
        server.stderr().contains("/mcp (12 read-only tools; "),
        "{}",
        server.stderr()
    );
    server
}

/// The client run `out` passed (its output has `marker`; the server's stderr is shown if not),
/// then SIGTERM ends the server gracefully: exit 0.
async fn passed_then_stop(out: &Output, marker: &str, server: HttpServer) {
    assert!(
        out.status.success(),
        "{}\n--- server stderr\n{}",
        report(out),
        server.stderr()
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(marker),
        "{}",
        report(out)
    );
    let (status, stderr) = server.stop().await;
    assert!(status.success(), "after SIGTERM: {status}\n{stderr}");
}

/// The official TypeScript SDK's Streamable HTTP client with the bearer in `requestInit.headers`:
/// the twelve read tools although every gate is open, read calls on the demo, the gated tools
/// refused by name, a wrong or missing token 401, a foreign Origin 403, no session id, no console
/// output.
#[tokio::test]
async fn typescript_sdk_client_over_http_sees_only_the_read_tools() {
    if !installed("typescript_sdk_client_over_http_sees_only_the_read_tools") {
        return;
    }
    let world = World::new();
    let server = http_demo(&world, &[]).await;
    let token = server.token.clone().expect("a bearer token is required");
    let env = [("PATH", path()), ("OUTLOOK_HTTP_BEARER_TOKEN", token)];
    let out = node("sdk-http-client.mjs", &[&server.url], world.path(), &env).await;
    assert!(
        out.stderr.is_empty(),
        "the client printed warnings:\n{}",
        report(&out)
    );
    passed_then_stop(&out, "sdk http client: all checks passed", server).await;
}

/// The official Python SDK's `streamable_http_client` with the bearer on its `httpx2` client: the
/// twelve read tools, read calls, the gated tools refused by name, a wrong token 401.
#[tokio::test]
async fn python_sdk_client_over_http_sees_only_the_read_tools() {
    let Some(python) =
        python_with_mcp("python_sdk_client_over_http_sees_only_the_read_tools").await
    else {
        return;
    };
    let world = World::new();
    let server = http_demo(&world, &[]).await;
    let token = server.token.clone().expect("a bearer token is required");
    let env = vec![("OUTLOOK_HTTP_BEARER_TOKEN".to_owned(), token)];
    let out = python_script(
        &python,
        "python_sdk_http_client.py",
        &server.url,
        world.path(),
        env,
    )
    .await;
    passed_then_stop(&out, "python sdk http client: all checks passed", server).await;
}

/// MCP Inspector 0.15's CLI over Streamable HTTP (`--transport http`), every read tool with every
/// argument. Its CLI has no option for a request header, so it cannot send a bearer token: this
/// server alone runs with `OUTLOOK_HTTP_ALLOW_NO_AUTH=true` (and says so when it starts).
#[tokio::test]
async fn mcp_inspector_cli_over_http_calls_every_read_tool_with_every_argument() {
    if !installed("mcp_inspector_cli_over_http_calls_every_read_tool_with_every_argument") {
        return;
    }
    let world = World::new();
    let server = http_demo(&world, &[("OUTLOOK_HTTP_ALLOW_NO_AUTH", "true")]).await;
    assert_eq!(server.token, None, "{}", server.stderr());
    let out = node(
        "inspector-cli.mjs",
        &["--http", &server.url],
        world.path(),
        &[("PATH", path())],
    )
    .await;
    passed_then_stop(&out, "calls passed", server).await;
}

/// Issue 29, item 5, end to end with parts nobody on this project wrote: `oidc-provider` (OpenID
/// Certified) as the authorization server on loopback, and the TypeScript MCP SDK's
/// `ClientCredentialsProvider` doing the whole discovery and OAuth flow itself against mailgate
/// as the resource server (the 401 challenge, the Protected Resource Metadata, the issuer's
/// metadata, a token for the resource by RFC 8707, RFC 9068 JWT), then reaching only its
/// principal's alias.
#[tokio::test]
async fn typescript_sdk_does_the_oauth_flow_against_oidc_provider_and_reaches_its_aliases() {
    use tokio::io::AsyncBufReadExt as _;
    if !installed("typescript_sdk_does_the_oauth_flow") {
        return;
    }
    const SECRET: &str = "e2e-only-client-secret-0123456789";
    let world = World::new();
    let entry = |alias| crate::util::DemoEntry {
        alias,
        address: if alias == "finance" {
            "finance@example.com"
        } else {
            "personal@example.com"
        },
        access: "full",
        maildir: true,
    };
    let config = crate::util::config_over_shared_demo(
        &world,
        &[entry("finance"), entry("personal")],
        r#", "principals": [{"label": "machine", "match": {"sub": "mailgate-e2e"}, "aliases": ["finance"]}]"#,
    );
    // The canonical URL is the address clients use, so it must be known before the server
    // starts: a port the kernel just handed out and released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut issuer = tokio::process::Command::new("node")
        .arg(clients_dir().join("oidc-issuer.mjs"))
        .args([url.as_str(), SECRET])
        .env_clear()
        .env("PATH", path())
        .current_dir(clients_dir())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(issuer.stdout.take().unwrap()).lines();
    let issuer_url = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(url) = line.strip_prefix("issuer ") {
                return url.to_owned();
            }
        }
        panic!("oidc-provider ended before listening")
    })
    .await
    .expect("oidc-provider listens within 30 s");
    let server = HttpServer::start(
        &world,
        &[
            "serve",
            "--http",
            &format!("127.0.0.1:{port}"),
            "--config",
            &config,
        ],
        &[
            ("MAILGATE_HTTP_OAUTH_ISSUER", issuer_url.as_str()),
            ("MAILGATE_HTTP_PUBLIC_URL", url.as_str()),
        ],
    )
    .await;
    let out = node(
        "sdk-oauth-client.mjs",
        &[&url, &issuer_url, "mailgate-e2e", SECRET],
        &clients_dir(),
        &[("PATH", path())],
    )
    .await;
    assert!(out.status.success(), "{}", report(&out));
    let seen: serde_json::Value = serde_json::from_slice(out.stdout.trim_ascii())
        .unwrap_or_else(|_| panic!("{}", report(&out)));
    assert_eq!(
        seen,
        serde_json::json!({"tools": 12, "mailboxes": ["finance"], "otherRefused": true}),
        "{}",
        report(&out)
    );
    let (status, _) = server.stop().await;
    assert!(status.success());
}

/// Issue 36 through the official SDKs: the Maildir of `tests/it/mime_shapes.rs` (mailbox
/// `shapes`, one folder per shape of the corpus) and the environment `mailgate serve` gets from
/// the client (HOME, MAILGATE_HOME, OUTLOOK_PLUGIN_CONFIG; the scripts add nothing).
fn issue_36_shapes_world() -> (World, Vec<(String, String)>) {
    let world = World::new();
    let config = crate::mime_shapes::shapes_maildir_config(&world);
    let env = vec![
        ("HOME".to_owned(), world.path().display().to_string()),
        (
            "MAILGATE_HOME".to_owned(),
            world.state().display().to_string(),
        ),
        ("OUTLOOK_PLUGIN_CONFIG".to_owned(), config),
    ];
    (world, env)
}

/// Runs `PROGRAM tests/clients/SCRIPT mailgate MANIFEST` in `world` with exactly `env` plus
/// PATH; prints its wall time.
async fn issue_36_run_client(
    program: &Path,
    script: &str,
    manifest: &Path,
    world: &World,
    env: &[(String, String)],
) -> Output {
    let started = Instant::now();
    let out = tokio::process::Command::new(program)
        .arg(clients_dir().join(script))
        .arg(EXE)
        .arg(manifest)
        .env_clear()
        .env("PATH", path())
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(world.path())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .expect("the client's interpreter runs");
    #[expect(
        clippy::print_stderr,
        reason = "the measured time is part of the test's report"
    )]
    {
        eprintln!("{script}: {:.1} s", started.elapsed().as_secs_f64());
    }
    out
}

/// The official Python SDK over stdio: every shape's body holds the manifest's strings (in the
/// structured content and in the text block), its attachments are the manifest's, its present
/// word is FOUND in its folder and its absent word has the manifest's status and warning.
#[tokio::test]
async fn issue_36_python_sdk_reads_and_searches_every_mime_shape() {
    let test = "issue_36_python_sdk_reads_and_searches_every_mime_shape";
    let Some(python) = python_with_mcp(test).await else {
        return;
    };
    let (world, env) = issue_36_shapes_world();
    let manifest = crate::mime_shapes::manifest_path();
    let out = issue_36_run_client(
        &python,
        "python_sdk_shapes_client.py",
        &manifest,
        &world,
        &env,
    )
    .await;
    assert!(out.status.success(), "{}", report(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("python sdk shapes client: all checks passed"),
        "{}",
        report(&out)
    );
}

/// The official TypeScript SDK over stdio, the same checks as the Python client; the SDK prints
/// nothing (no schema warning) on the way.
#[tokio::test]
async fn issue_36_typescript_sdk_reads_and_searches_every_mime_shape() {
    if !installed("issue_36_typescript_sdk_reads_and_searches_every_mime_shape") {
        return;
    }
    let (world, env) = issue_36_shapes_world();
    let manifest = crate::mime_shapes::manifest_path();
    let node = Path::new("node");
    let out = issue_36_run_client(node, "sdk-shapes-client.mjs", &manifest, &world, &env).await;
    assert!(out.status.success(), "{}", report(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("sdk shapes client: all checks passed"),
        "{}",
        report(&out)
    );
    assert!(
        out.stderr.is_empty(),
        "the client printed warnings:\n{}",
        report(&out)
    );
}

/// The two clients above can fail: given a copy of the manifest with two wrong expectations
/// (shape 01's body said to hold `cafe` instead of `café`; shape 09's absent word said to be
/// NOT_FOUND, which would be a false absence over its undecodable part), each exits 1 with a
/// table naming exactly those checks, and no other.
#[tokio::test]
async fn issue_36_sdk_shape_clients_fail_with_a_table_on_a_wrong_expectation() {
    let test = "issue_36_sdk_shape_clients_fail_with_a_table_on_a_wrong_expectation";
    let python = python_with_mcp(test).await;
    let node = installed(test).then(|| PathBuf::from("node"));
    if python.is_none() && node.is_none() {
        return;
    }
    let (world, env) = issue_36_shapes_world();
    let text = std::fs::read_to_string(crate::mime_shapes::manifest_path()).unwrap();
    let mut manifest: serde_json::Value = serde_json::from_str(&text).unwrap();
    for shape in manifest["shapes"].as_array_mut().unwrap() {
        match shape["file"].as_str().unwrap() {
            "01-type-without-subtype.eml" => {
                shape["bodyContains"] = serde_json::json!(["kumquat01", "cafe"]);
            }
            "09-base64-truncated.eml" => {
                assert_eq!(shape["absentStatus"], "SEARCH_INCOMPLETE");
                shape["absentStatus"] = "NOT_FOUND".into();
                shape["absentWarning"] = serde_json::Value::Null;
            }
            _ => {}
        }
    }
    let wrong = world.path().join("wrong-shapes.json");
    std::fs::write(&wrong, manifest.to_string()).unwrap();
    let runs = [
        (python, "python_sdk_shapes_client.py"),
        (node, "sdk-shapes-client.mjs"),
    ];
    for (program, script) in runs {
        let Some(program) = program else { continue };
        let out = issue_36_run_client(&program, script, &wrong, &world, &env).await;
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{script}: {}", report(&out));
        assert!(!stdout.contains("all checks passed"), "{}", report(&out));
        let rows: Vec<&str> = stdout
            .lines()
            .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()) && l.contains(" | "))
            .collect();
        let row = |shape: &str, check: &str| {
            rows.iter()
                .any(|r| r.starts_with(shape) && r.contains(&format!("| {check} ")))
        };
        assert!(
            rows.len() == 3
                && row("01-type-without-subtype", "body has cafe")
                && row("01-type-without-subtype", "text block has cafe")
                && row("09-base64-truncated", "search marzipan09")
                && stdout.contains("3 of "),
            "{script} should fail on exactly the three wrong checks:\n{}",
            report(&out)
        );
        assert!(
            rows.iter()
                .any(|r| r.contains("NOT_FOUND") && r.contains("SEARCH_INCOMPLETE")),
            "the table shows expected and got:\n{}",
            report(&out)
        );
    }
}
