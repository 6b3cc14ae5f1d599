//! Invalid inputs for every tool: unknown fields and exceeded bounds are protocol errors
//! (invalid_params) before any handler runs; an unknown alias is an in-band UNKNOWN_MAILBOX.
//! The server keeps serving after each.

use serde_json::{Value, json};

use crate::util::World;

/// A valid argument object for each of the twenty tools.
fn valid_args(tool: &str) -> Value {
    let m = "finance";
    match tool {
        "list_allowed_mailboxes" => json!({}),
        "search_mailbox" | "list_messages" => json!({"mailbox": m, "criteria": {"query": "x"}}),
        "search_mailboxes" => json!({"mailboxes": [m], "criteria": {}}),
        "search_mailboxes_batch" => {
            json!({"queries": [{"label": "a", "mailboxes": [m], "criteria": {}}]})
        }
        "get_message" | "list_attachments" => json!({"mailbox": m, "messageId": "abc"}),
        "list_folders" => json!({"mailbox": m}),
        "get_folder_stats" => json!({"mailbox": m, "folderId": "inbox"}),
        "get_attachment_content" => {
            json!({"mailbox": m, "messageId": "abc", "attachmentId": "att-0"})
        }
        "inspect_attachment_evidence" => {
            json!({"mailbox": m, "messageId": "abc", "attachmentId": "att-0", "keywords": ["x"]})
        }
        "investigate_documents" => json!({"mailbox": m, "criteria": {"keywords": ["x"]}}),
        "create_attachment_handoff" => {
            json!({"mailbox": m, "messageId": "abc", "attachmentId": "att-0", "idempotencyKey": "3f1c2a9e-8b7d-4c6e-9a1b-2c3d4e5f6a7b"})
        }
        "get_attachment_handoff" => json!({"handoffId": format!("oh_{}", "A".repeat(43))}),
        "move_messages" | "copy_messages" => {
            json!({"mailbox": m, "messageIds": ["abc"], "destinationFolderId": "archive"})
        }
        "mark_messages" => json!({"mailbox": m, "messageIds": ["abc"], "read": true}),
        "download_attachments" => json!({"mailbox": m, "messageId": "abc"}),
        "create_draft" => {
            json!({"mailbox": m, "to": ["ana@example.com"], "subject": "s", "body": "b"})
        }
        "send_email" => json!({"to": ["ana@example.com"], "subject": "s", "body": "b"}),
        other => panic!("no fixture for {other}"),
    }
}

/// One argument past its bound, per tool.
fn over_bound(tool: &str) -> Value {
    let mut v = valid_args(tool);
    let long = "x".repeat(513);
    match tool {
        "list_allowed_mailboxes" => v["unexpected"] = json!(1),
        "search_mailbox" | "list_messages" => v["criteria"]["maxResults"] = json!(101),
        "search_mailboxes" => v["mailboxes"] = json!(vec!["finance"; 33]),
        "search_mailboxes_batch" => {
            v["queries"] = json!(
                (0..26)
                    .map(|i| json!({"label": i.to_string()}))
                    .collect::<Vec<_>>()
            )
        }
        "list_folders" => v["mailbox"] = json!("x".repeat(65)),
        "get_folder_stats" => v["folderId"] = json!(long),
        "create_draft" | "send_email" => v["subject"] = json!("s".repeat(501)),
        "get_attachment_handoff" => v["handoffId"] = json!("oh_short"),
        "create_attachment_handoff" => v["idempotencyKey"] = json!("not-a-uuid"),
        "investigate_documents" => v["criteria"]["maxMessagesPerFolder"] = json!(201),
        "inspect_attachment_evidence" => v["keywords"] = json!(vec!["k"; 26]),
        "move_messages" | "copy_messages" | "mark_messages" => {
            v["messageIds"] = json!(vec!["a"; 101])
        }
        _ => v["messageId"] = json!(long),
    }
    v
}

#[tokio::test]
async fn every_tool_rejects_bad_input_on_the_right_channel() {
    let world = World::new()
        .with("PLUGIN_ALLOW_WRITES", "true")
        .with("PLUGIN_ALLOW_LOCAL_HANDOFFS", "true")
        .with("PLUGIN_ALLOW_SEND", "true")
        .with("OUTLOOK_SEND_FROM", "finance@example.com")
        .with("OUTLOOK_ALLOWED_SENDERS", "finance@example.com");
    let client = world.demo_client().await;
    let names = client.tool_names().await;
    assert_eq!(names.len(), 20);
    for tool in &names {
        let mut unknown = valid_args(tool);
        unknown["surpriseField"] = json!(true);
        assert!(
            client.call(tool, unknown).await.is_err(),
            "{tool}: unknown field must be invalid_params"
        );
        assert!(
            client.call(tool, over_bound(tool)).await.is_err(),
            "{tool}: bound must be invalid_params"
        );
        let args = valid_args(tool);
        if args.get("mailbox").is_some() {
            let mut bad = args.clone();
            bad["mailbox"] = json!("nosuchbox");
            assert_eq!(
                client.tool_error(tool, bad).await,
                "UNKNOWN_MAILBOX",
                "{tool}"
            );
        }
    }
    // Still alive and answering.
    assert_eq!(
        client.ok("list_allowed_mailboxes", json!({})).await["mailboxes"][0],
        "personal"
    );
    client.close().await;
}

#[tokio::test]
async fn send_email_has_no_mailbox_argument() {
    let world = World::new()
        .with("PLUGIN_ALLOW_SEND", "true")
        .with("OUTLOOK_SEND_FROM", "finance@example.com")
        .with("OUTLOOK_ALLOWED_SENDERS", "finance@example.com");
    let client = world.demo_client().await;
    let mut args = valid_args("send_email");
    args["mailbox"] = json!("personal");
    assert!(client.call("send_email", args).await.is_err());
    client.close().await;
}

#[tokio::test]
async fn a_read_narrowed_alias_is_refused_by_write_tools() {
    let world = World::new().with("PLUGIN_ALLOW_WRITES", "true");
    let client = world.demo_client().await;
    let mut args = valid_args("mark_messages");
    args["mailbox"] = json!("archive");
    assert_eq!(
        client.tool_error("mark_messages", args).await,
        "POLICY_DENIED"
    );
    // ... but it is still listed and readable.
    let folders = client
        .ok("list_folders", json!({"mailbox": "archive"}))
        .await;
    assert!(!folders["folders"].as_array().unwrap().is_empty());
    client.close().await;
}
