//! Invalid inputs for every tool of the 20-tool catalog, over stdio: a wrong type, an exceeded
//! bound, an unknown field and a missing required field are each an `INVALID_ARGUMENT` tool
//! result (`isError: true`) naming the field as the tool's schema spells it, never the value; an
//! unknown alias is an in-band UNKNOWN_MAILBOX; only a tool outside the catalog is a protocol
//! error, and a mailgate tool behind a closed gate says which variable opens it. The server
//! keeps serving after each.

use rmcp::model::CallToolResult;
use serde_json::{Value, json};

use crate::util::{World, shared_demo_config, text_of};

/// A value that must never come back in an error message.
const CANARY: &str = "CANARY-5e1d";

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

/// Sets `path` (dot-separated keys, `[i]` for an array item) in `v` to `value`.
fn set(mut v: Value, path: &str, value: Value) -> Value {
    let mut cur = &mut v;
    for part in path.split('.') {
        cur = match part.split_once('[') {
            Some((key, index)) => {
                let i: usize = index.trim_end_matches(']').parse().unwrap();
                &mut cur[key][i]
            }
            None => &mut cur[part],
        };
    }
    *cur = value;
    v
}

/// Per tool: (field path, a value of the wrong JSON type) and the required field to leave out
/// (`None` where the tool has no required field).
fn wrong_type_and_required(tool: &str) -> Option<((&'static str, Value), Option<&'static str>)> {
    let c = json!(CANARY);
    Some(match tool {
        "list_allowed_mailboxes" => return None,
        "search_mailbox" | "list_messages" => (("criteria.maxResults", c), Some("mailbox")),
        "search_mailboxes" => (("mailboxes", c), None),
        "search_mailboxes_batch" => (("queries[0].label", json!(7_654_321)), Some("queries")),
        "get_message" => (("offset", c), Some("messageId")),
        "list_folders" => (("mailbox", json!(7_654_321)), Some("mailbox")),
        "get_folder_stats" => (("folderId", json!(true)), Some("folderId")),
        "list_attachments" => (("limit", c), Some("messageId")),
        "get_attachment_content" => (("mode", json!(7_654_321)), Some("attachmentId")),
        "inspect_attachment_evidence" => (("keywords", c), Some("attachmentId")),
        "investigate_documents" => (("criteria.keywords", c), Some("criteria")),
        "create_attachment_handoff" => {
            (("idempotencyKey", json!(7_654_321)), Some("idempotencyKey"))
        }
        "get_attachment_handoff" => (("handoffId", json!([CANARY])), Some("handoffId")),
        "move_messages" | "copy_messages" => (("messageIds", c), Some("destinationFolderId")),
        "mark_messages" => (("read", c), Some("read")),
        "download_attachments" => (("attachmentIds", c), Some("messageId")),
        "create_draft" => (("to", c), Some("body")),
        "send_email" => (("dryRun", c), Some("body")),
        other => panic!("no fixture for {other}"),
    })
}

/// The field an [`over_bound`] case breaks, as the message must name it.
fn bound_field(tool: &str) -> &'static str {
    match tool {
        "search_mailbox" | "list_messages" => "criteria.maxResults",
        "search_mailboxes" => "mailboxes",
        "search_mailboxes_batch" => "queries",
        "list_folders" => "mailbox",
        "get_folder_stats" => "folderId",
        "create_draft" | "send_email" => "subject",
        "get_attachment_handoff" => "handoffId",
        "create_attachment_handoff" => "idempotencyKey",
        "investigate_documents" => "criteria.maxMessagesPerFolder",
        "inspect_attachment_evidence" => "keywords",
        "move_messages" | "copy_messages" | "mark_messages" => "messageIds",
        _ => "messageId",
    }
}

/// Asserts an `INVALID_ARGUMENT` result whose text starts with `field` (or names it as the
/// missing one) and quotes no value; returns the text.
fn invalid_argument(
    tool: &str,
    case: &str,
    result: &CallToolResult,
    field: Option<&str>,
) -> String {
    assert_eq!(result.is_error, Some(true), "{tool} {case}: {result:?}");
    let meta = result.meta.as_ref().expect("error meta");
    assert_eq!(
        meta.0["mailgate/errorCode"], "INVALID_ARGUMENT",
        "{tool} {case}"
    );
    let text = text_of(result);
    assert!(
        text.starts_with("INVALID_ARGUMENT: "),
        "{tool} {case}: {text}"
    );
    if let Some(field) = field {
        let named = text.contains(&format!(" {field}: ")) || text.contains(&format!("`{field}`"));
        assert!(
            named,
            "{tool} {case}: the field {field} is not named: {text}"
        );
    }
    assert!(
        !text.contains("CANARY") && !text.contains("7654321") && !text.contains("surprise"),
        "{tool} {case}: a value is echoed: {text}"
    );
    // No Rust spelling of a field leaks (snake_case names, Rust type names).
    assert!(
        !text.contains("max_") && !text.contains("u32"),
        "{tool} {case}: {text}"
    );
    text
}

#[tokio::test]
async fn every_tool_reports_invalid_arguments_as_tool_results_naming_the_field() {
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
        unknown["surpriseField"] = json!(CANARY);
        let result = client.call(tool, unknown).await.unwrap();
        let text = invalid_argument(tool, "unknown field", &result, None);
        assert!(text.contains("unknown field"), "{tool}: {text}");

        let result = client.call(tool, over_bound(tool)).await.unwrap();
        let field = (tool != "list_allowed_mailboxes").then(|| bound_field(tool));
        invalid_argument(tool, "bound", &result, field);

        if let Some(((path, value), required)) = wrong_type_and_required(tool) {
            let result = client
                .call(tool, set(valid_args(tool), path, value))
                .await
                .unwrap();
            let text = invalid_argument(tool, "wrong type", &result, Some(path));
            assert!(text.contains("invalid type"), "{tool}: {text}");
            if let Some(required) = required {
                let mut missing = valid_args(tool);
                missing.as_object_mut().unwrap().remove(required);
                let result = client.call(tool, missing).await.unwrap();
                let text = invalid_argument(tool, "missing", &result, Some(required));
                assert!(text.contains("missing field"), "{tool}: {text}");
            }
        }

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

/// The protocol error's text of a call outside the catalog.
async fn protocol_error(client: &crate::util::Client, tool: &str, args: Value) -> String {
    match client.call(tool, args).await {
        Err(rmcp::ServiceError::McpError(e)) => {
            assert_eq!(e.code.0, -32602, "{tool}: {e:?}");
            e.message.to_string()
        }
        other => panic!("{tool} must be a protocol error: {other:?}"),
    }
}

#[tokio::test]
async fn a_closed_gate_tool_called_by_name_says_which_gate_opens_it() {
    let world = World::new();
    let client = world.shared_demo_client().await;
    for (tool, var) in [
        ("create_draft", "PLUGIN_ALLOW_WRITES"),
        ("move_messages", "PLUGIN_ALLOW_WRITES"),
        ("get_attachment_handoff", "PLUGIN_ALLOW_LOCAL_HANDOFFS"),
        ("send_email", "PLUGIN_ALLOW_SEND"),
    ] {
        let message = protocol_error(&client, tool, valid_args(tool)).await;
        assert_eq!(
            message,
            format!("tool {tool} is not in this catalog: it needs {var}=true")
        );
    }
    // Any other name gets the plain text: the caller's string is not echoed.
    for tool in ["delete_email", CANARY] {
        let message = protocol_error(&client, tool, json!({})).await;
        assert_eq!(message, "tool not found in this catalog");
    }
    client.close().await;
}

#[tokio::test]
async fn mailgate_call_exits_2_for_invalid_arguments_including_non_json() {
    let world = World::new();
    let config = shared_demo_config(&world);
    for args in [
        "not json".to_owned(),
        format!("[\"{CANARY}\"]"),
        format!(r#"{{"mailbox":"finance","criteria":{{"maxResults":"{CANARY}"}}}}"#),
        r#"{"mailbox":"finance","criteria":{"maxResults":101}}"#.to_owned(),
    ] {
        let out = world
            .run(&["--config", &config, "call", "search_mailbox", &args])
            .await;
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(2), "{args}: {stdout}");
        let v: Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(v["error"]["code"], "INVALID_ARGUMENT", "{args}: {v}");
        assert!(!stdout.contains("CANARY"), "{stdout}");
    }
    let out = world
        .run(&["--config", &config, "call", "create_draft", "{}"])
        .await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("it needs PLUGIN_ALLOW_WRITES=true"),
        "{out:?}"
    );
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
    let result = client.call("send_email", args).await.unwrap();
    invalid_argument("send_email", "mailbox", &result, None);
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
