//! Budgets, untrusted framing of hostile mail, and honest answers for backends not built yet.

use serde_json::json;

use crate::util::{World, shared_maildir_config, text_of};

#[tokio::test]
async fn a_batch_over_budget_keeps_finished_labels_and_marks_the_rest() {
    let world = World::new();
    let config = shared_maildir_config(&world, r#", "maxBatchResultMessages": 4"#);
    let c = world.client(&["--config", &config, "serve"]).await;
    let batch = c
        .ok(
            "search_mailboxes_batch",
            json!({"queries": [
                {"label": "one", "mailboxes": ["finance"], "criteria": {"maxResults": 3}},
                {"label": "two", "mailboxes": ["finance"], "criteria": {"maxResults": 3}},
                {"label": "three", "mailboxes": ["personal"], "criteria": {"maxResults": 1}}
            ]}),
        )
        .await;
    let r = batch["results"].as_array().unwrap();
    assert_eq!(r.len(), 3, "no label is dropped");
    assert_eq!(r[0]["status"], "FOUND");
    assert_eq!(r[0]["results"][0]["messages"].as_array().unwrap().len(), 3);
    for later in &r[1..] {
        assert_eq!(later["status"], "SEARCH_INCOMPLETE");
        assert_eq!(later["warnings"][0], "budget_exhausted");
    }
    assert_eq!(batch["budget"]["exhausted"], true);
    assert_eq!(batch["status"], "SEARCH_INCOMPLETE");
    c.close().await;
}

/// Issue 22: the batch's nextCursor runs the labels a budget left, with fresh budgets; a label
/// over a budget on its own is passed over (it never fits a batch), and the answer says so.
#[tokio::test]
async fn a_batch_cursor_runs_the_labels_a_budget_left() {
    let world = World::new();
    let config = shared_maildir_config(&world, r#", "maxBatchResultMessages": 4"#);
    let c = world.client(&["--config", &config, "serve"]).await;
    let queries = json!([
        {"label": "one", "mailboxes": ["finance"], "criteria": {"maxResults": 3}},
        {"label": "two", "mailboxes": ["finance"], "criteria": {"maxResults": 3}},
        {"label": "three", "mailboxes": ["personal"], "criteria": {"maxResults": 1}}
    ]);
    let first = c
        .ok("search_mailboxes_batch", json!({"queries": queries}))
        .await;
    let cursor = first["nextCursor"]
        .as_str()
        .expect("a cursor past the budget");
    let rest = c
        .ok(
            "search_mailboxes_batch",
            json!({"queries": queries, "cursor": cursor}),
        )
        .await;
    let labels: Vec<(&str, &str)> = rest["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["label"].as_str().unwrap(), l["status"].as_str().unwrap()))
        .collect();
    assert_eq!(labels, [("two", "FOUND"), ("three", "FOUND")], "{rest}");
    assert_eq!(rest["budget"]["messages"], 4);
    assert!(rest.get("nextCursor").is_none(), "{rest}");
    // The cursor belongs to these queries: other queries refuse it.
    let other = json!([{"label": "one", "mailboxes": ["finance"], "criteria": {"maxResults": 2}}]);
    assert_eq!(
        c.tool_error(
            "search_mailboxes_batch",
            json!({"queries": other, "cursor": cursor})
        )
        .await,
        "INVALID_ARGUMENT"
    );

    // A first label over the budget alone: the cursor goes on after it.
    let queries = json!([
        {"label": "big", "mailboxes": ["finance"], "criteria": {"maxResults": 5}},
        {"label": "small", "mailboxes": ["personal"], "criteria": {"maxResults": 1}}
    ]);
    let answer = c
        .call("search_mailboxes_batch", json!({"queries": queries}))
        .await
        .unwrap();
    assert!(text_of(&answer).contains("Label big is over a batch budget on its own"));
    let first = answer.structured_content.unwrap();
    assert_eq!(first["results"][0]["warnings"][0], "budget_exhausted");
    let rest = c
        .ok(
            "search_mailboxes_batch",
            json!({"queries": queries, "cursor": first["nextCursor"]}),
        )
        .await;
    assert_eq!(rest["results"][0]["label"], "small", "{rest}");
    assert_eq!(rest["results"].as_array().unwrap().len(), 1);
    c.close().await;
}

/// Issue 22: more mailboxes than maxMailboxesPerSearch are searched answer by answer — the
/// first ones, then nextCursor for the rest — and until the last, absence is not proven. A batch
/// label over the cap searches the first ones and continues through search_mailboxes.
#[tokio::test]
async fn a_fan_out_past_max_mailboxes_goes_on_by_cursor() {
    let world = World::new();
    let config = shared_maildir_config(&world, r#", "maxMailboxesPerSearch": 1"#);
    let c = world.client(&["--config", &config, "serve"]).await;
    let criteria = json!({"subject": "zeppelinquark"});
    let first = c
        .ok("search_mailboxes", json!({"criteria": criteria}))
        .await;
    assert_eq!(first["results"].as_array().unwrap().len(), 1, "{first}");
    assert_eq!(first["results"][0]["status"], "NOT_FOUND");
    assert_eq!(
        first["status"], "SEARCH_INCOMPLETE",
        "unsearched mailboxes prove nothing"
    );
    let cursor = first["nextCursor"].as_str().unwrap().to_owned();
    // Followed to the end: every allowlisted mailbox once, in allowlist order.
    let listed = c.ok("list_allowed_mailboxes", json!({})).await;
    let all: Vec<&str> = listed["mailboxes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    let mut searched = vec![first["results"][0]["mailbox"].as_str().unwrap().to_owned()];
    let mut next = cursor.clone();
    loop {
        let answer = c
            .ok(
                "search_mailboxes",
                json!({"criteria": criteria, "cursor": next}),
            )
            .await;
        searched.push(answer["results"][0]["mailbox"].as_str().unwrap().to_owned());
        match answer["nextCursor"].as_str() {
            // Until the last answer, unsearched mailboxes leave absence unproven; the last
            // answer's status is its mailbox's (one allowlisted mailbox is unreachable).
            Some(n) => {
                assert!(
                    ["SEARCH_INCOMPLETE", "SEARCH_FAILED"]
                        .contains(&answer["status"].as_str().unwrap()),
                    "{answer}"
                );
                next = n.to_owned();
            }
            None => {
                assert_eq!(answer["status"], answer["results"][0]["status"], "{answer}");
                break;
            }
        }
    }
    assert_eq!(searched, all);
    // Bound to the mailboxes and criteria as asked.
    for args in [
        json!({"criteria": {"subject": "other"}, "cursor": cursor}),
        json!({"mailboxes": ["finance", "personal"], "criteria": criteria, "cursor": cursor}),
    ] {
        assert_eq!(
            c.tool_error("search_mailboxes", args.clone()).await,
            "INVALID_ARGUMENT",
            "{args}"
        );
    }

    let batch = c
        .ok(
            "search_mailboxes_batch",
            json!({"queries": [{"label": "both", "mailboxes": ["finance", "personal"],
                                "criteria": criteria}]}),
        )
        .await;
    let label = &batch["results"][0];
    assert_eq!(label["warnings"][0], "mailbox_limit", "{batch}");
    assert_eq!(label["status"], "SEARCH_INCOMPLETE");
    assert_eq!(label["results"][0]["mailbox"], "finance");
    let rest = c
        .ok(
            "search_mailboxes",
            json!({"mailboxes": ["finance", "personal"], "criteria": criteria,
                   "cursor": label["nextCursor"]}),
        )
        .await;
    assert_eq!(rest["results"][0]["mailbox"], "personal", "{rest}");
    assert_eq!(rest["status"], "NOT_FOUND");
    c.close().await;
}

#[tokio::test]
async fn too_many_queries_is_a_limit_error() {
    let world = World::new();
    let config = shared_maildir_config(&world, r#", "maxQueriesPerBatch": 1"#);
    let c = world.client(&["--config", &config, "serve"]).await;
    let code = c
        .tool_error(
            "search_mailboxes_batch",
            json!({"queries": [{"label": "a"}, {"label": "b"}]}),
        )
        .await;
    assert_eq!(code, "LIMIT_EXCEEDED");
    c.close().await;
}

/// A mailbox whose server cannot be reached answers `BACKEND_UNAVAILABLE` for a read and a
/// failed (never `NOT_FOUND`) search, and a multi-mailbox search says so for it while the
/// others still answer.
#[tokio::test]
async fn an_unreachable_mail_server_is_a_failure_never_an_absence() {
    let world = World::new().with("SUPPORT_IMAP_PASSWORD", "example-password");
    let mail = crate::util::shared_demo().mail.clone();
    // Port 9 (discard) on loopback: nothing listens, so every connection is refused at once.
    let json = format!(
        r#"{{"mailboxes": [
            {{"alias": "finance", "address": "finance@example.com",
              "backend": {{"kind": "maildir", "path": "{}"}}}},
            {{"alias": "support", "address": "support@example.org",
              "backend": {{"kind": "imap", "imap": {{"host": "127.0.0.1", "port": 9,
                "security": "plain", "passwordEnv": "SUPPORT_IMAP_PASSWORD"}}}}}}]}}"#,
        mail.join("finance").display()
    );
    let config = world.path().join("imap.json");
    crate::util::write_mode(&config, json.as_bytes(), 0o600);
    let config = config.display().to_string();
    let c = world.client(&["--config", &config, "serve"]).await;
    assert_eq!(
        c.tool_error(
            "get_message",
            json!({"mailbox": "support", "messageId": "1.1.SU5CT1g"})
        )
        .await,
        "BACKEND_UNAVAILABLE"
    );
    let single = c
        .ok(
            "search_mailbox",
            json!({"mailbox": "support", "criteria": {"query": "invoice"}}),
        )
        .await;
    assert_eq!(single["status"], "SEARCH_FAILED", "{single}");
    let multi = c
        .ok(
            "search_mailboxes",
            json!({"criteria": {"query": "invoice"}}),
        )
        .await;
    let support = &multi["results"][1];
    assert_eq!(support["mailbox"], "support");
    assert_eq!(support["status"], "SEARCH_FAILED");
    assert!(
        support["warnings"]
            .as_array()
            .expect("warnings")
            .iter()
            .any(|w| w == "backend_unavailable"),
        "{support}"
    );
    assert_eq!(
        multi["results"][0]["status"], "FOUND",
        "one mailbox's failure keeps the others"
    );
    assert_eq!(multi["status"], "SEARCH_FAILED");
    c.close().await;
}

#[tokio::test]
async fn a_prompt_injection_mail_stays_inside_the_fence() {
    let world = World::new();
    let c = world.shared_demo_client().await;
    let id = c
        .first_id("finance", json!({"subject": "URGENT: action required"}))
        .await;
    let raw = c
        .call(
            "get_message",
            json!({"mailbox": "finance", "messageId": id}),
        )
        .await
        .unwrap();
    let structured = raw.structured_content.clone().unwrap();
    let nonce = structured["untrustedDataFence"].as_str().unwrap();
    assert_eq!(structured["dataTrust"], "UNTRUSTED_EMAIL_DATA_V1");
    assert!(
        structured.get("untrustedDataMarker").is_none(),
        "dataTrust carries the marker"
    );
    let text = text_of(&raw);
    let open = text
        .find(&format!("<<<UNTRUSTED_EMAIL_DATA_V1 nonce={nonce}>>>"))
        .unwrap();
    let close = text
        .find(&format!("<<<END_UNTRUSTED_EMAIL_DATA_V1 nonce={nonce}>>>"))
        .unwrap();
    let attack = text
        .find("collector@evil.example.net")
        .expect("the body is returned");
    assert!(
        open < attack && attack < close,
        "the hostile text sits inside the fence"
    );
    // Preamble, opening fence, closing fence (the text's copy of the payload leaves out the
    // untrustedDataFence field: the fence itself says it).
    assert_eq!(
        text.matches(nonce).count(),
        3,
        "only the server writes the nonce"
    );
    c.close().await;
}

#[tokio::test]
async fn a_bad_search_memory_file_aborts_startup() {
    let world = World::new();
    let config = shared_maildir_config(&world, "");
    let memory = world.path().join("memory.yaml");
    std::fs::write(&memory, "apelidos: {}\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&memory, std::fs::Permissions::from_mode(0o644)).unwrap();
    let world = world.with("PLUGIN_SEARCH_MEMORY_PATH", memory.to_str().unwrap());
    let out = world.run(&["--config", &config, "policy", "check"]).await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("search memory"));
}

#[tokio::test]
async fn demo_refuses_a_foreign_config() {
    let world = World::new();
    let out = world.run(&["--config", "/nonexistent.json", "demo"]).await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--config"));
}
