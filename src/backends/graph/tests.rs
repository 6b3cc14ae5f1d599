//! The Graph client's retry, refresh and paging rules against wiremock: narrow scripted
//! answers, so each rule fails alone when broken. (The stateful fake Graph of the integration
//! tests covers the tools end to end.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use wiremock::matchers::{method, path, path_regex, query_param};
use wiremock::{Mock, MockServer, Request as Seen, ResponseTemplate};

use super::*;
use crate::backends::model::{Budget, Filters, Order};
use crate::config::env::Env;

const TENANT: &str = "22222222-2222-4222-8222-222222222222";
const USER: &str = "finance@example.com";
const MESSAGES: &str = "/v1.0/users/finance@example.com/mailFolders/inbox/messages";

async fn server() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(format!("/{TENANT}/oauth2/v2.0/token")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "token_type": "Bearer", "expires_in": 3599, "access_token": "tok-1"
        })))
        .mount(&server)
        .await;
    server
}

fn store(server: &MockServer) -> GraphStore {
    let settings = GraphSettings {
        tenant_id: TENANT.into(),
        client_id: "11111111-1111-4111-8111-111111111111".into(),
        credential: GraphCredential::ClientSecret(
            Env::from_pairs([("S", "app-secret-value")])
                .secret("S")
                .expect("secret"),
        ),
        base_url: format!("{}/v1.0", server.uri()),
        login_url: server.uri(),
    };
    let (key, plan) = account(USER);
    let limits = crate::coordination::upstream::UpstreamLimits::default().of(&key, plan);
    GraphStore::new(client(&settings).expect("client"), USER, limits)
}

fn message(i: usize) -> serde_json::Value {
    json!({
        "id": format!("AAMkAG{i:04}"),
        "parentFolderId": "AAMkInbox",
        "subject": format!("Message {i}"),
        "from": {"emailAddress": {"name": "Dana Example", "address": "dana@example.com"}},
        "receivedDateTime": format!("2024-01-01T00:{:02}:{:02}Z", i / 60 % 60, i % 60),
        "isRead": false,
        "hasAttachments": false,
        "bodyPreview": "preview"
    })
}

/// A page of `items` messages starting at `from`, with a nextLink to `next` when given.
fn page(server: &MockServer, from: usize, items: usize, next: Option<&str>) -> ResponseTemplate {
    let value: Vec<_> = (from..from + items).map(message).collect();
    let mut body = json!({ "value": value });
    if let Some(skip) = next {
        body["@odata.nextLink"] = json!(format!("{}{MESSAGES}?$skip={skip}", server.uri()));
    }
    ResponseTemplate::new(200).set_body_json(body)
}

fn request(max_items: usize, max_pages: u32) -> ScanRequest {
    ScanRequest {
        folder: FolderSelector::WellKnown(WellKnown::Inbox),
        filters: Filters::default(),
        budget: Budget {
            deadline: Instant::now() + Duration::from_secs(10),
            max_pages,
            max_items,
        },
        keep: 1_000,
        order: Order::default(),
    }
}

/// Mounts a chain of `pages` pages of ten (page n answers `$skip=10n`).
async fn chain(server: &MockServer, pages: usize) {
    for n in 0..pages {
        let next = (n + 1 < pages).then(|| ((n + 1) * 10).to_string());
        let mock = Mock::given(method("GET")).and(path(MESSAGES));
        let mock = if n == 0 {
            mock.and(|r: &Seen| !r.url.query().unwrap_or("").contains("skip"))
        } else {
            mock.and(query_param("$skip", (n * 10).to_string()))
        };
        mock.respond_with(page(server, n * 10, 10, next.as_deref()))
            .mount(server)
            .await;
    }
}

#[tokio::test]
async fn a_listing_follows_next_links_to_the_end_and_is_complete() {
    let server = server().await;
    chain(&server, 3).await;
    let page = store(&server)
        .scan(&request(500, 10), None)
        .await
        .expect("page");
    assert_eq!(page.examined, 30);
    assert_eq!(page.pages_scanned, 3);
    assert!(!page.truncated && page.stop.is_none(), "{page:?}");
    assert_eq!(page.items.len(), 30);
    // Every request carried the token and asked for immutable ids.
    for r in server.received_requests().await.expect("recorded") {
        if r.url.path().starts_with("/v1.0/") {
            assert_eq!(r.headers["authorization"], "Bearer tok-1");
            assert!(
                r.headers["prefer"]
                    .to_str()
                    .expect("ascii")
                    .contains("ImmutableId")
            );
        }
    }
}

#[tokio::test]
async fn limits_stop_a_listing_and_say_which() {
    let server = server().await;
    chain(&server, 5).await;
    let s = store(&server);
    let by_pages = s.scan(&request(500, 2), None).await.expect("page");
    assert_eq!((by_pages.pages_scanned, by_pages.examined), (2, 20));
    assert!(by_pages.truncated);
    assert_eq!(by_pages.stop, Some(ScanStop::Pages));
    let by_window = s.scan(&request(25, 10), None).await.expect("page");
    assert_eq!(by_window.examined, 25);
    assert!(by_window.truncated);
    assert_eq!(by_window.stop, Some(ScanStop::Window));
    // A window that ends exactly where the folder ends is complete.
    let server = self::server().await;
    chain(&server, 2).await;
    let exact = store(&server)
        .scan(&request(20, 10), None)
        .await
        .expect("page");
    assert!(!exact.truncated, "{exact:?}");
}

#[tokio::test]
async fn a_failed_later_page_keeps_what_was_read_and_marks_the_fault() {
    let server = server().await;
    Mock::given(method("GET"))
        .and(path(MESSAGES))
        .and(query_param("$skip", "20"))
        .respond_with(ResponseTemplate::new(500))
        .with_priority(1)
        .mount(&server)
        .await;
    chain(&server, 5).await;
    let page = store(&server)
        .scan(&request(500, 10), None)
        .await
        .expect("partial");
    assert_eq!(page.examined, 20, "pages 1 and 2");
    assert!(page.truncated && page.is_incomplete());
    assert_eq!(
        page.stop,
        Some(ScanStop::Fault(crate::backends::model::Fault::Unavailable))
    );
}

#[tokio::test]
async fn a_failed_first_page_is_the_error_and_malformed_json_is_malformed() {
    let server = server().await;
    Mock::given(method("GET"))
        .and(path(MESSAGES))
        .respond_with(ResponseTemplate::new(200).set_body_string("{\"value\": [{\"id\": "))
        .mount(&server)
        .await;
    let err = store(&server).scan(&request(500, 10), None).await;
    assert!(matches!(err, Err(BackendError::Malformed)), "{err:?}");
}

#[tokio::test]
async fn a_message_without_an_id_is_a_gap_not_a_failure() {
    let server = server().await;
    let mut broken = message(1);
    broken.as_object_mut().expect("object").remove("id");
    Mock::given(method("GET"))
        .and(path(MESSAGES))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"value": [message(0), broken]})),
        )
        .mount(&server)
        .await;
    let page = store(&server)
        .scan(&request(500, 10), None)
        .await
        .expect("page");
    assert_eq!(page.items.len(), 1);
    assert!(
        page.is_incomplete(),
        "an unread message leaves absence unproven"
    );
}

#[tokio::test]
async fn a_next_link_off_the_graph_root_is_not_followed() {
    let server = server().await;
    let elsewhere = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(MESSAGES))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "value": [message(0)],
            "@odata.nextLink": format!("{}{MESSAGES}?$skip=1", elsewhere.uri()),
        })))
        .mount(&server)
        .await;
    let page = store(&server)
        .scan(&request(500, 10), None)
        .await
        .expect("page");
    assert!(page.truncated);
    assert_eq!(
        page.stop,
        Some(ScanStop::Fault(crate::backends::model::Fault::Malformed))
    );
    assert!(
        elsewhere
            .received_requests()
            .await
            .expect("recorded")
            .is_empty(),
        "the token never went to the other server"
    );
}

#[tokio::test]
async fn throttling_is_retried_after_retry_after_and_reported_when_it_outlasts_the_budget() {
    let server = server().await;
    Mock::given(method("GET"))
        .and(path(MESSAGES))
        .respond_with(ResponseTemplate::new(429).insert_header("Retry-After", "0"))
        .up_to_n_times(2)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(MESSAGES))
        .respond_with(ResponseTemplate::new(503))
        .up_to_n_times(1)
        .with_priority(2)
        .mount(&server)
        .await;
    chain(&server, 1).await;
    let s = store(&server);
    let page = s.scan(&request(500, 10), None).await.expect("retried");
    assert_eq!(page.examined, 10);

    // A wait longer than the deadline is not slept: the caller learns the server's hint.
    let server = self::server().await;
    Mock::given(method("GET"))
        .and(path(MESSAGES))
        .respond_with(ResponseTemplate::new(429).insert_header("Retry-After", "60"))
        .mount(&server)
        .await;
    let started = Instant::now();
    let err = store(&server).scan(&request(500, 10), None).await;
    assert!(
        matches!(err, Err(BackendError::Throttled { retry_after: Some(d) }) if d == Duration::from_secs(60)),
        "{err:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "did not sleep past the deadline"
    );
}

#[tokio::test]
async fn a_rejected_token_is_refreshed_once() {
    let server = server().await;
    Mock::given(method("GET"))
        .and(path_regex("^/v1.0/users/[^/]+/messages/[^/]+$"))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({
            "error": {"code": "InvalidAuthenticationToken", "message": "Lifetime validation failed"}
        })))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path_regex("^/v1.0/users/[^/]+/messages/[^/]+$"))
        .respond_with(ResponseTemplate::new(200).set_body_json(message(7)))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path_regex("^/v1.0/users/[^/]+/messages/[^/]+/attachments$"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"value": []})))
        .mount(&server)
        .await;
    let s = store(&server);
    let detail = s
        .get_message("AAMkAG0007")
        .await
        .expect("after one refresh");
    assert_eq!(detail.summary.id, "AAMkAG0007");
    assert_eq!(s.client.tokens().fetched(), 2);

    // Always 401: one refresh, then the typed error.
    let server = self::server().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(401))
        .mount(&server)
        .await;
    let s = store(&server);
    assert!(matches!(
        s.get_message("AAMkAG0007").await,
        Err(BackendError::Unauthorised)
    ));
}

#[tokio::test]
async fn a_search_that_ends_at_graphs_cap_is_not_complete() {
    let server = server().await;
    let uri = server.uri();
    // Ten pages of 100 and no nextLink: Graph's 1,000-result cap, not the end of the matches.
    Mock::given(method("GET"))
        .and(path(MESSAGES))
        .and(query_param("$search", "\"invoice\""))
        .respond_with(move |r: &Seen| {
            // wiremock's recorded URL lacks the port; links are built from the server's.
            let skip: usize = r
                .url
                .query_pairs()
                .find(|(k, _)| k == "$skiptoken")
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0);
            let value: Vec<_> = (skip..skip + 100).map(message).collect();
            let mut body = json!({ "value": value });
            if skip + 100 < SEARCH_RESULT_CAP {
                body["@odata.nextLink"] = json!(format!(
                    "{uri}{MESSAGES}?$search=%22invoice%22&$skiptoken={}",
                    skip + 100
                ));
            }
            ResponseTemplate::new(200).set_body_json(body)
        })
        .mount(&server)
        .await;
    let page = store(&server)
        .scan(&request(5_000, 20), Some("Invoice!"))
        .await
        .expect("page");
    assert_eq!(page.examined, SEARCH_RESULT_CAP, "{:?}", page.stop);
    assert!(page.truncated);
    assert_eq!(page.stop, Some(ScanStop::ServerCap));
}

#[tokio::test]
async fn moves_check_the_destination_first_and_keep_the_order_of_ids() {
    let server = server().await;
    Mock::given(method("GET"))
        .and(path("/v1.0/users/finance@example.com/mailFolders/archive"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "AAMkArchive", "displayName": "Archive", "totalItemCount": 0, "unreadItemCount": 0
        })))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path_regex(
            "^/v1.0/users/finance@example.com/messages/[^/]+/move$",
        ))
        .and(|r: &Seen| {
            serde_json::from_slice::<serde_json::Value>(&r.body)
                .is_ok_and(|v| v["destinationId"] == "AAMkArchive")
        })
        .respond_with(|r: &Seen| {
            let id = r
                .url
                .path_segments()
                .and_then(|mut s| s.nth(4))
                .unwrap_or_default();
            if id == "gone" {
                ResponseTemplate::new(404)
            } else {
                ResponseTemplate::new(201).set_body_json(json!({"id": id}))
            }
        })
        .mount(&server)
        .await;
    let s = store(&server);
    let ids: Vec<String> = ["a1", "gone", "a3"].map(String::from).to_vec();
    let results = s
        .move_messages(&ids, &FolderSelector::WellKnown(WellKnown::Archive))
        .await
        .expect("destination exists");
    assert_eq!(results[0].as_deref().ok(), Some("a1"), "immutable id kept");
    assert!(matches!(results[1], Err(BackendError::NotFound)));
    assert_eq!(results[2].as_deref().ok(), Some("a3"));
    let missing = s
        .move_messages(&ids, &FolderSelector::Id("AAMkNoSuchFolder".into()))
        .await;
    assert!(
        matches!(missing, Err(BackendError::NotFound)),
        "whole call refused"
    );
    let moves = server
        .received_requests()
        .await
        .expect("recorded")
        .iter()
        .filter(|r| r.url.path().ends_with("/move"))
        .count();
    assert_eq!(moves, 3, "nothing moved for the missing destination");
}

#[tokio::test]
async fn an_attachment_over_the_bound_is_refused_before_download() {
    let server = server().await;
    let base = "/v1.0/users/finance@example.com/messages/m1/attachments/a1";
    Mock::given(method("GET"))
        .and(path(base))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "@odata.type": "#microsoft.graph.fileAttachment",
            "id": "a1", "name": "report.csv", "contentType": "text/csv", "size": 4096
        })))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("{base}/$value")))
        .respond_with(ResponseTemplate::new(200).set_body_bytes(vec![b'x'; 4096]))
        .mount(&server)
        .await;
    let s = store(&server);
    assert!(matches!(
        s.attachment("m1", "a1", 1024).await,
        Err(BackendError::TooLarge)
    ));
    let values = |reqs: Vec<Seen>| {
        reqs.iter()
            .filter(|r| r.url.path().ends_with("$value"))
            .count()
    };
    assert_eq!(values(server.received_requests().await.expect("r")), 0);
    let (meta, bytes) = s.attachment("m1", "a1", 8192).await.expect("fits");
    assert_eq!((meta.size, bytes.len()), (4096, 4096));
}

#[tokio::test]
async fn sending_posts_the_header_addressed_mime_as_the_pinned_sender() {
    let server = server().await;
    Mock::given(method("POST"))
        .and(path("/v1.0/users/finance@example.com/sendMail"))
        .and(wiremock::matchers::header("content-type", "text/plain"))
        .respond_with(ResponseTemplate::new(202))
        .expect(1)
        .mount(&server)
        .await;
    let s = store(&server);
    let sender = GraphSender::new(Arc::clone(&s.client));
    let permit = mailgate_policy::outbound::test_permit_with_bcc(
        &["ops@example.com"],
        &["audit@example.org"],
    );
    let sent = sender.send(permit).await.expect("accepted");
    assert_eq!(sent.recipients, 2);
    let requests = server.received_requests().await.expect("recorded");
    let body = &requests.last().expect("one").body;
    use base64::Engine as _;
    let mime = base64::engine::general_purpose::STANDARD
        .decode(body)
        .expect("base64 MIME");
    let text = String::from_utf8_lossy(&mime);
    assert!(text.contains("Bcc: audit@example.org"), "{text}");
    assert!(
        !requests
            .iter()
            .any(|r| r.url.as_str().contains("app-secret-value"))
    );
}

/// A search's fallback reads bodies and attachment lists in `$batch` requests of at most twenty
/// steps, chained four wide; a failed step fails its message only.
#[tokio::test]
async fn message_texts_are_read_in_batches_and_a_failed_step_fails_one_message() {
    let server = server().await;
    Mock::given(method("POST"))
        .and(path("/v1.0/$batch"))
        .respond_with(|r: &Seen| {
            let body: serde_json::Value = serde_json::from_slice(&r.body).expect("json");
            let steps = body["requests"].as_array().expect("steps");
            assert!(steps.len() <= 20, "{}", steps.len());
            for (n, step) in steps.iter().enumerate() {
                let depends = step.get("dependsOn").cloned();
                let want = n.checked_sub(4).map(|b| json!([b.to_string()]));
                assert_eq!(depends, want, "four chains");
            }
            let responses: Vec<_> = steps
                .iter()
                .map(|step| {
                    let url = step["url"].as_str().expect("url");
                    let id = step["id"].clone();
                    if url.contains("m0003") {
                        json!({"id": id, "status": 404, "body": {"error": {"code": "ErrorItemNotFound"}}})
                    } else if url.contains("/attachments") {
                        json!({"id": id, "status": 200, "body": {"value": [{
                            "@odata.type": "#microsoft.graph.fileAttachment",
                            "id": "a1", "name": "plan.csv", "contentType": "text/csv", "size": 3
                        }]}})
                    } else {
                        json!({"id": id, "status": 200, "body": {
                            "id": "x", "body": {"contentType": "text", "content": "the body"}
                        }})
                    }
                })
                .collect();
            ResponseTemplate::new(200).set_body_json(json!({ "responses": responses }))
        })
        .mount(&server)
        .await;
    let summaries: Vec<MessageSummary> = (0..25)
        .map(|i| {
            let mut m = message(i);
            m["id"] = json!(format!("m{i:04}"));
            m["hasAttachments"] = json!(i % 5 == 0);
            serde_json::from_value::<Message>(m)
                .expect("message")
                .summary("inbox")
        })
        .collect();
    let wanted: Vec<&MessageSummary> = summaries.iter().collect();
    let texts = store(&server)
        .texts(&wanted, Instant::now() + Duration::from_secs(10))
        .await;
    assert_eq!(texts.len(), 25);
    for (i, text) in texts.iter().enumerate() {
        match (i, text) {
            (3, Err(BackendError::NotFound)) => {}
            (3, other) => panic!("message 3's step failed: {other:?}"),
            (_, Ok(t)) => {
                assert_eq!(t.body, "the body");
                assert_eq!(t.attachments.len(), usize::from(i % 5 == 0), "{i}");
            }
            (_, Err(e)) => panic!("{i}: {e:?}"),
        }
    }
    let batches = server
        .received_requests()
        .await
        .expect("recorded")
        .iter()
        .filter(|r| r.url.path() == "/v1.0/$batch")
        .count();
    // 25 bodies + 5 attachment lists = 30 steps: two requests instead of thirty.
    assert_eq!(batches, 2);
}

/// The call's deadline ends a scan: before the first page it is the `Timeout` error; after it,
/// what was read is kept and the stop says the deadline.
#[tokio::test]
async fn the_deadline_ends_a_scan_with_what_was_read() {
    let server = server().await;
    Mock::given(method("GET"))
        .and(path(MESSAGES))
        .and(query_param("$skip", "10"))
        .respond_with(page(&server, 10, 10, None).set_delay(Duration::from_secs(5)))
        .with_priority(1)
        .mount(&server)
        .await;
    chain(&server, 2).await;
    let mut req = request(500, 10);
    req.budget.deadline = Instant::now() + Duration::from_millis(700);
    let started = Instant::now();
    let got = store(&server).scan(&req, None).await.expect("partial");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "did not wait for the slow page"
    );
    assert_eq!(got.examined, 10);
    assert!(got.timed_out && got.truncated);
    assert_eq!(got.stop, Some(ScanStop::Deadline));

    let server = self::server().await;
    Mock::given(method("GET"))
        .and(path(MESSAGES))
        .respond_with(page(&server, 0, 10, None).set_delay(Duration::from_secs(5)))
        .mount(&server)
        .await;
    let mut req = request(500, 10);
    req.budget.deadline = Instant::now() + Duration::from_millis(500);
    let err = store(&server).scan(&req, None).await;
    assert!(matches!(err, Err(BackendError::Timeout)), "{err:?}");
}

// --- the change feed (`messages/delta`) -----------------------------------------------------

const DELTA: &str = "/v1.0/users/finance@example.com/mailFolders/AAMkInbox/messages/delta";

fn item(id: &str, change_key: &str) -> serde_json::Value {
    json!({"@odata.type": "#microsoft.graph.message", "id": id, "changeKey": change_key})
}

fn sync_item(id: &str, version: &str) -> crate::backends::changes::SyncItem {
    crate::backends::changes::SyncItem {
        id: id.into(),
        version: version.into(),
    }
}

/// A delta page of `value` whose link (`nextLink` when `next`, else `deltaLink`) carries
/// `token` as `$skiptoken` or `$deltatoken`.
fn delta_page(
    server: &MockServer,
    value: Vec<serde_json::Value>,
    next: bool,
    token: &str,
) -> ResponseTemplate {
    let mut body = json!({ "value": value });
    if next {
        body["@odata.nextLink"] = json!(format!("{}{DELTA}?$skiptoken={token}", server.uri()));
    } else {
        body["@odata.deltaLink"] = json!(format!("{}{DELTA}?$deltatoken={token}", server.uri()));
    }
    ResponseTemplate::new(200).set_body_json(body)
}

async fn delta_requests(server: &MockServer) -> Vec<Seen> {
    server
        .received_requests()
        .await
        .expect("recorded")
        .into_iter()
        .filter(|r| r.url.path() == DELTA)
        .collect()
}

#[tokio::test]
async fn an_initial_round_lists_every_page_then_hands_out_the_delta_link() {
    use crate::backends::changes::FolderDelta;
    let server = server().await;
    Mock::given(method("GET"))
        .and(path(DELTA))
        .and(query_param("$select", "id,changeKey"))
        .respond_with(delta_page(
            &server,
            vec![item("m1", "ck1"), item("m2", "ck1")],
            true,
            "p2",
        ))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(DELTA))
        .and(query_param("$skiptoken", "p2"))
        .respond_with(delta_page(&server, vec![item("m3", "ck7")], true, "p3"))
        .mount(&server)
        .await;
    // The last page of a fresh round; a stray `@removed` there names nothing to remove.
    Mock::given(method("GET"))
        .and(path(DELTA))
        .and(query_param("$skiptoken", "p3"))
        .respond_with(delta_page(
            &server,
            vec![
                item("m4", "ck2"),
                json!({"id": "m0", "@removed": {"reason": "deleted"}}),
            ],
            false,
            "d1",
        ))
        .mount(&server)
        .await;
    let s = store(&server);
    let first = s.folder_changes("AAMkInbox", None).await.expect("page 1");
    assert_eq!(
        first.delta,
        FolderDelta::Inventory(vec![sync_item("m1", "ck1"), sync_item("m2", "ck1")])
    );
    assert!(first.more);
    let second = s
        .folder_changes("AAMkInbox", first.cursor.as_deref())
        .await
        .expect("page 2");
    // A nextLink of a fresh round keeps listing the folder.
    assert_eq!(
        second.delta,
        FolderDelta::Inventory(vec![sync_item("m3", "ck7")])
    );
    assert!(second.more);
    let last = s
        .folder_changes("AAMkInbox", second.cursor.as_deref())
        .await
        .expect("page 3");
    assert_eq!(
        last.delta,
        FolderDelta::Inventory(vec![sync_item("m4", "ck2")])
    );
    assert!(!last.more);
    let cursor = last.cursor.expect("a delta link to store");
    assert!(cursor.ends_with("$deltatoken=d1"), "{cursor}");
    let seen = delta_requests(&server).await;
    assert_eq!(seen.len(), 3);
    for r in &seen {
        let prefer = r.headers["prefer"].to_str().expect("ascii");
        assert!(
            prefer.contains("odata.maxpagesize=200") && prefer.contains("ImmutableId"),
            "{prefer}"
        );
        assert_eq!(r.headers["authorization"], "Bearer tok-1");
    }
}

#[tokio::test]
async fn a_delta_round_reports_new_changed_moved_and_deleted_messages() {
    use crate::backends::changes::FolderDelta;
    let server = server().await;
    // Since d1: m5 arrived, m1 was flagged (new changeKey); then m2 was deleted and m3 moved
    // to another folder (Graph names a move out `changed`: the item left this folder).
    Mock::given(method("GET"))
        .and(path(DELTA))
        .and(query_param("$deltatoken", "d1"))
        .respond_with(delta_page(
            &server,
            vec![item("m5", "ck1"), item("m1", "ck2")],
            true,
            "q2",
        ))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(DELTA))
        .and(query_param("$skiptoken", "q2"))
        .respond_with(delta_page(
            &server,
            vec![
                json!({"id": "m2", "@removed": {"reason": "deleted"}}),
                json!({"id": "m3", "@removed": {"reason": "changed"}}),
            ],
            false,
            "d2",
        ))
        .mount(&server)
        .await;
    let s = store(&server);
    let cursor = format!("d:{}{DELTA}?$deltatoken=d1", server.uri());
    let first = s
        .folder_changes("AAMkInbox", Some(&cursor))
        .await
        .expect("page 1");
    assert_eq!(
        first.delta,
        FolderDelta::Changes {
            changed: vec![sync_item("m5", "ck1"), sync_item("m1", "ck2")],
            removed: vec![],
            present: None,
        }
    );
    assert!(first.more);
    // A nextLink of a round of changes keeps reporting changes.
    let second = s
        .folder_changes("AAMkInbox", first.cursor.as_deref())
        .await
        .expect("page 2");
    assert_eq!(
        second.delta,
        FolderDelta::Changes {
            changed: vec![],
            removed: vec!["m2".into(), "m3".into()],
            present: None,
        }
    );
    assert!(!second.more);
    assert!(
        second
            .cursor
            .as_deref()
            .is_some_and(|c| c.starts_with("d:") && c.ends_with("$deltatoken=d2")),
        "{second:?}"
    );
    // The requests followed the links as given: no `$select` added to a link.
    for r in delta_requests(&server).await {
        assert!(!r.url.query().unwrap_or("").contains("select"), "{}", r.url);
    }
}

#[tokio::test]
async fn an_expired_delta_link_is_a_reset_and_a_fresh_round_is_not() {
    use crate::backends::changes::FolderDelta;
    let server = server().await;
    Mock::given(method("GET"))
        .and(path(DELTA))
        .and(query_param("$deltatoken", "old"))
        .respond_with(ResponseTemplate::new(410).set_body_json(json!({"error": {
            "code": "syncStateNotFound", "message": "The sync state generation is not found."
        }})))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(DELTA))
        .and(query_param("$deltatoken", "invalid"))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({"error": {
            "code": "syncStateInvalid", "message": "x"
        }})))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(DELTA))
        .and(query_param("$deltatoken", "bad"))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({"error": {
            "code": "BadRequest", "message": "x"
        }})))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(DELTA))
        .and(|r: &Seen| r.url.query().unwrap_or("").contains("select"))
        .respond_with(ResponseTemplate::new(410))
        .mount(&server)
        .await;
    let s = store(&server);
    let cursor = |token: &str| format!("d:{}{DELTA}?$deltatoken={token}", server.uri());
    for token in ["old", "invalid"] {
        let reset = s
            .folder_changes("AAMkInbox", Some(&cursor(token)))
            .await
            .expect("a reset is an answer");
        assert_eq!(reset.delta, FolderDelta::Reset, "{token}");
        assert_eq!((reset.cursor, reset.more), (None, false));
    }
    let other = s.folder_changes("AAMkInbox", Some(&cursor("bad"))).await;
    assert!(matches!(other, Err(BackendError::BadId)), "{other:?}");
    // Without a cursor there is nothing to reset: asking again would loop.
    let fresh = s.folder_changes("AAMkInbox", None).await;
    assert!(matches!(fresh, Err(BackendError::NotFound)), "{fresh:?}");
}

#[tokio::test]
async fn a_link_off_the_graph_root_is_malformed_and_never_followed() {
    let server = server().await;
    let elsewhere = MockServer::start().await;
    Mock::given(any_request())
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "value": [], "@odata.deltaLink": "x"
        })))
        .mount(&elsewhere)
        .await;
    // The server hands out a nextLink to another host: refused before it becomes a cursor.
    Mock::given(method("GET"))
        .and(path(DELTA))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "value": [item("m1", "ck1")],
            "@odata.nextLink": format!("{}{DELTA}?$skiptoken=p2", elsewhere.uri()),
        })))
        .mount(&server)
        .await;
    let s = store(&server);
    let handed_out = s.folder_changes("AAMkInbox", None).await;
    assert!(
        matches!(handed_out, Err(BackendError::Malformed)),
        "{handed_out:?}"
    );
    // A cursor (from disk) naming another host, scheme or root, or not ours at all.
    let base = server.uri();
    for cursor in [
        format!("d:{}{DELTA}?$deltatoken=d1", elsewhere.uri()),
        format!("i:{}{DELTA}?$skiptoken=p2", elsewhere.uri()),
        format!("d:{}/beta/users/finance@example.com/messages/delta", base),
        format!("d:{}", base.replacen("http://", "https://", 1) + DELTA),
        format!("{base}{DELTA}?$deltatoken=d1"),
    ] {
        let got = s.folder_changes("AAMkInbox", Some(&cursor)).await;
        assert!(matches!(got, Err(BackendError::Malformed)), "{cursor}");
    }
    assert!(
        elsewhere
            .received_requests()
            .await
            .expect("recorded")
            .is_empty(),
        "the token never went to the other server"
    );
    assert_eq!(
        delta_requests(&server).await.len(),
        1,
        "only the first page"
    );
}

fn any_request() -> impl wiremock::Match {
    |_: &Seen| true
}

#[tokio::test]
async fn a_throttled_delta_page_waits_for_retry_after_and_garbage_is_malformed() {
    use crate::backends::changes::FolderDelta;
    let server = server().await;
    Mock::given(method("GET"))
        .and(path(DELTA))
        .respond_with(ResponseTemplate::new(429).insert_header("Retry-After", "1"))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(DELTA))
        .respond_with(delta_page(&server, vec![item("m1", "ck1")], false, "d1"))
        .with_priority(2)
        .mount(&server)
        .await;
    let s = store(&server);
    let started = Instant::now();
    let page = s.folder_changes("AAMkInbox", None).await.expect("retried");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "waited for Retry-After"
    );
    assert_eq!(
        page.delta,
        FolderDelta::Inventory(vec![sync_item("m1", "ck1")])
    );
    assert_eq!(delta_requests(&server).await.len(), 2);

    // A wait past the deadline is the server's hint, not a sleep.
    let server = self::server().await;
    Mock::given(method("GET"))
        .and(path(DELTA))
        .respond_with(ResponseTemplate::new(429).insert_header("Retry-After", "60"))
        .mount(&server)
        .await;
    let err = store(&server).folder_changes("AAMkInbox", None).await;
    assert!(
        matches!(err, Err(BackendError::Throttled { retry_after: Some(d) }) if d == Duration::from_secs(60)),
        "{err:?}"
    );

    let server = self::server().await;
    for (n, body) in [
        json!({"value": [item("m1", "ck1")]}),
        json!({"value": [{"changeKey": "ck1"}], "@odata.deltaLink": "l"}),
        json!({"value": [{"id": "", "changeKey": "ck1"}], "@odata.deltaLink": "l"}),
        json!({"value": [{"id": "m1"}], "@odata.deltaLink": "l"}),
        json!({"value": "m1", "@odata.deltaLink": "l"}),
        json!({"value": [], "@odata.deltaLink": "l", "@odata.nextLink": "l"}),
    ]
    .into_iter()
    .enumerate()
    {
        Mock::given(method("GET"))
            .and(path(format!(
                "/v1.0/users/finance@example.com/mailFolders/F{n}/messages/delta"
            )))
            .respond_with(ResponseTemplate::new(200).set_body_json(body))
            .mount(&server)
            .await;
    }
    let s = store(&server);
    for n in 0..6 {
        let got = s.folder_changes(&format!("F{n}"), None).await;
        assert!(matches!(got, Err(BackendError::Malformed)), "{n}: {got:?}");
    }
}

#[tokio::test]
async fn a_folder_resolves_to_the_id_graph_gives_back() {
    let server = server().await;
    for key in ["inbox", "AAMkInbox"] {
        Mock::given(method("GET"))
            .and(path(format!(
                "/v1.0/users/finance@example.com/mailFolders/{key}"
            )))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "id": "AAMkInbox", "displayName": "Inbox"
            })))
            .mount(&server)
            .await;
    }
    let s = store(&server);
    assert_eq!(
        s.resolve_folder(&FolderSelector::WellKnown(WellKnown::Inbox))
            .await
            .expect("inbox"),
        "AAMkInbox"
    );
    assert_eq!(
        s.resolve_folder(&FolderSelector::Id("AAMkInbox".into()))
            .await
            .expect("by id"),
        "AAMkInbox"
    );
    let missing = s
        .resolve_folder(&FolderSelector::Id("AAMkNoSuchFolder".into()))
        .await;
    assert!(
        matches!(missing, Err(BackendError::NotFound)),
        "{missing:?}"
    );
    // The id a listing puts in `folder_id` is the same string.
    Mock::given(method("GET"))
        .and(path(MESSAGES))
        .respond_with(page(&server, 0, 1, None))
        .mount(&server)
        .await;
    let listed = s.scan(&request(10, 1), None).await.expect("listing");
    assert_eq!(listed.items[0].folder_id, "AAMkInbox");
}

/// A Graph mailbox with `backend.auth`: its own client, carrying `sign_in`'s tokens.
fn delegated_store(
    server: &MockServer,
    sign_in: &crate::backends::bearer::testing::FakeSignIn,
) -> GraphStore {
    let client = delegated_client(
        &format!("{}/v1.0", server.uri()),
        &server.uri(),
        sign_in.bearer.clone(),
    )
    .expect("client");
    let (key, plan) = account(USER);
    let limits = crate::coordination::upstream::UpstreamLimits::default().of(&key, plan);
    GraphStore::new(client, USER, limits)
}

/// The bearer of every Graph request for a message itself (not its attachments, which
/// `get_message` asks for alongside) the server saw, in order.
async fn bearers(server: &MockServer) -> Vec<String> {
    server
        .received_requests()
        .await
        .expect("recorded")
        .iter()
        .filter(|r| !r.url.path().ends_with("/attachments"))
        .map(|r| {
            assert!(
                r.url.path().starts_with("/v1.0/users/"),
                "only Graph routes: {}",
                r.url.path()
            );
            r.headers["authorization"]
                .to_str()
                .expect("ascii")
                .to_owned()
        })
        .collect()
}

#[tokio::test]
async fn a_delegated_mailbox_sends_its_aliases_token_and_a_401_is_one_refresh() {
    use crate::backends::bearer::testing::FakeSignIn;
    // No app token endpoint is mounted: a delegated client never asks for one.
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path_regex(
            "^/v1.0/users/finance@example.com/messages/[^/]+$",
        ))
        .respond_with(ResponseTemplate::new(401))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path_regex(
            "^/v1.0/users/finance@example.com/messages/[^/]+$",
        ))
        .respond_with(ResponseTemplate::new(200).set_body_json(message(7)))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path_regex("^/v1.0/users/[^/]+/messages/[^/]+/attachments$"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"value": []})))
        .mount(&server)
        .await;
    let sign_in = FakeSignIn::signed_in("personal");
    let s = delegated_store(&server, &sign_in);
    let detail = s
        .get_message("AAMkAG0007")
        .await
        .expect("after one refresh");
    assert_eq!(detail.summary.id, "AAMkAG0007");
    assert_eq!(sign_in.refreshes(), 2, "the first token, then one refresh");
    assert_eq!(bearers(&server).await, ["Bearer del-1", "Bearer del-2"]);

    // Always 401: one refresh, then the typed error.
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(401))
        .mount(&server)
        .await;
    let sign_in = FakeSignIn::signed_in("personal");
    let s = delegated_store(&server, &sign_in);
    assert!(matches!(
        s.get_message("AAMkAG0007").await,
        Err(BackendError::Unauthorised)
    ));
    assert_eq!(sign_in.refreshes(), 2);
    assert_eq!(bearers(&server).await, ["Bearer del-1", "Bearer del-2"]);
}

#[tokio::test]
async fn a_delegated_alias_that_must_sign_in_is_auth_required_and_never_an_empty_mailbox() {
    use crate::backends::bearer::testing::FakeSignIn;
    let server = MockServer::start().await;
    let sign_in = FakeSignIn::not_signed_in("personal");
    let s = delegated_store(&server, &sign_in);
    let err = s.get_message("AAMkAG0007").await.expect_err("no grant");
    assert!(
        matches!(&err, BackendError::AuthRequired(alias) if alias == "personal"),
        "{err:?}"
    );
    let tool = crate::tools::ToolError::from_backend(&err);
    assert_eq!(tool.code.as_str(), "AUTH_REQUIRED");
    assert!(
        tool.message.contains("mailgate auth login personal"),
        "{}",
        tool.message
    );
    let scan = s.scan(&request(500, 10), None).await;
    assert!(
        matches!(&scan, Err(BackendError::AuthRequired(alias)) if alias == "personal"),
        "{scan:?}"
    );
    assert!(
        bearers(&server).await.is_empty(),
        "nothing sent without a token"
    );
    assert_eq!(sign_in.refreshes(), 0);

    // A grant revoked while in use: Graph's 401, the refresh refused, AUTH_REQUIRED.
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(401))
        .mount(&server)
        .await;
    let sign_in = FakeSignIn::signed_in("personal");
    let s = delegated_store(&server, &sign_in);
    sign_in.bearer.get().await.expect("a first token");
    sign_in.revoke();
    let err = s.get_message("AAMkAG0007").await.expect_err("revoked");
    assert!(
        matches!(&err, BackendError::AuthRequired(alias) if alias == "personal"),
        "{err:?}"
    );
    assert_eq!(bearers(&server).await, ["Bearer del-1"]);
    assert_eq!(
        sign_in.refreshes(),
        2,
        "the first token, then the refused refresh"
    );
}
