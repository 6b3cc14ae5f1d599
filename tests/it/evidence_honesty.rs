//! Issue 9, "no false absence": the demo cases where the document tools claimed an absence they
//! had not proven, and the search answer that did not say which limit stopped it. Each test runs
//! the real binary over the demo mailboxes.

use serde_json::{Value, json};

use crate::util::{World, text_of};

/// The structured answer and the text block of one tool call.
async fn call(client: &crate::util::Client, tool: &str, args: Value) -> (Value, String) {
    let result = client.call(tool, args).await.unwrap();
    assert_ne!(result.is_error, Some(true), "{tool}: {:?}", result.content);
    let text = text_of(&result);
    (result.structured_content.expect("structured"), text)
}

fn names_not_read(out: &Value) -> Vec<(String, String, String)> {
    out["coverage"]["attachmentContent"]["notReadAttachments"]
        .as_array()
        .expect("notReadAttachments")
        .iter()
        .map(|a| {
            (
                a["name"].as_str().unwrap().to_owned(),
                a["format"].as_str().unwrap().to_owned(),
                a["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// "Quill & Ink Stationers" occurs only in attachment content: the `latin1-faturas` CSV (readable)
/// and the XLSX (not readable yet). It was NOT_FOUND with "coverage complete".
#[tokio::test]
async fn issue_9_keyword_in_a_readable_csv_is_found_not_absent() {
    let world = World::new();
    let client = world.shared_demo_client().await;
    let (out, text) = call(
        &client,
        "investigate_documents",
        json!({"mailbox": "finance", "criteria": {"keywords": ["Quill & Ink Stationers"]}}),
    )
    .await;
    assert_ne!(out["status"], "NOT_FOUND", "{out}");
    let matches = out["matches"].as_array().expect("matches");
    let csv = matches
        .iter()
        .find(|m| m["message"]["subject"] == "Relatório de faturas de março")
        .unwrap_or_else(|| panic!("the CSV's message is a match: {out}"));
    assert_eq!(
        csv["matchedSignals"]["keywords"][0],
        "Quill & Ink Stationers"
    );
    assert_eq!(csv["classification"], "CANDIDATE_REVIEW");
    assert_eq!(csv["contentMatchAttachmentIds"][0], "att-0");
    // The XLSX holding it too was not read: the list of matches is not known to be complete.
    assert_eq!(out["status"], "SEARCH_INCOMPLETE");
    assert_eq!(out["coverage"]["complete"], false);
    assert!(text.contains("coverage incomplete"), "{text}");
    client.close().await;
}

/// PROP-3107 sits only inside `premium-schedule-2026.xlsx`, which mailgate cannot read yet. It was
/// NOT_FOUND with "coverage complete"; now the answer names the XLSX, the reason and the lift.
#[tokio::test]
async fn issue_9_id_only_in_an_unreadable_xlsx_is_incomplete_not_absent() {
    let world = World::new();
    let client = world.shared_demo_client().await;
    let (out, text) = call(
        &client,
        "investigate_documents",
        json!({"mailbox": "finance", "criteria": {"proposalIds": ["PROP-3107"]}}),
    )
    .await;
    assert_eq!(out["status"], "SEARCH_INCOMPLETE", "{out}");
    assert_eq!(out["coverage"]["complete"], false);
    assert_eq!(
        out["coverage"]["folders"][0]["reasons"],
        json!(["ATTACHMENT_CONTENT_NOT_READ"])
    );
    assert!(
        names_not_read(&out).contains(&(
            "premium-schedule-2026.xlsx".into(),
            "xlsx".into(),
            "UNSUPPORTED_FORMAT".into()
        )),
        "{out}"
    );
    let by_reason = &out["coverage"]["attachmentContent"]["notReadByReason"][0];
    assert_eq!(by_reason["reason"], "UNSUPPORTED_FORMAT");
    assert!(
        by_reason["lift"]
            .as_str()
            .unwrap()
            .contains("no setting lifts it")
    );
    assert!(
        text.contains("UNSUPPORTED_FORMAT") && text.contains("xlsx"),
        "the text names what was not read: {text}"
    );
    client.close().await;
}

/// `attachmentNames: ["premium-schedule"]` was NOT_FOUND for `premium-schedule-2026.xlsx` (only
/// exact full names matched). Now the name without extension and a word-aligned part match, and
/// the answer says how.
#[tokio::test]
async fn issue_9_attachment_names_match_without_extension_or_by_words() {
    let world = World::new();
    let client = world.shared_demo_client().await;
    let (words, text) = call(
        &client,
        "investigate_documents",
        json!({"mailbox": "finance", "criteria": {"attachmentNames": ["premium-schedule"]}}),
    )
    .await;
    assert_eq!(words["status"], "CANDIDATE_REVIEW", "{words}");
    let m = &words["matches"][0];
    assert_eq!(
        m["matchedSignals"]["attachmentNames"][0],
        "premium-schedule"
    );
    assert_eq!(
        m["nameMatches"],
        json!([{"requested": "premium-schedule", "attachmentId": "att-0", "matchedBy": "WORDS"}])
    );
    assert!(text.contains("name without extension"), "{text}");

    let (stem, _) = call(
        &client,
        "investigate_documents",
        json!({"mailbox": "finance", "criteria": {"attachmentNames": ["PREMIUM-SCHEDULE-2026"]}}),
    )
    .await;
    assert_eq!(stem["matches"][0]["nameMatches"][0]["matchedBy"], "STEM");
    // A word is never cut: no match, and with names only no attachment text is needed.
    let (none, _) = call(
        &client,
        "investigate_documents",
        json!({"mailbox": "finance", "criteria": {"attachmentNames": ["premium-sched"]}}),
    )
    .await;
    assert_eq!(none["status"], "NOT_FOUND");
    assert_eq!(none["coverage"]["complete"], true);
    client.close().await;

    let tools = world.shared_demo_client().await;
    let schema = tools
        .tools()
        .await
        .into_iter()
        .find(|t| t.name == "investigate_documents")
        .expect("tool")
        .input_schema;
    let doc = serde_json::to_string(&schema).unwrap();
    assert!(
        doc.contains("name without extension"),
        "the schema documents the matching: {doc}"
    );
    tools.close().await;
}

/// `inspect_attachment_evidence` answered CONFIRMED from a PDF's name without saying that the PDF's
/// content was never read.
#[tokio::test]
async fn issue_9_confirmed_from_a_pdf_name_says_the_content_was_not_read() {
    let world = World::new();
    let client = world.shared_demo_client().await;
    let (search, _) = call(
        &client,
        "search_mailbox",
        json!({"mailbox": "personal", "criteria": {"query": "PROP-1001", "hasAttachments": true}}),
    )
    .await;
    let id = search["messages"][0]["id"].as_str().expect("message id");
    let (out, text) = call(
        &client,
        "inspect_attachment_evidence",
        json!({"mailbox": "personal", "messageId": id, "attachmentId": "att-0",
               "proposalIds": ["PROP-1001"]}),
    )
    .await;
    assert_eq!(out["status"], "CONFIRMED", "{out}");
    assert_eq!(
        out["confirmationReasons"],
        json!(["PROPOSAL_ID_IN_ATTACHMENT_NAME"])
    );
    assert_eq!(out["coverage"]["complete"], false);
    assert_eq!(out["coverage"]["contentRead"], false);
    assert!(
        out["coverage"]["contentNotRead"]
            .as_str()
            .is_some_and(|why| why.contains("no text extractor")),
        "{out}"
    );
    assert!(
        text.contains("by the attachment name only") && text.contains("coverage incomplete"),
        "{text}"
    );
    client.close().await;
}

/// Issue 10, item 5 (was issue 9's scan-window case): a Maildir search reads the whole folder
/// whatever maxResults is, so a query with no match is a proven NOT_FOUND over all 42 messages
/// of the demo's personal inbox, and the answer says so.
#[tokio::test]
async fn issue_10_a_maildir_search_scans_the_whole_folder_whatever_max_results() {
    let world = World::new();
    let client = world.shared_demo_client().await;
    let (out, text) = call(
        &client,
        "search_mailbox",
        json!({"mailbox": "personal", "criteria": {"query": "xylophone", "maxResults": 5}}),
    )
    .await;
    assert_eq!(out["status"], "NOT_FOUND", "{out}");
    assert_eq!(out["candidatesScanned"], 42, "{out}");
    assert_eq!(out["truncated"], false, "{out}");
    assert!(
        text.contains("All 42 messages of the folder were scanned."),
        "{text}"
    );
    client.close().await;
}
