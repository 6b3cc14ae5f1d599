//! Hostile messages delivered into a served mailbox: the server keeps answering (for that mailbox
//! and for another one), every answer stays bounded, and no search claims an absence over a
//! message it did not wholly read.
// See: issue 8, findings 1–4 and 8.

use std::path::Path;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::util::{Client, FINANCE, PERSONAL, World, config_over_demo, text_of};

/// A newest-first unique name, so a hostile message is inside every scan window.
fn deliver(maildir: &Path, n: u32, raw: &[u8]) {
    let name = format!("{}.M{n}P1.hostile", 1_900_000_000 + n);
    std::fs::write(maildir.join("new").join(name), raw).unwrap();
}

/// An outer message whose attachment is `depth` nested `message/rfc822` levels, as base64.
fn nesting_bomb(depth: usize) -> Vec<u8> {
    let mut inner = String::new();
    for _ in 0..depth {
        inner.push_str("Content-Type: message/rfc822\r\n\r\n");
    }
    inner.push_str("Subject: core\r\n\r\ndeepest\r\n");
    let b64 = base64::engine::general_purpose::STANDARD.encode(inner);
    let mut lines = String::new();
    for chunk in b64.as_bytes().chunks(76) {
        lines.push_str(std::str::from_utf8(chunk).unwrap());
        lines.push_str("\r\n");
    }
    format!(
        "From: mallory@example.org\r\nSubject: nesting\r\nContent-Type: multipart/mixed; \
         boundary=B\r\n\r\n--B\r\nContent-Type: text/plain\r\n\r\nhello\r\n--B\r\n\
         Content-Type: message/rfc822\r\nContent-Transfer-Encoding: base64\r\n\r\n{lines}--B--\r\n"
    )
    .into_bytes()
}

/// A message with `parts` tiny attachments.
fn many_parts(parts: usize) -> Vec<u8> {
    let mut raw = String::from(
        "From: mallory@example.org\r\nSubject: parts\r\nContent-Type: multipart/mixed; \
         boundary=P\r\n\r\n",
    );
    for i in 0..parts {
        raw.push_str(&format!(
            "--P\r\nContent-Type: application/octet-stream; name=a{i}.bin\r\n\r\nx\r\n"
        ));
    }
    raw.push_str("--P--\r\n");
    raw.into_bytes()
}

/// A message whose Subject is `bytes` long, folded every 70 characters.
fn huge_subject(bytes: usize) -> Vec<u8> {
    let mut raw = String::from("From: mallory@example.org\r\nSubject: ");
    let word = "padding ";
    let mut line = 0;
    while raw.len() < bytes {
        raw.push_str(word);
        line += word.len();
        if line > 70 {
            raw.push_str("\r\n ");
            line = 0;
        }
    }
    raw.push_str("tailtoken\r\n\r\nbody\r\n");
    raw.into_bytes()
}

/// The other mailbox still answers: one mail cannot take the server down for everyone.
async fn finance_still_answers(c: &Client) {
    let listing = c
        .ok(
            "list_messages",
            json!({"mailbox": "finance", "criteria": {"maxResults": 2}}),
        )
        .await;
    assert_eq!(listing["status"], "FOUND", "{listing}");
}

async fn search_personal(c: &Client, query: &str) -> Value {
    c.ok(
        "search_mailbox",
        json!({"mailbox": "personal", "criteria": {"query": query, "maxResults": 5}}),
    )
    .await
}

#[tokio::test]
async fn issue_8_hostile_messages_leave_the_server_serving_and_the_evidence_honest() {
    let world = World::new();
    let config = config_over_demo(&world, &[PERSONAL, FINANCE], "").await;
    let personal = world.state().join("demo/mail/personal");
    let c = world.client(&["--config", &config, "serve"]).await;

    // Finding 1: the nesting bomb used to abort the process on list, search and stats.
    deliver(&personal, 1, &nesting_bomb(2_600));
    let listing = c
        .ok(
            "list_messages",
            json!({"mailbox": "personal", "criteria": {"maxResults": 3}}),
        )
        .await;
    assert_eq!(
        listing["messages"][0]["contentGap"],
        "message_structure_limit"
    );
    let stats = c
        .ok(
            "get_folder_stats",
            json!({"mailbox": "personal", "folderId": "inbox"}),
        )
        .await;
    assert_eq!(stats["messagesNotRead"], 1, "{stats}");
    let absent = search_personal(&c, "zyxwvut").await;
    assert_eq!(absent["status"], "SEARCH_INCOMPLETE", "{absent}");
    assert!(
        absent["warnings"]
            .as_array()
            .unwrap()
            .contains(&json!("message_structure_limit"))
    );
    finance_still_answers(&c).await;

    // Finding 3: many parts; every answer about it stays bounded.
    deliver(&personal, 2, &many_parts(20_000));
    let id = c
        .first_id("personal", json!({"subject": "parts", "maxResults": 1}))
        .await;
    for format in ["text", "headers"] {
        let result = c
            .call(
                "get_message",
                json!({"mailbox": "personal", "messageId": id, "format": format}),
            )
            .await
            .unwrap();
        let size = serde_json::to_vec(&result).unwrap().len();
        assert!(size < 128_000, "get_message {format}: {size} bytes");
    }
    finance_still_answers(&c).await;

    // Finding 4: huge folded subjects are bounded before matching; a token past the bound is
    // not claimed absent.
    for n in 3..5 {
        deliver(&personal, n, &huge_subject(3_000_000));
    }
    // The token sits past the matching bound, so it is neither found nor claimed absent: the
    // corpus is fixed, so exactly SEARCH_INCOMPLETE, naming the truncated header.
    let tail = search_personal(&c, "tailtoken").await;
    assert_eq!(tail["status"], "SEARCH_INCOMPLETE", "{tail}");
    assert!(
        tail["warnings"]
            .as_array()
            .unwrap()
            .contains(&json!("message_header_truncated")),
        "{tail}"
    );
    finance_still_answers(&c).await;

    // Finding 2: an oversized message is listed with its gap, never silently skipped.
    let big = std::fs::File::create(personal.join("new/1900000010.M10P1.hostile")).unwrap();
    big.set_len(64 * 1024 * 1024 + 1).unwrap();
    let listing = c
        .ok(
            "list_messages",
            json!({"mailbox": "personal", "criteria": {"maxResults": 1}}),
        )
        .await;
    assert_eq!(listing["messages"][0]["contentGap"], "message_too_large");
    let result = c
        .call(
            "search_mailbox",
            json!({"mailbox": "personal", "criteria": {"query": "zyxwvut"}}),
        )
        .await
        .unwrap();
    let absent = result.structured_content.clone().unwrap();
    assert_eq!(absent["status"], "SEARCH_INCOMPLETE");
    assert!(
        absent["warnings"]
            .as_array()
            .unwrap()
            .contains(&json!("message_too_large"))
    );
    assert!(text_of(&result).contains("Absence is not proven"));
    finance_still_answers(&c).await;
    c.close().await;
}
