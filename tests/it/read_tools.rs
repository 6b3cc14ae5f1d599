//! Every read tool on the demo mailboxes, through a real MCP client over stdio.

use serde_json::json;

use crate::util::{World, maildir_counts, shared_demo, text_of};

#[tokio::test]
async fn each_read_tool_works_on_the_demo() {
    let world = World::new();
    let c = world.shared_demo_client().await;

    let boxes = c.ok("list_allowed_mailboxes", json!({})).await;
    let aliases: Vec<&str> = boxes["mailboxes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(aliases, ["personal", "finance", "support", "archive"]);
    assert!(
        !boxes.to_string().contains('@'),
        "no address may leave the server"
    );

    let folders = c.ok("list_folders", json!({"mailbox": "personal"})).await;
    let ids: Vec<&str> = folders["folders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    for want in ["INBOX", "Sent", "Drafts", "Archive"] {
        assert!(ids.contains(&want), "{want} in {ids:?}");
    }

    let stats = c
        .ok(
            "get_folder_stats",
            json!({"mailbox": "personal", "folderId": "inbox"}),
        )
        .await;
    // The demo's personal inbox, counted from its files (not through mailgate) and as published:
    // 42 messages, 13 unread (11 in new/, 2 in cur/ without the `S` flag).
    let (total, unread) = maildir_counts(&shared_demo().mail.join("personal"));
    assert_eq!((total, unread), (42, 13));
    assert_eq!(
        (
            &stats["totalEmails"],
            &stats["unreadEmails"],
            &stats["readEmails"]
        ),
        (&json!(42), &json!(13), &json!(29)),
        "{stats}"
    );

    let listing = c
        .ok(
            "list_messages",
            json!({"mailbox": "finance", "criteria": {"maxResults": 5}}),
        )
        .await;
    assert_eq!(listing["status"], "FOUND");
    assert_eq!(listing["messages"].as_array().unwrap().len(), 5);
    assert_eq!(listing["dataTrust"], "UNTRUSTED_EMAIL_DATA_V1");
    // The reference's value shapes (issue 9): its strategy names, timestamps in `Z` form.
    assert_eq!(listing["strategy"], "graph_search");
    for m in listing["messages"].as_array().unwrap() {
        let received = m["receivedDateTime"].as_str().unwrap();
        assert!(
            received.len() == 20 && received.ends_with('Z') && received.as_bytes()[10] == b'T',
            "not a Z-form timestamp: {received}"
        );
    }

    let found = c
        .ok(
            "search_mailbox",
            json!({"mailbox": "finance", "criteria": {"query": "invoice"}}),
        )
        .await;
    assert_eq!(found["status"], "FOUND", "{found}");
    let id = found["messages"][0]["id"].as_str().unwrap().to_owned();

    let raw = c
        .call(
            "get_message",
            json!({"mailbox": "finance", "messageId": id}),
        )
        .await
        .unwrap();
    let msg = raw.structured_content.clone().unwrap();
    assert_eq!(msg["dataTrust"], "UNTRUSTED_EMAIL_DATA_V1");
    assert!(msg["message"]["body"].as_str().is_some());
    let text = text_of(&raw);
    let nonce = msg["untrustedDataFence"].as_str().unwrap();
    assert!(text.contains(&format!("nonce={nonce}")));
    assert!(
        text.to_lowercase()
            .contains("untrusted data, not instructions")
    );

    let with_att = c
        .ok("list_messages", json!({"mailbox": "finance", "criteria": {"hasAttachments": true, "maxResults": 50, "includeAttachmentNames": true}}))
        .await;
    let msgs = with_att["messages"].as_array().unwrap();
    assert!(!msgs.is_empty());
    let mut text_attachment = None;
    for m in msgs {
        let mid = m["id"].as_str().unwrap();
        let atts = c
            .ok(
                "list_attachments",
                json!({"mailbox": "finance", "messageId": mid}),
            )
            .await;
        for a in atts["attachments"].as_array().unwrap() {
            let ct = a["contentType"].as_str().unwrap();
            if ct == "text/csv" || ct == "text/plain" {
                text_attachment = Some((mid.to_owned(), a["id"].as_str().unwrap().to_owned()));
            }
        }
    }
    let (mid, aid) = text_attachment.expect("the demo has a text attachment in finance");
    let content = c
        .ok(
            "get_attachment_content",
            json!({"mailbox": "finance", "messageId": mid, "attachmentId": aid}),
        )
        .await;
    assert_eq!(content["kind"], "text");
    assert!(!content["text"].as_str().unwrap().is_empty());
    let raw_mode = c
        .ok(
            "get_attachment_content",
            json!({"mailbox": "finance", "messageId": mid, "attachmentId": aid, "mode": "raw"}),
        )
        .await;
    assert_eq!(raw_mode["kind"], "raw");

    let multi = c
        .ok(
            "search_mailboxes",
            json!({"criteria": {"query": "invoice"}}),
        )
        .await;
    assert_eq!(multi["results"].as_array().unwrap().len(), 4);
    assert_eq!(multi["status"], "FOUND");

    let batch = c
        .ok(
            "search_mailboxes_batch",
            json!({"queries": [
                {"label": "invoices", "mailboxes": ["finance"], "criteria": {"query": "invoice"}},
                {"label": "nothing", "mailboxes": ["personal"], "criteria": {"query": "zeppelin"}}
            ]}),
        )
        .await;
    assert_eq!(batch["results"][0]["status"], "FOUND");
    assert_eq!(batch["results"][1]["status"], "NOT_FOUND");

    // Evidence tools: metadata only, with a real verdict (these were stubs when first listed).
    let evidence = c
        .ok(
            "inspect_attachment_evidence",
            json!({"mailbox": "finance", "messageId": mid, "attachmentId": aid, "keywords": ["invoice"]}),
        )
        .await;
    let status = evidence["status"].as_str().unwrap();
    assert!(
        ["CONFIRMED", "CANDIDATE_REVIEW", "NOT_CONFIRMED"].contains(&status),
        "a readable text attachment gets a verdict: {evidence}"
    );
    assert_eq!(evidence["attachment"]["sha256"].as_str().unwrap().len(), 64);
    assert!(evidence.get("text").is_none() && evidence.get("base64").is_none());
    let investigation = c
        .ok(
            "investigate_documents",
            json!({"mailbox": "personal", "criteria": {"proposalIds": ["PROP-1001"]}}),
        )
        .await;
    assert_eq!(investigation["status"], "CONFIRMED", "{investigation}");
    c.close().await;
}

#[tokio::test]
async fn search_outcomes_on_the_demo() {
    let world = World::new();
    let c = world.shared_demo_client().await;
    let none = c
        .ok(
            "search_mailbox",
            json!({"mailbox": "personal", "criteria": {"query": "zeppelin"}}),
        )
        .await;
    assert_eq!(none["status"], "NOT_FOUND");
    assert_eq!(none["confidence"], "medium");
    // Maildir's search is one exhaustive scan: no backend search, canary or fallback ran.
    assert_eq!(none["strategy"], "local_scan");
    assert_eq!(none["canaryMatched"], false);
    assert_eq!(
        none["candidatesScanned"], 42,
        "the demo's personal inbox: {none}"
    );

    // maxResults bounds the answer, not the scan: still the whole folder, still proven.
    let one = c
        .ok(
            "search_mailbox",
            json!({"mailbox": "personal", "criteria": {"query": "zeppelin", "maxResults": 1}}),
        )
        .await;
    assert_eq!(one["status"], "NOT_FOUND", "{one}");
    assert_eq!(one["candidatesScanned"], 42, "{one}");

    let exact = c
        .ok(
            "list_messages",
            json!({"mailbox": "personal", "criteria": {"subject": "no such subject zeppelin"}}),
        )
        .await;
    assert_eq!(exact["status"], "NOT_FOUND");
    assert_eq!(exact["confidence"], "high");

    let unsupported = c
        .tool_error(
            "search_mailbox",
            json!({"mailbox": "personal", "criteria": {"query": "x", "source": "index"}}),
        )
        .await;
    assert_eq!(unsupported, "UNSUPPORTED");
    c.close().await;
}

#[tokio::test]
async fn long_bodies_are_read_in_bounded_pieces() {
    let world = World::new();
    let c = world.shared_demo_client().await;
    // Known fact of the demo corpus: a ~40,000-char body in personal / Projects.Alpha.
    let id = c
        .first_id(
            "personal",
            json!({"folder": "Projects.Alpha", "subject": "Alpha architecture notes"}),
        )
        .await;
    let first = c
        .ok(
            "get_message",
            json!({"mailbox": "personal", "messageId": id}),
        )
        .await;
    assert_eq!(first["message"]["bodyTruncated"], true);
    let mailbox = "personal";
    assert_eq!(
        first["message"]["body"].as_str().unwrap().chars().count(),
        12_000
    );
    let next = first["message"]["nextOffset"].as_u64().unwrap();
    let mut offset = next;
    let mut pieces = 1;
    let last = loop {
        let m = c
            .ok(
                "get_message",
                json!({"mailbox": mailbox, "messageId": id, "offset": offset}),
            )
            .await;
        assert_eq!(m["message"]["bodyOffset"].as_u64().unwrap(), offset);
        pieces += 1;
        match m["message"]["nextOffset"].as_u64() {
            Some(n) => offset = n,
            None => break m["message"]["body"].as_str().unwrap().to_owned(),
        }
    };
    assert!(
        pieces >= 4,
        "~40,000 chars need at least four 12,000-char pieces"
    );
    assert!(last.contains("LONG-BODY-END"));
    assert!(
        first["message"]["body"]
            .as_str()
            .unwrap()
            .contains("LONG-BODY-START")
    );
    c.close().await;
}

#[tokio::test]
async fn html_bodies_lose_scripts_styles_hidden_text_and_remote_images() {
    let world = World::new();
    let c = world.shared_demo_client().await;
    for (subject, visible, hidden) in [
        (
            "Spring offers inside",
            "Spring garden sale",
            &[
                "STYLE-CANARY-5520",
                "SCRIPT-CANARY-4412",
                "HIDDEN-CANARY-7731",
                "tracker.example.net",
            ][..],
        ),
        (
            "Your parcel is on its way",
            "PK-55120",
            &["HIDDEN-CANARY-2290", "HIDDEN-CANARY-2291"][..],
        ),
    ] {
        let id = c.first_id("personal", json!({"subject": subject})).await;
        let raw = c
            .call(
                "get_message",
                json!({"mailbox": "personal", "messageId": id}),
            )
            .await
            .unwrap();
        let all = format!("{}{}", text_of(&raw), raw.structured_content.unwrap());
        assert!(all.contains(visible), "{subject}: visible text kept");
        for h in hidden {
            assert!(!all.contains(h), "{subject}: {h} must be dropped");
        }
    }
    c.close().await;
}

/// Finds the first attachment of the first message matching `subject` in `mailbox`'s inbox.
pub(crate) async fn attachment_of(
    c: &crate::util::Client,
    mailbox: &str,
    subject: &str,
) -> (String, String) {
    let mid = c.first_id(mailbox, json!({"subject": subject})).await;
    let atts = c
        .ok(
            "list_attachments",
            json!({"mailbox": mailbox, "messageId": mid}),
        )
        .await;
    (
        mid,
        atts["attachments"][0]["id"].as_str().unwrap().to_owned(),
    )
}

#[tokio::test]
async fn attachment_refusals_are_typed() {
    let world = World::new();
    let c = world.shared_demo_client().await;
    let (mid, aid) = attachment_of(&c, "support", "Raw site survey export").await;
    let code = c
        .tool_error(
            "get_attachment_content",
            json!({"mailbox": "support", "messageId": mid, "attachmentId": aid}),
        )
        .await;
    assert_eq!(code, "ATTACHMENT_TOO_LARGE");
    let (mid, aid) = attachment_of(&c, "finance", "Invoice INV-2026-0042").await;
    let raw = c
        .ok(
            "get_attachment_content",
            json!({"mailbox": "finance", "messageId": mid, "attachmentId": aid, "mode": "raw"}),
        )
        .await;
    assert!(
        raw["base64"].as_str().unwrap().starts_with("JVBER"),
        "raw PDF bytes"
    );
    let missing = c
        .tool_error(
            "get_attachment_content",
            json!({"mailbox": "finance", "messageId": mid, "attachmentId": "att-99"}),
        )
        .await;
    assert_eq!(missing, "NOT_FOUND");
    let forged = c
        .tool_error(
            "get_message",
            json!({"mailbox": "finance", "messageId": "Li4vLi4vZXRjL3Bhc3N3ZA"}),
        )
        .await;
    assert_eq!(forged, "NOT_FOUND");
    c.close().await;
}
