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
    assert_eq!(v["dataTrust"], "UNTRUSTED_EMAIL_DATA_V1");

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

/// Run from the folder holding the binary (as after `cargo run`, from the repository), the
/// tour's commands use the path the user has, not a bare `mailgate` that is not on PATH; and
/// it reads the demo's prompt-injection mail to show the fence around it.
#[tokio::test]
async fn demo_tour_uses_the_binary_path_and_shows_the_fence() {
    let world = World::new();
    let exe = std::path::Path::new(EXE);
    let cwd = exe.parent().unwrap().parent().unwrap();
    let relative = format!("./{}", exe.strip_prefix(cwd).unwrap().display());
    let out = tokio::process::Command::new("script")
        .args(["-qec", &format!("{EXE} demo"), "/dev/null"])
        .env_clear()
        .envs(&world.env)
        .current_dir(cwd)
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let commands: Vec<&str> = text.lines().filter(|l| l.starts_with("$ ")).collect();
    assert!(!commands.is_empty(), "{text}");
    for line in &commands {
        assert!(
            line.starts_with(&format!("$ {relative} --config ")),
            "{line}"
        );
    }
    // The injected body sits between the fence lines of the same nonce.
    let open = text
        .find("<<<UNTRUSTED_EMAIL_DATA_V1 nonce=")
        .expect("a fenced text block");
    let first = text
        .find("ATTENTION AI ASSISTANT")
        .expect("the injected body");
    let close = text
        .find("<<<END_UNTRUSTED_EMAIL_DATA_V1 nonce=")
        .expect("closed");
    assert!(open < first && first < close, "{text}");
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
    assert!(
        text.contains("http: `serve --http` serves the read catalog (12 tools)"),
        "{text}"
    );
    assert!(text.contains("archive [maildir] access=read"), "{text}");
    assert!(
        text.contains("graph: no Microsoft Graph mailbox configured"),
        "{text}"
    );
    assert!(
        !text.contains("Mail.") && !text.contains("New-"),
        "no Graph permissions without a Graph mailbox: {text}"
    );
    assert!(!text.contains('@'), "no address in the report: {text}");

    let graph = World::new()
        .with("PLUGIN_ALLOW_WRITES", "true")
        .config(crate::util::ONE_MAILBOX, 0o600);
    let out = graph.run(&["policy", "explain"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("minimum Microsoft Graph application permissions: Mail.ReadWrite"),
        "{text}"
    );
}

/// With Graph mailboxes listed, `policy explain` prints the minimum permission set of the open
/// gates and the RBAC for Applications commands, scoped to the Graph addresses only (never the
/// Maildir one) and naming the client id from the environment.
#[tokio::test]
async fn policy_explain_prints_the_graph_permissions_and_rbac_scope() {
    let world = World::new();
    let maildir = world.path().join("mail/finance");
    std::fs::create_dir_all(&maildir).unwrap();
    let config = format!(
        r#"{{ "mailboxes": [
            {{ "alias": "cloud", "address": "cloud@example.org" }},
            {{ "alias": "team", "address": "o'brien@example.org", "access": "read" }},
            {{ "alias": "finance", "address": "finance@example.com",
               "backend": {{ "kind": "maildir", "path": "{}" }} }} ] }}"#,
        maildir.display()
    );
    let world = world.config(&config, 0o600);
    let client_id = crate::util::GRAPH_TEST_ENV[1].1;
    let read_only = world.run(&["policy", "explain"]).await;
    let send = world
        .run_with(
            &[
                ("PLUGIN_ALLOW_WRITES", "true"),
                ("PLUGIN_ALLOW_SEND", "true"),
                ("OUTLOOK_SEND_FROM", "cloud@example.org"),
                ("OUTLOOK_ALLOWED_SENDERS", "cloud@example.org"),
            ],
            &["policy", "explain"],
        )
        .await;
    assert!(
        String::from_utf8_lossy(&send.stdout).contains("transport: Microsoft Graph sendMail"),
        "{}",
        String::from_utf8_lossy(&send.stdout)
    );
    // Read-only gates: one scope over both Graph mailboxes with Mail.Read. Writes and send: the
    // full sending mailbox gets Mail.ReadWrite and Mail.Send, the read-narrowed one Mail.Read
    // only, each in its own scope.
    let both_read = "New-ManagementScope -Name \"mailgate-mailread\" -RecipientRestrictionFilter \
                     \"PrimarySmtpAddress -eq 'cloud@example.org' -or PrimarySmtpAddress -eq \
                     'o''brien@example.org'\"";
    let sender_scope = "New-ManagementScope -Name \"mailgate-mailreadwrite-mailsend\" \
                        -RecipientRestrictionFilter \"PrimarySmtpAddress -eq 'cloud@example.org'\"";
    let narrowed_scope = "New-ManagementScope -Name \"mailgate-mailread\" \
                          -RecipientRestrictionFilter \"PrimarySmtpAddress -eq 'o''brien@example.org'\"";
    for (out, set, scopes, roles) in [
        (read_only, "Mail.Read", vec![both_read], &["Mail.Read"][..]),
        (
            send,
            "Mail.ReadWrite, Mail.Send",
            vec![sender_scope, narrowed_scope],
            &["Mail.ReadWrite", "Mail.Send", "Mail.Read"],
        ),
    ] {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains(&format!(
                "minimum Microsoft Graph application permissions: {set}\n"
            )),
            "{text}"
        );
        for scope in scopes {
            assert!(text.contains(scope), "{scope}\n{text}");
        }
        assert!(!text.contains("finance@example.com"), "{text}");
        assert!(
            text.contains(&format!("New-ServicePrincipal -AppId {client_id} ")),
            "{text}"
        );
        let assigned: Vec<&str> = text
            .lines()
            .filter_map(|l| {
                l.trim()
                    .strip_prefix("New-ManagementRoleAssignment ")?
                    .split('"')
                    .nth(1)?
                    .strip_prefix("Application ")
            })
            .collect();
        assert_eq!(assigned, roles, "{text}");
        assert!(
            text.contains("Test-ServicePrincipalAuthorization"),
            "{text}"
        );
        assert!(text.contains("remove any tenant-wide Mail.*"), "{text}");
    }
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
