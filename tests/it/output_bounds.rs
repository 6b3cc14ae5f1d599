//! Sender-controlled lists in tool answers stay bounded, say what was cut, and can be paged
//! through to their last item (issue 8, finding 3).

use serde_json::{Value, json};

use crate::util::{Client, FINANCE, PERSONAL, World, config_over_demo, text_of};

/// Parts of the generated hostile message: within the MIME parser's part limit (10,000), so
/// that every one is listed and the bound tested here is the tools' own.
const PARTS: usize = 9_000;
/// Recipients of the generated recipient-flood message (within the MIME parser's 1,000).
const RECIPIENTS: usize = 900;
/// Far above every bounded answer below, far below what the unbounded answers were.
const ANSWER_BYTES: usize = 64 * 1024;

/// A multipart/mixed message with `parts` tiny named attachments.
fn many_parts(subject: &str, parts: usize) -> Vec<u8> {
    let mut m = format!(
        "From: sender@example.org\r\nTo: finance@example.com\r\nSubject: {subject}\r\n\
         Message-ID: <many-parts@example.org>\r\nMIME-Version: 1.0\r\n\
         Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n\
         --b\r\nContent-Type: text/plain\r\n\r\nSee the parts.\r\n"
    );
    for i in 0..parts {
        m.push_str(&format!(
            "--b\r\nContent-Type: application/octet-stream\r\n\
             Content-Disposition: attachment; filename=\"part-{i}.bin\"\r\n\r\nx\r\n"
        ));
    }
    m.push_str("--b--\r\n");
    m.into_bytes()
}

/// A plain message addressed to `count` named recipients in To and in Cc.
fn many_recipients(subject: &str, count: usize) -> Vec<u8> {
    let list = |prefix: &str| {
        (0..count)
            .map(|i| format!("Recipient number {i} <{prefix}{i}@example.org>"))
            .collect::<Vec<_>>()
            .join(",\r\n ")
    };
    format!(
        "From: sender@example.org\r\nTo: {}\r\nCc: {}\r\nSubject: {subject}\r\n\
         Message-ID: <many-recipients@example.org>\r\n\r\nHello.\r\n",
        list("to-"),
        list("cc-")
    )
    .into_bytes()
}

/// A message whose every summary field is at its per-field bound in four-byte characters:
/// subject, sender name, preview and 30 attachment names.
fn widest_summary(n: usize) -> Vec<u8> {
    let wide = |chars: usize| "\u{1D538}".repeat(chars);
    let mut m = format!(
        "From: {} <sender@example.org>\r\nTo: finance@example.com\r\nSubject: WIDE {}\r\n\
         Message-ID: <wide-{n}@example.org>\r\nMIME-Version: 1.0\r\n\
         Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n\
         --b\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n\
         {}\r\n",
        wide(330),
        wide(300),
        wide(600)
    );
    for i in 0..30 {
        m.push_str(&format!(
            "--b\r\nContent-Type: application/octet-stream\r\n\
             Content-Disposition: attachment; filename=\"{i}{}\"\r\n\r\nx\r\n",
            wide(210)
        ));
    }
    m.push_str("--b--\r\n");
    m.into_bytes()
}

/// Delivers `raw` into the inbox of a demo Maildir.
fn deliver_to(world: &World, alias: &str, unique: &str, raw: &[u8]) {
    let cur = world.state().join(format!("demo/mail/{alias}/cur"));
    std::fs::write(cur.join(format!("{unique}:2,S")), raw).unwrap();
}

fn deliver(world: &World, unique: &str, raw: &[u8]) {
    deliver_to(world, "finance", unique, raw);
}

/// Byte sizes of an answer: the structured JSON and all text blocks.
async fn call_sized(c: &Client, tool: &str, args: Value) -> (Value, usize, usize) {
    let result = c.call(tool, args).await.unwrap();
    assert_ne!(result.is_error, Some(true), "{tool}: {:?}", result.content);
    let structured = result.structured_content.clone().unwrap();
    let bytes = serde_json::to_vec(&structured).unwrap().len();
    (structured, bytes, text_of(&result).len())
}

async fn hostile_world(raw: &[(&str, Vec<u8>)]) -> (World, Client) {
    let world = World::new();
    let config = config_over_demo(&world, &[FINANCE, PERSONAL], "").await;
    for (unique, bytes) in raw {
        deliver(&world, unique, bytes);
    }
    let c = world.client(&["--config", &config, "serve"]).await;
    (world, c)
}

fn assert_small(what: &str, structured: usize, text: usize) {
    assert!(
        structured < ANSWER_BYTES,
        "{what}: {structured} structured bytes"
    );
    assert!(text < 2 * ANSWER_BYTES, "{what}: {text} text bytes");
}

// See: issue 8, finding 3 (unbounded output from one mail).
#[tokio::test]
async fn issue_8_many_parts_give_bounded_answers_and_page_to_the_last_attachment() {
    let (_world, c) = hostile_world(&[(
        "1700000000.M1P1.example",
        many_parts("Nine thousand parts", PARTS),
    )])
    .await;
    let id = c
        .first_id("finance", json!({"subject": "Nine thousand parts"}))
        .await;

    for format in ["text", "headers"] {
        let (m, structured, text) = call_sized(
            &c,
            "get_message",
            json!({"mailbox": "finance", "messageId": id, "format": format}),
        )
        .await;
        assert_small(&format!("get_message {format}"), structured, text);
        let m = &m["message"];
        assert_eq!(m["attachmentsTruncated"], true, "{format}");
        assert_eq!(m["attachmentsTotal"], PARTS, "{format}");
        let shown = m["attachments"].as_array().unwrap();
        assert!(!shown.is_empty() && shown.len() < 100, "{format}");
        assert_eq!(shown[0]["id"], "att-0");
    }

    let (first, structured, text) = call_sized(
        &c,
        "list_attachments",
        json!({"mailbox": "finance", "messageId": id}),
    )
    .await;
    assert_small("list_attachments", structured, text);
    assert_eq!(first["truncated"], true);
    assert_eq!(first["totalCount"], PARTS);
    let page = first["attachments"].as_array().unwrap().len();
    assert!(page > 0 && page <= 100);
    assert_eq!(first["nextOffset"], page);

    // Follow nextOffset from near the end: every attachment up to the last is reachable.
    let mut offset = PARTS - 2 * page - 1;
    let mut seen = Vec::new();
    loop {
        let (p, structured, text) = call_sized(
            &c,
            "list_attachments",
            json!({"mailbox": "finance", "messageId": id, "offset": offset}),
        )
        .await;
        assert_small("a list_attachments page", structured, text);
        assert_eq!(p["offset"], offset);
        for a in p["attachments"].as_array().unwrap() {
            seen.push(a["id"].as_str().unwrap().to_owned());
        }
        match p["nextOffset"].as_u64() {
            Some(next) => {
                assert_eq!(p["truncated"], true);
                offset = usize::try_from(next).unwrap();
            }
            None => {
                assert_eq!(p["truncated"], false);
                break;
            }
        }
    }
    let expected: Vec<String> = (PARTS - 2 * page - 1..PARTS)
        .map(|i| format!("att-{i}"))
        .collect();
    assert_eq!(
        seen, expected,
        "pages are contiguous and end at the last part"
    );

    // A smaller page on request; an offset past the end is an empty, final page.
    let (small, ..) = call_sized(
        &c,
        "list_attachments",
        json!({"mailbox": "finance", "messageId": id, "offset": 5, "limit": 3}),
    )
    .await;
    let ids: Vec<&str> = small["attachments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["att-5", "att-6", "att-7"]);
    assert_eq!(small["nextOffset"], 8);
    let (past, ..) = call_sized(
        &c,
        "list_attachments",
        json!({"mailbox": "finance", "messageId": id, "offset": PARTS + 7}),
    )
    .await;
    assert_eq!(past["attachments"], json!([]));
    assert_eq!(past["truncated"], false);
    assert!(past.get("nextOffset").is_none());

    // Summaries name at most 30 attachments, flagged.
    let (listing, structured, text) = call_sized(
        &c,
        "search_mailbox",
        json!({"mailbox": "finance", "criteria": {"subject": "Nine thousand parts",
            "includeAttachmentNames": true}}),
    )
    .await;
    assert_small("search_mailbox", structured, text);
    let summary = &listing["messages"][0];
    assert_eq!(summary["attachmentsTruncated"], true);
    assert_eq!(summary["attachments"].as_array().unwrap().len(), 30);

    // The server still answers for another mailbox.
    c.ok(
        "list_messages",
        json!({"mailbox": "personal", "criteria": {"maxResults": 1}}),
    )
    .await;
    c.close().await;
}

// See: issue 8, finding 3 (To/Cc are sender-controlled lists too).
#[tokio::test]
async fn issue_8_many_recipients_are_bounded_and_paged() {
    let (_world, c) = hostile_world(&[(
        "1700000001.M2P1.example",
        many_recipients("Nine hundred recipients", RECIPIENTS),
    )])
    .await;
    let id = c
        .first_id("finance", json!({"subject": "Nine hundred recipients"}))
        .await;
    let (first, structured, text) = call_sized(
        &c,
        "get_message",
        json!({"mailbox": "finance", "messageId": id, "format": "headers"}),
    )
    .await;
    assert_small("get_message", structured, text);
    let m = &first["message"];
    assert_eq!(m["recipientsTruncated"], true);
    assert_eq!(m["toTotal"], RECIPIENTS);
    assert_eq!(m["ccTotal"], RECIPIENTS);
    let page = m["to"].as_array().unwrap().len();
    assert!(page > 0 && page < 100);
    assert_eq!(m["cc"].as_array().unwrap().len(), page);
    assert_eq!(m["nextRecipientOffset"], page);

    let mut offset = m["nextRecipientOffset"].as_u64().unwrap();
    let mut to = page;
    let mut last = String::new();
    loop {
        let (p, structured, text) = call_sized(
            &c,
            "get_message",
            json!({"mailbox": "finance", "messageId": id, "format": "headers",
                "recipientOffset": offset}),
        )
        .await;
        assert_small("a get_message recipient page", structured, text);
        let m = &p["message"];
        let list = m["to"].as_array().unwrap();
        to += list.len();
        if let Some(a) = list.last() {
            last = a["address"].as_str().unwrap().to_owned();
        }
        match m["nextRecipientOffset"].as_u64() {
            Some(next) => offset = next,
            None => break,
        }
    }
    assert_eq!(to, RECIPIENTS);
    assert_eq!(last, format!("to-{}@example.org", RECIPIENTS - 1));
    c.close().await;
}

// See: issue 8, finding 3 (a backstop over the whole answer).
#[tokio::test]
async fn issue_8_an_answer_over_the_output_bound_is_refused_not_sent() {
    let world = World::new();
    let config = config_over_demo(
        &world,
        &[FINANCE, PERSONAL],
        r#", "maxResultsPerMailbox": 100"#,
    )
    .await;
    for alias in ["finance", "personal"] {
        for n in 0..100 {
            deliver_to(
                &world,
                alias,
                &format!("17000001{n:02}.M{n}P3.example"),
                &widest_summary(n),
            );
        }
    }
    let c = world.client(&["--config", &config, "serve"]).await;
    let criteria = json!({"subject": "WIDE", "maxResults": 100, "includeAttachmentNames": true});
    // One mailbox at its per-field bounds still fits (about 3 MB)...
    let (one, structured, _) = call_sized(
        &c,
        "search_mailbox",
        json!({"mailbox": "finance", "criteria": criteria}),
    )
    .await;
    assert_eq!(one["messages"].as_array().unwrap().len(), 100);
    assert!(structured > 2_000_000, "{structured}");
    // ...two do not: a typed refusal instead of megabytes of sender text.
    let code = c
        .tool_error(
            "search_mailboxes",
            json!({"mailboxes": ["finance", "personal"], "criteria": criteria}),
        )
        .await;
    assert_eq!(code, "LIMIT_EXCEEDED");
    c.ok("list_allowed_mailboxes", json!({})).await;
    c.close().await;
}

#[test]
fn generated_messages_are_what_the_tests_claim() {
    // Guard against a generator typo silently shrinking the hostile input.
    let raw = many_parts("s", 3);
    let text = String::from_utf8(raw).unwrap();
    assert_eq!(text.matches("filename=").count(), 3);
    let raw = many_recipients("s", 4);
    let text = String::from_utf8(raw).unwrap();
    assert_eq!(text.matches("@example.org").count(), 2 + 8);
}
