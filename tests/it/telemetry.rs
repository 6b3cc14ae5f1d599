//! Secrets and content never reach the logs or the run journal.

use serde_json::json;

use crate::util::World;

const SECRETS: [&str; 5] = [
    "s3cr3t-query-TOKEN",
    "hunter2-zip-password",
    "confidential-subject-words",
    "ana.lima@example.com",
    "Bearer eyJhbGciOi",
];

#[tokio::test]
async fn secret_looking_values_never_reach_journal_or_stderr() {
    let world = World::new()
        .with("MAILGATE_JOURNAL", "true")
        .with("MAILGATE_LOG", "debug");
    let stderr_path = world.path().join("stderr.log");
    let c = world.shared_demo_client_with_stderr(&stderr_path).await;
    let calls = [
        (
            "search_mailbox",
            json!({"mailbox": "finance", "criteria": {"query": SECRETS[0], "subject": SECRETS[2]}}),
        ),
        (
            "search_mailboxes",
            json!({"criteria": {"query": SECRETS[0], "sender": SECRETS[3]}}),
        ),
        (
            "search_mailboxes_batch",
            json!({"queries": [{"label": SECRETS[4], "criteria": {"query": SECRETS[0]}}]}),
        ),
        (
            "list_messages",
            json!({"mailbox": "personal", "criteria": {"sender": SECRETS[3]}}),
        ),
        (
            "get_message",
            json!({"mailbox": "finance", "messageId": SECRETS[0]}),
        ),
        ("list_folders", json!({"mailbox": "finance"})),
        (
            "get_folder_stats",
            json!({"mailbox": "finance", "folderId": SECRETS[2]}),
        ),
        (
            "list_attachments",
            json!({"mailbox": "finance", "messageId": SECRETS[4]}),
        ),
        (
            "get_attachment_content",
            json!({"mailbox": "finance", "messageId": SECRETS[0], "attachmentId": "att-0", "password": SECRETS[1]}),
        ),
        (
            "inspect_attachment_evidence",
            json!({"mailbox": "finance", "messageId": SECRETS[0], "attachmentId": "att-0", "clients": [SECRETS[2]]}),
        ),
        (
            "investigate_documents",
            json!({"mailbox": "finance", "criteria": {"insurers": [SECRETS[2]], "keywords": [SECRETS[0]]}}),
        ),
        ("list_allowed_mailboxes", json!({"mailbox": SECRETS[0]})),
        (
            "search_mailbox",
            json!({"mailbox": "finance", "criteria": {"query": "invoice"}}),
        ),
    ];
    for (tool, args) in calls {
        let _ = c.call(tool, args).await;
    }
    // The server has exited once this returns, so its stderr and journal are complete.
    c.close_and_reap().await;
    let journal = std::fs::read_to_string(world.state().join("journal.jsonl")).unwrap();
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    // The capture worked: the server's debug log is in it (a failed or empty capture would
    // make every "not in stderr" check below pass vacuously).
    assert!(
        stderr.contains("serving MCP over stdio"),
        "stderr was not captured: {stderr:?}"
    );
    assert!(
        journal.lines().count() >= 12,
        "every call is journaled: {journal}"
    );
    for line in journal.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["event"], "tool_call");
    }
    for secret in SECRETS {
        assert!(!journal.contains(secret), "journal leaked {secret}");
        assert!(!stderr.contains(secret), "stderr leaked {secret}");
    }
    for content in ["invoice", "Invoice", "@example"] {
        assert!(
            !journal.contains(content),
            "journal holds content {content:?}"
        );
    }
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(world.state().join("journal.jsonl"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "journal must be private");
}
