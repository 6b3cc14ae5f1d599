//! Resources, prompts and completions (issue 22) through rmcp's client on the demo: what
//! `initialize` declares, every resource and template, reads of each view, the errors (bad URI,
//! alias off the allowlist) that name no address, completion of aliases, and each prompt's
//! expansion and argument validation.

use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams};
use rmcp::service::ServiceError;
use serde_json::{Value, json};

use crate::util::{Client, World};

pub(crate) async fn read(client: &Client, uri: &str) -> Result<Value, ServiceError> {
    let result = client
        .inner
        .read_resource(ReadResourceRequestParams::new(uri))
        .await?;
    assert_eq!(result.contents.len(), 1, "{uri}");
    let json = serde_json::to_value(&result.contents[0]).unwrap();
    assert_eq!(json["uri"], uri);
    assert_eq!(json["mimeType"], "application/json");
    Ok(serde_json::from_str(json["text"].as_str().unwrap()).unwrap())
}

/// The JSON-RPC error code and message of a refused request.
fn refusal(e: ServiceError) -> (i32, String) {
    match e {
        ServiceError::McpError(data) => (data.code.0, data.message.into_owned()),
        other => panic!("not a protocol error: {other:?}"),
    }
}

#[tokio::test]
async fn resources_list_read_and_refuse_without_naming_an_address() {
    let world = World::new();
    let client = world.demo_client().await;
    let info = client.inner.peer_info().expect("initialized");
    let caps = serde_json::to_value(&info.capabilities).unwrap();
    for cap in ["tools", "resources", "prompts", "completions"] {
        assert!(caps.get(cap).is_some(), "{cap} not declared: {caps}");
    }

    let listed = client.inner.list_all_resources().await.unwrap();
    let uris: Vec<&str> = listed.iter().map(|r| r.uri.as_str()).collect();
    for uri in [
        "mailgate://mailboxes",
        "mailgate://policy",
        "mailgate://finance/folders",
        "mailgate://archive/index",
    ] {
        assert!(uris.contains(&uri), "{uri} not in {uris:?}");
    }
    let templates = client.inner.list_all_resource_templates().await.unwrap();
    let templates: Vec<&str> = templates.iter().map(|t| t.uri_template.as_str()).collect();
    assert_eq!(
        templates,
        [
            "mailgate://{alias}/folders",
            "mailgate://{alias}/categories",
            "mailgate://{alias}/contacts{?query}",
            "mailgate://{alias}/index"
        ]
    );

    // What a model pays to learn them (benches/tokens.rs prints the figures).
    let listing = serde_json::to_string(&listed).unwrap().len();
    let templ = serde_json::to_string(&client.inner.list_all_resource_templates().await.unwrap())
        .unwrap()
        .len();
    let prompts = serde_json::to_string(&client.inner.list_all_prompts().await.unwrap())
        .unwrap()
        .len();
    assert!(
        listing <= 2_500 && templ <= 1_000 && prompts <= 1_600,
        "resources {listing} B, templates {templ} B, prompts {prompts} B"
    );

    let mailboxes = read(&client, "mailgate://mailboxes").await.unwrap();
    assert_eq!(
        mailboxes["mailboxes"],
        json!(["personal", "finance", "support", "archive"])
    );
    let policy = read(&client, "mailgate://policy").await.unwrap();
    assert_eq!(policy["catalog"], "read", "{policy}");
    assert_eq!(policy["tools"].as_array().unwrap().len(), 12);
    assert_eq!(policy["mailboxes"][3]["access"], "read", "{policy}");
    let text = policy.to_string();
    assert!(
        !text.contains('@') && !text.contains(world.path().to_str().unwrap()),
        "{text}"
    );

    let folders = read(&client, "mailgate://finance/folders").await.unwrap();
    assert!(
        !folders["folders"].as_array().unwrap().is_empty(),
        "{folders}"
    );
    let categories = read(&client, "mailgate://finance/categories")
        .await
        .unwrap();
    assert_eq!(categories["dataTrust"], "UNTRUSTED_EMAIL_DATA_V1");
    assert_eq!(categories["categories"], json!([]));
    assert!(categories["unsupported"].is_string(), "{categories}");
    let index = read(&client, "mailgate://finance/index").await.unwrap();
    assert_eq!(index["indexed"], false, "{index}");
    assert!(
        index["note"]
            .as_str()
            .unwrap()
            .contains("index sync finance")
    );

    // Contacts from headers on Maildir, said so; the mailbox's own address is never listed.
    let contacts = read(&client, "mailgate://finance/contacts").await.unwrap();
    assert_eq!(contacts["source"], "headers", "{contacts}");
    assert_eq!(contacts["dataTrust"], "UNTRUSTED_EMAIL_DATA_V1");
    assert!(contacts["window"].as_str().unwrap().contains("not listed"));
    let all = contacts["contacts"].as_array().unwrap();
    assert!(!all.is_empty(), "{contacts}");
    assert!(
        all.iter().all(|c| c["address"] != "finance@example.com"),
        "{contacts}"
    );
    let first = all[0]["address"].as_str().unwrap().to_owned();
    let narrowed = read(
        &client,
        &format!("mailgate://finance/contacts?query={}", &first[..4]),
    )
    .await
    .unwrap();
    let matched = narrowed["contacts"].as_array().unwrap();
    assert!(
        !matched.is_empty() && matched.len() <= all.len(),
        "{narrowed}"
    );

    // Refusals: a malformed URI is invalid params; an alias off the allowlist is not found;
    // neither names an address.
    for (uri, code) in [
        ("mailgate://finance/messages", -32602),
        ("file:///etc/passwd", -32602),
        ("mailgate://finance/contacts?query=%zz", -32602),
        ("mailgate://nobody/folders", -32002),
    ] {
        let (got, message) = refusal(read(&client, uri).await.unwrap_err());
        assert_eq!(got, code, "{uri}: {message}");
        assert!(!message.contains('@'), "{message}");
    }

    // Completion of a template's alias.
    let values = client
        .inner
        .complete_resource_simple("mailgate://{alias}/folders", "alias", "fi")
        .await
        .unwrap();
    assert_eq!(values, ["finance"]);
    client.close().await;
}

async fn prompt(client: &Client, name: &str, args: Value) -> Result<String, ServiceError> {
    let mut params = GetPromptRequestParams::new(name);
    params.arguments = args.as_object().cloned();
    let result = client.inner.get_prompt(params).await?;
    let json = serde_json::to_value(&result.messages).unwrap();
    assert_eq!(json[0]["role"], "user");
    Ok(json[0]["content"]["text"].as_str().unwrap().to_owned())
}

#[tokio::test]
async fn prompts_expand_with_this_catalogs_tools_and_validate_their_arguments() {
    let world = World::new();
    let client = world.demo_client().await;
    let prompts = client.inner.list_all_prompts().await.unwrap();
    let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "compose_email",
            "summarize_emails",
            "triage_inbox",
            "find_evidence"
        ]
    );

    let compose = prompt(
        &client,
        "compose_email",
        json!({ "context": "thank Ana for the invoice", "mailbox": "finance" }),
    )
    .await
    .unwrap();
    assert!(compose.contains("thank Ana for the invoice"));
    // The read catalog has no create_draft: the prompt does not offer it.
    assert!(compose.contains("cannot save drafts"), "{compose}");
    assert!(compose.contains("NOT_FOUND"), "{compose}");

    let summary = prompt(
        &client,
        "summarize_emails",
        json!({ "mailbox": "finance", "query": "invoice" }),
    )
    .await
    .unwrap();
    assert!(
        summary.contains(r#""criteria":{"query":"invoice"}"#),
        "{summary}"
    );
    let triage = prompt(&client, "triage_inbox", json!({ "mailbox": "personal" }))
        .await
        .unwrap();
    assert!(triage.contains("list_messages"), "{triage}");
    let evidence = prompt(
        &client,
        "find_evidence",
        json!({ "question": "did we pay the March invoice?", "mailboxes": "finance, support" }),
    )
    .await
    .unwrap();
    assert!(evidence.contains("finance, support"), "{evidence}");

    for (name, args, names) in [
        (
            "summarize_emails",
            json!({ "mailbox": "nobody" }),
            "mailbox",
        ),
        ("summarize_emails", json!({}), "mailbox"),
        ("compose_email", json!({ "context": "" }), "context"),
        (
            "find_evidence",
            json!({ "question": "x", "mailboxes": "finance,nobody" }),
            "mailboxes",
        ),
        (
            "triage_inbox",
            json!({ "mailbox": "personal", "extra": "x" }),
            "unknown",
        ),
        ("no_such_prompt", json!({}), "no such prompt"),
    ] {
        let (code, message) = refusal(prompt(&client, name, args).await.unwrap_err());
        assert_eq!(code, -32602, "{name}: {message}");
        assert!(message.contains(names), "{name}: {message}");
    }
    let values = client
        .inner
        .complete_prompt_simple("triage_inbox", "mailbox", "a")
        .await
        .unwrap();
    assert_eq!(values, ["archive"]);
    client.close().await;
}

/// `list_messages` of `mailbox` in pages of `page`, following nextCursor to the end: the ids in
/// order, and how many answers it took.
pub(crate) async fn ids_by_cursor(
    client: &Client,
    mailbox: &str,
    page: u32,
) -> (Vec<String>, usize) {
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    let mut answers = 0;
    loop {
        let mut args = json!({ "mailbox": mailbox, "criteria": { "maxResults": page } });
        if let Some(c) = &cursor {
            args["cursor"] = json!(c);
        }
        let answer = client.ok("list_messages", args).await;
        answers += 1;
        assert!(answers < 200, "cursors never end");
        ids.extend(crate::util::message_ids(&answer));
        match answer["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return (ids, answers),
        }
    }
}

/// One `list_messages` answer of up to 100 ids: what paging by cursor must reproduce.
pub(crate) async fn ids_at_once(client: &Client, mailbox: &str) -> Vec<String> {
    let answer = client
        .ok(
            "list_messages",
            json!({ "mailbox": mailbox, "criteria": { "maxResults": 100 } }),
        )
        .await;
    crate::util::message_ids(&answer)
}

#[tokio::test]
async fn cursors_continue_listings_bodies_and_attachment_pages_and_refuse_tampering() {
    let world = World::new();
    let config = crate::util::config_over_demo(
        &world,
        &[crate::util::FINANCE, crate::util::PERSONAL],
        r#", "maxResultsPerMailbox": 100, "maxBodyChars": 200"#,
    )
    .await;
    // The demo has no message with two attachments: one for the attachment pages.
    std::fs::write(
        world
            .state()
            .join("demo/mail/finance/cur/1799999999.M1P1.cursor:2,S"),
        "From: Ana Lima <ana.lima@example.com>\r\nTo: finance@example.com\r\nSubject: Two \
         files\r\nDate: Mon, 2 Nov 2026 10:00:00 +0000\r\nMIME-Version: 1.0\r\n\
         Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: \
         text/plain\r\n\r\nTwo files.\r\n--b\r\nContent-Type: text/plain; name=a.txt\r\n\
         Content-Disposition: attachment; filename=a.txt\r\n\r\nA\r\n--b\r\nContent-Type: \
         text/plain; name=b.txt\r\nContent-Disposition: attachment; filename=b.txt\r\n\r\n\
         B\r\n--b--\r\n",
    )
    .unwrap();
    let client = world.client(&["--config", config.as_str(), "serve"]).await;

    // Listings: page by page to the end, the same messages in the same order as at once.
    let all = ids_at_once(&client, "finance").await;
    let (paged, answers) = ids_by_cursor(&client, "finance", 7).await;
    assert!(answers > 2, "{answers}");
    assert_eq!(paged, all);

    // A body cut at maxBodyChars: the cursor reads on exactly where nextOffset does.
    let mut body = String::new();
    let mut next: Option<String> = None;
    let mut message_id = String::new();
    for candidate in &all {
        let first = client
            .ok(
                "get_message",
                json!({ "mailbox": "finance", "messageId": candidate }),
            )
            .await;
        if first["nextCursor"].is_string() {
            message_id = candidate.clone();
            body = first["message"]["body"].as_str().unwrap().to_owned();
            next = first["nextCursor"].as_str().map(str::to_owned);
            break;
        }
    }
    let cursor = next.expect("a demo body longer than 200 characters");
    let by_cursor = client
        .ok(
            "get_message",
            json!({ "mailbox": "finance", "messageId": message_id, "cursor": cursor }),
        )
        .await;
    let by_offset = client
        .ok(
            "get_message",
            json!({ "mailbox": "finance", "messageId": message_id, "offset": 200 }),
        )
        .await;
    assert_eq!(by_cursor["message"]["body"], by_offset["message"]["body"]);
    assert_eq!(by_cursor["message"]["bodyOffset"], 200);
    assert_eq!(body.chars().count(), 200);

    // Attachment pages: the cursor of a one-attachment page reads the second.
    let mut paged_attachments = false;
    for id in &all {
        let first = client
            .ok(
                "list_attachments",
                json!({ "mailbox": "finance", "messageId": id, "limit": 1 }),
            )
            .await;
        let Some(next) = first["nextCursor"].as_str() else {
            continue;
        };
        let second = client
            .ok(
                "list_attachments",
                json!({ "mailbox": "finance", "messageId": id, "limit": 1, "cursor": next }),
            )
            .await;
        assert_eq!(second["offset"], 1, "{second}");
        assert_ne!(
            second["attachments"][0]["id"],
            first["attachments"][0]["id"]
        );
        paged_attachments = true;
        break;
    }
    assert!(paged_attachments, "a demo message with two attachments");

    // Tampering: altered, another tool's, another message's, another alias's, beside an
    // offset — each INVALID_ARGUMENT.
    let mut altered = cursor.clone();
    let last = altered.pop().unwrap();
    altered.push(if last == 'A' { 'B' } else { 'A' });
    let (_, listing_cursor) = {
        let a = client
            .ok(
                "list_messages",
                json!({ "mailbox": "finance", "criteria": { "maxResults": 3 } }),
            )
            .await;
        (a.clone(), a["nextCursor"].as_str().unwrap().to_owned())
    };
    for args in [
        json!({ "mailbox": "finance", "messageId": message_id, "cursor": altered }),
        json!({ "mailbox": "finance", "messageId": message_id, "cursor": listing_cursor }),
        json!({ "mailbox": "finance", "messageId": all[0], "cursor": cursor }),
        json!({ "mailbox": "personal", "messageId": message_id, "cursor": cursor }),
        json!({ "mailbox": "finance", "messageId": message_id, "cursor": cursor, "offset": 0 }),
        json!({ "mailbox": "finance", "messageId": message_id, "cursor": "not a cursor!" }),
    ] {
        assert_eq!(
            client.tool_error("get_message", args.clone()).await,
            "INVALID_ARGUMENT",
            "{args}"
        );
    }
    // The same criteria in another order and a listing cursor on search_mailbox.
    let reordered = client
        .ok(
            "list_messages",
            serde_json::from_str::<Value>(&format!(
                r#"{{"cursor":"{listing_cursor}","criteria":{{"maxResults":3}},"mailbox":"finance"}}"#
            ))
            .unwrap(),
        )
        .await;
    assert_eq!(reordered["messages"][0]["id"], all[3]);
    assert_eq!(
        client
            .tool_error(
                "search_mailbox",
                json!({ "mailbox": "finance", "criteria": { "maxResults": 3 }, "cursor": listing_cursor }),
            )
            .await,
        "INVALID_ARGUMENT"
    );
    client.close().await;

    // Another server process: the cursor has expired, and says so.
    let again = world.client(&["--config", config.as_str(), "serve"]).await;
    let result = again
        .call(
            "list_messages",
            json!({ "mailbox": "finance", "criteria": { "maxResults": 3 }, "cursor": listing_cursor }),
        )
        .await
        .unwrap();
    let text = crate::util::text_of(&result);
    assert!(text.contains("expired"), "{text}");
    again.close().await;
}

/// The categories filter on a backend that keeps none: the single-mailbox tools refuse it
/// naming the field, a fan-out reports it per mailbox; never a silent ignore.
#[tokio::test]
async fn a_categories_filter_on_maildir_is_refused_not_ignored() {
    let world = World::new();
    let client = world.demo_client().await;
    let code = client
        .tool_error(
            "list_messages",
            json!({ "mailbox": "finance", "criteria": { "categories": ["Invoices"] } }),
        )
        .await;
    assert_eq!(code, "UNSUPPORTED");
    let result = client
        .call(
            "search_mailbox",
            json!({ "mailbox": "finance", "criteria": { "query": "x", "categories": ["Invoices"] } }),
        )
        .await
        .unwrap();
    assert!(
        crate::util::text_of(&result).contains("criteria.categories"),
        "{result:?}"
    );
    let fanned = client
        .ok(
            "search_mailboxes",
            json!({ "mailboxes": ["finance", "personal"], "criteria": { "categories": ["Invoices"] } }),
        )
        .await;
    for r in fanned["results"].as_array().unwrap() {
        assert_eq!(r["status"], "SEARCH_FAILED", "{r}");
        assert!(
            r["warnings"]
                .as_array()
                .unwrap()
                .contains(&json!("categories_unsupported")),
            "{r}"
        );
    }
    let empty = client
        .tool_error(
            "list_messages",
            json!({ "mailbox": "finance", "criteria": { "categories": [] } }),
        )
        .await;
    assert_eq!(empty, "INVALID_ARGUMENT");
    client.close().await;
}

/// A mailbox of search_mailboxes cut at maxResults carries a cursor that search_mailbox, with
/// that mailbox and the same criteria, continues exactly (and that no other mailbox accepts).
#[tokio::test]
async fn a_fan_out_mailbox_continues_through_search_mailbox() {
    let world = World::new();
    let client = world.demo_client().await;
    let criteria = json!({ "query": "invoice", "maxResults": 2 });
    let fanned = client
        .ok(
            "search_mailboxes",
            json!({ "mailboxes": ["finance", "personal"], "criteria": criteria }),
        )
        .await;
    let finance = &fanned["results"][0];
    assert_eq!(finance["mailbox"], "finance");
    let cursor = finance["nextCursor"]
        .as_str()
        .expect("finance has more than 2 invoices");
    let next = client
        .ok(
            "search_mailbox",
            json!({ "mailbox": "finance", "criteria": criteria, "cursor": cursor }),
        )
        .await;
    let wide = client
        .ok(
            "search_mailbox",
            json!({ "mailbox": "finance", "criteria": { "query": "invoice", "maxResults": 4 } }),
        )
        .await;
    let ids = crate::util::message_ids;
    assert_eq!(ids(&next), ids(&wide)[2..].to_vec(), "{next}");
    assert_eq!(
        client
            .tool_error(
                "search_mailbox",
                json!({ "mailbox": "personal", "criteria": criteria, "cursor": cursor }),
            )
            .await,
        "INVALID_ARGUMENT"
    );
    client.close().await;
}

/// A folder tree past list_folders' 1,000 goes on by cursor: every folder once, in order; the
/// cursor is the mailbox's own.
#[tokio::test]
async fn a_folder_tree_past_a_thousand_goes_on_by_cursor() {
    let world = World::new();
    let config =
        crate::util::config_over_demo(&world, &[crate::util::FINANCE, crate::util::PERSONAL], "")
            .await;
    let root = world.state().join("demo/mail/finance");
    for n in 0..1_050 {
        for sub in ["cur", "new", "tmp"] {
            std::fs::create_dir_all(root.join(format!(".f{n:04}/{sub}"))).unwrap();
        }
    }
    let client = world.client(&["--config", config.as_str(), "serve"]).await;
    let first = client
        .ok("list_folders", json!({ "mailbox": "finance" }))
        .await;
    let ids = |answer: &Value| -> Vec<String> {
        answer["folders"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        (ids(&first).len(), &first["truncated"]),
        (1000, &json!(true))
    );
    let cursor = first["nextCursor"].as_str().unwrap();
    let rest = client
        .ok(
            "list_folders",
            json!({ "mailbox": "finance", "cursor": cursor }),
        )
        .await;
    assert_eq!(rest["truncated"], false, "{rest}");
    assert!(rest.get("nextCursor").is_none());
    let mut all = ids(&first);
    all.extend(ids(&rest));
    let made = (0..1_050)
        .filter(|n| all.contains(&format!("f{n:04}")))
        .count();
    assert_eq!(made, 1_050);
    let unique: std::collections::BTreeSet<&String> = all.iter().collect();
    assert_eq!(unique.len(), all.len());
    assert_eq!(
        client
            .tool_error(
                "list_folders",
                json!({ "mailbox": "personal", "cursor": cursor })
            )
            .await,
        "INVALID_ARGUMENT"
    );
    client.close().await;
}

/// investigate_documents past maxResults goes on by cursor: the pages joined are the matches of
/// one wide call, in its order, and every page carries the whole investigation's status.
#[tokio::test]
async fn investigation_matches_go_on_by_cursor() {
    let world = World::new();
    let client = world.shared_demo_client().await;
    let criteria = json!({"keywords": ["invoice"], "folders": ["inbox"]});
    let ids = |answer: &Value| -> Vec<String> {
        answer["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["message"]["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let mut wide = criteria.clone();
    wide["maxResults"] = json!(25);
    let whole = client
        .ok(
            "investigate_documents",
            json!({"mailbox": "finance", "criteria": wide}),
        )
        .await;
    let expected = ids(&whole);
    assert!(expected.len() > 2, "{whole}");
    assert_eq!(whole["matchesTruncated"], false, "{whole}");
    let mut narrow = criteria.clone();
    narrow["maxResults"] = json!(2);
    let mut args = json!({"mailbox": "finance", "criteria": narrow});
    let mut paged = Vec::new();
    loop {
        let page = client.ok("investigate_documents", args.clone()).await;
        assert_eq!(page["status"], whole["status"], "{page}");
        assert_eq!(page["totalMatches"], whole["totalMatches"]);
        paged.extend(ids(&page));
        match page["nextCursor"].as_str() {
            Some(next) => {
                assert_eq!(page["matchesTruncated"], true);
                args["cursor"] = json!(next);
            }
            None => break,
        }
    }
    assert_eq!(paged, expected);
    // Other criteria refuse the cursor.
    let first = client
        .ok(
            "investigate_documents",
            json!({"mailbox": "finance", "criteria": narrow}),
        )
        .await;
    assert_eq!(
        client
            .tool_error(
                "investigate_documents",
                json!({"mailbox": "finance", "criteria": criteria, "cursor": first["nextCursor"]}),
            )
            .await,
        "INVALID_ARGUMENT"
    );
    client.close().await;
}
