//! The Microsoft Graph backend end to end (issue 11): the real binary over stdio MCP, pointed at
//! the fake Graph (`fake_graph`) with a reference user's config shape (entries without
//! `backend`) and environment. Every tool of the widest catalog on Graph mailboxes, a mixed
//! Graph + Maildir config, the fault cases (throttling, a failed page, malformed JSON, an
//! expired token, an out-of-scope mailbox, a search that ignores the query), the permissions
//! each tool's requests needed against what `policy/catalog.toml` declares, and the
//! certificate credential.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{Value, json};

use crate::fake_graph::{
    CLIENT_SECRET, ClientAuth, FakeGraph, Fault, FaultKind, Message, RetryAfter, Route,
};
use crate::util::{Client, World, write_mode};

const FINANCE: &str = "finance@example.com";
const PERSONAL: &str = "ana.lima@example.com";

/// The demo corpus (`src/demo/messages`) for finance and personal, as two Graph mailboxes.
async fn seeded_fake() -> FakeGraph {
    let fake = FakeGraph::start().await;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/demo/messages");
    let seeded = fake.seed_from_eml_dir(&dir, &[("finance", FINANCE), ("personal", PERSONAL)]);
    assert!(seeded > 50, "the demo corpus: {seeded}");
    fake
}

/// A reference user's plugin.json: Graph entries have no `backend`.
fn graph_config(world: &World, extra_entries: &str) -> String {
    let json = format!(
        r#"{{"mailboxes": [
            {{"alias": "finance", "address": "{FINANCE}"}},
            {{"alias": "personal", "address": "{PERSONAL}"}}{extra_entries}]}}"#
    );
    let path = world.path().join("plugin.json");
    write_mode(&path, json.as_bytes(), 0o600);
    path.display().to_string()
}

/// A world whose child reaches `fake` with the fake's credentials.
fn world_for(fake: &FakeGraph) -> World {
    fake.env()
        .iter()
        .fold(World::new(), |world, (k, v)| world.with(k, v))
}

/// The Graph permission `policy/catalog.toml` declares for `tool`.
fn declared_permission(tool: &str) -> String {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("policy/catalog.toml"))
            .expect("catalog.toml");
    let catalog: toml::Value = toml::from_str(&text).expect("toml");
    catalog["tools"][tool]["graph_permission"]
        .as_str()
        .expect("declared")
        .to_owned()
}

/// Whether the declared permission covers everything the requests needed.
fn covers(declared: &str, used: &BTreeSet<&'static str>) -> bool {
    used.iter().all(|p| match declared {
        "Mail.ReadWrite" => *p == "Mail.Read" || *p == "Mail.ReadWrite",
        other => *p == other,
    })
}

/// Calls `tool` (which must succeed) and checks that its Graph requests needed only the
/// permission `policy/` declares for it.
async fn call(fake: &FakeGraph, c: &Client, tool: &str, args: Value) -> Value {
    fake.clear_requests();
    let out = c.ok(tool, args).await;
    let used = fake.permissions_used();
    let declared = declared_permission(tool);
    assert!(
        covers(&declared, &used),
        "{tool} declares {declared} but its requests needed {used:?}"
    );
    out
}

/// Every tool of the 20-tool catalog on Graph mailboxes, through a real MCP client over stdio.
#[tokio::test]
async fn every_tool_works_on_graph_mailboxes() {
    let fake = seeded_fake().await;
    let world = world_for(&fake)
        .with("PLUGIN_ALLOW_WRITES", "true")
        .with("PLUGIN_ALLOW_LOCAL_HANDOFFS", "true")
        .with("PLUGIN_ALLOW_SEND", "true")
        .with("OUTLOOK_SEND_FROM", FINANCE)
        .with("OUTLOOK_ALLOWED_SENDERS", FINANCE)
        .with(
            "OUTLOOK_ALLOWED_RECIPIENT_DOMAINS",
            "example.com,example.org",
        );
    let config = graph_config(&world, "");
    let c = world.client(&["--config", &config, "serve"]).await;
    assert_eq!(c.tools().await.len(), 20);

    let allowed = call(&fake, &c, "list_allowed_mailboxes", json!({})).await;
    assert_eq!(allowed["mailboxes"], json!(["finance", "personal"]));

    let folders = call(&fake, &c, "list_folders", json!({"mailbox": "finance"})).await;
    let names: Vec<&str> = folders["folders"]
        .as_array()
        .expect("folders")
        .iter()
        .filter_map(|f| f["displayName"].as_str())
        .collect();
    assert!(
        names.contains(&"Inbox") && names.contains(&"Archive"),
        "{names:?}"
    );

    let stats = call(
        &fake,
        &c,
        "get_folder_stats",
        json!({"mailbox": "finance", "folderId": "inbox"}),
    )
    .await;
    let inbox_total = fake.messages_in(FINANCE, "inbox").len() as u64;
    assert_eq!(stats["totalEmails"], inbox_total, "{stats}");

    let listing = call(
        &fake,
        &c,
        "list_messages",
        json!({"mailbox": "finance", "criteria": {"hasAttachments": true, "maxResults": 50}}),
    )
    .await;
    assert_eq!(listing["status"], "FOUND", "{listing}");
    let with_attachments = listing["messages"].as_array().expect("messages");

    // A word of a real subject is found by Graph's own search, trusted after a clean canary.
    let subject = fake.messages_in(FINANCE, "inbox")[0].subject.clone();
    let word = subject
        .split(|ch: char| !ch.is_alphanumeric())
        .find(|w| w.len() > 4)
        .expect("a word")
        .to_owned();
    let found = call(
        &fake,
        &c,
        "search_mailbox",
        json!({"mailbox": "finance", "criteria": {"query": word}}),
    )
    .await;
    assert_eq!(found["status"], "FOUND", "{found}");
    assert_eq!(found["strategy"], "graph_search", "{found}");
    let absent = call(
        &fake,
        &c,
        "search_mailbox",
        json!({"mailbox": "finance", "criteria": {"query": "zeppelinquark"}}),
    )
    .await;
    assert!(
        absent["status"] == "NOT_FOUND" && absent["truncated"] == false
            || absent["status"] == "SEARCH_INCOMPLETE",
        "{absent}"
    );
    let both = call(
        &fake,
        &c,
        "search_mailboxes",
        json!({"criteria": {"query": word}}),
    )
    .await;
    assert_eq!(both["results"].as_array().map(Vec::len), Some(2), "{both}");
    let batch = call(
        &fake,
        &c,
        "search_mailboxes_batch",
        json!({"queries": [
            {"label": "a", "mailboxes": ["finance"], "criteria": {"query": word}},
            {"label": "b", "mailboxes": ["personal"], "criteria": {"maxResults": 2}}
        ]}),
    )
    .await;
    assert_eq!(
        batch["results"].as_array().map(Vec::len),
        Some(2),
        "{batch}"
    );

    // Reads of one message and its attachments.
    let (message_id, attachment_id) = {
        let mut pick = None;
        for m in with_attachments {
            let id = m["id"].as_str().expect("id");
            let atts = call(
                &fake,
                &c,
                "list_attachments",
                json!({"mailbox": "finance", "messageId": id}),
            )
            .await;
            if let Some(a) = atts["attachments"].as_array().and_then(|a| {
                a.iter()
                    .find(|a| matches!(a["contentType"].as_str(), Some("text/csv" | "text/plain")))
            }) {
                pick = Some((id.to_owned(), a["id"].as_str().expect("id").to_owned()));
                break;
            }
        }
        pick.expect("a text attachment in the demo finance mailbox")
    };
    let message = call(
        &fake,
        &c,
        "get_message",
        json!({"mailbox": "finance", "messageId": message_id}),
    )
    .await;
    assert_eq!(message["dataTrust"], "UNTRUSTED_EMAIL_DATA_V1");
    assert!(
        message["message"]["body"]
            .as_str()
            .is_some_and(|b| !b.is_empty())
    );
    let content = call(
        &fake,
        &c,
        "get_attachment_content",
        json!({"mailbox": "finance", "messageId": message_id, "attachmentId": attachment_id}),
    )
    .await;
    assert!(
        content["text"].as_str().is_some_and(|t| !t.is_empty()),
        "{content}"
    );
    call(
        &fake,
        &c,
        "inspect_attachment_evidence",
        json!({"mailbox": "finance", "messageId": message_id, "attachmentId": attachment_id,
               "keywords": [word]}),
    )
    .await;
    call(
        &fake,
        &c,
        "investigate_documents",
        json!({"mailbox": "finance", "criteria": {"keywords": [word]}}),
    )
    .await;
    let saved = call(
        &fake,
        &c,
        "download_attachments",
        json!({"mailbox": "finance", "messageId": message_id, "attachmentIds": [attachment_id]}),
    )
    .await;
    assert_eq!(saved["files"][0]["status"], "saved", "{saved}");
    let handoff = call(
        &fake,
        &c,
        "create_attachment_handoff",
        json!({"mailbox": "finance", "messageId": message_id, "attachmentId": attachment_id,
               "idempotencyKey": "3f1c2a9e-8b7d-4c6e-9a1b-2c3d4e5f6a7b"}),
    )
    .await;
    let handoff_id = handoff["handoffId"]
        .as_str()
        .expect("handoff id")
        .to_owned();
    fake.clear_requests();
    call(
        &fake,
        &c,
        "get_attachment_handoff",
        json!({"handoffId": handoff_id}),
    )
    .await;
    assert!(
        fake.requests().is_empty(),
        "a handoff is served from the store"
    );

    // Writes.
    call(
        &fake,
        &c,
        "mark_messages",
        json!({"mailbox": "finance", "messageIds": [message_id], "read": false}),
    )
    .await;
    assert!(!fake.message(FINANCE, &message_id).expect("kept").is_read);
    let copied = call(
        &fake,
        &c,
        "copy_messages",
        json!({"mailbox": "finance", "messageIds": [message_id], "destinationFolderId": "archive"}),
    )
    .await;
    let copy_id = copied["results"][0]["newId"].as_str().expect("copy id");
    assert_ne!(copy_id, message_id);
    let moved = call(
        &fake,
        &c,
        "move_messages",
        json!({"mailbox": "finance", "messageIds": [message_id], "destinationFolderId": "junkemail"}),
    )
    .await;
    assert_eq!(moved["idIsImmutable"], true, "{moved}");
    assert_eq!(moved["results"][0]["newId"], message_id.as_str(), "{moved}");
    assert_eq!(
        fake.message(FINANCE, &message_id).expect("moved").folder_id,
        fake.folder_id(FINANCE, "junkemail").expect("junk")
    );
    // The id held from before the move still reads the message.
    call(
        &fake,
        &c,
        "get_message",
        json!({"mailbox": "finance", "messageId": message_id}),
    )
    .await;

    let drafts_before = fake.messages_in(FINANCE, "drafts").len();
    let draft = call(
        &fake,
        &c,
        "create_draft",
        json!({"mailbox": "finance", "to": ["ana.lima@example.com"], "subject": "Re: figures",
               "body": "Draft reply.", "replyTo": message_id,
               "attachments": [{"messageId": message_id, "attachmentId": attachment_id}]}),
    )
    .await;
    assert_eq!(fake.messages_in(FINANCE, "drafts").len(), drafts_before + 1);
    let draft_id = draft["draftId"].as_str().expect("draft id");
    let stored = fake.message(FINANCE, draft_id).expect("the draft");
    assert_eq!(stored.attachments.len(), 1);
    assert!(
        stored
            .headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("In-Reply-To")),
        "threaded: {:?}",
        stored.headers
    );

    let sent_before = fake.messages_in(FINANCE, "sentitems").len();
    let sent = call(
        &fake,
        &c,
        "send_email",
        json!({"to": ["ana.lima@example.com"], "bcc": ["records@example.org"],
               "subject": "Quarter figures", "body": "Attached as discussed."}),
    )
    .await;
    assert_eq!(sent["status"], "sent", "{sent}");
    assert_eq!(sent["transport"], "graph", "{sent}");
    let mails = fake.sent();
    assert_eq!(mails.len(), 1);
    assert_eq!(mails[0].mailbox, FINANCE, "sent as the pinned sender");
    assert_eq!(
        mails[0].bcc,
        ["records@example.org"],
        "Graph got the blind copy"
    );
    assert_eq!(
        fake.messages_in(FINANCE, "sentitems").len(),
        sent_before + 1,
        "Graph filed the one Sent copy; mailgate filed none"
    );

    fake.assert_no_secret_in_urls(&[CLIENT_SECRET]);
    fake.assert_users_within(&[FINANCE, PERSONAL]);
    assert_eq!(fake.token_requests(), 1, "one token for the whole session");
    c.close().await;
}

/// A config mixing Graph and Maildir mailboxes answers one search across both.
#[tokio::test]
async fn a_mixed_graph_and_maildir_config_searches_both() {
    let fake = seeded_fake().await;
    let world = world_for(&fake);
    let mail = crate::util::shared_demo().mail.clone();
    let extra = format!(
        r#", {{"alias": "support", "address": "support@example.org",
              "backend": {{"kind": "maildir", "path": "{}"}}}}"#,
        mail.join("support").display()
    );
    let config = graph_config(&world, &extra);
    let c = world.client(&["--config", &config, "serve"]).await;
    let out = c
        .ok(
            "search_mailboxes",
            json!({"criteria": {"query": "invoice"}}),
        )
        .await;
    let results = out["results"].as_array().expect("results");
    assert_eq!(results.len(), 3);
    for r in results {
        assert!(
            matches!(
                r["status"].as_str(),
                Some("FOUND" | "NOT_FOUND" | "SEARCH_INCOMPLETE")
            ),
            "{r}"
        );
    }
    assert_eq!(results[2]["mailbox"], "support");
    let batch = c
        .ok(
            "search_mailboxes_batch",
            json!({"queries": [
                {"label": "cloud", "mailboxes": ["finance"], "criteria": {"query": "invoice"}},
                {"label": "local", "mailboxes": ["support"], "criteria": {"query": "invoice"}}
            ]}),
        )
        .await;
    assert_eq!(
        batch["results"].as_array().map(Vec::len),
        Some(2),
        "{batch}"
    );
    c.close().await;
}

/// A world with one Graph mailbox of 500 synthetic messages (five pages of 100).
async fn paging_world() -> (FakeGraph, World, Client) {
    let fake = FakeGraph::start().await;
    fake.add_mailbox(FINANCE);
    fake.seed_synthetic(FINANCE, "inbox", 500);
    // maxResults 100 makes the listing window 500: five pages of Graph's 100.
    let (world, c) = finance_client(&fake, r#", "maxResultsPerMailbox": 100"#).await;
    (fake, world, c)
}

/// A server over the one Graph mailbox `finance` of `fake`, with `extra` top-level config keys,
/// and the world it runs in (its folder lives as long as the world).
async fn finance_client(fake: &FakeGraph, extra: &str) -> (World, Client) {
    let world = world_for(fake);
    let json =
        format!(r#"{{"mailboxes": [{{"alias": "finance", "address": "{FINANCE}"}}]{extra}}}"#);
    let path = world.path().join("plugin.json");
    write_mode(&path, json.as_bytes(), 0o600);
    let c = world
        .client(&["--config", &path.display().to_string(), "serve"])
        .await;
    (world, c)
}

/// A listing over all five pages that matches nothing: the honest NOT_FOUND baseline, then the
/// same listing under each fault.
fn nothing_matches() -> Value {
    json!({"mailbox": "finance", "criteria": {"subject": "zeppelinquark", "maxResults": 100}})
}

#[tokio::test]
async fn faults_are_retried_or_reported_never_not_found() {
    let (fake, _world, c) = paging_world().await;
    let clean = c.ok("list_messages", nothing_matches()).await;
    assert_eq!(clean["status"], "NOT_FOUND", "{clean}");
    assert_eq!(clean["pagesScanned"], 5, "{clean}");

    // Throttling within the budget is waited out (seconds and HTTP-date forms), as is a 503.
    for kind in [
        FaultKind::Throttle(RetryAfter::Seconds(0)),
        FaultKind::Throttle(RetryAfter::HttpDate(chrono::Utc::now())),
        FaultKind::Unavailable(None),
    ] {
        fake.inject(Fault::new(Route::List, kind.clone()));
        let out = c.ok("list_messages", nothing_matches()).await;
        assert_eq!(out["status"], "NOT_FOUND", "{kind:?}: {out}");
    }

    // A 500 on page 3 of 5: pages 1–2 were read, the rest is unknown.
    fake.inject(
        Fault::new(Route::List, FaultKind::ServerError).nth(fake.route_count(Route::List) + 3),
    );
    let out = c.ok("list_messages", nothing_matches()).await;
    assert_eq!(out["status"], "SEARCH_INCOMPLETE", "{out}");
    assert!(
        out["warnings"]
            .as_array()
            .expect("warnings")
            .contains(&json!("backend_unavailable")),
        "{out}"
    );

    // Throttling that outlasts the call's budget is a rate-limit answer, not an absence.
    fake.inject(Fault::new(Route::List, FaultKind::Throttle(RetryAfter::Seconds(90))).always());
    let out = c.ok("list_messages", nothing_matches()).await;
    assert_eq!(out["status"], "SEARCH_FAILED", "{out}");
    assert!(
        out["warnings"].to_string().contains("backend_rate_limited"),
        "{out}"
    );
    let code = c
        .tool_error(
            "get_folder_stats",
            json!({"mailbox": "finance", "folderId": "inbox"}),
        )
        .await;
    assert_eq!(code, "RATE_LIMITED");
    fake.clear_faults();

    // Malformed JSON on the first page: a failed search naming the class.
    fake.inject(Fault::new(Route::List, FaultKind::MalformedJson));
    let out = c.ok("list_messages", nothing_matches()).await;
    assert_eq!(out["status"], "SEARCH_FAILED", "{out}");
    assert!(
        out["warnings"]
            .to_string()
            .contains("backend_malformed_response"),
        "{out}"
    );

    // Messages without an id are unreadable: absence among them is unproven.
    fake.inject(Fault::new(
        Route::List,
        FaultKind::MissingField("id".into()),
    ));
    let out = c.ok("list_messages", nothing_matches()).await;
    assert_eq!(out["status"], "SEARCH_INCOMPLETE", "{out}");

    // A token that expires between calls is refreshed once, transparently.
    let before = fake.token_requests();
    fake.expire_tokens();
    let out = c.ok("list_messages", nothing_matches()).await;
    assert_eq!(out["status"], "NOT_FOUND", "{out}");
    assert_eq!(fake.token_requests(), before + 1);

    // Never a NOT_FOUND from a get of a missing message: the typed error.
    let code = c
        .tool_error(
            "get_message",
            json!({"mailbox": "finance", "messageId": "AAMkNoSuchId"}),
        )
        .await;
    assert_eq!(code, "NOT_FOUND");
    c.close().await;
}

#[tokio::test]
async fn a_mailbox_outside_the_apps_exchange_scope_is_an_auth_failure() {
    let fake = seeded_fake().await;
    fake.scope_app_to(&[PERSONAL]);
    let world = world_for(&fake);
    let config = graph_config(&world, "");
    let c = world.client(&["--config", &config, "serve"]).await;
    let code = c
        .tool_error("list_folders", json!({"mailbox": "finance"}))
        .await;
    assert_eq!(code, "AUTH_FAILED");
    let out = c
        .ok(
            "search_mailboxes",
            json!({"criteria": {"query": "invoice"}}),
        )
        .await;
    assert_eq!(out["results"][0]["status"], "SEARCH_FAILED");
    assert!(
        out["results"][0]["warnings"]
            .to_string()
            .contains("backend_auth_failed")
    );
    assert_ne!(out["results"][1]["status"], "SEARCH_FAILED", "{out}");
    c.close().await;
}

/// When Graph ignores `$search` (it answers the canary too), its hits are not trusted: the
/// local scan decides, and finding nothing is `SEARCH_UNTRUSTED`, never `NOT_FOUND`.
#[tokio::test]
async fn a_search_that_ignores_the_query_is_caught_by_the_canary() {
    let fake = FakeGraph::start().await;
    fake.add_mailbox(FINANCE);
    fake.add_message(
        FINANCE,
        "inbox",
        Message::new("Invoice 7 for the catering").from("Dana Example", "dana@example.org"),
    );
    fake.add_message(
        FINANCE,
        "inbox",
        Message::new("Lunch on Friday")
            .from("Eli Example", "eli@example.org")
            .file_attachment("quokka-menu.csv", "text/csv", b"dish,price\n"),
    );
    fake.ignore_search(FINANCE);
    let (_world, c) = finance_client(&fake, "").await;
    let hit = c
        .ok(
            "search_mailbox",
            json!({"mailbox": "finance", "criteria": {"query": "catering"}}),
        )
        .await;
    assert_eq!(hit["status"], "FOUND", "{hit}");
    assert_eq!(hit["strategy"], "local_scan", "{hit}");
    assert_eq!(hit["canaryMatched"], true);
    assert_eq!(hit["messages"].as_array().map(Vec::len), Some(1), "{hit}");
    let miss = c
        .ok(
            "search_mailbox",
            json!({"mailbox": "finance", "criteria": {"query": "zeppelinquark"}}),
        )
        .await;
    assert_eq!(miss["status"], "SEARCH_UNTRUSTED", "{miss}");
    // A word only in an attachment's name: the listing did not fetch attachment lists, so the
    // local scan fetches the message's before it calls it a non-match.
    let by_name = c
        .ok(
            "search_mailbox",
            json!({"mailbox": "finance", "criteria": {"query": "quokka"}}),
        )
        .await;
    assert_eq!(by_name["status"], "FOUND", "{by_name}");
    // A listing says it has attachments without claiming a count it did not read; asking for
    // names fetches them.
    let listing = c
        .ok(
            "list_messages",
            json!({"mailbox": "finance", "criteria": {"hasAttachments": true}}),
        )
        .await;
    let first = &listing["messages"][0];
    assert_eq!(first["hasAttachments"], true, "{listing}");
    assert!(first.get("attachmentCount").is_none(), "{listing}");
    let named = c
        .ok(
            "list_messages",
            json!({"mailbox": "finance",
                   "criteria": {"hasAttachments": true, "includeAttachmentNames": true}}),
        )
        .await;
    let first = &named["messages"][0];
    assert_eq!(first["attachmentCount"], 1, "{named}");
    assert_eq!(
        first["attachments"][0]["name"], "quokka-menu.csv",
        "{named}"
    );
    c.close().await;
}

/// The certificate credential end to end: a PS256 client assertion the fake verifies with the
/// certificate's public key and thumbprint; no secret anywhere.
#[tokio::test]
async fn a_certificate_credential_authenticates_without_a_secret() {
    use rustls_pki_types::pem::PemObject as _;
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/graph");
    let fake = seeded_fake().await;
    let public = std::fs::read(fixtures.join("test-only-cert-pubkey.pem")).expect("fixture");
    let spki = rustls_pki_types::SubjectPublicKeyInfoDer::from_pem_slice(&public).expect("spki");
    fake.set_assertion_key(spki.as_ref());
    let cert_pem = std::fs::read(fixtures.join("test-only-cert.pem")).expect("fixture");
    let cert = rustls_pki_types::CertificateDer::from_pem_slice(&cert_pem).expect("cert");
    use base64::Engine as _;
    use sha2::Digest as _;
    fake.set_assertion_thumbprint(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(&cert)),
    );
    let tenant = crate::fake_graph::TENANT;
    let client = crate::fake_graph::CLIENT_ID;
    fake.set_credentials(tenant, client, None);

    let world = world_for(&fake);
    // One 0600 PEM holding key and certificate, as the Azure tools write it.
    let mut both = std::fs::read(fixtures.join("test-only-key.pem")).expect("fixture");
    both.extend_from_slice(&cert_pem);
    let pem = world.path().join("app.pem");
    write_mode(&pem, &both, 0o600);
    let world = world.without("MICROSOFT_GRAPH_CLIENT_SECRET").with(
        "MICROSOFT_GRAPH_CLIENT_CERTIFICATE_PATH",
        &pem.display().to_string(),
    );
    let config = graph_config(&world, "");
    let c = world.client(&["--config", &config, "serve"]).await;
    let out = c
        .ok(
            "list_messages",
            json!({"mailbox": "finance", "criteria": {"maxResults": 1}}),
        )
        .await;
    assert_eq!(out["status"], "FOUND", "{out}");
    match fake.last_client_auth() {
        Some(ClientAuth::Assertion(claims)) => {
            assert_eq!(claims["iss"], client);
            assert_eq!(claims["aud"], fake.token_url());
        }
        other => panic!("expected a client assertion, got {other:?}"),
    }
    c.close().await;

    // A key file others can read is refused at startup, naming the variable.
    write_mode(&pem, &both, 0o644);
    let out = world.run(&["--config", &config, "serve"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("MICROSOFT_GRAPH_CLIENT_CERTIFICATE_PATH"),
        "{stderr}"
    );
}

/// Startup refuses a Graph mailbox without usable credentials or with an endpoint that would
/// carry the token in the clear; the messages name variables, never values.
#[tokio::test]
async fn startup_refuses_bad_graph_settings() {
    let world = World::new()
        .without("MICROSOFT_GRAPH_CLIENT_SECRET")
        .with("MICROSOFT_GRAPH_TENANT_ID", "contoso-tenant");
    let config = graph_config(&world, "");
    let out = world.run(&["--config", &config, "serve"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("MICROSOFT_GRAPH_TENANT_ID"), "{stderr}");
    assert!(stderr.contains("MICROSOFT_GRAPH_CLIENT_SECRET"), "{stderr}");
    assert!(!stderr.contains("contoso"), "no value shown: {stderr}");

    let world = World::new().with("MAILGATE_GRAPH_BASE_URL", "http://graph.example.com/v1.0");
    let config = graph_config(&world, "");
    let out = world.run(&["--config", &config, "serve"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("MAILGATE_GRAPH_BASE_URL"), "{stderr}");
    assert!(stderr.contains("https"), "{stderr}");
}

/// Attachments of each Graph kind through the tools: a file's bytes, an attached message
/// (`itemAttachment`, read as its MIME), a link to a file elsewhere (`referenceAttachment`: no
/// bytes in the mailbox, a typed refusal), and a declared size over the cap refused before
/// any byte is downloaded.
#[tokio::test]
async fn attachments_of_each_graph_kind() {
    let fake = FakeGraph::start().await;
    fake.add_mailbox(FINANCE);
    let attached = Message::new("Signed contract for Orchard Bakery")
        .from("Eli Example", "eli@example.org")
        .text("The countersigned contract, clause 7 amended.");
    let id = fake.add_message(
        FINANCE,
        "inbox",
        Message::new("Contract pack")
            .from("Dana Example", "dana@example.org")
            .file_attachment("terms.txt", "text/plain", b"Payment within 30 days.")
            .item_attachment(attached)
            .reference_attachment("budget.xlsx", "https://contoso.example.com/budget.xlsx")
            .file_attachment("huge.csv", "text/csv", b"a,b\n")
            .declared_size(900 * 1024 * 1024),
    );
    let (_world, c) = finance_client(&fake, "").await;
    let listed = c
        .ok(
            "list_attachments",
            json!({"mailbox": "finance", "messageId": id}),
        )
        .await;
    let attachments = listed["attachments"].as_array().expect("attachments");
    assert_eq!(attachments.len(), 4, "{listed}");
    let by_name = |name: &str| {
        attachments
            .iter()
            .find(|a| a["name"] == name)
            .unwrap_or_else(|| panic!("{name}: {listed}"))["id"]
            .as_str()
            .expect("id")
            .to_owned()
    };
    let read = |attachment: String| json!({"mailbox": "finance", "messageId": id, "attachmentId": attachment});
    let file = c
        .ok("get_attachment_content", read(by_name("terms.txt")))
        .await;
    assert!(
        file["text"].as_str().is_some_and(|t| t.contains("30 days")),
        "{file}"
    );
    let item = by_name("Signed contract for Orchard Bakery");
    assert!(
        attachments
            .iter()
            .any(|a| a["contentType"] == "message/rfc822"),
        "an attached message is message/rfc822: {listed}"
    );
    let message = c.ok("get_attachment_content", read(item)).await;
    assert!(
        message["text"]
            .as_str()
            .is_some_and(|t| t.contains("clause 7")),
        "{message}"
    );
    let code = c
        .tool_error("get_attachment_content", read(by_name("budget.xlsx")))
        .await;
    assert_eq!(code, "UNSUPPORTED");
    fake.clear_requests();
    let code = c
        .tool_error("get_attachment_content", read(by_name("huge.csv")))
        .await;
    assert_eq!(code, "ATTACHMENT_TOO_LARGE");
    assert_eq!(
        fake.count(Route::AttachmentValue),
        0,
        "refused on the declared size, before any download"
    );
    c.close().await;
}

/// A token that expires while a five-page listing is under way: the page that meets the 401
/// refreshes the token once and the listing completes as if nothing happened.
#[tokio::test]
async fn a_token_that_expires_mid_listing_is_refreshed_once() {
    let (fake, _world, c) = paging_world().await;
    // The first call fetches the token.
    c.ok("list_folders", json!({"mailbox": "finance"})).await;
    fake.latency(std::time::Duration::from_millis(40));
    let tokens = fake.token_requests();
    let first_page = fake.route_count(Route::List) + 1;
    let listing = c.call("list_messages", nothing_matches());
    let expire = async {
        // Readiness, not a fixed sleep: expire once the listing has asked for its first page.
        while fake.route_count(Route::List) < first_page {
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
        fake.expire_tokens();
    };
    let (result, ()) = tokio::join!(listing, expire);
    let out = result
        .expect("answered")
        .structured_content
        .expect("structured");
    assert_eq!(out["status"], "NOT_FOUND", "{out}");
    assert_eq!(out["pagesScanned"], 5, "{out}");
    assert_eq!(fake.token_requests(), tokens + 1, "one refresh");
    c.close().await;
}

/// The fake's per-folder `messages/delta`, as the Graph change feed of the local index reads it
/// (the index CLI that drives it through the binary is not here yet): a fresh round in pages,
/// then a round from the deltaLink reporting an arrival, a flag change, a move (out of the
/// source's delta, into the target's) and a deletion, and an expired deltaLink answering 410.
#[tokio::test]
async fn the_fake_reports_folder_changes_through_delta_links() {
    const BOX: &str = "delta.desk@example.com";
    let fake = FakeGraph::start().await;
    fake.add_mailbox(BOX);
    let ids: Vec<String> = (0..5)
        .map(|n| fake.add_message(BOX, "inbox", Message::synthetic(n)))
        .collect();
    let archive = fake.add_folder(BOX, "archive");
    let token = fake.issue_token();
    let http = reqwest::Client::new();
    let get = |url: String| {
        let (http, token) = (http.clone(), token.clone());
        async move {
            let resp = http
                .get(url)
                .bearer_auth(token)
                .header("Prefer", "IdType=\"ImmutableId\", odata.maxpagesize=2")
                .send()
                .await
                .expect("sent");
            let status = resp.status().as_u16();
            (status, resp.json::<Value>().await.unwrap_or(Value::Null))
        }
    };
    let delta_url = |folder: &str| {
        format!(
            "{}/users/{BOX}/mailFolders/{folder}/messages/delta?$select=id,changeKey",
            fake.base_url()
        )
    };
    // Follows a round to its deltaLink: (items, pages, deltaLink).
    let round = |first: String| {
        let get = &get;
        async move {
            let (mut items, mut pages, mut url) = (Vec::new(), 0, first);
            loop {
                let (status, page) = get(url).await;
                assert_eq!(status, 200, "{page}");
                pages += 1;
                items.extend(page["value"].as_array().expect("value").iter().cloned());
                if let Some(next) = page["@odata.nextLink"].as_str() {
                    assert!(next.contains("$skiptoken="), "{next}");
                    assert!(
                        !next.contains("select"),
                        "options live in the token: {next}"
                    );
                    url = next.to_owned();
                } else {
                    let link = page["@odata.deltaLink"].as_str().expect("deltaLink");
                    return (items, pages, link.to_owned());
                }
            }
        }
    };
    let (items, pages, inbox_link) = round(delta_url("inbox")).await;
    assert_eq!((items.len(), pages), (5, 3), "five messages, two a page");
    let listed: BTreeSet<&str> = items.iter().filter_map(|i| i["id"].as_str()).collect();
    assert_eq!(listed, ids.iter().map(String::as_str).collect());
    assert!(
        items
            .iter()
            .all(|i| i["changeKey"].is_string() && i.get("subject").is_none())
    );
    let (_, _, archive_link) = round(delta_url(&archive)).await;

    // Nothing changed: an empty round.
    let (quiet, _, inbox_link) = round(inbox_link).await;
    assert!(quiet.is_empty(), "{quiet:?}");

    // An arrival, a flag set through Graph, a move through Graph, a deletion elsewhere.
    let new_id = fake.add_message(BOX, "inbox", Message::new("Delta arrival"));
    let resp = http
        .patch(format!(
            "{}/users/{BOX}/messages/{}",
            fake.base_url(),
            ids[0]
        ))
        .bearer_auth(&token)
        .json(&json!({"flag": {"flagStatus": "flagged"}}))
        .send()
        .await
        .expect("patch");
    assert_eq!(resp.status().as_u16(), 200);
    let resp = http
        .post(format!(
            "{}/users/{BOX}/messages/{}/move",
            fake.base_url(),
            ids[1]
        ))
        .bearer_auth(&token)
        .header("Prefer", "IdType=\"ImmutableId\"")
        .json(&json!({"destinationId": "archive"}))
        .send()
        .await
        .expect("move");
    assert_eq!(resp.status().as_u16(), 201);
    assert!(fake.delete_message(BOX, &ids[2]));
    let key_before = items
        .iter()
        .find(|i| i["id"] == ids[0].as_str())
        .map(|i| i["changeKey"].clone())
        .expect("listed");

    let (changes, _, inbox_link) = round(inbox_link).await;
    let changed: BTreeSet<&str> = changes
        .iter()
        .filter(|i| i.get("@removed").is_none())
        .filter_map(|i| i["id"].as_str())
        .collect();
    assert_eq!(changed, BTreeSet::from([new_id.as_str(), ids[0].as_str()]));
    let flagged = changes
        .iter()
        .find(|i| i["id"] == ids[0].as_str())
        .expect("flagged");
    assert_ne!(
        flagged["changeKey"], key_before,
        "a flag change moves the changeKey"
    );
    let removed: Vec<(&str, &str)> = changes
        .iter()
        .filter_map(|i| Some((i["id"].as_str()?, i["@removed"]["reason"].as_str()?)))
        .collect();
    assert_eq!(
        removed,
        [(ids[1].as_str(), "changed"), (ids[2].as_str(), "deleted")]
    );
    let (into_archive, _, _) = round(archive_link).await;
    let arrived: Vec<&str> = into_archive
        .iter()
        .filter_map(|i| i["id"].as_str())
        .collect();
    assert_eq!(arrived, [ids[1].as_str()], "the moved message keeps its id");

    // A change made elsewhere moves the changeKey too.
    fake.update_message(BOX, &ids[3], |m| m.is_read = !m.is_read);
    let (read, _, inbox_link) = round(inbox_link).await;
    let read: Vec<&str> = read.iter().filter_map(|i| i["id"].as_str()).collect();
    assert_eq!(read, [ids[3].as_str()]);
    fake.expire_delta_tokens();
    let (status, error) = get(inbox_link).await;
    assert_eq!(status, 410, "{error}");
    assert_eq!(error["error"]["code"], "syncStateNotFound");
    // A fresh round still works, and lists the folder as it is now.
    let (again, _, _) = round(delta_url("inbox")).await;
    assert_eq!(again.len(), 4, "{again:?}");
}

/// The local index over a Graph mailbox, end to end through the binary (issue 21): `mailgate
/// index sync` reads each folder's `messages/delta` in pages, a second sync follows the
/// deltaLinks and sees an arrival, a flag change and a deletion, and once Graph has dropped the
/// sync state (410 `syncStateNotFound`) the next sync starts a fresh round that still removes
/// what was deleted meanwhile, without refetching what did not change.
#[tokio::test]
async fn the_index_syncs_a_graph_mailbox_by_delta_and_resyncs_after_a_410() {
    const BOX: &str = "index.desk@example.com";
    let fake = FakeGraph::start().await;
    fake.add_mailbox(BOX);
    let words = [
        "kilo", "lima", "mike", "november", "oscar", "papa", "quebec",
    ];
    let ids: Vec<String> = words
        .iter()
        .map(|w| {
            fake.add_message(
                BOX,
                "inbox",
                Message::new(&format!("Delta note {w}word")).text(&format!("Body about {w}word.")),
            )
        })
        .collect();
    let world = world_for(&fake);
    let config = world.path().join("desk.json");
    write_mode(
        &config,
        format!(r#"{{"mailboxes": [{{"alias": "desk", "address": "{BOX}"}}]}}"#).as_bytes(),
        0o600,
    );
    let config = config.display().to_string();
    let sync = async || {
        let out = world
            .run(&["--config", &config, "index", "sync", "desk"])
            .await;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    };
    let first = sync().await;
    assert!(
        first.contains("desk: complete: 7 indexed, 0 removed"),
        "{first}"
    );
    let fresh_rounds = fake.count(Route::Delta);
    assert!(fresh_rounds >= 2, "paged: {fresh_rounds} delta requests");

    let search = async |word: &str| {
        let c = world.client(&["--config", &config, "serve"]).await;
        let out = c
            .ok(
                "search_mailbox",
                json!({"mailbox": "desk", "criteria": {"query": word, "source": "index"}}),
            )
            .await;
        c.close().await;
        out
    };
    assert_eq!(search("limaword").await["status"], "FOUND");
    assert_eq!(search("zuluword").await["status"], "NOT_FOUND");

    // Changes made elsewhere: an arrival, a flag, a deletion.
    fake.add_message(
        BOX,
        "inbox",
        Message::new("Delta note romeoword").text("Body."),
    );
    fake.update_message(BOX, &ids[0], |m| m.is_read = true);
    assert!(fake.delete_message(BOX, &ids[1]));
    let second = sync().await;
    assert!(
        second.contains("desk: complete: 2 indexed, 1 removed"),
        "{second}"
    );
    assert_eq!(search("romeoword").await["status"], "FOUND");
    assert_eq!(search("limaword").await["status"], "NOT_FOUND");
    let kilo = search("kiloword").await;
    assert_eq!(kilo["messages"][0]["isRead"], true, "{kilo}");

    // Graph drops the sync state; a deletion happens meanwhile.
    fake.expire_delta_tokens();
    assert!(fake.delete_message(BOX, &ids[2]));
    let third = sync().await;
    assert!(
        third.contains("desk: complete: 0 indexed, 1 removed"),
        "{third}"
    );
    assert_eq!(search("mikeword").await["status"], "NOT_FOUND");
    assert_eq!(search("novemberword").await["status"], "FOUND");
}

/// Resources on Graph (issue 22): master categories, contacts (the address book) and people
/// search for a contacts query, each through its own Graph route.
#[tokio::test]
async fn resources_read_categories_contacts_and_people_from_graph() {
    let fake = FakeGraph::start().await;
    fake.add_mailbox(FINANCE);
    fake.set_categories(FINANCE, &["Invoices", "Red category"]);
    fake.add_contact(FINANCE, "Ana Lima", "ana.lima@example.com");
    fake.add_contact(FINANCE, "Bruno Costa", "bruno.costa@example.com");
    fake.add_contact(FINANCE, "Finance Team", FINANCE);
    let (_world, c) = finance_client(&fake, "").await;
    let read = |uri: &'static str| crate::surface::read(&c, uri);

    let categories = read("mailgate://finance/categories").await.unwrap();
    assert_eq!(
        categories["categories"],
        json!(["Invoices", "Red category"])
    );
    assert_eq!(categories["dataTrust"], "UNTRUSTED_EMAIL_DATA_V1");
    let book = read("mailgate://finance/contacts").await.unwrap();
    assert_eq!(book["source"], "addressBook", "{book}");
    // The mailbox's own address is never listed.
    assert_eq!(
        book["contacts"],
        json!([
            { "name": "Ana Lima", "address": "ana.lima@example.com" },
            { "name": "Bruno Costa", "address": "bruno.costa@example.com" }
        ])
    );
    let people = read("mailgate://finance/contacts?query=bruno")
        .await
        .unwrap();
    assert_eq!(people["contacts"][0]["address"], "bruno.costa@example.com");
    assert_eq!(people["contacts"].as_array().unwrap().len(), 1);
    assert_eq!(fake.route_count(Route::Categories), 1);
    assert_eq!(fake.route_count(Route::Contacts), 1);
    assert_eq!(fake.route_count(Route::People), 1);
    c.close().await;
}

/// Continuation cursors on Graph (issue 22): 500 messages listed 30 at a time by following
/// nextCursor are every message once, in the order one listing gives the first 100.
#[tokio::test]
async fn cursors_page_a_graph_listing_to_the_end() {
    let (_fake, _world, c) = paging_world().await;
    let first = crate::surface::ids_at_once(&c, "finance").await;
    let (paged, answers) = crate::surface::ids_by_cursor(&c, "finance", 30).await;
    assert_eq!(answers, 17);
    assert_eq!(paged.len(), 500);
    assert_eq!(paged[..100], first[..]);
    let unique: BTreeSet<&String> = paged.iter().collect();
    assert_eq!(unique.len(), 500);
    c.close().await;
}

/// Attachment text past maxExtractedChars goes on by cursor on Graph (issue 22).
#[tokio::test]
async fn attachment_text_continues_by_cursor_on_graph() {
    let fake = FakeGraph::start().await;
    fake.add_mailbox(FINANCE);
    let long = crate::extraction::long_notes();
    fake.add_message(
        FINANCE,
        "inbox",
        Message::new("Long notes").file_attachment("notes.txt", "text/plain", long.as_bytes()),
    );
    let (_world, c) = finance_client(&fake, r#", "maxExtractedChars": 1000"#).await;
    let (mid, aid) = crate::extraction::attachment_of(&c, "finance", "Long notes").await;
    let args = json!({"mailbox": "finance", "messageId": mid, "attachmentId": aid});
    let (text, answers) = crate::extraction::text_by_cursor(&c, &args).await;
    assert_eq!((text.as_str(), answers), (long.as_str(), 4));
    c.close().await;
}

/// The categories filter on Graph (issue 22): any of the names, case-insensitively.
#[tokio::test]
async fn list_messages_filters_by_categories_on_graph() {
    let fake = FakeGraph::start().await;
    fake.add_mailbox(FINANCE);
    fake.add_message(
        FINANCE,
        "inbox",
        Message::new("Lease invoice").categories(&["Invoices"]),
    );
    fake.add_message(
        FINANCE,
        "inbox",
        Message::new("Team lunch").categories(&["Social"]),
    );
    fake.add_message(FINANCE, "inbox", Message::new("No label"));
    let (_world, c) = finance_client(&fake, "").await;
    let subjects = |answer: &Value| -> Vec<String> {
        answer["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["subject"].as_str().unwrap().to_owned())
            .collect()
    };
    let one = c
        .ok(
            "list_messages",
            json!({ "mailbox": "finance", "criteria": { "categories": ["invoices"] } }),
        )
        .await;
    assert_eq!(subjects(&one), ["Lease invoice"], "{one}");
    let two = c
        .ok(
            "list_messages",
            json!({ "mailbox": "finance", "criteria": { "categories": ["Invoices", "Social"] } }),
        )
        .await;
    assert_eq!(subjects(&two).len(), 2, "{two}");
    let none = c
        .ok(
            "list_messages",
            json!({ "mailbox": "finance", "criteria": { "categories": ["Travel"] } }),
        )
        .await;
    assert_eq!(none["status"], "NOT_FOUND", "{none}");
    c.close().await;
}

/// A Graph mailbox with `backend.auth` (issue 37) whose alias has not signed in: the server
/// starts without the app-only `MICROSOFT_GRAPH_*` variables and without touching the network,
/// a tool call answers AUTH_REQUIRED naming `mailgate auth login ALIAS`, and a search
/// SEARCH_FAILED (never NOT_FOUND); nothing reaches Graph without a token.
#[tokio::test]
async fn a_delegated_graph_mailbox_without_a_grant_answers_auth_required() {
    let fake = seeded_fake().await;
    let world = World::new()
        .without("MICROSOFT_GRAPH_TENANT_ID")
        .without("MICROSOFT_GRAPH_CLIENT_ID")
        .without("MICROSOFT_GRAPH_CLIENT_SECRET")
        .with("MAILGATE_GRAPH_LOGIN_URL", &fake.uri())
        .with("MAILGATE_GRAPH_BASE_URL", &fake.base_url());
    let json = format!(
        r#"{{"mailboxes": [{{"alias": "me", "address": "{PERSONAL}", "backend": {{
            "kind": "graph",
            "auth": {{"kind": "oauth", "provider": "microsoft",
                      "clientId": "33333333-3333-4333-8333-333333333333",
                      "tenant": "44444444-4444-4444-8444-444444444444"}}}}}}]}}"#
    );
    let path = world.path().join("plugin.json");
    write_mode(&path, json.as_bytes(), 0o600);
    let c = world
        .client(&["--config", &path.display().to_string(), "serve"])
        .await;
    fake.clear_requests();

    let result = c
        .call("list_folders", json!({"mailbox": "me"}))
        .await
        .expect("a tool result");
    assert_eq!(result.is_error, Some(true));
    let meta = result.meta.clone().expect("error meta");
    assert_eq!(meta.0["mailgate/errorCode"], "AUTH_REQUIRED", "{meta:?}");
    let text = serde_json::to_string(&result.content).expect("json");
    assert!(text.contains("mailgate auth login me"), "{text}");

    let out = c
        .ok(
            "search_mailboxes",
            json!({"criteria": {"query": "invoice"}}),
        )
        .await;
    assert_eq!(out["results"][0]["status"], "SEARCH_FAILED", "{out}");
    assert!(
        out["results"][0]["warnings"]
            .to_string()
            .contains("backend_sign_in_required"),
        "{out}"
    );
    assert!(fake.requests().is_empty(), "nothing sent without a token");
    assert_eq!(fake.token_requests(), 0, "no app token either");
    c.close().await;
}
