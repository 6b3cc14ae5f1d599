//! The write family (move, copy, mark, download, draft) over real stdio MCP on the demo
//! mailboxes: absent with the gate closed, working with it open, refused for a read-only alias.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::{Value, json};
use sha2::Digest as _;

use crate::util::{Client, DemoEntry, FINANCE, World, config_over_demo, sorted_names, text_of};

const WRITE_TOOLS: [&str; 5] = [
    "move_messages",
    "copy_messages",
    "mark_messages",
    "download_attachments",
    "create_draft",
];

/// A world with the write gate open and the download root inside its temp dir.
fn writes_world() -> World {
    let world = World::new().with("PLUGIN_ALLOW_WRITES", "true");
    let downloads = world.path().join("downloads");
    world.with("MAILGATE_DOWNLOAD_DIR", &downloads.display().to_string())
}

fn downloads(world: &World) -> PathBuf {
    world.path().join("downloads")
}

/// The newest summaries of a folder (at most maxResultsPerMailbox, 20), optionally filtered by
/// a subject substring.
async fn messages_matching(
    c: &Client,
    mailbox: &str,
    folder: &str,
    subject: Option<&str>,
) -> Vec<Value> {
    let mut criteria = json!({"folder": folder, "maxResults": 20, "maxPages": 10,
                              "includeAttachmentNames": true});
    if let Some(subject) = subject {
        criteria["subject"] = Value::from(subject);
    }
    let out = c
        .ok(
            "list_messages",
            json!({"mailbox": mailbox, "criteria": criteria}),
        )
        .await;
    out["messages"].as_array().unwrap().clone()
}

async fn messages(c: &Client, mailbox: &str, folder: &str) -> Vec<Value> {
    messages_matching(c, mailbox, folder, None).await
}

async fn ids(c: &Client, mailbox: &str, folder: &str) -> Vec<String> {
    messages(c, mailbox, folder)
        .await
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect()
}

/// How many messages a folder holds.
async fn total(c: &Client, mailbox: &str, folder: &str) -> u64 {
    c.ok(
        "get_folder_stats",
        json!({"mailbox": mailbox, "folderId": folder}),
    )
    .await["totalEmails"]
        .as_u64()
        .unwrap()
}

/// The id of the message with exactly `subject` in a folder.
async fn by_subject(c: &Client, mailbox: &str, folder: &str, subject: &str) -> String {
    messages_matching(c, mailbox, folder, Some(subject))
        .await
        .iter()
        .find(|m| m["subject"] == subject)
        .unwrap_or_else(|| panic!("{mailbox}/{folder} has {subject:?}"))["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The folder a message id currently resolves to, or the error code.
async fn folder_of(c: &Client, mailbox: &str, id: &str) -> String {
    let raw = c
        .call("get_message", json!({"mailbox": mailbox, "messageId": id}))
        .await
        .unwrap();
    if raw.is_error == Some(true) {
        raw.meta.unwrap().0["mailgate/errorCode"]
            .as_str()
            .unwrap()
            .to_owned()
    } else {
        raw.structured_content.unwrap()["message"]["folderId"]
            .as_str()
            .unwrap()
            .to_owned()
    }
}

#[tokio::test]
async fn write_tools_are_absent_and_uncallable_with_the_gate_closed() {
    let world = World::new().with("MAILGATE_DOWNLOAD_DIR", "/nonexistent-mailgate-downloads");
    let c = world.shared_demo_client().await;
    let names = c.tool_names().await;
    for tool in WRITE_TOOLS {
        assert!(!names.contains(&tool.to_owned()), "{tool} must be absent");
        let args =
            json!({"mailbox": "personal", "messageIds": ["x"], "destinationFolderId": "archive"});
        assert_eq!(
            c.protocol_refusal(tool, args).await,
            format!("tool {tool} is not in this catalog: it needs PLUGIN_ALLOW_WRITES=true")
        );
    }
    c.close().await;
    assert!(
        !Path::new("/nonexistent-mailgate-downloads").exists(),
        "no download root without the write gate"
    );
}

#[tokio::test]
async fn move_returns_new_ids_and_the_messages_change_folders() {
    let world = writes_world();
    let c = world.demo_client().await;
    assert!(c.tool_names().await.contains(&"move_messages".to_owned()));
    let inbox = ids(&c, "personal", "inbox").await;
    let (inbox_total, archive_total) = (
        total(&c, "personal", "inbox").await,
        total(&c, "personal", "archive").await,
    );
    let moving = inbox[..2].to_vec();
    let out = c
        .ok(
            "move_messages",
            json!({"mailbox": "personal", "messageIds": moving, "destinationFolderId": "archive"}),
        )
        .await;
    assert_eq!(out["status"], "complete", "{out}");
    assert_eq!(out["successfulItems"], 2);
    assert_eq!(out["failedItems"], 0);
    let new_ids: Vec<String> = out["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r["success"], true);
            r["newId"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(total(&c, "personal", "inbox").await, inbox_total - 2);
    assert_eq!(total(&c, "personal", "archive").await, archive_total + 2);
    let inbox_after = ids(&c, "personal", "inbox").await;
    for (old, new) in moving.iter().zip(&new_ids) {
        assert!(!inbox_after.contains(old), "gone from the source");
        assert_eq!(
            folder_of(&c, "personal", new).await,
            "Archive",
            "in the destination"
        );
        assert_eq!(folder_of(&c, "personal", old).await, "NOT_FOUND");
    }

    // One good id and one bogus id: partial success, reported per item.
    let good = inbox_after[0].clone();
    let raw = c
        .call(
            "move_messages",
            json!({"mailbox": "personal", "messageIds": [good, "bogus-id"],
                   "destinationFolderId": "Projects.Alpha"}),
        )
        .await
        .unwrap();
    let out = raw.structured_content.clone().unwrap();
    assert_eq!(out["status"], "partial");
    assert!(
        text_of(&raw).contains("1 succeeded, 1 failed"),
        "{}",
        text_of(&raw)
    );
    assert_eq!(out["results"][0]["success"], true);
    assert_eq!(out["results"][1]["success"], false);
    assert_eq!(out["results"][1]["errorCode"], "NOT_FOUND");
    assert!(out["results"][1].get("newId").is_none());

    // All bogus: failed. An unknown destination: a tool error, nothing moved.
    let out = c
        .ok(
            "move_messages",
            json!({"mailbox": "personal", "messageIds": ["nope"], "destinationFolderId": "archive"}),
        )
        .await;
    assert_eq!(out["status"], "failed");
    let before = ids(&c, "personal", "inbox").await;
    assert_eq!(
        c.tool_error(
            "move_messages",
            json!({"mailbox": "personal", "messageIds": [before[0]],
                   "destinationFolderId": "No Such Folder"}),
        )
        .await,
        "NOT_FOUND"
    );
    assert_eq!(ids(&c, "personal", "inbox").await, before);
    assert_eq!(folder_of(&c, "personal", &before[0]).await, "INBOX");
    c.close().await;
}

#[tokio::test]
async fn more_ids_than_max_batch_size_change_nothing() {
    let world = writes_world();
    let config = custom_config(&world, r#", "maxBatchSize": 2"#).await;
    let c = world.client(&["--config", &config, "serve"]).await;
    let inbox = ids(&c, "finance", "inbox").await;
    for tool in ["move_messages", "copy_messages"] {
        let code = c
            .tool_error(
                tool,
                json!({"mailbox": "finance", "messageIds": inbox[..3],
                       "destinationFolderId": "archive"}),
            )
            .await;
        assert_eq!(code, "LIMIT_EXCEEDED");
    }
    let code = c
        .tool_error(
            "mark_messages",
            json!({"mailbox": "finance", "messageIds": inbox[..3], "read": true}),
        )
        .await;
    assert_eq!(code, "LIMIT_EXCEEDED");
    assert_eq!(ids(&c, "finance", "inbox").await, inbox);
    assert_eq!(
        total(&c, "finance", "archive").await,
        14,
        "nothing copied or moved"
    );
    c.close().await;
}

#[tokio::test]
async fn mark_flips_is_read_and_copy_leaves_both() {
    let world = writes_world();
    let c = world.demo_client().await;
    let unread: Vec<Value> = messages(&c, "finance", "inbox")
        .await
        .into_iter()
        .filter(|m| m["isRead"] == false)
        .collect();
    let id = unread[0]["id"].as_str().unwrap().to_owned();
    let is_read = |list: &[Value], id: &str| {
        list.iter().find(|m| m["id"] == id).unwrap()["isRead"]
            .as_bool()
            .unwrap()
    };
    let out = c
        .ok(
            "mark_messages",
            json!({"mailbox": "finance", "messageIds": [id], "read": true}),
        )
        .await;
    assert_eq!(out["status"], "complete");
    assert!(is_read(&messages(&c, "finance", "inbox").await, &id));
    c.ok(
        "mark_messages",
        json!({"mailbox": "finance", "messageIds": [id], "read": false}),
    )
    .await;
    assert!(!is_read(&messages(&c, "finance", "inbox").await, &id));

    let subject = "Bank ledger export June";
    let source = by_subject(&c, "finance", "inbox", subject).await;
    let out = c
        .ok(
            "copy_messages",
            json!({"mailbox": "finance", "messageIds": [source], "destinationFolderId": "archive"}),
        )
        .await;
    assert_eq!(out["status"], "complete");
    let copy = out["results"][0]["newId"].as_str().unwrap().to_owned();
    assert_ne!(copy, source);
    assert_eq!(
        by_subject(&c, "finance", "inbox", subject).await,
        source,
        "source stays"
    );
    assert_eq!(by_subject(&c, "finance", "archive", subject).await, copy);
    c.close().await;
}

#[tokio::test]
async fn downloads_are_private_files_with_the_raw_bytes_sha256() {
    let world = writes_world();
    let c = world.demo_client().await;
    let dl = downloads(&world);
    assert!(dl.is_dir(), "the download root is created at startup");
    assert_eq!(
        std::fs::metadata(&dl).unwrap().permissions().mode() & 0o777,
        0o700
    );

    for (subject, expected_name) in [
        ("Bank ledger export June", "ledger-2026-06.csv"),
        (
            "Relatório de faturas de março",
            "relatório-faturas-março.csv",
        ),
    ] {
        let mid = by_subject(&c, "finance", "inbox", subject).await;
        let raw = c
            .call(
                "download_attachments",
                json!({"mailbox": "finance", "messageId": mid}),
            )
            .await
            .unwrap();
        let out = raw.structured_content.clone().unwrap();
        assert_eq!(
            out["dataTrust"], "UNTRUSTED_EMAIL_DATA_V1",
            "names are sender-controlled"
        );
        assert!(
            !serde_json::to_string(&out)
                .unwrap()
                .contains(&dl.display().to_string()),
            "no absolute path in the answer"
        );
        assert!(!text_of(&raw).contains(&dl.display().to_string()));
        assert_eq!(out["failedDownloads"], 0, "{out}");
        let file = &out["files"][0];
        assert_eq!(file["status"], "saved");
        assert_eq!(file["filename"], expected_name);
        assert_eq!(file["relativePath"], expected_name);
        let path = dl.join(expected_name);
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.file_type().is_file());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(file["sizeBytes"].as_u64().unwrap(), bytes.len() as u64);

        let att = file["attachmentId"].as_str().unwrap();
        let content = c
            .ok(
                "get_attachment_content",
                json!({"mailbox": "finance", "messageId": mid, "attachmentId": att, "mode": "raw"}),
            )
            .await;
        let raw_bytes = base64::engine::general_purpose::STANDARD
            .decode(content["base64"].as_str().unwrap())
            .unwrap();
        assert_eq!(bytes, raw_bytes);
        assert_eq!(
            file["sha256"].as_str().unwrap(),
            hex::encode(sha2::Sha256::digest(&raw_bytes))
        );
    }

    // A second download never overwrites: it gets a suffixed name.
    let mid = by_subject(&c, "finance", "inbox", "Bank ledger export June").await;
    let again = c
        .ok(
            "download_attachments",
            json!({"mailbox": "finance", "messageId": mid, "attachmentIds": ["att-0"]}),
        )
        .await;
    assert_eq!(again["files"][0]["filename"], "ledger-2026-06 (1).csv");
    assert_eq!(
        sorted_names(&dl),
        [
            "ledger-2026-06 (1).csv",
            "ledger-2026-06.csv",
            "relatório-faturas-março.csv"
        ]
    );
    // Unknown or duplicate ids are refused before anything is written.
    for ids in [json!(["att-9"]), json!(["att-0", "att-0"])] {
        c.tool_error(
            "download_attachments",
            json!({"mailbox": "finance", "messageId": mid, "attachmentIds": ids}),
        )
        .await;
    }
    assert_eq!(sorted_names(&dl).len(), 3);
    c.close().await;
}

/// finance, support and the read-only archive from the demo, with extra keys.
async fn custom_config(world: &World, extra: &str) -> String {
    let mailboxes = [
        FINANCE,
        DemoEntry {
            alias: "support",
            address: "support@example.org",
            access: "full",
            maildir: true,
        },
        DemoEntry {
            alias: "archive",
            address: "records@example.net",
            access: "read",
            maildir: true,
        },
    ];
    config_over_demo(world, &mailboxes, extra).await
}

#[tokio::test]
async fn the_oversized_attachment_is_refused_by_budget_before_any_write() {
    let world = writes_world();
    let config = custom_config(&world, r#", "maxDownloadBatchBytes": 1048576"#).await;
    let c = world.client(&["--config", &config, "serve"]).await;
    let mid = by_subject(&c, "support", "inbox", "Raw site survey export (large)").await;
    let raw = c
        .call(
            "download_attachments",
            json!({"mailbox": "support", "messageId": mid}),
        )
        .await
        .unwrap();
    assert_eq!(raw.is_error, Some(true));
    assert_eq!(
        raw.meta.as_ref().unwrap().0["mailgate/errorCode"],
        "LIMIT_EXCEEDED",
        "{}",
        text_of(&raw)
    );
    assert!(text_of(&raw).contains("maxDownloadBatchBytes"));
    // By id, too.
    assert_eq!(
        c.tool_error(
            "download_attachments",
            json!({"mailbox": "support", "messageId": mid, "attachmentIds": ["att-0"]}),
        )
        .await,
        "LIMIT_EXCEEDED"
    );
    assert!(
        sorted_names(&downloads(&world)).is_empty(),
        "nothing written, not even a temp file"
    );
    c.close().await;
}

#[tokio::test]
async fn drafts_land_in_drafts_with_attachments_by_reference() {
    let world = writes_world();
    let c = world.demo_client().await;
    let drafts_before = ids(&c, "finance", "drafts").await;
    let source = by_subject(&c, "finance", "inbox", "Bank ledger export June").await;
    let out = c
        .ok(
            "create_draft",
            json!({"mailbox": "finance", "to": ["ana.lima@example.com"],
                   "bcc": ["records@example.net"],
                   "subject": "Ledger for review", "body": "Please check the June ledger.\n",
                   "attachments": [{"messageId": source, "attachmentId": "att-0"}]}),
        )
        .await;
    assert_eq!(out["mailbox"], "finance");
    assert_eq!(out["attachmentsCount"], 1);
    let draft = out["draftId"].as_str().unwrap().to_owned();
    let drafts = ids(&c, "finance", "drafts").await;
    assert_eq!(drafts.len(), drafts_before.len() + 1);
    assert!(drafts.contains(&draft));
    let got = c
        .ok(
            "get_message",
            json!({"mailbox": "finance", "messageId": draft}),
        )
        .await;
    let m = &got["message"];
    assert_eq!(m["subject"], "Ledger for review");
    assert_eq!(m["folderId"], "Drafts");
    assert_eq!(m["to"][0]["address"], "ana.lima@example.com");
    assert_eq!(m["attachments"][0]["name"], "ledger-2026-06.csv");
    assert!(m["body"].as_str().unwrap().contains("June ledger"));

    // A reply draft threads on the parent and prefixes the subject.
    let parent = by_subject(
        &c,
        "finance",
        "inbox",
        "Invoice INV-2026-0042 - Orchard Bakery Ltd",
    )
    .await;
    let parent_msg = c
        .ok(
            "get_message",
            json!({"mailbox": "finance", "messageId": parent}),
        )
        .await;
    let reply = c
        .ok(
            "create_draft",
            json!({"mailbox": "finance", "to": ["ana.lima@example.com"],
                   "subject": "Invoice INV-2026-0042", "body": "Received, thanks.",
                   "replyTo": parent}),
        )
        .await;
    let got = c
        .ok(
            "get_message",
            json!({"mailbox": "finance", "messageId": reply["draftId"]}),
        )
        .await;
    assert_eq!(got["message"]["subject"], "Re: Invoice INV-2026-0042");
    let parent_id = parent_msg["message"]["internetMessageId"].as_str().unwrap();
    assert_eq!(
        got["message"]["inReplyTo"]
            .as_str()
            .unwrap()
            .trim_matches(['<', '>']),
        parent_id.trim_matches(['<', '>'])
    );
    c.close().await;
}

// See: issue 8, finding 12 (raw VT/FF/ESC/BEL bytes went out unencoded in `Subject:`).
#[tokio::test]
async fn issue_8_a_draft_subject_with_control_characters_is_refused_naming_the_field() {
    let world = writes_world();
    let c = world.demo_client().await;
    let before = ids(&c, "finance", "drafts").await;
    for subject in [
        "Invoice\u{b}due",
        "Invoice\u{c}due",
        "Invoice\u{1b}[2Jdue",
        "Invoice\u{7}due",
        "Invoice\tdue",
        "Invoice\u{7f}due",
        "Invoice\u{9b}31mdue",
    ] {
        let args = json!({"mailbox": "finance", "to": ["ana.lima@example.com"], "body": "x",
                          "subject": subject});
        let result = c.call("create_draft", args).await.unwrap();
        assert_eq!(result.is_error, Some(true), "{subject:?} was drafted");
        let meta = result.meta.as_ref().unwrap();
        assert_eq!(
            meta.0["mailgate/errorCode"], "INVALID_ARGUMENT",
            "{subject:?}"
        );
        let text = text_of(&result);
        assert!(
            text.contains("the subject contains a control character"),
            "{text}"
        );
    }
    assert_eq!(
        ids(&c, "finance", "drafts").await,
        before,
        "nothing was written"
    );
    c.close().await;
}

#[tokio::test]
async fn refused_drafts_write_nothing() {
    let world = writes_world();
    let c = world.demo_client().await;
    let before = ids(&c, "finance", "drafts").await;
    let base = json!({"mailbox": "finance", "to": ["ana.lima@example.com"], "body": "x"});
    let with = |extra: Value| {
        let mut v = base.clone();
        for (k, val) in extra.as_object().unwrap() {
            v[k] = val.clone();
        }
        v
    };
    for subject in ["Hello\r\nBcc: collector@evil.example.net", "a\nb", "nul\0"] {
        let code = c
            .tool_error("create_draft", with(json!({"subject": subject})))
            .await;
        assert_eq!(code, "INVALID_ARGUMENT", "{subject:?}");
    }
    let source = by_subject(&c, "finance", "inbox", "Bank ledger export June").await;
    let cases = [
        (json!([{"messageId": source}]), "INVALID_ARGUMENT"),
        (json!([{}]), "INVALID_ARGUMENT"),
        (
            json!([{"messageId": source, "attachmentId": "att-0",
                    "handoffId": format!("oh_{}", "A".repeat(43))}]),
            "INVALID_ARGUMENT",
        ),
        // The handoff gate is closed in this world, so a handoff id is refused by policy.
        (
            json!([{"handoffId": format!("oh_{}", "A".repeat(43))}]),
            "POLICY_DENIED",
        ),
        // One good attachment and one missing: no draft at all.
        (
            json!([{"messageId": source, "attachmentId": "att-0"},
                   {"messageId": source, "attachmentId": "att-7"}]),
            "NOT_FOUND",
        ),
    ];
    for (attachments, expected) in cases {
        let code = c
            .tool_error(
                "create_draft",
                with(json!({"subject": "s", "attachments": attachments})),
            )
            .await;
        assert_eq!(code, expected, "{attachments}");
    }
    assert_eq!(
        c.tool_error(
            "create_draft",
            with(json!({"subject": "s", "replyTo": "bogus-id"}))
        )
        .await,
        "NOT_FOUND"
    );
    assert_eq!(
        ids(&c, "finance", "drafts").await,
        before,
        "nothing was written"
    );
    c.close().await;
}

#[tokio::test]
async fn the_read_only_archive_alias_is_refused_by_every_write_tool() {
    let world = writes_world();
    let c = world.demo_client().await;
    let inbox = ids(&c, "archive", "inbox").await;
    let id = inbox[0].clone();
    let calls = [
        (
            "move_messages",
            json!({"mailbox": "archive", "messageIds": [id], "destinationFolderId": "archive"}),
        ),
        (
            "copy_messages",
            json!({"mailbox": "archive", "messageIds": [id], "destinationFolderId": "archive"}),
        ),
        (
            "mark_messages",
            json!({"mailbox": "archive", "messageIds": [id], "read": false}),
        ),
        (
            "download_attachments",
            json!({"mailbox": "archive", "messageId": id}),
        ),
        (
            "create_draft",
            json!({"mailbox": "archive", "to": ["records@example.net"], "subject": "s",
                   "body": "b"}),
        ),
    ];
    for (tool, args) in calls {
        assert_eq!(c.tool_error(tool, args).await, "POLICY_DENIED", "{tool}");
    }
    assert_eq!(ids(&c, "archive", "inbox").await, inbox);
    assert!(sorted_names(&downloads(&world)).is_empty());
    c.close().await;
}

// Issue 8, finding 12c: the per-call budget alone let repeated calls fill the disk.
#[tokio::test]
async fn repeated_downloads_stop_at_the_download_folder_bound() {
    let world = writes_world();
    let config = custom_config(
        &world,
        r#", "maxDownloadBatchBytes": 1024, "maxDownloadFolderBytes": 1024"#,
    )
    .await;
    let c = world.client(&["--config", &config, "serve"]).await;
    let mid = by_subject(&c, "finance", "inbox", "Bank ledger export June").await;
    let args = json!({"mailbox": "finance", "messageId": mid, "attachmentIds": ["att-0"]});
    let folder_bytes = |dl: &Path| -> u64 {
        std::fs::read_dir(dl)
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum()
    };
    let mut saved = 0;
    let refusal = loop {
        let raw = c.call("download_attachments", args.clone()).await.unwrap();
        if raw.is_error == Some(true) {
            break raw;
        }
        assert_eq!(raw.structured_content.unwrap()["successfulDownloads"], 1);
        saved += 1;
        assert!(saved <= 5, "the folder bound never stopped the downloads");
    };
    // The ledger is a little over 200 bytes: four fit in 1 KiB, the fifth does not.
    assert_eq!(saved, 4);
    assert_eq!(
        refusal.meta.as_ref().unwrap().0["mailgate/errorCode"],
        "LIMIT_EXCEEDED"
    );
    let text = text_of(&refusal);
    assert!(text.contains("maxDownloadFolderBytes (1024)"), "{text}");
    assert!(text.contains("nothing was written"), "{text}");
    let dl = downloads(&world);
    assert_eq!(
        sorted_names(&dl).len(),
        4,
        "nothing written, not even a temp file"
    );
    assert!(folder_bytes(&dl) <= 1024);
    // Room made by the operator is used again.
    std::fs::remove_file(dl.join("ledger-2026-06.csv")).unwrap();
    c.ok("download_attachments", args.clone()).await;
    assert!(folder_bytes(&dl) <= 1024);
    c.close().await;
}
