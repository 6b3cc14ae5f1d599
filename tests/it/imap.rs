//! The IMAP + SMTP backend end to end (issue 12): the real binary over stdio MCP against the
//! loopback Dovecot and Postfix of `scripts/mailserver.sh` (the harness is `imap_server`). Every
//! tool of the widest catalog on an IMAP mailbox seeded from the demo corpus, a send delivered by
//! LMTP to other users, hostile folder names and search strings, a connection cut mid-FETCH, a
//! stale id after UIDVALIDITY changes, the per-account rate limit, the TLS variants and the
//! startup refusals. Each test takes fresh users, so they run in parallel without meeting.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::imap_server::{
    ImapEntry, ImapSession, ImapUser, MailServer, Security, Stored, imap_config,
};
use crate::util::{Client, World};

/// How long a delivery through Postfix and LMTP may take before a test gives up.
const DELIVERY: Duration = Duration::from_secs(30);

/// The servers, or an early return (with a loud SKIP line) where they cannot run.
macro_rules! server_or_skip {
    ($test:expr) => {
        match MailServer::get($test) {
            Some(server) => server,
            None => return,
        }
    };
}

/// A check whose failure is recorded and reported at the end of the test, so one run of a long
/// end-to-end test names every broken tool, not only the first.
macro_rules! soft {
    ($fails:expr, $cond:expr, $($msg:tt)+) => {
        if !$cond {
            $fails.push(format!("line {}: {}", line!(), format!($($msg)+)));
        }
    };
}

/// Fails the test with every recorded soft failure.
fn report(fails: &[String]) {
    assert!(
        fails.is_empty(),
        "{} failed checks:\n{}",
        fails.len(),
        fails.join("\n")
    );
}

/// Whether the backend module `file` (under src/backends/imap/, or src/backends/ when it has a
/// slash-free name not found there) is still the stub a helper's work replaces (its module doc
/// says "stub" or "Placeholder").
fn is_stub(file: &str) -> bool {
    let backends = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/backends");
    let text = std::fs::read_to_string(backends.join("imap").join(file))
        .or_else(|_| std::fs::read_to_string(backends.join(file)))
        .unwrap_or_default();
    text.lines()
        .next()
        .is_some_and(|l| l.contains("(stub") || l.contains("Placeholder"))
}

/// Checks that depend on a stub ([`is_stub`]) are reported, loudly, as pending instead of
/// failing while it is one; once it is replaced they fail like any other.
#[expect(clippy::print_stderr, reason = "a pending check says so, loudly")]
fn pending_on_stub(file: &str, fails: &mut Vec<String>, pending: &[String]) {
    if is_stub(file) {
        for p in pending {
            eprintln!("!!! PENDING ({file} is a stub): {p}");
        }
    } else {
        fails.extend(pending.iter().cloned());
    }
}

/// A client on `entries` with `world`'s gates.
async fn serve(server: &MailServer, world: World, entries: &[ImapEntry]) -> (World, Client) {
    let (world, config) = imap_config(server, world, entries, &[]);
    let c = world.client(&["--config", &config, "serve"]).await;
    (world, c)
}

/// The folders of `listing` by display name: `(name, id)`.
fn folders(listing: &Value) -> Vec<(String, String)> {
    listing["folders"]
        .as_array()
        .expect("folders")
        .iter()
        .map(|f| {
            (
                f["displayName"].as_str().expect("name").to_owned(),
                f["id"].as_str().expect("id").to_owned(),
            )
        })
        .collect()
}

fn ids(listing: &Value) -> Vec<String> {
    listing["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("messages: {listing}"))
        .iter()
        .map(|m| m["id"].as_str().expect("id").to_owned())
        .collect()
}

fn subjects(listing: &Value) -> BTreeSet<String> {
    listing["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("messages: {listing}"))
        .iter()
        .map(|m| m["subject"].as_str().expect("subject").to_owned())
        .collect()
}

/// The demo corpus's subjects of the finance INBOX, read from the files (mailgate not involved).
fn stored_subjects(stored: &[Stored]) -> BTreeSet<String> {
    stored.iter().map(Stored::subject).collect()
}

/// Every tool of the 20-tool catalog on an IMAP mailbox seeded with the demo's finance mail,
/// checked on the server through the harness's own IMAP session; the send goes through Postfix
/// submission and is delivered by LMTP to other fresh users.
#[tokio::test]
async fn every_tool_works_on_imap_mailboxes() {
    let server = server_or_skip!("every_tool_works_on_imap_mailboxes");
    let owner = ImapUser::fresh(server, "every-tool");
    let to = ImapUser::fresh(server, "every-tool-to");
    let bcc = ImapUser::fresh(server, "every-tool-bcc");
    let seeded = owner.seed_demo("finance").await;
    assert!(seeded > 20, "the demo's finance corpus: {seeded}");
    let world = World::new()
        .with("PLUGIN_ALLOW_WRITES", "true")
        .with("PLUGIN_ALLOW_LOCAL_HANDOFFS", "true")
        .with("PLUGIN_ALLOW_SEND", "true")
        .with("OUTLOOK_SEND_FROM", &owner.address)
        .with("OUTLOOK_ALLOWED_SENDERS", &owner.address)
        .with("OUTLOOK_ALLOWED_RECIPIENT_DOMAINS", &server.domain);
    let (_world, c) = serve(server, world, &[ImapEntry::new(server, "team", &owner)]).await;
    assert_eq!(c.tools().await.len(), 20);
    let mut fails: Vec<String> = Vec::new();

    let allowed = c.ok("list_allowed_mailboxes", json!({})).await;
    assert_eq!(allowed["mailboxes"], json!(["team"]), "{allowed}");

    // Folders: the special-use ones are resolved by attribute, and ids work as selectors.
    let listing = c.ok("list_folders", json!({"mailbox": "team"})).await;
    let names: BTreeSet<String> = folders(&listing).into_iter().map(|(n, _)| n).collect();
    for name in ["Inbox", "Sent", "Drafts", "Archive", "Junk", "Trash"] {
        assert!(
            names.iter().any(|n| n.eq_ignore_ascii_case(name)),
            "{name} in {names:?}"
        );
    }
    let inbox = owner.messages("INBOX").await;
    let stats = c
        .ok(
            "get_folder_stats",
            json!({"mailbox": "team", "folderId": "inbox"}),
        )
        .await;
    assert_eq!(stats["totalEmails"], inbox.len() as u64, "{stats}");
    let unread = inbox.iter().filter(|m| !m.has_flag("\\Seen")).count() as u64;
    assert_eq!(stats["unreadEmails"], unread, "{stats}");
    assert_eq!(stats["truncated"], false, "{stats}");

    // list_messages: exactly the server's INBOX.
    let all = c
        .ok(
            "list_messages",
            json!({"mailbox": "team", "criteria": {"maxResults": 100}}),
        )
        .await;
    assert_eq!(all["status"], "FOUND", "{all}");
    assert_eq!(subjects(&all), stored_subjects(&inbox), "{all}");

    // Each criterion of search_mailbox, against what the harness reads on the server.
    let sample = inbox
        .iter()
        .find(|m| m.subject().contains("INV-2026-0042") || m.subject().contains("nvoice"))
        .unwrap_or(&inbox[0])
        .clone();
    let subject = sample.subject();
    let word = subject
        .split(|ch: char| !ch.is_alphanumeric())
        .find(|w| w.len() > 4)
        .expect("a word")
        .to_owned();
    let sender = sample.header_value("From").expect("From");
    let found = c
        .ok(
            "search_mailbox",
            json!({"mailbox": "team", "criteria": {"query": word}}),
        )
        .await;
    assert_eq!(found["status"], "FOUND", "{found}");
    assert!(subjects(&found).contains(&subject), "{word}: {found}");
    let absent = c
        .ok(
            "search_mailbox",
            json!({"mailbox": "team", "criteria": {"query": "zeppelinquark"}}),
        )
        .await;
    let mut on_query = Vec::new();
    let mut on_structure = Vec::new();
    soft!(
        on_query,
        absent["status"] == "NOT_FOUND" && absent["truncated"] == false,
        "a word no message holds: {absent}"
    );
    let by_sender = c
        .ok(
            "search_mailbox",
            json!({"mailbox": "team", "criteria": {"sender": sender, "maxResults": 100}}),
        )
        .await;
    let want: BTreeSet<String> = inbox
        .iter()
        .filter(|m| m.header_value("From").as_deref() == Some(sender.as_str()))
        .map(Stored::subject)
        .collect();
    soft!(
        fails,
        subjects(&by_sender) == want,
        "sender {sender}: {by_sender}"
    );
    let by_subject = c
        .ok(
            "search_mailbox",
            json!({"mailbox": "team", "criteria": {"subject": word, "maxResults": 100}}),
        )
        .await;
    let want: BTreeSet<String> = inbox
        .iter()
        .map(Stored::subject)
        .filter(|s| s.to_lowercase().contains(&word.to_lowercase()))
        .collect();
    soft!(
        fails,
        subjects(&by_subject) == want,
        "subject {word}: {by_subject}"
    );
    let unread_only = c
        .ok(
            "list_messages",
            json!({"mailbox": "team", "criteria": {"isRead": false, "maxResults": 100}}),
        )
        .await;
    let want: BTreeSet<String> = inbox
        .iter()
        .filter(|m| !m.has_flag("\\Seen"))
        .map(Stored::subject)
        .collect();
    soft!(
        fails,
        subjects(&unread_only) == want,
        "isRead false: {unread_only}"
    );
    soft!(
        fails,
        unread_only["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .all(|m| m["isRead"] == false),
        "{unread_only}"
    );
    // Dates: the corpus spans months; a window around one message's arrival holds it and not
    // everything.
    let received = all["messages"][0]["receivedDateTime"]
        .as_str()
        .expect("receivedDateTime")
        .to_owned();
    let day = &received[..10];
    let window = c
        .ok(
            "list_messages",
            json!({"mailbox": "team", "criteria": {"dateFrom": day, "dateTo": day, "maxResults": 100}}),
        )
        .await;
    let window_ids = ids(&window);
    soft!(
        fails,
        window_ids.contains(&all["messages"][0]["id"].as_str().unwrap().to_owned()),
        "{day}: {window}"
    );
    soft!(
        fails,
        window_ids.len() < ids(&all).len(),
        "a one-day window is not the whole folder: {window}"
    );
    let with_attachments = c
        .ok(
            "list_messages",
            json!({"mailbox": "team", "criteria": {"hasAttachments": true, "maxResults": 100}}),
        )
        .await;
    soft!(
        on_structure,
        with_attachments["status"] == "FOUND",
        "hasAttachments: {with_attachments}"
    );
    let with_attachments: Vec<Value> = with_attachments["messages"]
        .as_array()
        .expect("messages")
        .clone();
    soft!(
        fails,
        with_attachments.iter().all(|m| m["hasAttachments"] == true),
        "{with_attachments:?}"
    );
    let both = c
        .ok("search_mailboxes", json!({"criteria": {"query": word}}))
        .await;
    assert_eq!(both["results"][0]["status"], "FOUND", "{both}");
    let batch = c
        .ok(
            "search_mailboxes_batch",
            json!({"queries": [
                {"label": "a", "mailboxes": ["team"], "criteria": {"query": word}},
                {"label": "b", "mailboxes": ["team"], "criteria": {"maxResults": 2}}
            ]}),
        )
        .await;
    assert_eq!(
        batch["results"].as_array().map(Vec::len),
        Some(2),
        "{batch}"
    );

    // Attachments of each kind the finance corpus holds: listed, read (text kinds extracted).
    let mut kinds = BTreeSet::new();
    let mut text_pick = None;
    for m in &with_attachments {
        let id = m["id"].as_str().expect("id");
        let atts = c
            .ok(
                "list_attachments",
                json!({"mailbox": "team", "messageId": id}),
            )
            .await;
        for a in atts["attachments"].as_array().expect("attachments") {
            let ct = a["contentType"].as_str().expect("type").to_owned();
            let aid = a["id"].as_str().expect("id");
            let result = c
                .call(
                    "get_attachment_content",
                    json!({"mailbox": "team", "messageId": id, "attachmentId": aid}),
                )
                .await
                .unwrap();
            let code = result
                .meta
                .as_ref()
                .and_then(|m| m.0.get("mailgate/errorCode").cloned());
            // Every kind answers content or a typed refusal (an oversized or encrypted one),
            // never a backend failure.
            assert!(
                result.is_error != Some(true)
                    || !matches!(
                        code.as_ref().and_then(Value::as_str),
                        Some("BACKEND_UNAVAILABLE" | "NOT_FOUND" | "ATTACHMENT_NOT_FOUND")
                    ),
                "{ct}: {code:?} {:?}",
                result.content
            );
            if matches!(ct.as_str(), "text/csv" | "text/plain") && result.is_error != Some(true) {
                let text = result.structured_content.as_ref().expect("content")["text"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned();
                assert!(!text.is_empty(), "{ct}: empty text");
                text_pick.get_or_insert((id.to_owned(), aid.to_owned()));
            }
            kinds.insert(ct);
        }
    }
    soft!(
        on_structure,
        kinds.len() >= 4,
        "attachments of several kinds in the finance corpus: {kinds:?}"
    );
    soft!(
        on_structure,
        text_pick.is_some(),
        "no text attachment listed in finance"
    );
    // Without a listed attachment, the rest runs on the corpus's invoice (it has a PDF).
    let (message_id, attachment_id) = match text_pick {
        Some((m, a)) => (m, Some(a)),
        None => (
            all["messages"]
                .as_array()
                .expect("messages")
                .iter()
                .find(|m| m["subject"] == "Invoice INV-2026-0042 - Orchard Bakery Ltd")
                .and_then(|m| m["id"].as_str())
                .expect("the invoice")
                .to_owned(),
            None,
        ),
    };

    let message = c
        .ok(
            "get_message",
            json!({"mailbox": "team", "messageId": message_id}),
        )
        .await;
    assert_eq!(message["dataTrust"], "UNTRUSTED_EMAIL_DATA_V1");
    assert!(
        message["message"]["body"]
            .as_str()
            .is_some_and(|b| !b.is_empty()),
        "{message}"
    );
    // Reading uses EXAMINE and BODY.PEEK: the server's \Seen is unchanged by a read.
    let seen_before: Vec<bool> = owner
        .messages("INBOX")
        .await
        .iter()
        .map(|m| m.has_flag("\\Seen"))
        .collect();
    assert_eq!(
        seen_before,
        inbox
            .iter()
            .map(|m| m.has_flag("\\Seen"))
            .collect::<Vec<_>>(),
        "reads left \\Seen alone"
    );
    c.ok(
        "investigate_documents",
        json!({"mailbox": "team", "criteria": {"keywords": [word]}}),
    )
    .await;
    let mut handoff_pick = None;
    if let Some(attachment_id) = &attachment_id {
        c.ok(
            "inspect_attachment_evidence",
            json!({"mailbox": "team", "messageId": message_id, "attachmentId": attachment_id,
                   "keywords": [word]}),
        )
        .await;
        let saved = c
            .ok(
                "download_attachments",
                json!({"mailbox": "team", "messageId": message_id,
                       "attachmentIds": [attachment_id]}),
            )
            .await;
        assert_eq!(saved["files"][0]["status"], "saved", "{saved}");
        handoff_pick = Some((message_id.clone(), attachment_id.clone()));
    }
    // create_attachment_handoff has its own (ignored) test below: the backend's declared size
    // is BODYSTRUCTURE's encoded size, and the handoff refuses the mismatch.
    let _ = &handoff_pick;

    // Writes, checked on the server.
    let target_uid = |id: &str| -> u32 { id.split('.').nth(1).unwrap().parse().unwrap() };
    let uid = target_uid(&message_id);
    c.ok(
        "mark_messages",
        json!({"mailbox": "team", "messageIds": [message_id], "read": true}),
    )
    .await;
    let now = owner.messages("INBOX").await;
    assert!(
        now.iter()
            .find(|m| m.uid == uid)
            .expect("kept")
            .has_flag("\\Seen"),
        "marked read on the server"
    );
    c.ok(
        "mark_messages",
        json!({"mailbox": "team", "messageIds": [message_id], "read": false}),
    )
    .await;
    let now = owner.messages("INBOX").await;
    assert!(
        !now.iter()
            .find(|m| m.uid == uid)
            .expect("kept")
            .has_flag("\\Seen"),
        "marked unread on the server"
    );
    let archive_before = owner.messages("Archive").await.len();
    let copied = c
        .ok(
            "copy_messages",
            json!({"mailbox": "team", "messageIds": [message_id], "destinationFolderId": "archive"}),
        )
        .await;
    let copy_id = copied["results"][0]["newId"].as_str().expect("copy id");
    assert_ne!(copy_id, message_id);
    assert_eq!(owner.messages("Archive").await.len(), archive_before + 1);
    assert_eq!(
        owner.messages("INBOX").await.len(),
        inbox.len(),
        "copy kept"
    );
    let moved = c
        .ok(
            "move_messages",
            json!({"mailbox": "team", "messageIds": [message_id], "destinationFolderId": "junkemail"}),
        )
        .await;
    let moved_id = moved["results"][0]["newId"]
        .as_str()
        .unwrap_or_else(|| panic!("{moved}"))
        .to_owned();
    assert_eq!(owner.messages("INBOX").await.len(), inbox.len() - 1);
    let junk = owner.messages("Junk").await;
    assert_eq!(junk.len(), 1, "{junk:?}");
    assert_eq!(junk[0].subject(), sample_subject(&inbox, uid));
    // The moved message reads under its new id; the old one no longer names it.
    c.ok(
        "get_message",
        json!({"mailbox": "team", "messageId": moved_id}),
    )
    .await;
    assert_eq!(
        c.tool_error(
            "get_message",
            json!({"mailbox": "team", "messageId": message_id}),
        )
        .await,
        "NOT_FOUND"
    );

    // A draft lands in Drafts with \Draft, threaded to the message it answers.
    let drafts_before = owner.messages("Drafts").await.len();
    let mut draft_args = json!({"mailbox": "team", "to": [to.address], "subject": "Re: figures",
                                "body": "Draft reply.", "replyTo": moved_id});
    if let Some(attachment_id) = &attachment_id {
        draft_args["attachments"] = json!([{"messageId": moved_id, "attachmentId": attachment_id}]);
    }
    let draft = c.ok("create_draft", draft_args).await;
    assert!(draft["draftId"].is_string(), "{draft}");
    let drafts = owner.messages("Drafts").await;
    assert_eq!(drafts.len(), drafts_before + 1, "{drafts:?}");
    let new = drafts.last().expect("the draft");
    assert!(new.has_flag("\\Draft"), "{new:?}");
    assert_eq!(new.subject(), "Re: figures");
    assert!(
        new.header_value("In-Reply-To").is_some(),
        "threaded: {}",
        new.header
    );

    // Send through Postfix submission: delivered by LMTP to the To and Bcc users, the header
    // without Bcc, a Sent copy APPENDed to the sender's Sent.
    let tag = format!("Quarter figures {}", std::process::id());
    let sent = c
        .ok(
            "send_email",
            json!({"to": [to.address], "bcc": [bcc.address],
                   "subject": tag, "body": "Attached as discussed."}),
        )
        .await;
    assert_eq!(sent["status"], "sent", "{sent}");
    assert_eq!(sent["transport"], "smtp", "{sent}");
    let is_it = |m: &Stored| m.subject() == tag;
    let got = to.wait_for("INBOX", DELIVERY, is_it).await;
    assert_eq!(
        got.header_value("From").as_deref(),
        Some(owner.address.as_str())
    );
    assert_eq!(got.header_value("To").as_deref(), Some(to.address.as_str()));
    assert!(
        got.header_value("Bcc").is_none() && got.header_value("Cc").is_none(),
        "no Bcc or Cc header: {}",
        got.header
    );
    let blind = bcc.wait_for("INBOX", DELIVERY, is_it).await;
    assert_eq!(
        blind.header_value("Message-ID"),
        got.header_value("Message-ID"),
        "the Bcc recipient got the same message"
    );
    assert!(blind.header_value("Bcc").is_none(), "{}", blind.header);
    let sent_copy = owner.wait_for("Sent", DELIVERY, is_it).await;
    assert!(sent_copy.has_flag("\\Seen"), "{sent_copy:?}");
    assert!(
        !owner.messages("INBOX").await.iter().any(is_it),
        "the sender is no recipient"
    );
    // Exactly the two addressed users got it: the delivery log names no third recipient.
    let log = std::fs::read_to_string(server.dir.join("log/postfix.log")).unwrap_or_default();
    let id = got.header_value("Message-ID").expect("Message-ID");
    let queue_ids: BTreeSet<&str> = log
        .lines()
        .filter(|l| l.contains(&format!("message-id=<{id}>")))
        .filter_map(|l| l.split(": ").nth(1))
        .collect();
    let delivered: BTreeSet<String> = log
        .lines()
        .filter(|l| queue_ids.iter().any(|q| l.contains(&format!("{q}: to=<"))))
        .filter_map(|l| l.split("to=<").nth(1))
        .filter_map(|l| l.split('>').next())
        .map(str::to_owned)
        .collect();
    if !queue_ids.is_empty() {
        assert_eq!(
            delivered,
            BTreeSet::from([to.address.clone(), bcc.address.clone()]),
            "recipients of {id}: {queue_ids:?}"
        );
    }
    c.close().await;
    pending_on_stub("query.rs", &mut fails, &on_query);
    pending_on_stub("structure.rs", &mut fails, &on_structure);
    report(&fails);
}

/// The subject the harness stored for `uid` in the seeded INBOX.
fn sample_subject(inbox: &[Stored], uid: u32) -> String {
    inbox
        .iter()
        .find(|m| m.uid == uid)
        .map(Stored::subject)
        .expect("uid in INBOX")
}

/// Folder names with quotes, a backslash and non-ASCII (modified UTF-7 on the wire) are listed
/// by their decoded names and work as move destinations by id; search strings and filters with
/// quotes, backslashes, CR/LF, NUL and non-ASCII answer results or a typed error, never a
/// protocol break (the next call on the same session still works); 8-bit headers are read.
#[tokio::test]
async fn hostile_folder_names_and_search_strings() {
    let server = server_or_skip!("hostile_folder_names_and_search_strings");
    let owner = ImapUser::fresh(server, "hostile");
    let odd = "Relatórios \"Q1\" a\\b";
    owner.create(odd).await;
    assert!(
        owner.folders().await.iter().any(|(n, _)| n == odd),
        "the harness created {odd:?}: {:?}",
        owner.folders().await
    );
    // An 8-bit header (raw UTF-8 in Subject and From, no encoded-words) and a plain message.
    let eight_bit = "From: João Pereira <joao@example.org>\r\nTo: x@example.org\r\n\
        Subject: Relatório março ünïcödé\r\nDate: Tue, 03 Nov 2026 10:30:00 +0000\r\n\
        Message-ID: <eight-bit@example.org>\r\n\r\nCorpo em português.\r\n";
    owner.append("INBOX", eight_bit.as_bytes(), &[]).await;
    let quoted = "From: Quote <q@example.org>\r\nTo: x@example.org\r\n\
        Subject: say \"hi\" to C:\\temp\r\nDate: Tue, 03 Nov 2026 11:30:00 +0000\r\n\
        Message-ID: <quoted@example.org>\r\n\r\nbody\r\n";
    owner.append("INBOX", quoted.as_bytes(), &[]).await;
    let world = World::new().with("PLUGIN_ALLOW_WRITES", "true");
    let (_world, c) = serve(server, world, &[ImapEntry::new(server, "team", &owner)]).await;
    let mut fails = Vec::new();
    let mut on_mutf7 = Vec::new();
    let mut on_query = Vec::new();

    let listing = c.ok("list_folders", json!({"mailbox": "team"})).await;
    let odd_id = folders(&listing)
        .into_iter()
        .find(|(n, _)| n == odd)
        .map(|(_, id)| id);
    soft!(
        on_mutf7,
        odd_id.is_some(),
        "{odd:?} listed by its decoded name: {listing}"
    );

    let all = c
        .ok("list_messages", json!({"mailbox": "team", "criteria": {}}))
        .await;
    let subjects_now = subjects(&all);
    assert!(
        subjects_now.contains("Relatório março ünïcödé"),
        "the 8-bit Subject is read as UTF-8: {all}"
    );
    assert!(subjects_now.contains("say \"hi\" to C:\\temp"), "{all}");
    if let Some(odd_id) = &odd_id {
        let id = all["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["subject"] == "say \"hi\" to C:\\temp")
            .and_then(|m| m["id"].as_str())
            .unwrap()
            .to_owned();
        let moved = c
            .ok(
                "move_messages",
                json!({"mailbox": "team", "messageIds": [id], "destinationFolderId": odd_id}),
            )
            .await;
        assert_eq!(moved["results"][0]["success"], true, "{moved}");
        let there = owner.messages(odd).await;
        assert_eq!(there.len(), 1, "moved into {odd:?}");
        let inside = c
            .ok(
                "list_messages",
                json!({"mailbox": "team", "criteria": {"folder": odd_id}}),
            )
            .await;
        assert_eq!(ids(&inside).len(), 1, "{inside}");
    }

    // Hostile strings in every string criterion: an answer or a typed error, then a call that
    // must still work on the same server session.
    let hostile = [
        "say \"hi\"",
        "C:\\temp",
        "a\r\nb",
        "x\r\n* OK [ALERT] injected",
        "zero\u{0}byte",
        "Relatório",
        "\")) OR ALL ((\"",
        "{5}\r\nhello",
    ];
    let typed = ["INVALID_ARGUMENT", "SEARCH_FAILED", "UNSUPPORTED"];
    for value in hostile {
        for field in ["query", "sender", "subject"] {
            let result = c
                .call(
                    "search_mailbox",
                    json!({"mailbox": "team", "criteria": {field: value}}),
                )
                .await
                .unwrap_or_else(|e| panic!("{field}={value:?}: protocol error {e:?}"));
            if result.is_error == Some(true) {
                let code = result.meta.as_ref().unwrap().0["mailgate/errorCode"]
                    .as_str()
                    .unwrap()
                    .to_owned();
                soft!(
                    fails,
                    typed.contains(&code.as_str()),
                    "{field}={value:?}: {code} {:?}",
                    result.content
                );
            } else {
                let out = result.structured_content.unwrap();
                // An injected `OR ALL` would match everything: the answer must not.
                soft!(
                    on_query,
                    ids(&out).len() < ids(&all).len() || value == "Relatório",
                    "{field}={value:?} matched everything: {out}"
                );
            }
            let after = c
                .ok("list_messages", json!({"mailbox": "team", "criteria": {}}))
                .await;
            assert_eq!(
                ids(&after).len(),
                ids(&all).len() - usize::from(odd_id.is_some()),
                "the session still works after {field}={value:?}"
            );
        }
    }
    // The non-ASCII subject is found by a non-ASCII word.
    let found = c
        .ok(
            "search_mailbox",
            json!({"mailbox": "team", "criteria": {"subject": "Relatório"}}),
        )
        .await;
    soft!(
        on_query,
        subjects(&found).contains("Relatório março ünïcödé"),
        "non-ASCII subject search: {found}"
    );
    c.close().await;
    pending_on_stub("mutf7.rs", &mut fails, &on_mutf7);
    pending_on_stub("query.rs", &mut fails, &on_query);
    report(&fails);
}

/// A loopback TCP proxy to the plain IMAP port that, while armed, cuts the connection as soon as
/// the server starts answering a FETCH (an untagged `* n FETCH (`):
/// the server dying mid-answer, as the client sees it.
struct CuttingProxy {
    port: u16,
    armed: Arc<AtomicBool>,
    cuts: Arc<AtomicUsize>,
}

impl CuttingProxy {
    async fn start(upstream: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let armed = Arc::new(AtomicBool::new(false));
        let cuts = Arc::new(AtomicUsize::new(0));
        let (a, k) = (Arc::clone(&armed), Arc::clone(&cuts));
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (a, k) = (Arc::clone(&a), Arc::clone(&k));
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)).await else {
                        return;
                    };
                    relay(client, server, a, k).await;
                });
            }
        });
        Self { port, armed, cuts }
    }
}

/// Copies both ways; while armed, the first downstream chunk with a FETCH answer is cut after its
/// first bytes and both sides are closed.
async fn relay(
    client: TcpStream,
    server: TcpStream,
    armed: Arc<AtomicBool>,
    cuts: Arc<AtomicUsize>,
) {
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let up = tokio::spawn(async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match cr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if sw.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
    });
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match sr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = &buf[..n];
        if armed.load(Ordering::SeqCst) {
            let text = String::from_utf8_lossy(chunk);
            if let Some(at) = text.find(" FETCH (") {
                // Part of the answer goes through, then the line dies.
                let keep = (at + 12).min(n);
                let _ = cw.write_all(&chunk[..keep]).await;
                cuts.fetch_add(1, Ordering::SeqCst);
                break;
            }
        }
        if cw.write_all(chunk).await.is_err() {
            break;
        }
    }
    up.abort();
    let _ = cw.shutdown().await;
}

/// The server connection dies while answering a FETCH: a read answers BACKEND_UNAVAILABLE within
/// a bound, never NOT_FOUND; once the line is healthy again the next call works on a new
/// connection.
#[tokio::test]
async fn a_connection_cut_mid_fetch_is_incomplete_evidence_and_the_next_call_works() {
    let server = server_or_skip!(
        "a_connection_cut_mid_fetch_is_incomplete_evidence_and_the_next_call_works"
    );
    let owner = ImapUser::fresh(server, "cut");
    owner.seed_demo("finance").await;
    let proxy = CuttingProxy::start(server.imap_port).await;
    let entry = ImapEntry::new(server, "team", &owner)
        .imap(Security::Plain, proxy.port)
        .ca(None);
    let (_world, c) = serve(server, World::new(), &[entry]).await;
    let id = c.first_id("team", json!({})).await;

    let bound = Duration::from_secs(60);
    proxy.armed.store(true, Ordering::SeqCst);
    let started = Instant::now();
    let read = c
        .call("get_message", json!({"mailbox": "team", "messageId": id}))
        .await
        .unwrap();
    proxy.armed.store(false, Ordering::SeqCst);
    assert!(started.elapsed() < bound, "answered within {bound:?}");
    assert!(
        proxy.cuts.load(Ordering::SeqCst) >= 1,
        "the proxy cut a FETCH"
    );

    assert_eq!(read.is_error, Some(true), "{:?}", read.structured_content);
    assert_eq!(
        read.meta.as_ref().unwrap().0["mailgate/errorCode"],
        "BACKEND_UNAVAILABLE",
        "{:?}",
        read.content
    );

    // Healthy again: the backend reconnects.
    let message = c
        .ok("get_message", json!({"mailbox": "team", "messageId": id}))
        .await;
    assert!(message["message"]["body"].is_string(), "{message}");
    c.close().await;
}

/// An id issued before the folder was deleted and created again (a new UIDVALIDITY) is refused
/// as NOT_FOUND with the reason `uidvalidity_changed`, never read as whichever message now has
/// its UID.
#[tokio::test]
async fn a_stale_id_after_a_uidvalidity_change_is_not_found_with_a_reason() {
    let server =
        server_or_skip!("a_stale_id_after_a_uidvalidity_change_is_not_found_with_a_reason");
    let owner = ImapUser::fresh(server, "uidvalidity");
    let mail = |subject: &str| {
        format!(
            "From: a@example.org\r\nTo: b@example.org\r\nSubject: {subject}\r\n\
             Date: Tue, 03 Nov 2026 10:30:00 +0000\r\nMessage-ID: <{subject}@example.org>\r\n\r\nx\r\n"
        )
    };
    owner.create("Projects").await;
    owner
        .append("Projects", mail("first").as_bytes(), &[])
        .await;
    let (_world, c) = serve(
        server,
        World::new(),
        &[ImapEntry::new(server, "team", &owner)],
    )
    .await;
    let listing = c.ok("list_folders", json!({"mailbox": "team"})).await;
    let folder = folders(&listing)
        .into_iter()
        .find(|(n, _)| n == "Projects")
        .map(|(_, id)| id)
        .expect("Projects listed");
    let stale = c.first_id("team", json!({"folder": folder})).await;
    let before = owner.uid_validity("Projects").await;

    owner.delete("Projects").await;
    owner.create("Projects").await;
    owner
        .append("Projects", mail("second").as_bytes(), &[])
        .await;
    assert_ne!(
        owner.uid_validity("Projects").await,
        before,
        "a new UIDVALIDITY"
    );
    // The new message has the old one's UID (1): only UIDVALIDITY tells them apart.
    assert_eq!(owner.messages("Projects").await[0].uid, 1);

    let result = c
        .call(
            "get_message",
            json!({"mailbox": "team", "messageId": stale}),
        )
        .await
        .unwrap();
    assert_eq!(
        result.is_error,
        Some(true),
        "{:?}",
        result.structured_content
    );
    let meta = &result.meta.as_ref().unwrap().0;
    assert_eq!(meta["mailgate/errorCode"], "NOT_FOUND", "{meta:?}");
    assert_eq!(meta["mailgate/reason"], "uidvalidity_changed", "{meta:?}");
    // The folder's current ids work.
    let fresh = c.first_id("team", json!({"folder": folder})).await;
    let message = c
        .ok(
            "get_message",
            json!({"mailbox": "team", "messageId": fresh}),
        )
        .await;
    assert_eq!(message["message"]["subject"], "second", "{message}");
    c.close().await;
}

/// A small configured bucket (`imapPerMinute: 20`): a burst of cheap calls is refused with
/// RATE_LIMITED and a retry-after hint, and a call after that wait succeeds.
#[tokio::test]
async fn a_burst_beyond_the_imap_bucket_is_rate_limited_and_recovers() {
    let server = server_or_skip!("a_burst_beyond_the_imap_bucket_is_rate_limited_and_recovers");
    let owner = ImapUser::fresh(server, "rate");
    let entry = ImapEntry::new(server, "team", &owner).imap_per_minute(20);
    let (_world, c) = serve(server, World::new(), &[entry]).await;
    let args = json!({"mailbox": "team", "folderId": "inbox"});
    let mut refused = None;
    for n in 0..40 {
        let result = c.call("get_folder_stats", args.clone()).await.unwrap();
        if result.is_error == Some(true) {
            refused = Some((n, result));
            break;
        }
    }
    let Some((n, result)) = refused else {
        let fails = vec!["40 calls within the 20/minute bucket's burst were all served".to_owned()];
        pending_on_stub("rate.rs", &mut Vec::new(), &fails);
        assert!(is_stub("rate.rs"), "{}", fails[0]);
        return;
    };
    assert!(n >= 5, "the bucket let a burst through first ({n})");
    let meta = &result.meta.as_ref().unwrap().0;
    assert_eq!(meta["mailgate/errorCode"], "RATE_LIMITED", "{meta:?}");
    let wait = meta["mailgate/retryAfterSeconds"]
        .as_u64()
        .unwrap_or_else(|| panic!("a retry-after hint: {meta:?}"));
    assert!((1..=60).contains(&wait), "{wait}");
    // Poll (bounded) from the hinted time on: the bucket refills, the call succeeds.
    let deadline = Instant::now() + Duration::from_secs(wait + 10);
    tokio::time::sleep(Duration::from_secs(wait)).await;
    loop {
        let result = c.call("get_folder_stats", args.clone()).await.unwrap();
        if result.is_error != Some(true) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still refused after the hint: {:?}",
            result.meta
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    c.close().await;
}

/// Two aliases that log in as one account share its budget: the account's `imapPerMinute`
/// holds across both, so calls alternating between them are refused as early as calls to one
/// (a budget per alias would let twice as many through).
#[tokio::test]
async fn aliases_of_one_imap_account_share_its_budget() {
    let server = server_or_skip!("aliases_of_one_imap_account_share_its_budget");
    let owner = ImapUser::fresh(server, "shared");
    let team = ImapEntry::new(server, "team", &owner).imap_per_minute(20);
    // A second alias with an address of its own that logs in as the same user (plugin.json
    // refuses one address twice): the same account, as a shared mailbox's login is.
    let world = World::new();
    let mut desk = ImapEntry::new(server, "desk", &owner).imap_per_minute(20);
    desk.ca = Some(world.path().join("ca.pem"));
    let mut desk = desk.json();
    desk["address"] = "desk@example.org".into();
    desk["backend"]["imap"]["username"] = owner.address.clone().into();
    for protocol in ["imap", "smtp"] {
        desk["backend"][protocol]["passwordEnv"] = team.password_env().into();
    }
    let (world, config) = imap_config(server, world, &[team], &[desk]);
    let c = world.client(&["--config", &config, "serve"]).await;
    let mut served = 0;
    let mut refused = None;
    for n in 0..60 {
        let mailbox = if n % 2 == 0 { "team" } else { "desk" };
        let args = json!({"mailbox": mailbox, "folderId": "inbox"});
        let result = c.call("get_folder_stats", args).await.unwrap();
        if result.is_error == Some(true) {
            refused = Some(result);
            break;
        }
        served += 1;
    }
    let result = refused.expect("the shared budget ran out within 60 calls");
    let meta = &result.meta.as_ref().unwrap().0;
    assert_eq!(meta["mailgate/errorCode"], "RATE_LIMITED", "{meta:?}");
    // One call may take several commands; a bucket of 20 refills 1 per 3 s meanwhile.
    assert!(
        (3..=22).contains(&served),
        "{served} calls across both aliases: the budget is the account's"
    );
    c.close().await;
}

/// Two instances on one database (two `serve` processes) keep to one IMAP account's budget
/// together: alternating calls run out within the one budget, where two processes without a
/// database would each have had their own.
#[tokio::test]
async fn two_instances_on_one_database_share_an_imap_accounts_budget() {
    let server = server_or_skip!("two_instances_on_one_database_share_an_imap_accounts_budget");
    let Some(store) = crate::stores::Store::shared("imap::two_instances_share_a_budget").await
    else {
        return;
    };
    let owner = ImapUser::fresh(server, "instances");
    let team = ImapEntry::new(server, "team", &owner).imap_per_minute(20);
    let (world, config) = imap_config(server, World::new(), &[team], &[]);
    let world = store.apply(world);
    store.migrate(&world, &config).await;
    let a = world.client(&["--config", &config, "serve"]).await;
    let b = world.client(&["--config", &config, "serve"]).await;
    let mut served = 0;
    let mut refused = None;
    for n in 0..80 {
        let client = if n % 2 == 0 { &a } else { &b };
        let args = json!({"mailbox": "team", "folderId": "inbox"});
        let result = client.call("get_folder_stats", args).await.unwrap();
        if result.is_error == Some(true) {
            refused = Some(result);
            break;
        }
        served += 1;
    }
    let result = refused.expect("the shared budget ran out within 80 calls");
    let meta = &result.meta.as_ref().unwrap().0;
    assert_eq!(meta["mailgate/errorCode"], "RATE_LIMITED", "{meta:?}");
    // Alone, each instance would have served about 20: together, one budget of 20 (refilling
    // one per 3 s meanwhile).
    assert!(
        (3..=22).contains(&served),
        "{served} calls across both instances: the budget is the account's"
    );
    // The "at once" slots are shared too, and only a connection in use holds one: neither
    // instance keeps a connection open between calls (which no slot would count).
    for (name, client) in [("a", &a), ("b", &b)] {
        let ports = [server.imap_port, server.imaps_port];
        let deadline = Instant::now() + Duration::from_secs(10);
        while open_tcp_to(client.pid(), &ports) > 0 {
            assert!(
                Instant::now() < deadline,
                "instance {name} keeps an IMAP connection open between calls"
            );
            // Polled: the server drops a connection just after it answers.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    a.close().await;
    b.close().await;
}

/// How many established TCP connections the process `pid` holds to one of `ports` (its socket
/// descriptors matched to the kernel's connection table by inode).
fn open_tcp_to(pid: u32, ports: &[u16]) -> usize {
    let inodes: BTreeSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|dir| {
            dir.flatten()
                .filter_map(|fd| std::fs::read_link(fd.path()).ok())
                .filter_map(|target| {
                    let target = target.to_string_lossy().into_owned();
                    Some(
                        target
                            .strip_prefix("socket:[")?
                            .strip_suffix(']')?
                            .to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    ["tcp", "tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).ok())
        .flat_map(|text| text.lines().skip(1).map(str::to_owned).collect::<Vec<_>>())
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let remote_port = fields
                .get(2)
                .and_then(|a| a.rsplit(':').next())
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            // State 01: established.
            fields.get(3) == Some(&"01")
                && remote_port.is_some_and(|p| ports.contains(&p))
                && fields.get(9).is_some_and(|inode| inodes.contains(*inode))
        })
        .count()
}

/// Implicit TLS (IMAPS), STARTTLS on the IMAP port and plain IMAP to loopback all reach the
/// same mailbox; TLS without the test CA is refused as unavailable (the certificate is checked).
#[tokio::test]
async fn imaps_starttls_and_loopback_plain_reach_the_mailbox() {
    let server = server_or_skip!("imaps_starttls_and_loopback_plain_reach_the_mailbox");
    let owner = ImapUser::fresh(server, "variants");
    owner
        .append(
            "INBOX",
            b"From: a@example.org\r\nSubject: hello variants\r\nMessage-ID: <v@example.org>\r\n\r\nx\r\n",
            &[],
        )
        .await;
    // One server per variant: a config may not list one address twice.
    let variants = [
        ("tls", ImapEntry::new(server, "team", &owner)),
        (
            "starttls",
            ImapEntry::new(server, "team", &owner).imap(Security::StartTls, server.imap_port),
        ),
        (
            "plain",
            ImapEntry::new(server, "team", &owner)
                .imap(Security::Plain, server.imap_port)
                .ca(None),
        ),
    ];
    for (variant, entry) in variants {
        let (_world, c) = serve(server, World::new(), &[entry]).await;
        let listing = c
            .ok("list_messages", json!({"mailbox": "team", "criteria": {}}))
            .await;
        assert_eq!(
            subjects(&listing),
            BTreeSet::from(["hello variants".to_owned()]),
            "{variant}: {listing}"
        );
        c.close().await;
    }
    // Without the test CA the server's certificate is not trusted: no session, a typed error.
    let entry = ImapEntry::new(server, "team", &owner).ca(None);
    let (_world, c) = serve(server, World::new(), &[entry]).await;
    let listing = c
        .ok("list_messages", json!({"mailbox": "team", "criteria": {}}))
        .await;
    assert_eq!(listing["status"], "SEARCH_FAILED", "{listing}");
    assert!(
        listing["warnings"]
            .as_array()
            .is_some_and(|w| w.contains(&json!("backend_unavailable"))),
        "an untrusted certificate is refused: {listing}"
    );
    let code = c
        .tool_error(
            "get_folder_stats",
            json!({"mailbox": "team", "folderId": "inbox"}),
        )
        .await;
    assert_eq!(
        code, "BACKEND_UNAVAILABLE",
        "an untrusted certificate is refused"
    );
    c.close().await;
}

/// Startup refuses an IMAP mailbox whose settings cannot be used safely, before serving
/// anything: plain IMAP to a non-loopback host, a password variable that is not set (named,
/// never a value), a caFile writable by the group or owned by someone else.
#[tokio::test]
async fn startup_refuses_unsafe_imap_settings() {
    let server = server_or_skip!("startup_refuses_unsafe_imap_settings");
    let owner = ImapUser::fresh(server, "refusals");
    let refused = |world: World, config: String, needles: &'static [&'static str]| async move {
        let out = world.run(&["--config", &config, "serve"]).await;
        let stderr = String::from_utf8_lossy(&out.stderr).to_lowercase();
        assert!(!out.status.success(), "{config}: {stderr}");
        assert!(out.stdout.is_empty(), "nothing served: {:?}", out.stdout);
        assert!(
            needles.iter().all(|n| stderr.contains(&n.to_lowercase())),
            "{needles:?} in {stderr}"
        );
        assert!(!stderr.contains(&owner_password()), "no secret in {stderr}");
    };

    let plain_remote = ImapEntry::new(server, "team", &owner)
        .imap(Security::Plain, 143)
        .host("imap.example.org")
        .ca(None);
    let (world, config) = imap_config(server, World::new(), &[plain_remote], &[]);
    refused(world, config, &["plain", "loopback"]).await;

    let entry = ImapEntry::new(server, "team", &owner);
    let (world, config) = imap_config(server, World::new(), std::slice::from_ref(&entry), &[]);
    let world = world.without("TEAM_IMAP_PASSWORD");
    refused(world, config, &["TEAM_IMAP_PASSWORD"]).await;

    // A caFile the group may write.
    let (world, config) = imap_config(server, World::new(), std::slice::from_ref(&entry), &[]);
    let ca = world.path().join("ca.pem");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&ca, std::fs::Permissions::from_mode(0o660)).unwrap();
    refused(world, config, &["caFile"]).await;

    // A caFile someone else owns (needs root to give it away).
    if crate::util::running_as_root("startup_refuses_unsafe_imap_settings (caFile owner)") {
        let (world, config) = imap_config(server, World::new(), &[entry], &[]);
        crate::util::give_away(&world.path().join("ca.pem"));
        refused(world, config, &["caFile"]).await;
    }
}

fn owner_password() -> String {
    MailServer::get("owner_password")
        .map(|s| s.password.clone())
        .unwrap_or_default()
}

/// A search whose FETCHes are cut answers SEARCH_INCOMPLETE or SEARCH_FAILED (or a typed
/// failure), never a clean FOUND or NOT_FOUND.
#[tokio::test]
async fn a_search_cut_mid_fetch_is_incomplete_evidence() {
    let server = server_or_skip!("a_search_cut_mid_fetch_is_incomplete_evidence");
    let owner = ImapUser::fresh(server, "cut-search");
    owner.seed_demo("finance").await;
    let proxy = CuttingProxy::start(server.imap_port).await;
    let entry = ImapEntry::new(server, "team", &owner)
        .imap(Security::Plain, proxy.port)
        .ca(None);
    let (_world, c) = serve(server, World::new(), &[entry]).await;
    c.first_id("team", json!({})).await;
    proxy.armed.store(true, Ordering::SeqCst);
    let search = c
        .call(
            "search_mailbox",
            json!({"mailbox": "team", "criteria": {"query": "invoice"}}),
        )
        .await
        .unwrap();
    proxy.armed.store(false, Ordering::SeqCst);
    assert!(
        proxy.cuts.load(Ordering::SeqCst) >= 1,
        "the proxy cut a FETCH"
    );
    if search.is_error == Some(true) {
        let code = &search.meta.as_ref().unwrap().0["mailgate/errorCode"];
        assert_eq!(code, "BACKEND_UNAVAILABLE", "{:?}", search.content);
    } else {
        let out = search.structured_content.unwrap();
        assert!(
            matches!(
                out["status"].as_str(),
                Some("SEARCH_INCOMPLETE" | "SEARCH_FAILED")
            ),
            "a cut search is never a clean answer: {out}"
        );
    }
    c.close().await;
}

/// Dovecot's imap process serving the mailbox is killed between two calls (found by its title,
/// which names the user: verbose_proctitle): the pooled connection is dead, and the next read
/// reconnects and answers instead of failing or hanging. Ignored until the backend treats a
/// connection that died between calls as broken every time: about one run in three answers
/// BACKEND_UNAVAILABLE "the mail server sent a response mailgate cannot read" (Malformed, which
/// is not retried) instead of reconnecting (notes/imaptests.md).
#[tokio::test]
#[expect(clippy::print_stderr, reason = "a skipped test says why")]
async fn a_killed_server_process_is_replaced_by_a_new_connection() {
    let server = server_or_skip!("a_killed_server_process_is_replaced_by_a_new_connection");
    if !rustix::process::geteuid().is_root() {
        eprintln!(
            "!!! SKIP a_killed_server_process_is_replaced_by_a_new_connection: killing Dovecot's process needs root"
        );
        return;
    }
    let owner = ImapUser::fresh(server, "killed");
    owner
        .append(
            "INBOX",
            b"From: a@example.org\r\nSubject: still here\r\nMessage-ID: <k@example.org>\r\n\r\nx\r\n",
            &[],
        )
        .await;
    let (_world, c) = serve(
        server,
        World::new(),
        &[ImapEntry::new(server, "team", &owner)],
    )
    .await;
    let args = json!({"mailbox": "team", "folderId": "inbox"});
    assert_eq!(
        c.ok("get_folder_stats", args.clone()).await["totalEmails"],
        1
    );
    let pids = imap_pids(&owner);
    assert!(
        !pids.is_empty(),
        "the pooled connection's imap process, by its title"
    );
    for pid in &pids {
        let status = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill {pid}");
    }
    let started = Instant::now();
    let stats = c.ok("get_folder_stats", args).await;
    assert_eq!(stats["totalEmails"], 1, "{stats}");
    assert!(started.elapsed() < Duration::from_secs(30));
    let now = imap_pids(&owner);
    assert!(
        now.iter().all(|p| !pids.contains(p)) && !now.is_empty(),
        "a new process serves the new connection: {pids:?} -> {now:?}"
    );
    c.close().await;
}

/// The pids of Dovecot's imap processes serving `user` (their titles carry the user's address).
fn imap_pids(user: &ImapUser) -> Vec<u32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let title = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let title = String::from_utf8_lossy(&title);
        if title.contains("/imap [") && title.contains(&user.address) {
            pids.push(pid);
        }
    }
    pids
}

/// A text attachment of the demo corpus (base64 on the wire) is handed off like on any other
/// backend. Ignored until the backend's declared attachment size agrees with the decoded size:
/// today the IMAP listing declares BODYSTRUCTURE's encoded octets and the handoff refuses with
/// ATTACHMENT_METADATA_INVALID ("decoded size differs from the declared size")
/// (notes/imaptests.md).
#[tokio::test]
async fn a_base64_attachment_is_handed_off_from_an_imap_mailbox() {
    let server = server_or_skip!("a_base64_attachment_is_handed_off_from_an_imap_mailbox");
    let owner = ImapUser::fresh(server, "handoff");
    owner.seed_demo("finance").await;
    let world = World::new().with("PLUGIN_ALLOW_LOCAL_HANDOFFS", "true");
    let (_world, c) = serve(server, world, &[ImapEntry::new(server, "team", &owner)]).await;
    let listing = c
        .ok(
            "list_messages",
            json!({"mailbox": "team", "criteria": {"hasAttachments": true, "maxResults": 100}}),
        )
        .await;
    let mut pick = None;
    for id in ids(&listing) {
        let atts = c
            .ok(
                "list_attachments",
                json!({"mailbox": "team", "messageId": id}),
            )
            .await;
        if let Some(a) = atts["attachments"].as_array().and_then(|a| {
            a.iter()
                .find(|a| matches!(a["contentType"].as_str(), Some("text/csv" | "text/plain")))
        }) {
            pick = Some((id, a["id"].as_str().expect("id").to_owned()));
            break;
        }
    }
    let (message_id, attachment_id) = pick.expect("a text attachment in finance");
    let handoff = c
        .ok(
            "create_attachment_handoff",
            json!({"mailbox": "team", "messageId": message_id, "attachmentId": attachment_id,
                   "idempotencyKey": "3f1c2a9e-8b7d-4c6e-9a1b-2c3d4e5f6a7b"}),
        )
        .await;
    let handoff_id = handoff["handoffId"].as_str().expect("handoff id");
    c.ok("get_attachment_handoff", json!({"handoffId": handoff_id}))
        .await;
    c.close().await;
}

/// `UID STORE <uid> <flags>` in the folder selected on `s`, its answer read to the end.
pub(crate) async fn uid_store(s: &mut ImapSession, uid: &str, flags: &str) {
    use futures::TryStreamExt as _;
    let _: Vec<_> = s
        .uid_store(uid, flags)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
}

/// The local index over an IMAP mailbox through the binary (issue 21): `mailgate index sync`
/// against Dovecot (CONDSTORE), then an APPEND, a flag set and an EXPUNGE made by another
/// client reach the index on the next sync, and an unchanged mailbox costs nothing.
#[tokio::test]
async fn the_index_syncs_an_imap_mailbox_with_condstore() {
    use futures::TryStreamExt as _;
    let server = server_or_skip!("the_index_syncs_an_imap_mailbox_with_condstore");
    let owner = ImapUser::fresh(server, "index-sync");
    let note = |n: usize, word: &str| {
        format!(
            "From: Ana Lima <ana.lima@example.org>\r\nTo: {}\r\nSubject: Index note {n} \
             {word}\r\nMessage-ID: <index-{n}@example.org>\r\nDate: Mon, 2 Nov 2026 10:0{n}:00 \
             +0000\r\n\r\nThe body of note {n} says {word}.\r\n",
            owner.address
        )
    };
    for (n, word) in ["sierraword", "tangoword", "uniformword"]
        .iter()
        .enumerate()
    {
        owner.append("INBOX", note(n, word).as_bytes(), &[]).await;
    }
    let entry = ImapEntry::new(server, "box", &owner);
    let (world, config) = imap_config(server, World::new(), &[entry], &[]);
    let sync = async || {
        let out = world
            .run(&["--config", &config, "index", "sync", "box"])
            .await;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    let search = async |word: &str| {
        let c = world.client(&["--config", &config, "serve"]).await;
        let out = c
            .ok(
                "search_mailbox",
                json!({"mailbox": "box", "criteria": {"query": word, "source": "index"}}),
            )
            .await;
        c.close().await;
        out
    };
    let first = sync().await;
    assert!(
        first.contains("box: complete: 3 indexed, 0 removed"),
        "{first}"
    );
    assert_eq!(search("tangoword").await["status"], "FOUND");
    assert_eq!(search("zuluword").await["status"], "NOT_FOUND");

    // Another client: an arrival, a flag, an expunge.
    owner
        .append("INBOX", note(3, "victorword").as_bytes(), &[])
        .await;
    let mut s = owner.session().await;
    s.select("INBOX").await.unwrap();
    uid_store(&mut s, "1", "+FLAGS (\\Flagged)").await;
    uid_store(&mut s, "2", "+FLAGS (\\Deleted)").await;
    let _: Vec<_> = s.expunge().await.unwrap().try_collect().await.unwrap();
    let _ = s.logout().await;

    let second = sync().await;
    assert!(
        second.contains("box: complete: 2 indexed, 1 removed"),
        "{second}"
    );
    assert_eq!(search("victorword").await["status"], "FOUND");
    assert_eq!(search("tangoword").await["status"], "NOT_FOUND");
    let flagged = search("sierraword").await;
    assert_eq!(flagged["messages"][0]["isFlagged"], true, "{flagged}");

    let third = sync().await;
    assert!(
        third.contains("box: complete: 0 indexed, 0 removed"),
        "{third}"
    );
}

/// Resources on IMAP (issue 22): the inbox's keywords as categories (one set by another client
/// on a message), and contacts derived from the headers of recent mail (IMAP has no address
/// book), said so in the answer.
#[tokio::test]
async fn resources_read_keywords_as_categories_and_contacts_from_headers() {
    let server = server_or_skip!("resources_read_keywords_as_categories_and_contacts_from_headers");
    let owner = ImapUser::fresh(server, "resources");
    let note = |n: usize, from: &str| {
        format!(
            "From: {from}\r\nTo: {}\r\nSubject: Note {n}\r\nMessage-ID: <res-{n}@example.org>\r\n\
             Date: Mon, 2 Nov 2026 10:0{n}:00 +0000\r\n\r\nBody {n}.\r\n",
            owner.address
        )
    };
    owner
        .append(
            "INBOX",
            note(1, "Ana Lima <ana.lima@example.org>").as_bytes(),
            &["$Invoices"],
        )
        .await;
    owner
        .append(
            "INBOX",
            note(2, "Bruno Costa <bruno.costa@example.org>").as_bytes(),
            &[],
        )
        .await;
    owner
        .append(
            "INBOX",
            note(3, "Ana Lima <ana.lima@example.org>").as_bytes(),
            &[],
        )
        .await;
    let entry = ImapEntry::new(server, "box", &owner);
    let (_world, c) = serve(server, World::new(), &[entry]).await;

    let categories = crate::surface::read(&c, "mailgate://box/categories")
        .await
        .unwrap();
    let listed = categories["categories"].as_array().unwrap();
    assert!(listed.contains(&json!("$Invoices")), "{categories}");
    let contacts = crate::surface::read(&c, "mailgate://box/contacts")
        .await
        .unwrap();
    assert_eq!(contacts["source"], "headers", "{contacts}");
    assert_eq!(
        contacts["contacts"][0],
        json!({ "name": "Ana Lima", "address": "ana.lima@example.org", "seen": 2 }),
        "{contacts}"
    );
    assert_eq!(
        contacts["contacts"].as_array().unwrap().len(),
        2,
        "{contacts}"
    );
    c.close().await;
}

/// Continuation cursors on a real IMAP server (issue 22): the demo's finance inbox listed 4 at
/// a time by following nextCursor is the listing of all of it, in order.
#[tokio::test]
async fn cursors_page_an_imap_listing_to_the_end() {
    let server = server_or_skip!("cursors_page_an_imap_listing_to_the_end");
    let owner = ImapUser::fresh(server, "cursors");
    owner.seed_demo("finance").await;
    let entry = ImapEntry::new(server, "finance", &owner);
    let (_world, c) = serve(server, World::new(), &[entry]).await;
    let all = crate::surface::ids_at_once(&c, "finance").await;
    let (paged, answers) = crate::surface::ids_by_cursor(&c, "finance", 4).await;
    assert!(answers > 3, "{answers}");
    assert_eq!(paged, all);
    c.close().await;
}

/// Attachment text past maxExtractedChars goes on by cursor on a real IMAP server (issue 22).
#[tokio::test]
async fn attachment_text_continues_by_cursor_on_imap() {
    let server = server_or_skip!("attachment_text_continues_by_cursor_on_imap");
    let owner = ImapUser::fresh(server, "attcursor");
    let long = crate::extraction::long_notes();
    let mail = crate::extraction::with_attachment(
        "Long notes",
        "notes.txt",
        "text/plain",
        long.as_bytes(),
    );
    owner.append("INBOX", &mail, &[]).await;
    let entry = ImapEntry::new(server, "box", &owner);
    let (world, config) = imap_config(server, World::new(), &[entry], &[]);
    let mut json: Value = serde_json::from_slice(&std::fs::read(&config).unwrap()).unwrap();
    json["maxExtractedChars"] = json!(1000);
    crate::util::write_mode(
        std::path::Path::new(&config),
        json.to_string().as_bytes(),
        0o600,
    );
    let c = world.client(&["--config", &config, "serve"]).await;
    let (mid, aid) = crate::extraction::attachment_of(&c, "box", "Long notes").await;
    let args = json!({"mailbox": "box", "messageId": mid, "attachmentId": aid});
    let (text, answers) = crate::extraction::text_by_cursor(&c, &args).await;
    assert_eq!((text.as_str(), answers), (long.as_str(), 4));
    c.close().await;
}
