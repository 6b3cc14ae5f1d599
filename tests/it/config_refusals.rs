//! Startup refusals: each bad configuration ends the process non-zero with one stderr line, and
//! nothing is served (stdout stays empty).

use crate::util::{ONE_MAILBOX, World, give_away, running_as_root, write_mode};

async fn refused(world: World, needle: &str) {
    for args in [&["policy", "check"][..], &["serve"][..]] {
        let out = world.run(args).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "{args:?} should fail; stderr: {stderr}"
        );
        assert!(
            out.stdout.is_empty(),
            "nothing may be served: {:?}",
            out.stdout
        );
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "one line expected: {stderr}");
        assert!(
            lines[0].to_lowercase().contains(&needle.to_lowercase()),
            "{:?} should mention {needle:?}",
            lines[0]
        );
    }
}

#[tokio::test]
async fn a_valid_config_passes_the_check() {
    let out = World::new()
        .config(ONE_MAILBOX, 0o600)
        .run(&["policy", "check"])
        .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn symlinked_config_is_refused() {
    let world = World::new().config(ONE_MAILBOX, 0o600);
    let link = world.path().join("link.json");
    std::os::unix::fs::symlink(world.path().join("plugin.json"), &link).unwrap();
    let world = world.with("OUTLOOK_PLUGIN_CONFIG", &link.display().to_string());
    refused(world, "regular file").await;
}

#[tokio::test]
async fn group_readable_config_is_refused() {
    refused(World::new().config(ONE_MAILBOX, 0o644), "permission").await;
}

#[tokio::test]
async fn unknown_key_is_refused() {
    let json = r#"{ "mailboxes": [ { "alias": "test", "address": "test@example.com" } ], "clientSecret": "x" }"#;
    refused(World::new().config(json, 0o600), "clientSecret").await;
}

#[tokio::test]
async fn allow_send_key_is_refused() {
    let json = r#"{ "mailboxes": [ { "alias": "test", "address": "test@example.com" } ], "allowSend": true }"#;
    refused(World::new().config(json, 0o600), "allowSend").await;
}

#[tokio::test]
async fn duplicate_alias_is_refused() {
    let json = r#"{ "mailboxes": [ { "alias": "test", "address": "a@example.com" }, { "alias": "test", "address": "b@example.com" } ] }"#;
    refused(World::new().config(json, 0o600), "duplicate").await;
}

#[tokio::test]
async fn bad_boolean_spelling_is_refused_naming_the_variable() {
    for var in [
        "PLUGIN_ALLOW_WRITES",
        "PLUGIN_ALLOW_LOCAL_HANDOFFS",
        "PLUGIN_ALLOW_SEND",
    ] {
        for bad in ["yesplease", "2", "truthy", "enabled"] {
            let world = World::new().config(ONE_MAILBOX, 0o600).with(var, bad);
            refused(world, var).await;
        }
    }
}

#[tokio::test]
async fn send_without_send_from_is_refused() {
    let world = World::new()
        .config(ONE_MAILBOX, 0o600)
        .with("PLUGIN_ALLOW_SEND", "true")
        .with("OUTLOOK_ALLOWED_SENDERS", "test@example.com");
    refused(world, "OUTLOOK_SEND_FROM").await;
}

#[tokio::test]
async fn send_from_outside_the_allowlist_is_refused() {
    let world = World::new()
        .config(ONE_MAILBOX, 0o600)
        .with("PLUGIN_ALLOW_SEND", "true")
        .with("OUTLOOK_SEND_FROM", "other@example.com")
        .with("OUTLOOK_ALLOWED_SENDERS", "other@example.com");
    refused(world, "OUTLOOK_SEND_FROM").await;
}

#[tokio::test]
async fn empty_allowed_senders_is_refused() {
    for senders in [None, Some(" "), Some(",")] {
        let mut world = World::new()
            .config(ONE_MAILBOX, 0o600)
            .with("PLUGIN_ALLOW_SEND", "true")
            .with("OUTLOOK_SEND_FROM", "test@example.com");
        if let Some(s) = senders {
            world = world.with("OUTLOOK_ALLOWED_SENDERS", s);
        }
        refused(world, "OUTLOOK_ALLOWED_SENDERS").await;
    }
}

#[tokio::test]
async fn a_dotenv_file_never_overrides_the_environment() {
    let world = World::new()
        .config(ONE_MAILBOX, 0o600)
        .with("PLUGIN_ALLOW_WRITES", "false");
    std::fs::write(
        world.path().join(".env"),
        "PLUGIN_ALLOW_WRITES=true\nPLUGIN_ALLOW_LOCAL_HANDOFFS=true\n",
    )
    .unwrap();
    let out = world.run(&["tools"]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tools = String::from_utf8_lossy(&out.stdout);
    assert!(
        !tools.contains("move_messages"),
        "explicit false must win over .env"
    );
    assert!(
        tools.contains("create_attachment_handoff"),
        ".env fills unset variables"
    );
    assert_eq!(tools.lines().count(), 14);
}

// Finding 5 of issue 8: policy-setting files are trusted by owner, not only by mode.

#[tokio::test]
async fn a_dotenv_owned_by_another_user_is_refused() {
    if !running_as_root("a_dotenv_owned_by_another_user_is_refused") {
        return;
    }
    // 0644 and not writable by group or others: only its owner can change it, and its owner is
    // someone else sharing the working directory.
    let world = World::new().config(ONE_MAILBOX, 0o600);
    let dotenv = world.path().join(".env");
    write_mode(
        &dotenv,
        b"PLUGIN_ALLOW_WRITES=true\nPLUGIN_ALLOW_LOCAL_HANDOFFS=true\n",
        0o644,
    );
    give_away(&dotenv);
    refused(
        world,
        ".env in the working directory is not usable: it must be owned by the user mailgate runs as",
    )
    .await;
}

#[tokio::test]
async fn a_config_owned_by_another_user_is_refused_even_for_root() {
    if !running_as_root("a_config_owned_by_another_user_is_refused_even_for_root") {
        return;
    }
    let world = World::new().config(ONE_MAILBOX, 0o600);
    give_away(&world.path().join("plugin.json"));
    refused(
        world,
        "the config file is not usable: it must be owned by the user mailgate runs as",
    )
    .await;
}

#[tokio::test]
async fn a_hard_linked_config_is_refused() {
    let world = World::new().config(ONE_MAILBOX, 0o600);
    std::fs::hard_link(
        world.path().join("plugin.json"),
        world.path().join("elsewhere.json"),
    )
    .unwrap();
    refused(world, "it must have exactly one hard link").await;
}

#[tokio::test]
async fn a_search_memory_file_gets_the_config_file_rules() {
    // Hard-linked: refused wherever it runs.
    let world = World::new().config(ONE_MAILBOX, 0o600);
    let memory = world.path().join("memory.yaml");
    write_mode(&memory, b"apelidos: {}\n", 0o600);
    std::fs::hard_link(&memory, world.path().join("other-name.yaml")).unwrap();
    let world = world.with("PLUGIN_SEARCH_MEMORY_PATH", memory.to_str().unwrap());
    refused(
        world,
        "search memory file (PLUGIN_SEARCH_MEMORY_PATH or searchMemoryPath) is refused: it must \
         have exactly one hard link",
    )
    .await;

    if !running_as_root("a_search_memory_file_gets_the_config_file_rules (owner part)") {
        return;
    }
    let world = World::new().config(ONE_MAILBOX, 0o600);
    let memory = world.path().join("memory.yaml");
    write_mode(&memory, b"apelidos: {}\n", 0o600);
    give_away(&memory);
    let world = world.with("PLUGIN_SEARCH_MEMORY_PATH", memory.to_str().unwrap());
    refused(
        world,
        "search memory file (PLUGIN_SEARCH_MEMORY_PATH or searchMemoryPath) is refused: it must be owned",
    )
    .await;
}
