//! The CLI: `call` runs the server's validation and handlers; `demo` on a terminal runs the tour;
//! `policy explain` reports without contacting any backend.

use crate::util::{EXE, World, demo_config};

#[tokio::test]
async fn call_uses_the_same_validation_and_handlers() {
    let world = World::new();
    let config = demo_config(&world).await;
    let ok = world
        .run(&[
            "--config",
            &config,
            "call",
            "search_mailbox",
            r#"{"mailbox":"finance","criteria":{"query":"quarterly reconciliation"}}"#,
        ])
        .await;
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert_eq!(v["status"], "FOUND");
    assert_eq!(v["dataTrust"], "untrusted");

    let bad = world
        .run(&[
            "--config",
            &config,
            "call",
            "search_mailbox",
            r#"{"mailbox":"finance","bogus":1}"#,
        ])
        .await;
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stdout).contains("INVALID_ARGUMENT"));

    let unknown = world
        .run(&[
            "--config",
            &config,
            "call",
            "list_folders",
            r#"{"mailbox":"nobody"}"#,
        ])
        .await;
    assert_eq!(unknown.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&unknown.stdout).contains("UNKNOWN_MAILBOX"));

    let closed = world
        .run(&[
            "--config",
            &config,
            "call",
            "mark_messages",
            r#"{"mailbox":"finance","messageIds":["x"],"read":true}"#,
        ])
        .await;
    assert_eq!(
        closed.status.code(),
        Some(2),
        "a closed gate's tool is not callable"
    );
}

#[tokio::test]
async fn demo_on_a_terminal_runs_the_tour() {
    let world = World::new();
    let cmd = format!("{EXE} demo");
    let out = tokio::process::Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env_clear()
        .envs(&world.env)
        .current_dir(world.path())
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for needle in [
        "claude mcp add",
        "→ status FOUND",
        "→ status NOT_FOUND",
        "move_messages is not in this catalog",
        "untrusted",
    ] {
        assert!(text.contains(needle), "tour lacks {needle:?}:\n{text}");
    }
}

#[tokio::test]
async fn policy_explain_reports_the_catalog_and_permissions() {
    let world = World::new().with("PLUGIN_ALLOW_WRITES", "true");
    let config = demo_config(&world).await;
    let out = world.run(&["--config", &config, "policy", "explain"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("catalog: read+writes (17 tools)"), "{text}");
    assert!(text.contains("archive [maildir] access=read"), "{text}");
    assert!(text.contains("Mail.ReadWrite"), "{text}");
    assert!(!text.contains('@'), "no address in the report: {text}");
}

#[tokio::test]
async fn every_command_has_help() {
    let world = World::new();
    for args in [
        &["--help"][..],
        &["serve", "--help"],
        &["tools", "--help"],
        &["call", "--help"],
        &["policy", "--help"],
        &["policy", "explain", "--help"],
        &["policy", "check", "--help"],
        &["policy", "export", "--help"],
        &["demo", "--help"],
        &["handoff", "--help"],
        &["handoff", "list", "--help"],
        &["handoff", "verify", "--help"],
        &["handoff", "path", "--help"],
        &["handoff", "remove", "--help"],
        &["handoff", "prune", "--help"],
    ] {
        let out = world.run(args).await;
        assert!(out.status.success(), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Usage"),
            "{args:?}"
        );
    }
}
