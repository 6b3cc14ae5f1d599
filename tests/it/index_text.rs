//! What a reader sees is what a query finds (issue 27, item 1), end to end: a Maildir holding
//! the classes of text that broke the promise (decomposed accents, Greek with tonos, a dotted
//! capital I, a word inside an unspaced CJK sentence, a 64-character digest, a soft hyphen and a
//! zero-width space inside words, Hangul), synced with `mailgate index sync`, then searched
//! through the MCP client live, from the index, and hybrid: every source finds every word,
//! none answers `NOT_FOUND`; a query of no word and a query token the index cannot hold are
//! `SEARCH_INCOMPLETE` naming why, never `NOT_FOUND` or a wider match. Over both stores
//! ([`both_stores!`]): the shared store matches on the same tokens.

use std::path::Path;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::stores::{Store, both_stores};
use crate::util::{Client, World, maildir_box};

const DIGEST: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// (file name, subject, body) of each message; bodies are UTF-8 plain text.
fn messages() -> Vec<(&'static str, String, String)> {
    vec![
        (
            "1770000001.M1P1.t:2,",
            "Re\u{301}sume\u{301} for the role".to_owned(),
            "Attached is my re\u{301}sume\u{301}.".to_owned(),
        ),
        (
            "1770000002.M2P1.t:2,",
            "Ταξίδι".to_owned(),
            "Θα είμαι στην Αθήνα την Τρίτη.".to_owned(),
        ),
        (
            "1770000003.M3P1.t:2,",
            "Office move".to_owned(),
            "The team moves to the İstanbul office.".to_owned(),
        ),
        (
            "1770000004.M4P1.t:2,",
            "ご連絡".to_owned(),
            "私は東京都に住んでいます。見積書を送付します。".to_owned(),
        ),
        (
            "1770000005.M5P1.t:2,",
            "Invoice 7".to_owned(),
            format!("Invoice 7, checksum {DIGEST}."),
        ),
        (
            "1770000006.M6P1.t:2,",
            "Invoice 8".to_owned(),
            "Invoice 8, no checksum here.".to_owned(),
        ),
        (
            "1770000007.M7P1.t:2,",
            "Newsletter".to_owned(),
            "Read the new con\u{ad}tract terms. Kick\u{200b}off on Monday. ____".to_owned(),
        ),
        (
            "1770000008.M8P1.t:2,",
            "회의".to_owned(),
            "서울에서 만나요".to_owned(),
        ),
    ]
}

fn write_box(mail: &Path) {
    for (name, subject, body) in messages() {
        let raw = format!(
            "From: Ana Lima <ana.lima@example.com>\r\nTo: box@example.com\r\nSubject: =?UTF-8?B?{}?=\r\n\
             Message-ID: <{name}@example.com>\r\nDate: Mon, 2 Nov 2026 10:00:00 +0000\r\n\
             MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\
             Content-Transfer-Encoding: 8bit\r\n\r\n{body}\r\n",
            base64::engine::general_purpose::STANDARD.encode(subject.as_bytes())
        );
        std::fs::write(mail.join("cur").join(name), raw).unwrap();
    }
}

async fn synced(store: &Store) -> (World, String) {
    let world = store.world();
    let (mail, config) = maildir_box(&world, &[]);
    write_box(&mail);
    store.migrate(&world, &config).await;
    let out = world
        .run(&["--config", &config, "index", "sync", "box"])
        .await;
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (world, config)
}

async fn search(client: &Client, query: &str, source: &str) -> Value {
    client
        .ok(
            "search_mailbox",
            json!({ "mailbox": "box", "criteria": { "query": query, "source": source } }),
        )
        .await
}

fn subjects(answer: &Value) -> Vec<String> {
    answer["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .map(|m| m["subject"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

both_stores!(every_source_finds_what_the_reader_sees);
async fn every_source_finds_what_the_reader_sees(store: Store) {
    let (world, config) = synced(&store).await;
    let client = world.client(&["--config", &config, "serve"]).await;
    for (query, subject) in [
        ("résumé", "Résumé for the role"),
        ("resume", "Résumé for the role"),
        ("ΑΘΗΝΑ", "Ταξίδι"),
        ("αθηνα", "Ταξίδι"),
        ("istanbul", "Office move"),
        ("東京", "ご連絡"),
        ("見積書", "ご連絡"),
        (DIGEST, "Invoice 7"),
        (&DIGEST.to_uppercase(), "Invoice 7"),
        ("contract", "Newsletter"),
        ("kickoff", "Newsletter"),
        ("서울", "회의"),
    ] {
        for source in ["live", "index", "hybrid"] {
            let answer = search(&client, query, source).await;
            assert_eq!(answer["status"], "FOUND", "{query} from {source}: {answer}");
            let found = subjects(&answer);
            assert!(
                found.iter().any(|s| s.nfc_eq(subject)),
                "{query} from {source}: {found:?}"
            );
        }
    }
    // A digest the index holds narrows, never widens: the invoice without it is not listed.
    for source in ["live", "index", "hybrid"] {
        let answer = search(&client, &format!("invoice {DIGEST}"), source).await;
        assert_eq!(subjects(&answer), ["Invoice 7"], "{source}: {answer}");
    }
    client.close().await;
}

both_stores!(a_query_of_no_word_or_of_a_token_the_index_cannot_hold_proves_nothing);
async fn a_query_of_no_word_or_of_a_token_the_index_cannot_hold_proves_nothing(store: Store) {
    let (world, config) = synced(&store).await;
    let client = world.client(&["--config", &config, "serve"]).await;
    for source in ["live", "index", "hybrid"] {
        let answer = search(&client, "____", source).await;
        assert_eq!(answer["status"], "SEARCH_INCOMPLETE", "{source}: {answer}");
        assert!(
            answer["warnings"]
                .to_string()
                .contains("query_has_no_words"),
            "{source}: {answer}"
        );
    }
    // 400 Georgian letters: one token of 1,200 bytes, past what the index keeps.
    let long = "ა".repeat(400);
    let answer = search(&client, &long, "index").await;
    assert_eq!(answer["status"], "SEARCH_INCOMPLETE", "{answer}");
    assert!(
        answer["warnings"]
            .to_string()
            .contains("query_token_too_long"),
        "{answer}"
    );
    // The live scan can still answer it, and the hybrid answer is the live one's.
    let answer = search(&client, &long, "hybrid").await;
    assert_eq!(answer["status"], "NOT_FOUND", "{answer}");
    client.close().await;
}

/// Subjects compare as a reader sees them (the decomposed accents of the fixture).
trait NfcEq {
    fn nfc_eq(&self, other: &str) -> bool;
}

impl NfcEq for String {
    fn nfc_eq(&self, other: &str) -> bool {
        use unicode_normalization::UnicodeNormalization;
        self.nfc().eq(other.nfc())
    }
}
