//! The eight catalogs through a real MCP client: exact names, counts and annotations.

use crate::util::World;

const READ: [&str; 12] = [
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
const HANDOFF: [&str; 2] = ["create_attachment_handoff", "get_attachment_handoff"];
const WRITE: [&str; 5] = [
    "move_messages",
    "copy_messages",
    "mark_messages",
    "download_attachments",
    "create_draft",
];
const SEND: [&str; 1] = ["send_email"];
const FORBIDDEN: [&str; 5] = [
    "reply_to_email",
    "delete_email",
    "batch_delete_emails",
    "delete_folder",
    "forward_email",
];

fn world(handoffs: bool, writes: bool, send: bool) -> World {
    let b = |v: bool| if v { "true" } else { "false" };
    let mut w = World::new()
        .with("PLUGIN_ALLOW_LOCAL_HANDOFFS", b(handoffs))
        .with("PLUGIN_ALLOW_WRITES", b(writes))
        .with("PLUGIN_ALLOW_SEND", b(send));
    if send {
        w = w
            .with("OUTLOOK_SEND_FROM", "finance@example.com")
            .with("OUTLOOK_ALLOWED_SENDERS", "finance@example.com");
    }
    w
}

#[tokio::test]
async fn every_gate_setting_serves_exactly_its_catalog() {
    for bits in 0..8u8 {
        let (h, w, s) = (bits & 1 != 0, bits & 2 != 0, bits & 4 != 0);
        let world = world(h, w, s);
        let client = world.demo_client().await;
        let tools = client.tools().await;
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
        client.close().await;
    }
}

#[tokio::test]
async fn a_tool_outside_the_catalog_cannot_be_called() {
    let world = world(false, false, false);
    let client = world.demo_client().await;
    let err = client
        .call(
            "move_messages",
            serde_json::json!({"mailbox": "finance", "messageIds": ["x"], "destinationFolderId": "archive"}),
        )
        .await;
    assert!(
        err.is_err(),
        "a closed gate's tool must be a protocol error, not a result"
    );
    client.close().await;
}

#[tokio::test]
async fn initialize_reports_the_server() {
    let world = world(false, false, false);
    let client = world.demo_client().await;
    let info = client.inner.peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, "mailgate");
    assert!(info.capabilities.tools.is_some());
    client.close().await;
}
