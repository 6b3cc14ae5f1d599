//! Drop-in for reference-plugin users (issue 9): the reference's smoke-test environment, its
//! variables (`DOWNLOAD_DIR`, `LOG_LEVEL`), clients that leave before `initialize`, and the
//! startup report of misspelled variables.

use std::path::Path;

use crate::util::{EXE, ONE_MAILBOX, World, mkdir_mode, write_mode};

/// The reference smoke test's fixture: a 0700 temp dir holding a 0600 plugin.json with one
/// Graph mailbox and a 0700 download root. Returns (config, downloads).
fn reference_fixture(world: &World) -> (String, String) {
    let root = world.path().join("smoke");
    mkdir_mode(&root, 0o700);
    let config = root.join("plugin.json");
    write_mode(
        &config,
        br#"{"mailboxes":[{"alias":"test","address":"test@example.com"}]}"#,
        0o600,
    );
    let downloads = root.join("downloads");
    mkdir_mode(&downloads, 0o700);
    (
        config.display().to_string(),
        downloads.display().to_string(),
    )
}

const READS: usize = 12;

/// The reference smoke test's minimal environment (no HOME) for one gate setting; the send
/// variables are the ones its send scenarios add.
fn smoke_env(
    config: &str,
    downloads: &str,
    gates: [&'static str; 3],
    send_env: &[(&'static str, &'static str)],
) -> Vec<(String, String)> {
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into());
    let mut env: Vec<(String, String)> = [
        ("PATH", path.as_str()),
        ("NODE_ENV", "test"),
        ("LOG_LEVEL", "error"),
        (
            "MICROSOFT_GRAPH_CLIENT_ID",
            "11111111-1111-4111-8111-111111111111",
        ),
        ("MICROSOFT_GRAPH_CLIENT_SECRET", "plugin-smoke-secret"),
        (
            "MICROSOFT_GRAPH_TENANT_ID",
            "22222222-2222-4222-8222-222222222222",
        ),
        ("TARGET_USER_EMAIL", "test@example.com"),
        ("OUTLOOK_PLUGIN_CONFIG", config),
        ("PLUGIN_ALLOW_WRITES", gates[0]),
        ("PLUGIN_ALLOW_LOCAL_HANDOFFS", gates[1]),
        ("PLUGIN_ALLOW_SEND", gates[2]),
        ("DOWNLOAD_DIR", downloads),
    ]
    .iter()
    .chain(send_env)
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    env.sort();
    env
}

fn world_with(env: &[(String, String)]) -> World {
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    World::new().exactly(&pairs)
}

/// `mailgate serve` with exactly the reference smoke test's minimal environment: PATH,
/// NODE_ENV, LOG_LEVEL, fake Graph credentials, TARGET_USER_EMAIL, OUTLOOK_PLUGIN_CONFIG,
/// DOWNLOAD_DIR and the three gates as literal "true"/"false" (with the send scenarios'
/// OUTLOOK_SEND_FROM and OUTLOOK_ALLOWED_SENDERS) — and no HOME. Every gate setting starts,
/// initializes and lists the catalog the reference lists, with the smoke test's annotation
/// checks.
///
/// With the handoff gate open, the store is `~/.mailgate/handoffs` of the account running the
/// test (no HOME: the account's home folder, as the reference's `os.homedir()`).
#[tokio::test]
async fn the_reference_smoke_env_serves_every_gate_setting() {
    let base = World::new();
    let (config, downloads) = reference_fixture(&base);
    let flag = |on: bool| if on { "true" } else { "false" };
    for writes in [false, true] {
        for handoffs in [false, true] {
            for send in [false, true] {
                let send_env: &[(&str, &str)] = if send {
                    &[
                        ("OUTLOOK_SEND_FROM", "test@example.com"),
                        ("OUTLOOK_ALLOWED_SENDERS", "test@example.com"),
                    ]
                } else {
                    &[]
                };
                let env = smoke_env(
                    &config,
                    &downloads,
                    [flag(writes), flag(handoffs), flag(send)],
                    send_env,
                );
                let world = world_with(&env);
                let client = world.client(&["serve"]).await;
                let tools = client.tools().await;
                let names = client.tool_names().await;
                let expected = READS
                    + if writes { 5 } else { 0 }
                    + if handoffs { 2 } else { 0 }
                    + usize::from(send);
                assert_eq!(
                    names.len(),
                    expected,
                    "writes={writes} handoffs={handoffs} send={send}: {names:?}"
                );
                assert_eq!(names.contains(&"send_email".to_owned()), send);
                assert_eq!(names.contains(&"move_messages".to_owned()), writes);
                assert_eq!(
                    names.contains(&"create_attachment_handoff".to_owned()),
                    handoffs
                );
                for tool in &tools {
                    let name = tool.name.as_ref();
                    let hints = tool.annotations.as_ref().expect("annotations");
                    let read_only = !matches!(
                        name,
                        "move_messages"
                            | "copy_messages"
                            | "mark_messages"
                            | "download_attachments"
                            | "create_draft"
                            | "create_attachment_handoff"
                            | "send_email"
                    );
                    assert_eq!(hints.read_only_hint, Some(read_only), "{name}");
                    let destructive =
                        matches!(name, "move_messages" | "mark_messages" | "send_email");
                    assert_eq!(hints.destructive_hint, Some(destructive), "{name}");
                    if name == "create_attachment_handoff" {
                        assert_eq!(hints.idempotent_hint, Some(true));
                    }
                }
                let listed = client
                    .ok("list_allowed_mailboxes", serde_json::json!({}))
                    .await;
                assert_eq!(listed["mailboxes"], serde_json::json!(["test"]));
                client.close().await;
            }
        }
    }
}

/// The reference smoke test's four startup refusals, in the same minimal environment.
#[tokio::test]
async fn the_reference_smoke_send_refusals_stop_startup() {
    let base = World::new();
    let (config, downloads) = reference_fixture(&base);
    let cases: [&[(&str, &str)]; 4] = [
        &[("OUTLOOK_ALLOWED_SENDERS", "test@example.com")],
        &[("OUTLOOK_SEND_FROM", "test@example.com")],
        &[
            ("OUTLOOK_SEND_FROM", "stranger@example.com"),
            ("OUTLOOK_ALLOWED_SENDERS", "stranger@example.com"),
        ],
        &[
            ("OUTLOOK_SEND_FROM", "test@example.com"),
            ("OUTLOOK_ALLOWED_SENDERS", "stranger@example.com"),
        ],
    ];
    for send_env in cases {
        let env = smoke_env(&config, &downloads, ["false", "false", "true"], send_env);
        let out = world_with(&env).run(&["serve"]).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{send_env:?}: {stderr}");
        assert!(stderr.contains("the send gate cannot open"), "{stderr}");
    }
}

/// Runs `mailgate serve` with stdin that ends before any message (no client, or one that
/// connected and left).
#[tokio::test]
async fn a_client_that_leaves_before_initialize_is_a_clean_exit() {
    let world = World::new().config(ONE_MAILBOX, 0o600);
    let out = world.run(&["serve"]).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());

    // A first message that is neither a request nor `initialize` (here a notification) is
    // still a failure. (A request before `initialize` gets an error reply and the server keeps
    // waiting, so a client that then leaves is the clean case above.)
    let mut child = tokio::process::Command::new(EXE)
        .arg("serve")
        .env_clear()
        .envs(&world.env)
        .current_dir(world.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use tokio::io::AsyncWriteExt as _;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
            .await
            .unwrap();
    }
    let out = child.wait_with_output().await.unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not an initialize request"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn demo_serve_without_a_client_exits_with_a_hint() {
    let world = World::new();
    let out = world.run(&["demo", "--serve"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(stderr.contains("no MCP client on stdin"), "{stderr}");
    assert!(stderr.contains("demo --serve"), "{stderr}");
    assert!(!stderr.contains("closed"), "{stderr}");
}

#[tokio::test]
async fn download_dir_is_the_reference_name_of_mailgate_download_dir() {
    let world = World::new()
        .config(ONE_MAILBOX, 0o600)
        .with("PLUGIN_ALLOW_WRITES", "true");
    let here = world.path().join("dl");
    mkdir_mode(&here, 0o700);
    let elsewhere = world.path().join("other");
    mkdir_mode(&elsewhere, 0o700);
    let here = here.display().to_string();
    let explained = world
        .run_with(&[("DOWNLOAD_DIR", &here)], &["policy", "explain"])
        .await;
    assert!(explained.status.success());
    assert!(
        String::from_utf8_lossy(&explained.stdout).contains(&format!("download root: {here}")),
        "{}",
        String::from_utf8_lossy(&explained.stdout)
    );
    let same = world
        .run_with(
            &[("DOWNLOAD_DIR", &here), ("MAILGATE_DOWNLOAD_DIR", &here)],
            &["policy", "check"],
        )
        .await;
    assert_eq!(same.status.code(), Some(0));
    let conflict = world
        .run_with(
            &[
                ("DOWNLOAD_DIR", &here),
                ("MAILGATE_DOWNLOAD_DIR", &elsewhere.display().to_string()),
            ],
            &["policy", "check"],
        )
        .await;
    assert_eq!(conflict.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&conflict.stderr);
    assert!(
        stderr.contains("DOWNLOAD_DIR and MAILGATE_DOWNLOAD_DIR are both set and differ"),
        "{stderr}"
    );
}

#[tokio::test]
async fn log_level_sets_the_stderr_level_when_mailgate_log_is_unset() {
    let world = World::new()
        .config(ONE_MAILBOX, 0o600)
        // Far from every known name: a warning, not a refusal.
        .with("OUTLOOK_SOMETHING_ELSE_ENTIRELY", "1");
    let stderr = |out: &std::process::Output| String::from_utf8_lossy(&out.stderr).into_owned();
    let default = world.run(&["policy", "check"]).await;
    assert!(default.status.success(), "{}", stderr(&default));
    assert!(
        stderr(&default).contains("OUTLOOK_SOMETHING_ELSE_ENTIRELY"),
        "warned at the default level: {}",
        stderr(&default)
    );
    let quiet = world
        .run_with(&[("LOG_LEVEL", "error")], &["policy", "check"])
        .await;
    assert!(quiet.status.success());
    assert_eq!(stderr(&quiet), "", "LOG_LEVEL=error keeps warnings off");
    let ours_wins = world
        .run_with(
            &[("LOG_LEVEL", "error"), ("MAILGATE_LOG", "warn")],
            &["policy", "check"],
        )
        .await;
    assert!(stderr(&ours_wins).contains("OUTLOOK_SOMETHING_ELSE_ENTIRELY"));
    let invalid = world
        .run_with(&[("LOG_LEVEL", "verbose")], &["policy", "check"])
        .await;
    assert_eq!(invalid.status.code(), Some(0), "a bad level only warns");
    assert!(
        stderr(&invalid).contains("LOG_LEVEL is not one of"),
        "{}",
        stderr(&invalid)
    );
}

#[tokio::test]
async fn a_misspelled_variable_is_refused_with_the_closest_name() {
    let world = World::new().config(ONE_MAILBOX, 0o600);
    for (typo, meant) in [
        ("PLUGIN_ALOW_WRITES", "PLUGIN_ALLOW_WRITES"),
        (
            "OUTLOOK_ALLOWED_RECIPIENT_DOMAIN",
            "OUTLOOK_ALLOWED_RECIPIENT_DOMAINS",
        ),
        ("MAILGATE_DOWNLOADDIR", "MAILGATE_DOWNLOAD_DIR"),
    ] {
        let out = world.run_with(&[(typo, "false")], &["serve"]).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{typo}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "{typo} is not a variable mailgate knows; did you mean {meant}?"
            )),
            "{stderr}"
        );
    }
}

#[tokio::test]
async fn a_config_error_names_the_file_it_tried() {
    let world = World::new();
    let out = world
        .run(&["--config", "missing/plugin.json", "policy", "check"])
        .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr.starts_with("mailgate: missing/plugin.json: the config file is not usable"),
        "{stderr}"
    );
    // A relative path stays relative in the message, also for an error inside the file.
    write_mode(
        &world.path().join("bad.json"),
        br#"{"mailboxes": []}"#,
        0o600,
    );
    let out = world
        .run(&["--config", "bad.json", "policy", "check"])
        .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("mailgate: bad.json: the config file is invalid: mailboxes"),
        "{stderr}"
    );
    // The default locations, mailgate's and the reference's, are both named when neither
    // exists; the reference's is used when only it exists.
    let out = world.run(&["policy", "check"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(".config/mailgate/plugin.json"), "{stderr}");
    assert!(
        stderr.contains(".config/mcp-outlook/plugin.json"),
        "{stderr}"
    );
    let reference = world.path().join(".config/mcp-outlook");
    std::fs::create_dir_all(&reference).unwrap();
    write_mode(
        &reference.join("plugin.json"),
        ONE_MAILBOX.as_bytes(),
        0o600,
    );
    let out = world.run(&["tools"]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(Path::new(&reference.join("plugin.json")).exists());
}

/// Where mailgate is deliberately stricter than the reference plugin, the startup message names
/// the rule that was broken (not only the variable or file).
#[tokio::test]
async fn stricter_refusals_name_their_rule() {
    let world = World::new().config(ONE_MAILBOX, 0o600);
    let refusal = |out: std::process::Output| {
        assert_eq!(out.status.code(), Some(1));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };

    write_mode(
        &world.path().join("dup.json"),
        br#"{"mailboxes": [{"alias": "test", "address": "test@example.com"}], "maxBodyChars": 5, "maxBodyChars": 6}"#,
        0o600,
    );
    let text = refusal(
        world
            .run(&["--config", "dup.json", "policy", "check"])
            .await,
    );
    assert!(
        text.contains("repeats an object key") && text.contains("only once"),
        "{text}"
    );

    let dotenv = world.path().join(".env");
    write_mode(&dotenv, b"A=1\n", 0o664);
    let text = refusal(world.run(&["policy", "check"]).await);
    assert!(
        text.contains(".env") && text.contains("chmod go-w"),
        "{text}"
    );
    write_mode(&dotenv, b"A=1\nB C D\n", 0o600);
    let text = refusal(world.run(&["policy", "check"]).await);
    assert!(
        text.contains("entry 2 could not be parsed") && text.contains("KEY=VALUE"),
        "{text}"
    );
    std::fs::remove_file(&dotenv).unwrap();

    let text = refusal(
        world
            .run_with(
                &[(
                    "OUTLOOK_ALLOWED_SENDERS",
                    "test@example.com,<a@example.com>",
                )],
                &["policy", "check"],
            )
            .await,
    );
    assert!(
        text.contains("OUTLOOK_ALLOWED_SENDERS contains invalid entries (count: 1")
            && text.contains("one email address"),
        "{text}"
    );
    assert!(!text.contains("<a@example.com>"), "{text}");
    let text = refusal(
        world
            .run_with(
                &[("OUTLOOK_ALLOWED_RECIPIENT_DOMAINS", "https://example.com")],
                &["policy", "check"],
            )
            .await,
    );
    assert!(text.contains("must be a domain name"), "{text}");
}
