//! The eight catalogs through a real MCP client: exact names, counts and annotations.

use crate::util::{
    FINANCE, PERSONAL, World, config_over_shared_demo, gated_world as world, text_of,
};

pub(crate) const READ: [&str; 12] = [
    "list_allowed_mailboxes",
    "search_mailbox",
    "search_mailboxes",
    "search_mailboxes_batch",
    "get_message",
    "list_messages",
    "list_folders",
    "get_folder_stats",
    "list_attachments",
    "get_attachment_content",
    "inspect_attachment_evidence",
    "investigate_documents",
];
pub(crate) const HANDOFF: [&str; 2] = ["create_attachment_handoff", "get_attachment_handoff"];
pub(crate) const WRITE: [&str; 5] = [
    "move_messages",
    "copy_messages",
    "mark_messages",
    "download_attachments",
    "create_draft",
];
pub(crate) const SEND: [&str; 1] = ["send_email"];
const FORBIDDEN: [&str; 5] = [
    "reply_to_email",
    "delete_email",
    "batch_delete_emails",
    "delete_folder",
    "forward_email",
];

#[tokio::test]
async fn every_gate_setting_serves_exactly_its_catalog() {
    for bits in 0..8u8 {
        let (h, w, s) = (bits & 1 != 0, bits & 2 != 0, bits & 4 != 0);
        let world = world(h, w, s);
        let tools = world.shared_demo_tools().await;
        let mut expected: Vec<&str> = READ.to_vec();
        if h {
            expected.extend(HANDOFF);
        }
        if w {
            expected.extend(WRITE);
        }
        if s {
            expected.extend(SEND);
        }
        let mut names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
        names.sort();
        expected.sort();
        assert_eq!(names, expected, "handoffs={h} writes={w} send={s}");
        let count = [12, 14, 17, 19, 13, 15, 18, 20][bits as usize];
        assert_eq!(names.len(), count);
        for f in FORBIDDEN {
            assert!(!names.iter().any(|n| n == f));
        }
        for t in &tools {
            let a = t.annotations.as_ref().unwrap();
            let name = t.name.as_ref();
            let read_only = READ.contains(&name) || name == "get_attachment_handoff";
            assert_eq!(a.read_only_hint, Some(read_only), "{name} readOnlyHint");
            let destructive = matches!(name, "move_messages" | "mark_messages" | "send_email");
            assert_eq!(
                a.destructive_hint,
                Some(destructive),
                "{name} destructiveHint"
            );
            if name == "create_attachment_handoff" {
                assert_eq!(a.idempotent_hint, Some(true));
            }
            assert_eq!(
                a.open_world_hint,
                Some(name == "send_email"),
                "{name} openWorldHint"
            );
            assert!(t.input_schema.get("properties").is_some() || name == "list_allowed_mailboxes");
        }
    }
}

#[tokio::test]
async fn a_tool_outside_the_catalog_cannot_be_called() {
    let world = world(false, false, false);
    let client = world.shared_demo_client().await;
    // A closed gate's tool is not a result but a protocol error that names the gate.
    let message = client
        .protocol_refusal(
            "move_messages",
            serde_json::json!({"mailbox": "finance", "messageIds": ["x"], "destinationFolderId": "archive"}),
        )
        .await;
    assert_eq!(
        message,
        "tool move_messages is not in this catalog: it needs PLUGIN_ALLOW_WRITES=true"
    );
    // A name no catalog has is refused the same way, without a gate to name.
    let message = client
        .protocol_refusal("no_such_tool", serde_json::json!({}))
        .await;
    assert_eq!(message, "tool not found in this catalog");
    client.close().await;
}

#[tokio::test]
async fn initialize_reports_the_server() {
    let world = world(false, false, false);
    let client = world.shared_demo_client().await;
    let info = client.inner.peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, "mailgate");
    assert!(info.capabilities.tools.is_some());
    client.close().await;
}

// See: issue 9, item 1 (the reference's smoke test compares `JSON.stringify` of this answer).
#[tokio::test]
async fn issue_9_list_allowed_mailboxes_is_exactly_the_reference_shape() {
    let world = World::new();
    let config = config_over_shared_demo(&world, &[FINANCE, PERSONAL], "");
    let client = world.client(&["--config", &config, "serve"]).await;
    let answer = client
        .ok("list_allowed_mailboxes", serde_json::json!({}))
        .await;
    assert_eq!(
        serde_json::to_string(&answer).unwrap(),
        r#"{"mailboxes":["finance","personal"]}"#
    );
    client.close().await;

    // With an alias narrowed to read, the access per alias is added, and the text says it.
    // The world owns the state folder: it must outlive the server.
    let world = World::new();
    let client = world.shared_demo_client().await;
    let raw = client
        .call("list_allowed_mailboxes", serde_json::json!({}))
        .await
        .unwrap();
    let answer = raw.structured_content.clone().unwrap();
    assert!(answer["mailboxes"].as_array().unwrap().len() >= 2);
    let archive = answer["mailboxAccess"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["alias"] == "archive")
        .unwrap();
    assert_eq!(archive["access"], "read");
    assert!(
        text_of(&raw).contains("Read-only (write and handoff tools refused): archive."),
        "{}",
        text_of(&raw)
    );
    client.close().await;
}

// See: issue 9, item 5, and issue 10, item 5. A Maildir search is an exhaustive local scan:
// no backend search or canary ran, so its answer carries no graph_* warning (and no note
// explaining them), and its NOT_FOUND says the whole folder was read.
#[tokio::test]
async fn issue_10_a_maildir_not_found_names_its_whole_folder_scan_and_no_graph_codes() {
    // The world owns the state folder: it must outlive the server.
    let world = World::new();
    let client = world.shared_demo_client().await;
    let raw = client
        .call(
            "search_mailbox",
            serde_json::json!({"mailbox": "finance", "criteria": {"query": "zzqx nowhere"}}),
        )
        .await
        .unwrap();
    let answer = raw.structured_content.clone().unwrap();
    assert_eq!(answer["status"], "NOT_FOUND", "{answer}");
    assert_eq!(answer["strategy"], "local_scan", "{answer}");
    let warnings = answer["warnings"].as_array().unwrap();
    assert!(
        !warnings
            .iter()
            .any(|w| w.as_str().unwrap().starts_with("graph_")),
        "{answer}"
    );
    let text = text_of(&raw);
    assert!(!text.contains("Warning codes graph_*"), "{text}");
    let scanned = answer["candidatesScanned"]
        .as_u64()
        .expect("candidatesScanned");
    assert!(
        text.contains(&format!(
            "All {scanned} messages of the folder were scanned."
        )),
        "{text}"
    );
    client.close().await;
}
